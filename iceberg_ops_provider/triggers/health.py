"""TableHealthTrigger: watch the tables of a namespace (or a list) and fire when maintenance newly falls due.

An event trigger for an ``AssetWatcher`` (docs/maintenance/watch.md): each poll is one look of
:func:`~iceberg_ops_provider.maintenance.watch.watch_tables`, run in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import TriggerEvent

from iceberg_ops_provider.core.polling import describe_error
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import BaseEventTrigger
from iceberg_ops_provider.maintenance.overview import DEFAULT_PARALLELISM
from iceberg_ops_provider.maintenance.watch import WatchState, watch_tables, watched_tables
from iceberg_ops_provider.triggers.polling import _call, _connection, _open_catalog

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["WATCH_STATE_KEY", "TableHealthTrigger"]

WATCH_STATE_KEY = "table_health_watch"
"""The key of the watch state (last seen locations, announced tables) in the asset's state store."""

_UNREAD = object()  # the state store not read yet

_MULTI_ASSET = "concrete inlets and outlets"  # Airflow's refusal of an unsubscripted call when several assets share it


class TableHealthTrigger(BaseEventTrigger):
    """Watch tables from metadata alone and fire an event naming the tables whose policy now calls for work.

    Every ``poll_interval`` seconds, each table is loaded once; only tables whose metadata location changed
    (or whose quiet hours may have ended) are measured, under their own policy. An event is an edge: it lists
    the tables newly due (``{"namespace", "tables": [{"table", "needs", "score", ...}], "errors", ...}``),
    and a table is listed again only after its metadata changed and it is still due, or after it was healthy.

    The watch state is kept in the asset's state store (Airflow 3.3); without one (an older Airflow, or
    several assets sharing this trigger) it is kept in memory, and after a triggerer restart the tables
    still due are announced once more.

    Args:
        iceberg_conn_id: The Airflow connection of the catalog.
        namespace: The namespace whose tables are watched (listed again at every poll), or
        tables: the tables watched (``namespace.table``); exactly one of the two.
        poll_interval: Seconds between looks.
        parallelism: Tables loaded (and measured) at a time.
    """

    def __init__(
        self,
        *,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        namespace: str | None = None,
        tables: Sequence[str] | None = None,
        poll_interval: float = 300.0,
        parallelism: int = DEFAULT_PARALLELISM,
    ) -> None:
        super().__init__()
        if (namespace is None) == (tables is None):
            raise ValueError("TableHealthTrigger watches either a namespace or a list of tables: give exactly one.")
        self.iceberg_conn_id = iceberg_conn_id
        self.namespace = namespace
        self.tables = sorted(set(tables)) if tables is not None else None
        self.poll_interval = float(poll_interval)
        self.parallelism = int(parallelism)
        self.state = WatchState()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and the keyword arguments that re-create this trigger."""
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "iceberg_conn_id": self.iceberg_conn_id,
                "namespace": self.namespace,
                "tables": self.tables,
                "poll_interval": self.poll_interval,
                "parallelism": self.parallelism,
            },
        )

    async def _store(self) -> Any:
        """The asset's state store with the saved state read into ``self.state``, or ``None`` (state in memory)."""
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return None
        try:
            saved = await asyncio.to_thread(store.get, WATCH_STATE_KEY)
        except ValueError as exc:
            if _MULTI_ASSET not in str(exc):
                raise
            self.log.warning(
                "Several assets share this trigger: the watch state is kept in memory, so a triggerer restart "
                "announces the tables still due once more."
            )
            return None
        self.state = WatchState.from_json(saved)
        return store

    async def _save(self, store: Any) -> None:
        """Write the watch state to the store; a failed write is logged (the state stays in memory)."""
        try:
            await asyncio.to_thread(store.set, WATCH_STATE_KEY, self.state.to_json())
        except Exception as exc:  # the watcher outlives a state store that did not answer
            self.log.warning(
                "The watch state was not stored (kept in memory, written at the next change; a triggerer "
                "restart before then announces the tables still due once more): %s",
                describe_error(exc),
            )

    def _look(self, catalog: Catalog) -> Any:
        """One look (blocking; runs in a thread)."""
        names = watched_tables(catalog, self.namespace, self.tables)
        return watch_tables(catalog, names, self.state, parallelism=self.parallelism)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Look every ``poll_interval`` seconds, forever; yield an event when tables newly fall due."""
        store: Any = _UNREAD
        catalog: Catalog | None = None
        try:
            while True:
                try:
                    if store is _UNREAD:  # before the first look: a look from an empty state announces again
                        store = await self._store()
                    if catalog is None:
                        connection = await _connection(self.iceberg_conn_id)
                        catalog = await asyncio.to_thread(_open_catalog, connection)
                    result = await asyncio.to_thread(self._look, catalog)
                except Exception as exc:  # a watcher outlives outages: the next poll tries again
                    self.log.warning("The look failed, tried again at the next poll: %s", describe_error(exc))
                    _call(catalog, "close")
                    catalog = None
                else:
                    for error in result.errors:
                        self.log.warning("%s not measured: %s %s", error.table, error.error, error.message or "")
                    self.log.info(
                        "Watched %d table(s): %d measured, %d newly due",
                        result.tables,
                        len(result.measured),
                        len(result.due),
                    )
                    changed, self.state = result.state != self.state, result.state
                    if result.due:
                        yield TriggerEvent({"namespace": self.namespace, **result.to_json()})
                    if store is not None and changed:  # after the event: a crash in between announces again
                        await self._save(store)
                _call(getattr(catalog, "engine", None), "dispose")  # a SQL catalog's pooled connections
                await asyncio.sleep(self.poll_interval)
        finally:
            _call(catalog, "close")
