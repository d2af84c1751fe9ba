"""Which tables a migration touched, and how: the net change per table, for results and lineage.

Several changes to one table fold into one net change: created then changed was created; changed
then renamed was renamed (from its first name); dropped then created was overwritten; created then
dropped left nothing. A context built while a :func:`recording` is open notes its changes there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "Change",
    "TouchedTable",
    "TouchedTables",
    "current_recording",
    "merge_touched",
    "recording",
    "stored_location",
]

Change = Literal["create", "alter", "drop", "rename", "overwrite", "write"]
"""How a table changed: ``write`` means the migration loaded the table to write to it itself
(``ctx.load_table``), so what it wrote, if anything, is its own affair."""

_CHANGES: tuple[str, ...] = get_args(Change)


@dataclass(frozen=True)
class TouchedTable:
    """The net change a migration (or a run of several) made to one table, by its full name now (dropped: then).

    ``previous`` is a renamed table's name before; ``location``, where a dropped one was stored (``None``: unknown).
    """

    table: str
    change: Change
    previous: str | None = None
    location: str | None = None

    def __post_init__(self) -> None:
        if self.change not in _CHANGES:
            raise ValueError(f"change={self.change!r} is not one of {', '.join(_CHANGES)}.")
        if (self.change == "rename") != (self.previous is not None):
            raise ValueError(f"A rename needs the previous name, and only a rename has one: {self!r}.")

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: ``table`` and ``change``, plus ``previous`` and ``location`` when known."""
        return {key: value for key, value in asdict(self).items() if value is not None}


class TouchedTables:
    """The tables one migration touched, each with its net change, in the order they were last touched."""

    def __init__(self) -> None:
        self._tables: dict[str, TouchedTable] = {}

    def created(self, table: str) -> None:
        """``table`` was created (after a drop of the same name: overwritten)."""
        earlier = self._tables.pop(table, None)
        change: Change = "overwrite" if earlier is not None and earlier.change in ("drop", "overwrite") else "create"
        self._tables[table] = TouchedTable(table, change)

    def altered(self, table: str) -> None:
        """A staged change to ``table`` (schema, spec, sort order, properties) was committed."""
        earlier = self._tables.get(table)
        if earlier is None or earlier.change == "write":
            self._tables.pop(table, None)
            self._tables[table] = TouchedTable(table, "alter")

    def written(self, table: str) -> None:
        """The migration loaded ``table`` to read or write it itself."""
        if table not in self._tables:
            self._tables[table] = TouchedTable(table, "write")

    def renamed(self, old: str, new: str) -> None:
        """``old`` was renamed to ``new``; a table created in this migration stays created, under ``new``."""
        earlier = self._tables.pop(old, None)
        self._tables.pop(new, None)
        if earlier is not None and earlier.change in ("create", "overwrite"):
            self._tables[new] = TouchedTable(new, earlier.change)
            return
        first = earlier.previous if earlier is not None and earlier.change == "rename" else old
        if first == new:  # renamed back to where it started: only what else changed remains
            self._tables[new] = TouchedTable(new, "alter")
        else:
            self._tables[new] = TouchedTable(new, "rename", previous=first)

    def dropped(self, table: str, location: str | None = None) -> None:
        """``table`` was dropped; ``location`` is where it was stored, if known."""
        earlier = self._tables.pop(table, None)
        if earlier is not None and earlier.change == "create":
            return  # created and dropped within the changes noted here: nothing remains
        if earlier is not None and earlier.change == "rename" and earlier.previous is not None:
            table = earlier.previous  # gone under its new name: it was the table known by the first one
            self._tables.pop(table, None)
        self._tables[table] = TouchedTable(table, "drop", location=location)

    def note(self, touched: TouchedTable) -> None:
        """Fold in a net change noted elsewhere (a later migration's), as the change it stands for."""
        change, table = touched.change, touched.table
        if change in ("drop", "overwrite"):
            self.dropped(table, touched.location)
        if change == "rename" and touched.previous is not None:
            self.renamed(touched.previous, table)
        elif change in ("create", "overwrite"):
            self.created(table)
        elif change in ("alter", "write"):
            (self.altered if change == "alter" else self.written)(table)

    def tables(self) -> tuple[TouchedTable, ...]:
        """Every table touched, with its net change."""
        return tuple(self._tables.values())


def merge_touched(*batches: Iterable[TouchedTable]) -> tuple[TouchedTable, ...]:
    """The net changes of several migrations run in order (e.g. a whole ``upgrade``)."""
    merged = TouchedTables()
    for batch in batches:
        for touched in batch:
            merged.note(touched)
    return merged.tables()


_RECORDING: ContextVar[TouchedTables | None] = ContextVar("iceberg_ops_touched_tables", default=None)


def current_recording() -> TouchedTables | None:
    """The recording open in this thread (see :func:`recording`), if any."""
    return _RECORDING.get()


@contextmanager
def recording() -> Iterator[TouchedTables]:
    """Collect what the migration context built inside the ``with`` block touches."""
    touched = TouchedTables()
    token = _RECORDING.set(touched)
    try:
        yield touched
    finally:
        _RECORDING.reset(token)


def stored_location(catalog: Catalog, identifier: tuple[str, ...]) -> str | None:
    """Where a table about to be dropped is stored, so its lineage can still name it; ``None`` if unreadable."""
    try:
        return catalog.load_table(identifier).location()
    except Exception:  # the drop itself reports a missing table; lineage only loses the name
        return None
