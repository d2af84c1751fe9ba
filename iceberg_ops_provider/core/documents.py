"""Documents read back: YAML files a person wrote, and JSON documents the project wrote itself."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

import yaml
from pydantic import TypeAdapter, ValidationError

__all__ = ["read_back", "yaml_document"]

T = TypeVar("T")


def yaml_document(data: bytes, source: object, error: Callable[[str], Exception]) -> Any:
    """The YAML document in ``data``, the bytes of file ``source``; raises ``error(message)`` if it is not one.

    The message names the file and the place: ``<source>: not UTF-8 text (byte 0xe9 on line 2); save
    the file as UTF-8.`` or ``<source>: not valid YAML (line 5, column 1): could not find expected ':'
    (while scanning a simple key on line 4, column 1)`` (where the construct began, if on another line).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{source}: not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}); save the file as UTF-8."
        ) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None and (mark is None or start.line != mark.line):
            problem = f"{problem} ({context} on line {start.line + 1}, column {start.column + 1})"
        raise error(f"{source}: not valid YAML{where}: {problem}") from exc


_adapter = cache(TypeAdapter)


def read_back(cls: type[T], data: Any, what: str, fix: str) -> T:
    """``data``, a document ``cls.to_json()`` wrote, as ``cls`` (a dataclass): each field checked by its type.

    Text is read as a number where the field is one, a list as a tuple; keys ``cls`` does not have
    are ignored. Pydantic's errors are worded in one sentence: ``<what> lacks table, index: <fix>.``
    or ``<what>'s index must be a valid integer, got 'x': <fix>.``

    Raises:
        ValueError: Not a mapping, a field missing or of the wrong type.
    """
    try:
        return _adapter(cls).validate_python(data)
    except ValidationError as exc:
        errors = exc.errors()
    missing = [str(error["loc"][0]) for error in errors if error["type"] == "missing"]
    if missing:
        raise ValueError(f"{what} lacks {', '.join(missing)}: {fix}.") from None
    first = errors[0]
    field = "".join(f"'s {part}" if index == 0 else f".{part}" for index, part in enumerate(first["loc"]))
    said = str(first.get("ctx", {}).get("error", "")) or first["msg"].replace("Input should be", "must be")
    said = "must be a mapping" if first["type"] == "dataclass_type" else said
    raise ValueError(f"{what}{field} {said}, got {first['input']!r}: {fix}.") from None
