"""The rows of the migration history table and the table's schema."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import pyarrow as pa

__all__ = ["HISTORY_SCHEMA", "HISTORY_TABLE", "HistoryRow", "Operation", "Status"]

HISTORY_TABLE = "migration_history"
"""Name of the history table inside the meta-namespace."""

Status = Literal["applied", "rolled_back", "failed"]
Operation = Literal["upgrade", "downgrade", "stamp", "repair"]

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("version", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("description", pa.string()),
        pa.field("applied_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("checksum", pa.string()),
        pa.field("duration_ms", pa.int64()),
        pa.field("operation", pa.string()),
        pa.field("executed_by", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("source_sha256", pa.string()),
    ]
)
"""The specification's columns (``version`` ... ``error``) and what Flyway users expect beside them:
the file's checksum, how long it ran, which operation wrote the row, who/where ran it, the run id, and
the SHA-256 of the file's bytes (a table written by an earlier release gains it on its next write)."""


@dataclass(frozen=True)
class HistoryRow:
    """The latest state of one migration version in one namespace.

    Attributes:
        version: The migration's version (``"0003"``).
        namespace: The namespace it was applied to.
        description: The migration's description.
        applied_at: When this state was recorded (UTC).
        status: ``applied``, ``rolled_back`` or ``failed``.
        error: The error text of a failure, else ``None``.
        checksum: The migration file's checksum when this state was recorded (``ast1:`` + SHA-256 of its parsed
            code; older rows hold the SHA-256 of its bytes).
        duration_ms: How long ``upgrade()``/``downgrade()`` ran, in milliseconds.
        operation: ``upgrade``, ``downgrade``, ``stamp`` or ``repair``.
        executed_by: ``user@host:pid`` of the process that wrote the row.
        run_id: The id of the runner invocation that wrote the row.
        source_sha256: The SHA-256 of the file's bytes (line endings normalised) behind ``checksum``:
            a run finds the file unchanged without parsing it.
    """

    version: str
    namespace: str
    description: str
    applied_at: datetime
    status: Status
    error: str | None = None
    checksum: str | None = None
    duration_ms: int | None = None
    operation: Operation = "upgrade"
    executed_by: str | None = None
    run_id: str | None = None
    source_sha256: str | None = None

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> HistoryRow:
        """Build a row from a dict read from the table."""
        applied_at = row["applied_at"]
        if applied_at.tzinfo is None:
            applied_at = applied_at.replace(tzinfo=UTC)
        return cls(**{**row, "applied_at": applied_at})

    @classmethod
    def from_arrow(cls, data: pa.Table) -> list[HistoryRow]:
        """The rows of an Arrow table with :data:`HISTORY_SCHEMA`'s columns, column by column (a run reads them all)."""
        columns = data.select(HISTORY_SCHEMA.names).to_pydict()
        columns["applied_at"] = [at if at.tzinfo else at.replace(tzinfo=UTC) for at in columns["applied_at"]]
        return [cls(*values) for values in zip(*columns.values(), strict=True)]

    def to_dict(self) -> dict[str, Any]:
        """The row as a dict in the table's column order."""
        return asdict(self)

    def to_json(self) -> dict[str, Any]:
        """The row as JSON-able values (ISO timestamps)."""
        data = self.to_dict()
        data["applied_at"] = self.applied_at.isoformat()
        return data


def rows_to_arrow(rows: list[HistoryRow]) -> pa.Table:
    """Rows as an Arrow table with :data:`HISTORY_SCHEMA`."""
    return pa.Table.from_pylist([row.to_dict() for row in rows], schema=HISTORY_SCHEMA)
