"""IcebergPartitionTrigger: wait in the triggerer until data for a partition (or a filter) is committed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.readiness import describe_partition_wait, parse_after_snapshot, probe_partition
from iceberg_ops_provider.triggers.polling import CatalogPollingTrigger, CheckResult

if TYPE_CHECKING:
    from datetime import datetime

    from pyiceberg.catalog import Catalog

__all__ = ["IcebergPartitionTrigger"]


class IcebergPartitionTrigger(CatalogPollingTrigger):
    """Poll a table's metadata until at least ``min_rows`` rows match ``partition`` and/or ``where``.

    Each check plans a scan (manifests only, no data file read) with
    :func:`~iceberg_ops_provider.readiness.partition_rows`. Yields ``{"status": "success", "seen":
    {"table", "snapshot_id", "rows", "files", "files_with_deletes"}, ...}`` once enough rows are
    committed, or a ``timeout``/``failed`` event (see :mod:`iceberg_ops_provider.triggers.polling`).
    A missing table or a partition key that is not a field of the table's spec fails at once.

    Args:
        table: The table (``namespace.table``).
        partition: Wanted partition values by partition field name (values rendered as text).
        where: A PyIceberg row filter string.
        min_rows: Rows needed (the sum of the matching data files' record counts).
        after_snapshot: Count only data files committed after this snapshot id.
        iceberg_conn_id: The Airflow connection of the catalog.
        deadline: When to stop waiting (absolute; see :class:`CatalogPollingTrigger`).
        poll_interval: Seconds between checks.
        started_at: When the wait began, for the timeout message.
    """

    def __init__(
        self,
        *,
        table: str,
        partition: dict[str, Any] | None = None,
        where: str | None = None,
        min_rows: int = 1,
        after_snapshot: int | str | None = None,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        deadline: datetime | str | float,
        poll_interval: float = 60.0,
        started_at: datetime | str | float | None = None,
    ) -> None:
        super().__init__(
            iceberg_conn_id=iceberg_conn_id, deadline=deadline, poll_interval=poll_interval, started_at=started_at
        )
        self.table = table
        self.partition = dict(partition) if partition else None
        self.where = where or None
        self.min_rows = int(min_rows)
        self.after_snapshot = parse_after_snapshot(after_snapshot)

    def arguments(self) -> dict[str, Any]:
        """The table, partition, filter, rows needed and snapshot."""
        return {
            "table": self.table,
            "partition": self.partition,
            "where": self.where,
            "min_rows": self.min_rows,
            "after_snapshot": self.after_snapshot,
        }

    def waiting_for(self) -> str:
        """``at least 1 row(s) in partition day='2026-01-02' of sales.events``."""
        return describe_partition_wait(self.table, self.partition, self.where, self.min_rows, self.after_snapshot)

    def check(self, catalog: Catalog, connection: Any) -> CheckResult:
        """Count the matching rows once."""
        probe = probe_partition(catalog, self.table, self.partition, self.where, self.after_snapshot)
        return probe.rows >= self.min_rows, probe.to_json(), probe.describe()
