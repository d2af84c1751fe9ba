"""Error messages whose advice each front words in its own language.

A :class:`Message` holds text and facts (:class:`Arg`, :class:`Hint`, :class:`Setting`); ``str()`` is
Python's wording, :func:`worded` the command line's (docs/errors.md, Facts, and each front's words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MISSING",
    "Arg",
    "Hint",
    "Message",
    "Setting",
    "message",
    "message_about",
    "python_words",
    "worded",
]


class _Missing:
    """The value of an :class:`Arg` that names the argument only."""

    def __repr__(self) -> str:
        return "MISSING"

    def __reduce__(self) -> str:
        return "MISSING"  # one instance, also across pickling (an error sent to another process)


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Arg:
    """An argument of the call that an error's message names, and the value to give it (if any)."""

    name: str
    value: Any = MISSING
    keyword: bool = False

    def python(self) -> str:
        """The Python wording: ``name=value`` (the value's ``repr``), ``name=`` or ``name``."""
        if self.value is not MISSING:
            return f"{self.name}={self.value!r}"
        return f"{self.name}=" if self.keyword else self.name


@dataclass(frozen=True)
class Hint:
    """A step a message advises whose wording depends on the front (how to set a table's sort order).

    Attributes:
        key: What the step is (``set_sort_order``); a front that words it otherwise looks it up by key.
        python: The Python wording.
        details: What a front needs to word it (``{"table": "sales.orders"}``).
    """

    key: str
    python: str
    details: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Setting:
    """A setting of a catalog that a message names, worded by where it was set (an option, the file, a connection).

    Attributes:
        key: The setting (``db_path``, ``uri``, ``timeout``, ``credential``, ...).
        source: ``python``, ``file``, ``connection`` or ``flags``.
        where: The file, or the connection's id.
        role: ``catalog``, or ``target`` (the second catalog of a move).
        flagged: Given on the command line.
    """

    key: str
    source: str = "python"
    where: str = ""
    role: str = "catalog"
    flagged: bool = False

    @property
    def python(self) -> str:
        """The wording outside the command line (key ``""``: the catalog's settings as a whole)."""
        if not self.key:
            return {
                "file": f"`catalog:` in {self.where or 'iceberg-ops.yaml'}",
                "connection": f"the extra of Airflow connection {self.where!r}",
            }.get(self.source, "the catalog's options")
        if self.source == "file":  # airflow_conn_id is a key of the file itself, not of `catalog:`
            under = "" if self.key == "airflow_conn_id" else " under `catalog:`"
            return f"`{self.key}:`{under} in {self.where or 'iceberg-ops.yaml'}"
        if self.source == "connection":
            return f"{_CONNECTION_FIELDS.get(self.key, f'the `{self.key}` extra')} of Airflow connection {self.where!r}"
        return f"the `{self.key}` option"


_CONNECTION_FIELDS = {
    "uri": "the Host (or the `uri` extra)",
    "credential": "the Login and Password (or the `credential` extra)",
    "kind": "the `kind` extra",
}

Fact = Arg | Hint | Setting
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True)
class Message:
    """An error message of text and facts that each front words; ``+`` joins messages and text, keeping the facts.

    Attributes:
        parts: Text and facts, in order.
        about: The argument the error is about, when it is a bad value of one (``where``): a front
            may report it as a usage error of its own name for it.
    """

    parts: tuple[str | Fact, ...]
    about: str | None = None

    def worded(self, words: Callable[[Fact], str]) -> str:
        """The message with each fact worded by ``words``."""
        return "".join(part if isinstance(part, str) else words(part) for part in self.parts)

    def __str__(self) -> str:
        return self.worded(python_words)

    def __add__(self, other: object) -> Message:
        if isinstance(other, str):
            return Message((*self.parts, other), self.about)
        if isinstance(other, Message):
            return Message((*self.parts, *other.parts), self.about or other.about)
        return NotImplemented

    def __radd__(self, other: object) -> Message:
        if isinstance(other, str):
            return Message((other, *self.parts), self.about)
        return NotImplemented

    def upper_first(self) -> Message:
        """The message starting with a capital letter (a problem listed first becomes a sentence)."""
        if self.parts and isinstance(self.parts[0], str) and self.parts[0]:
            return Message((self.parts[0][0].upper() + self.parts[0][1:], *self.parts[1:]), self.about)
        return self

    @staticmethod
    def join(separator: str, messages: Sequence[str | Message]) -> Message:
        """``separator.join(messages)``, keeping the facts of each."""
        return sum(((separator if index else "") + item for index, item in enumerate(messages)), Message(()))


def python_words(fact: Fact) -> str:
    """A fact as the Python API (and the Airflow operators, whose fields are its arguments) words it."""
    return fact.python() if isinstance(fact, Arg) else fact.python


def message(template: str, /, *, about: str | None = None, **facts: Fact | str) -> Message:
    """A :class:`Message` from ``template``, each ``{name}`` in it replaced by ``facts[name]``.

    Text facts are inserted as they are; a ``{name}`` without a fact stays as written.

    Example:
        ``message("use {mode} to move only what was appended", mode=Arg("mode", "incremental"))``
    """
    parts: list[str | Fact] = []
    text, position = "", 0
    for match in _PLACEHOLDER.finditer(template):
        fact = facts.get(match.group(1))
        if fact is None:
            continue
        text += template[position : match.start()]
        if isinstance(fact, str):
            text += fact
        else:
            parts += [text, fact] if text else [fact]
            text = ""
        position = match.end()
    text += template[position:]
    return Message((*parts, text) if text else tuple(parts), about)


def _message_of(error: BaseException) -> Message | None:
    found = error.args[0] if len(error.args) == 1 else None
    return found if isinstance(found, Message) else None


def worded(error: BaseException, words: Callable[[Fact], str]) -> str:
    """``error``'s message with its facts worded by ``words`` (``str(error)`` when it has none)."""
    found = _message_of(error)
    return found.worded(words) if found is not None else str(error)


def message_about(error: BaseException) -> str | None:
    """The argument ``error`` is a bad value of (``where``), when its message says so."""
    found = _message_of(error)
    return found.about if found is not None else None
