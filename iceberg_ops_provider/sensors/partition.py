"""IcebergPartitionSensor: wait until data for a partition, or matching a filter, has been committed."""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.readiness import describe_partition_wait, parse_after_snapshot, probe_partition
from iceberg_ops_provider.sensors.base import IcebergCatalogSensor

if TYPE_CHECKING:
    from datetime import datetime

    from iceberg_ops_provider.triggers.partition import IcebergPartitionTrigger
    from iceberg_ops_provider.triggers.polling import CheckResult

__all__ = ["IcebergPartitionSensor"]


class IcebergPartitionSensor(IcebergCatalogSensor):
    """Wait until at least ``min_rows`` rows of a partition (and/or matching a filter) are committed.

    Judged from the table's metadata only, at its current snapshot: a scan is planned (manifests,
    their partition summaries and file metrics; no data file is read) and the data files whose
    partition record holds the wanted values are kept. ``rows`` is the sum of their record counts;
    rows removed by delete files still count, so for files with delete files it is an upper bound.

    * ``partition={"day": "{{ ds }}"}``: keys are partition field names of the table's current spec;
      values are converted per the field's transform (``day`` a date, ``hour`` ``2026-01-02-05``,
      ``month`` ``2026-01``, ``year`` ``2026``, ``identity`` a value of the column, ``bucket`` and
      ``truncate`` a value of the source column, bucketed or truncated as the table does; ``None``
      the null partition). A key that is not a field fails the task at once, naming the fields.
      Files written before the field was added to the spec are in none of its partitions.
    * ``where="region = 'eu' and amount > 0"``: a PyIceberg row filter; files that may hold matching
      rows (by partition values and column statistics) count whole.
    * Both: files in the partition that may match the filter. At least one of the two is needed.

    Args:
        table: The table, ``namespace.table`` (templated).
        partition: Wanted partition values by field name (templated; each value renders as text).
        where: A PyIceberg row filter (templated).
        min_rows: Rows needed, at least 1.
        after_snapshot: Count only data files committed after this snapshot id (templated; for
            example the ``snapshot_id`` an upstream task pushed). ``None``, empty or ``"None"``: all.
            Files rewritten since (compaction) count as new.
        iceberg_conn_id: The Airflow connection of the catalog (templated).
        deferrable: Wait in the triggerer (default); else wait on a worker in ``mode``.
        **kwargs: ``poke_interval``, ``timeout``, ``mode`` (default ``reschedule``), ``soft_fail``, ...

    Returns (XCom):
        ``{"table", "snapshot_id", "rows", "files", "files_with_deletes"}`` as seen when the wait ended.

    Raises:
        ValueError: At construction, neither ``partition`` nor ``where``, or ``min_rows`` below 1.
    """

    template_fields: Sequence[str] = ("table", "partition", "where", "after_snapshot", "iceberg_conn_id")
    ui_color = "#d6f5e3"

    def __init__(
        self,
        *,
        table: str,
        partition: dict[str, Any] | None = None,
        where: str | None = None,
        min_rows: int = 1,
        after_snapshot: int | str | None = None,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(iceberg_conn_id=iceberg_conn_id, deferrable=deferrable, **kwargs)
        if partition is None and where is None:
            raise ValueError(
                f"{type(self).__name__} {self.task_id!r} needs partition= (such as {{'day': '{{{{ ds }}}}'}}), "
                "where= (a row filter such as \"region = 'eu'\"), or both."
            )
        if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 1:
            raise ValueError(
                f"{type(self).__name__} {self.task_id!r}: min_rows must be an integer of at least 1, got {min_rows!r}."
            )
        self.table = table
        self.partition = partition
        self.where = where
        self.min_rows = min_rows
        self.after_snapshot = after_snapshot
        self._partition: dict[str, Any] | None = None
        self._where: str | None = None
        self._after: int | None = None

    def prepare(self) -> None:
        """Check the rendered table, partition, filter and snapshot."""
        if not isinstance(self.table, str) or "." not in self.table.strip(". "):
            raise ValueError(f"table must be 'namespace.table', got {self.table!r}.")
        self._partition = _mapping(self.partition)
        if self.where is not None and not isinstance(self.where, str):
            raise ValueError(f"where must be a row filter string, got {self.where!r}.")
        self._where = self.where.strip() if self.where and self.where.strip() else None
        if self._partition is None and self._where is None:
            raise ValueError("partition and where both rendered empty; there is nothing to wait for.")
        self._after = parse_after_snapshot(self.after_snapshot)

    def waiting_for(self) -> str:
        """``at least 1 row(s) in partition day='2026-01-02' of sales.events``."""
        return describe_partition_wait(self.table, self._partition, self._where, self.min_rows, self._after)

    def check(self, hook: IcebergCatalogHook) -> CheckResult:
        """Count the matching rows once."""
        probe = probe_partition(hook.get_conn(), self.table, self._partition, self._where, self._after)
        return probe.rows >= self.min_rows, probe.to_json(), probe.describe()

    def trigger(self, deadline: datetime, started_at: datetime) -> IcebergPartitionTrigger:
        """The trigger that goes on counting in the triggerer."""
        from iceberg_ops_provider.triggers.partition import IcebergPartitionTrigger

        return IcebergPartitionTrigger(
            table=self.table,
            partition=self._partition,
            where=self._where,
            min_rows=self.min_rows,
            after_snapshot=self._after,
            iceberg_conn_id=self.iceberg_conn_id,
            deadline=deadline,
            poll_interval=self.poke_interval,
            started_at=started_at,
        )


def _mapping(partition: object) -> dict[str, Any] | None:
    """The rendered ``partition`` as a dict; text holding a dict (a whole-dict template) is read back."""
    if partition is None or partition == "" or partition == {}:
        return None
    if isinstance(partition, str):
        text = partition.strip()
        try:
            partition = json.loads(text)
        except ValueError:
            with contextlib.suppress(ValueError, SyntaxError):
                partition = ast.literal_eval(text)
    if not isinstance(partition, dict) or not all(isinstance(key, str) for key in partition):
        raise ValueError(
            f"partition must be a mapping of partition field names to values, got {partition!r}; template each "
            "value ({'day': '{{ ds }}'}) or render the DAG with render_template_as_native_obj=True."
        )
    return partition
