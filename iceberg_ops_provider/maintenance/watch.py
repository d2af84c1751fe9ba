"""Watch tables for maintenance that newly falls due, at a cost proportional to what changed since the last look.

:func:`watch_tables` is one look at the tables of a namespace (or a list). Each table is loaded once to read
its metadata location; a table whose location is the one the previous look saw is not measured again, unless
its policy held its work then (quiet hours, maintenance off) and may not now. Tables whose location changed
are measured as the maintenance queue measures them (:func:`~iceberg_ops_provider.maintenance.queue.measure_table`,
under each table's own policy, from metadata alone).

A look reports edges, not states: a due table is *announced* once, and again only when its metadata changed
and it is still due, or when it became due again after being healthy. What the previous look saw and
announced is the :class:`WatchState` it returns, JSON-able so a caller can keep it between processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.catalogs import failure, spec_of
from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.errors import IcebergOpsError
from iceberg_ops_provider.maintenance.overview import DEFAULT_PARALLELISM
from iceberg_ops_provider.maintenance.policy import table_policy
from iceberg_ops_provider.maintenance.queue import QueuedTable, QueueError, measure_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["WatchResult", "WatchState", "watch_tables", "watched_tables"]


@dataclass(frozen=True)
class WatchState:
    """What the previous look saw: each table's metadata location, what was announced, and what was held.

    ``announced`` maps a table to the metadata location at which its due work was announced; ``held`` are
    the tables whose policy held their work (``disabled``, ``quiet_hours``) when last measured. An empty
    state (the default) announces every due table at the next look.
    """

    locations: Mapping[str, str] = field(default_factory=dict)
    announced: Mapping[str, str] = field(default_factory=dict)
    held: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        """JSON-able form, read back by :meth:`from_json`."""
        return {"locations": dict(self.locations), "announced": dict(self.announced), "held": sorted(self.held)}

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> WatchState:
        """The state :meth:`to_json` wrote; an empty state for ``None`` or anything that is not such a mapping.

        Only entries of the shape :meth:`to_json` writes are kept (a table's name and a location, as text):
        a state of another shape costs the tables it names one measure each, never the look.
        """
        if not isinstance(value, Mapping):
            return cls()
        locations, announced, held = value.get("locations"), value.get("announced"), value.get("held")
        return cls(
            locations=_texts(locations),
            announced=_texts(announced),
            held=frozenset(name for name in held if isinstance(name, str)) if isinstance(held, list) else frozenset(),
        )


def _texts(value: Any) -> dict[str, str]:
    """The entries of ``value`` (when a mapping) whose key and value are both text."""
    if not isinstance(value, Mapping):
        return {}
    return {key: item for key, item in value.items() if isinstance(key, str) and isinstance(item, str)}


@dataclass(frozen=True)
class WatchResult:
    """One look: the tables newly due (highest score first), failures, what was measured, and the new state.

    ``measured`` are the tables whose health was computed at this look; every other listed table cost one
    load (its metadata location) and nothing more.
    """

    due: tuple[QueuedTable, ...]
    errors: tuple[QueueError, ...]
    measured: tuple[str, ...]
    tables: int
    state: WatchState

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: each newly due table's entry (``table``, ``needs``, ``score``, ...) and the failures."""
        return {
            "tables": [entry.to_json() for entry in self.due],
            "errors": [error.to_json() for error in self.errors],
            "measured": list(self.measured),
            "watched": self.tables,
        }


def watched_tables(catalog: Catalog, namespace: str | None, tables: Sequence[str] | None) -> list[str]:
    """The tables a look covers: ``tables`` as given, else those ``namespace`` lists now (sorted).

    Raises:
        ValueError: Neither or both of ``namespace`` and ``tables`` are given.
        NoSuchNamespaceError: ``namespace`` does not exist (as the catalog says).
    """
    if (namespace is None) == (tables is None):
        raise ValueError("Watch either a namespace or a list of tables, not both and not neither.")
    if tables is not None:
        return sorted(set(tables))
    return sorted(".".join(identifier) for identifier in catalog.list_tables(tuple(namespace.split("."))))


def watch_tables(
    catalog: Catalog,
    tables: Sequence[str],
    state: WatchState | None = None,
    *,
    moment: datetime | None = None,
    parallelism: int = DEFAULT_PARALLELISM,
) -> WatchResult:
    """Look once at ``tables``: load each, measure only those that changed since ``state``, announce new work.

    Reads metadata and manifests only, ``parallelism`` tables at a time; changes nothing. ``moment`` (default
    now) decides the quiet hours. A table that cannot be loaded or measured is reported in ``errors`` and
    measured again at the next look; tables no longer listed are forgotten.
    """
    moment = datetime.now(UTC) if moment is None else moment
    state = WatchState() if state is None else state
    spec = spec_of(catalog)

    def look(name: str) -> tuple[str, str | None, QueuedTable | QueueError | str | None]:
        try:
            table = catalog.load_table(name)
        except Exception as exc:  # one unreadable table must not hide the others
            found = failure(exc, spec)
            return name, None, QueueError(name, found.kind, type(exc).__name__, None)
        location = table.metadata_location
        if state.locations.get(name) == location:
            if name not in state.held:
                return name, location, None  # unchanged: nothing more to read
            try:
                if table_policy(table).skip_reason(moment) is not None:
                    return name, location, None  # still held
            except (IcebergOpsError, ValueError):
                pass  # measured below, which reports the bad policy
        return name, location, measure_table(name, table, moment)

    names = sorted(set(tables))
    workers = max(1, min(parallelism, len(names)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="watch") as pool:
        looks = list(pool.map(carrying_context(look), names))

    locations: dict[str, str] = {}
    announced = {name: at for name, at in state.announced.items() if name in set(names)}
    held = {name for name in state.held if name in set(names)}
    due: list[QueuedTable] = []
    errors: list[QueueError] = []
    measured: list[str] = []
    for name, location, found in looks:
        if found is None:  # unchanged, or still held
            locations[name] = location  # type: ignore[assignment]
            continue
        if isinstance(found, QueueError):  # not remembered: measured again at the next look
            errors.append(found)
            continue
        measured.append(name)
        locations[name] = location  # type: ignore[assignment]
        if isinstance(found, str):  # healthy: the next time it is due is news again
            announced.pop(name, None)
            held.discard(name)
        elif found.held is not None:
            held.add(name)
        else:
            held.discard(name)
            if announced.get(name) != location:
                announced[name] = location  # type: ignore[assignment]
                due.append(found)
    return WatchResult(
        due=tuple(sorted(due, key=lambda q: (-q.score, q.table))),
        errors=tuple(errors),
        measured=tuple(measured),
        tables=len(names),
        state=WatchState(locations, announced, frozenset(held)),
    )
