"""The migration event log: the audit trail of every namespace, ``<meta_namespace>.migration_events``.

A run's outcomes are appended in one commit when it ends; a write that fails is logged and never fails
the run (:meth:`EventLog.events` shows a lost batch's outcomes from the history table). Once the log
holds more than :attr:`EventLog.compact_after_files` files it is rewritten into one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue, EqualTo

from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.history.commit import META_TABLE_PROPERTIES, replace_files
from iceberg_ops_provider.history.records import HistoryRow
from iceberg_ops_provider.history.store import create_meta_table, load_meta_table, trim_table, upgrade_meta_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["EVENTS_SCHEMA", "EVENTS_TABLE", "EventLog", "MigrationEvent"]

log = logging.getLogger(__name__)

EVENTS_TABLE = "migration_events"
"""Name of the event table inside the meta-namespace."""

EVENTS_SCHEMA = pa.schema(
    [
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("event", pa.string(), nullable=False),
        pa.field("version", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("executed_by", pa.string()),
        pa.field("message", pa.string()),
        pa.field("details", pa.string()),
        pa.field("duration_ms", pa.int64()),
        pa.field("checksum", pa.string()),
        pa.field("error", pa.string()),
    ]
)

_APPEND_ATTEMPTS = 12
"""Attempts of an event append lost to other writers of the shared log (its compaction, its expiry)."""


@dataclass(frozen=True)
class MigrationEvent:
    """One event of a namespace.

    Attributes:
        event: ``applied``, ``rolled_back``, ``failed``, ``rollback_failed``, ``rollback_refused``,
            ``stamped`` (a version's outcomes), or ``lock_taken_over``, ``recovered``, ``recovery_partial``,
            ``intent_cleared``, ``force_unlock``, ``repair``.
        details: Structured details (the previous holder, the actions found committed, ...).
    """

    namespace: str
    at: datetime
    event: str
    version: str | None
    run_id: str | None
    executed_by: str | None
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    duration_ms: int | None = None
    checksum: str | None = None
    error: str | None = None

    @classmethod
    def from_history_row(cls, row: HistoryRow, **details: Any) -> MigrationEvent:
        """The event a history row records (an apply, rollback, stamp or failure)."""
        event = _ROW_EVENTS.get((row.operation, row.status), row.operation)
        took = f" in {row.duration_ms / 1000:.2f}s" if row.duration_ms is not None else ""
        message = f"{event.replace('_', ' ')} {row.version} {row.description}".rstrip() + took
        if row.operation == "stamp":
            message = f"stamped {row.version} as {row.status.replace('_', ' ')}"
        message += f": {row.error}" if row.error else ""
        identity = (row.namespace, row.applied_at, event, row.version, row.run_id, row.executed_by, message, details)
        return cls(*identity, duration_ms=row.duration_ms, checksum=row.checksum, error=row.error)

    def to_row(self) -> dict[str, Any]:
        """The event as a row of :data:`EVENTS_SCHEMA`."""
        return {**self.__dict__, "details": json.dumps(self.details, sort_keys=True, default=str)}

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**self.__dict__, "at": self.at.isoformat()}


_ROW_EVENTS = {
    ("upgrade", "applied"): "applied",
    ("upgrade", "failed"): "failed",
    ("downgrade", "rolled_back"): "rolled_back",
    ("downgrade", "applied"): "rollback_failed",
    ("stamp", "applied"): "stamped",
    ("stamp", "rolled_back"): "stamped",
    ("repair", "applied"): "repair",
}


class EventLog:
    """Append and read the event log of one catalog's meta-namespace.

    Args:
        catalog: The catalog.
        meta_namespace: The namespace that holds the history.
        keep_days: Events older than this are dropped when the log is compacted (``None``: keep all).
    """

    compact_after_files = 32
    """Data files the log may hold before it is rewritten into one."""

    keep_snapshots = 5
    """Snapshots of the log kept for time travel; the files of older ones are deleted."""

    def __init__(self, catalog: Catalog, meta_namespace: str, keep_days: float | None = 400) -> None:
        if keep_days is not None and keep_days <= 0:
            raise ValueError(f"keep_days must be positive (or None to keep every event), got {keep_days}.")
        self.catalog = catalog
        self.identifier = (*meta_namespace.split("."), EVENTS_TABLE)
        self.keep_days = keep_days

    def record(
        self,
        namespace: str,
        event: str,
        message: str,
        *,
        version: str | None = None,
        run_id: str | None = None,
        executed_by: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Append one event now (best effort: a failure is logged, never raised)."""
        now = datetime.now(UTC)
        self.record_many([MigrationEvent(namespace, now, event, version, run_id, executed_by, message, details or {})])

    def record_many(self, events: list[MigrationEvent]) -> None:
        """Append ``events`` in one commit (best effort: a failure is logged, never raised)."""
        if not events:
            return
        rows = pa.Table.from_pylist([event.to_row() for event in events], schema=EVENTS_SCHEMA)
        try:
            # An append that lost a race (another writer's compaction or expiry removed the snapshot it
            # started from) left nothing behind, so trying again is safe.
            for attempt in lost_races(_APPEND_ATTEMPTS, what="event log"):
                with attempt:
                    table = self._ensure_table()
                    replace_files(table, None, rows)
        except Exception as exc:
            self._lost(events, exc)
            return
        self._maintain(table)

    @staticmethod
    def _lost(events: list[MigrationEvent], exc: BaseException) -> None:
        kinds = ", ".join(sorted({event.event for event in events}))
        log.warning("could not record %d event(s) (%s) in the event log: %s", len(events), kinds, exc)

    def events(self, namespace: str, history: list[HistoryRow] | None = None) -> list[MigrationEvent]:
        """The events of ``namespace``, oldest first, with the outcomes of ``history`` the log lacks. Reads only."""
        table = load_meta_table(self.catalog, self.identifier)
        events: list[MigrationEvent] = []
        if table is not None and table.current_snapshot() is not None:
            data = table.scan(row_filter=EqualTo("namespace", namespace)).to_arrow()
            names = [name for name in EVENTS_SCHEMA.names if name in data.column_names]
            events = [
                MigrationEvent(**{**row, "at": _utc(row["at"]), "details": json.loads(row["details"] or "{}")})
                for row in data.select(names).to_pylist()
            ]
        logged = {(event.run_id, event.version, event.event) for event in events}
        for row in history or []:
            event = MigrationEvent.from_history_row(row, source="history")
            if event.event != "repair" and (event.run_id, event.version, event.event) not in logged:
                events.append(event)
        return sorted(events, key=lambda event: event.at)

    def _ensure_table(self) -> Table:
        table = load_meta_table(self.catalog, self.identifier) or create_meta_table(
            self.catalog, self.identifier, arrow_to_iceberg_schema(EVENTS_SCHEMA), properties=META_TABLE_PROPERTIES
        )
        return upgrade_meta_table(self.catalog, table, EVENTS_SCHEMA)

    def _maintain(self, table: Table) -> None:
        """Rewrite the log into one file once it holds many, then delete the files of old snapshots."""
        snapshot = table.current_snapshot()
        files = int(snapshot.summary.additional_properties.get("total-data-files", "0")) if snapshot else 0
        if snapshot is None or files <= self.compact_after_files:
            return
        try:
            data = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
            if self.keep_days is not None:
                data = data.filter(pc.greater_equal(data.column("at"), self._cutoff(data)))
            # Deletes the files of the snapshot just read; events appended meanwhile stay.
            replace_files(table, AlwaysTrue(), data.sort_by("at"), properties={"iceberg-ops.operation": "compaction"})
        except Exception as exc:
            log.info("could not compact the event log (%s: %s); the next batch tries again", type(exc).__name__, exc)
            return
        trim_table(table, self.keep_snapshots)

    def _cutoff(self, data: pa.Table) -> pa.Scalar:
        """``keep_days`` before the earlier of now and the newest event (a clock running ahead drops nothing recent)."""
        newest = pc.max(data.column("at")).as_py()
        now = datetime.now(UTC)
        reference = min(now, _utc(newest)) if newest is not None else now
        return pa.scalar(reference - timedelta(days=self.keep_days or 0), pa.timestamp("us", tz="UTC"))


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
