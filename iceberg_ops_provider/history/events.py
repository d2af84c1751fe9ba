"""The migration event log: things that happened to a namespace besides applying and rolling back.

``<meta_namespace>.migration_events`` is append-only: lock takeovers, crash recoveries, forced
unlocks, cleared intent records and repairs, each with who, when and details. Its writes are rare (they
happen only when something went wrong), so each event is one fast append; a write that fails is
logged and never fails the run it describes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.expressions import EqualTo

from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.history.store import ensure_meta_namespace, load_meta_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

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
    ]
)

_TABLE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "10",
    "commit.retry.num-retries": "10",
}


@dataclass(frozen=True)
class MigrationEvent:
    """One event of a namespace.

    Attributes:
        namespace: The namespace.
        at: When it happened (UTC).
        event: ``lock_taken_over``, ``recovered``, ``recovery_partial``, ``intent_cleared``, ``force_unlock``
            or ``repair``.
        version: The migration version concerned, if any.
        run_id: The run that recorded it.
        executed_by: ``user@host:pid`` of that run.
        message: One human line.
        details: Structured details (the previous holder, the actions found committed, ...).
    """

    namespace: str
    at: datetime
    event: str
    version: str | None
    run_id: str | None
    executed_by: str | None
    message: str
    details: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**self.__dict__, "at": self.at.isoformat()}


class EventLog:
    """Append and read the event log of one catalog's meta-namespace.

    Args:
        catalog: The catalog.
        meta_namespace: The namespace that holds the history.
    """

    def __init__(self, catalog: Catalog, meta_namespace: str) -> None:
        self.catalog = catalog
        self.identifier = (*meta_namespace.split("."), EVENTS_TABLE)

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
        """Append one event (best effort: a failure is logged, never raised)."""
        row = {
            "namespace": namespace,
            "at": datetime.now(UTC),
            "event": event,
            "version": version,
            "run_id": run_id,
            "executed_by": executed_by,
            "message": message,
            "details": json.dumps(details or {}, sort_keys=True, default=str),
        }
        try:
            table = self._ensure_table()
            table.append(pa.Table.from_pylist([row], schema=EVENTS_SCHEMA))
        except Exception as exc:
            log.warning("could not record the %s event of %r in the event log: %s", event, namespace, exc)

    def events(self, namespace: str) -> list[MigrationEvent]:
        """The events of ``namespace``, oldest first. Creates nothing."""
        table = load_meta_table(self.catalog, self.identifier)
        if table is None or table.current_snapshot() is None:
            return []
        data = table.scan(row_filter=EqualTo("namespace", namespace)).to_arrow()
        events = [
            MigrationEvent(**{**row, "at": _utc(row["at"]), "details": json.loads(row["details"] or "{}")})
            for row in data.select(EVENTS_SCHEMA.names).to_pylist()
        ]
        return sorted(events, key=lambda event: event.at)

    def _ensure_table(self) -> Any:
        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            pass
        ensure_meta_namespace(self.catalog, self.identifier)
        try:
            return self.catalog.create_table(
                self.identifier, arrow_to_iceberg_schema(EVENTS_SCHEMA), properties=_TABLE_PROPERTIES
            )
        except TableAlreadyExistsError:
            return self.catalog.load_table(self.identifier)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
