"""IcebergPartitionTrigger: wait in the triggerer until data for a partition (or a filter) is committed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError

from iceberg_ops_provider.partitions.probe import SnapshotMark, describe_partition_wait, probe_partition
from iceberg_ops_provider.triggers.polling import CatalogPollingTrigger, CheckResult

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["IcebergPartitionTrigger"]

_BYTES_KEY = "bytes_hex"


def _stored_partition(partition: dict[str, Any] | None) -> dict[str, Any] | None:
    """``partition`` as Airflow can store it: ``bytes`` values become ``{"bytes_hex": "..."}``."""
    if not partition:
        return None
    return {key: {_BYTES_KEY: value.hex()} if isinstance(value, bytes) else value for key, value in partition.items()}


def _given_partition(partition: dict[str, Any] | None) -> dict[str, Any] | None:
    """``partition`` with ``{"bytes_hex": "..."}`` values read back as ``bytes`` (a value is never a mapping)."""
    if not partition:
        return None
    return {
        key: bytes.fromhex(value[_BYTES_KEY])
        if isinstance(value, dict) and set(value) == {_BYTES_KEY} and isinstance(value[_BYTES_KEY], str)
        else value
        for key, value in partition.items()
    }


class IcebergPartitionTrigger(CatalogPollingTrigger):
    """Poll a table's metadata until at least ``min_rows`` rows match ``partition`` and/or ``where``.

    Each check walks the table's manifests (no data file read). A missing table does not end the wait:
    the sensor checked it exists before deferring, so it is taken to be dropped and re-created.

    Args:
        table, partition, where, min_rows, after_snapshot, count_possible_rows: As the sensor's, rendered
            (``bytes`` partition values stored as ``{"bytes_hex": ...}``).
        after_sequence_number: That snapshot's sequence number, and
        after_timestamp_ms: its commit time, as the sensor read them before deferring: with both, the
            wait needs no lookup of the snapshot and goes on if it is expired meanwhile.
        **polling: ``iceberg_conn_id``, ``deadline``, ... of :class:`CatalogPollingTrigger`.
    """

    def __init__(
        self,
        *,
        table: str,
        partition: dict[str, Any] | None = None,
        where: str | None = None,
        min_rows: int = 1,
        after_snapshot: int | None = None,
        after_sequence_number: int | None = None,
        after_timestamp_ms: int | None = None,
        count_possible_rows: bool = False,
        **polling: Any,
    ) -> None:
        super().__init__(**polling)
        self.table = table
        self.partition = _given_partition(partition)
        self.where = where
        self.min_rows = min_rows
        self.after_snapshot = after_snapshot
        self.mark: SnapshotMark | None = None
        if after_snapshot is not None and after_sequence_number is not None and after_timestamp_ms is not None:
            self.mark = SnapshotMark(after_snapshot, after_sequence_number, after_timestamp_ms)
        self.count_possible_rows = count_possible_rows

    def arguments(self) -> dict[str, Any]:
        """The table, partition, filter, rows needed and snapshot (with its mark when known)."""
        return {
            "table": self.table,
            "partition": _stored_partition(self.partition),
            "where": self.where,
            "min_rows": self.min_rows,
            "after_snapshot": self.after_snapshot,
            "after_sequence_number": self.mark.sequence_number if self.mark else None,
            "after_timestamp_ms": self.mark.timestamp_ms if self.mark else None,
            "count_possible_rows": self.count_possible_rows,
        }

    def waiting_for(self) -> str:
        """``at least 1 row(s) in partition day='2026-01-02' of sales.events``."""
        return describe_partition_wait(
            self.table, self.partition, self.where, self.min_rows, self.after_snapshot, self.count_possible_rows
        )

    def transient(self, exc: BaseException) -> bool:
        """As for any check, and a missing table too (it existed when the sensor deferred)."""
        return isinstance(exc, NoSuchTableError) or super().transient(exc)

    def check(self, catalog: Catalog, connection: Any) -> CheckResult:
        """Count the matching rows once."""
        after = self.mark or self.after_snapshot
        probe = probe_partition(catalog, self.table, self.partition, self.where, after)
        if self.mark is None and probe.after is not None:
            self.mark = probe.after  # later checks of this run need the snapshot no more
        return probe.enough(self.min_rows, self.count_possible_rows), probe.to_json(), probe.describe()
