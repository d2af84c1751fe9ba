"""What a refusal of a name that is not there adds: the names that are, and the closest one."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["LISTED", "MissingTable", "closest", "did_you_mean", "existing_namespaces", "listed", "missing_table"]

LISTED = 20
"""How many names a message lists before ``...``."""


def listed(names: Sequence[str], limit: int = LISTED) -> str:
    """``a, b, c`` (the first ``limit`` names, then ``...``), or ``none``."""
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "") if names else "none"


def closest(name: str, names: Iterable[str]) -> str | None:
    """The name of ``names`` closest to ``name`` (difflib, at least 60% alike), or ``None``."""
    found = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(guess: str | None) -> str:
    """`` Did you mean 'guess'?``, or empty without a guess."""
    return f" Did you mean {guess!r}?" if guess else ""


def existing_namespaces(catalog: Catalog, *, hidden: Collection[str] = ()) -> list[str]:
    """The catalog's top-level namespaces, dotted and sorted, without the ``hidden`` ones (the meta-namespace)."""
    return sorted(name for name in (".".join(n) for n in catalog.list_namespaces()) if name not in hidden)


@dataclass(frozen=True)
class MissingTable:
    """What exists around a table that does not.

    ``names``: the tables of its namespace (bare) when that exists, else the namespaces that do;
    ``guess``: the closest ``namespace.table``; ``unlisted``: why the catalog could not list, if so.
    """

    namespace: str
    namespace_exists: bool
    names: list[str]
    guess: str | None
    unlisted: str | None = None

    @property
    def detail(self) -> str:
        """``tables of sales: orders``, or ``namespace 'salse' does not exist either; existing namespaces: sales``."""
        if self.unlisted is not None:
            return f"the catalog could not list what exists: {self.unlisted}"
        if self.namespace_exists:
            return f"tables of {self.namespace}: {listed(self.names)}"
        return f"namespace {self.namespace!r} does not exist either; existing namespaces: {listed(self.names)}"


def _bare_tables(catalog: Catalog, namespace: str) -> list[str]:
    return sorted(identifier[-1] for identifier in catalog.list_tables(namespace))


def missing_table(catalog: Catalog, table: str) -> MissingTable:
    """What exists around ``table`` (``namespace.table``), which does not: for a message naming it.

    The guess is the closest table of its namespace; when the namespace does not exist either, the
    closest table of the closest namespace. Never raises: a catalog that refuses to list says so in
    :attr:`MissingTable.detail`, so the message about the table is still made.
    """
    namespace, _, bare = table.rpartition(".")
    try:
        if catalog.namespace_exists(namespace):
            names = _bare_tables(catalog, namespace)
            match = closest(bare, names)
            return MissingTable(namespace, True, names, f"{namespace}.{match}" if match else None)
        namespaces = existing_namespaces(catalog)
        other = closest(namespace, namespaces)
        match = closest(bare, _bare_tables(catalog, other)) if other is not None else None
        return MissingTable(namespace, False, namespaces, f"{other}.{match}" if match else None)
    except Exception as exc:
        return MissingTable(namespace, False, [], None, unlisted=" ".join(f"{type(exc).__name__}: {exc}".split()))
