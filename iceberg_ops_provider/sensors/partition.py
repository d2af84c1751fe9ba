"""IcebergPartitionSensor: wait until data for a partition, or matching a filter, has been committed."""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.operators.lineage import IcebergLineageMixin
from iceberg_ops_provider.partitions.probe import (
    SnapshotMark,
    describe_partition_wait,
    parse_after_snapshot,
    probe_partition,
)
from iceberg_ops_provider.sensors.base import IcebergCatalogSensor

if TYPE_CHECKING:
    from airflow.sdk import Context

    from iceberg_ops_provider.triggers.partition import IcebergPartitionTrigger
    from iceberg_ops_provider.triggers.polling import CheckResult

__all__ = ["IcebergPartitionSensor"]

_MARK_KEY = "iceberg_ops.after_snapshot_mark"


class IcebergPartitionSensor(IcebergLineageMixin, IcebergCatalogSensor):
    """Wait until at least ``min_rows`` rows of a partition (and/or matching a filter) are committed.

    Judged from the table's metadata only (no data file is read): ``rows`` are those certainly there,
    ``possible_rows`` an upper bound (``docs/sensors.md`` explains both, and how partition values are read).

    Args:
        table: The table, ``namespace.table`` (templated; surrounding spaces are dropped).
        partition: Wanted partition values by field name (templated; each value renders as text).
        where: A PyIceberg row filter (templated).
        min_rows: Rows needed, at least 1.
        after_snapshot: Count only data files committed after this snapshot id (templated). Given, it
            must render to a snapshot id: ``None`` or ``"None"`` fails the task; ``""`` means all data.
        count_possible_rows: Judge ``min_rows`` on possible rows (an upper bound) instead of certain ones.
        iceberg_conn_id: The Airflow connection of the catalog (templated).
        deferrable: Wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
        **kwargs: ``poke_interval``, ``timeout``, ``mode`` (default ``reschedule``), ``soft_fail``, ...

    Returns (XCom):
        ``{"table", "snapshot_id", "rows", "possible_rows", "files", "files_with_deletes"}`` as seen
        when the wait ended.

    Lineage: once the wait is over, the table is an OpenLineage input at the snapshot seen.

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
        count_possible_rows: bool = False,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(iceberg_conn_id=iceberg_conn_id, **kwargs)
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
        self.count_possible_rows = bool(count_possible_rows)
        self._after_given = after_snapshot is not None
        self._table = ""
        self._partition: dict[str, Any] | None = None
        self._where: str | None = None
        self._after: int | None = None
        self._mark: SnapshotMark | None = None
        self._state_store: Any = None

    def prepare(self) -> None:
        """Check the rendered table, partition, filter and snapshot."""
        self._table = _table(self.table)
        self._partition = _mapping(self.partition)
        if self.where is not None and not isinstance(self.where, str):
            raise ValueError(f"where must be a row filter string, got {self.where!r}.")
        self._where = self.where.strip() if self.where and self.where.strip() else None
        if self._partition is None and self._where is None:
            raise ValueError("partition and where both rendered empty; there is nothing to wait for.")
        rendered = self.after_snapshot
        if self._after_given and (rendered is None or (isinstance(rendered, str) and rendered.strip() == "None")):
            raise ValueError(
                f"after_snapshot rendered as {rendered!r}: the value it was given (often an upstream task's XCom) "
                "holds no snapshot id, and counting all data instead could pass on data older than the run. Make "
                "the upstream push the snapshot id, or render '' (e.g. \"{{ ti.xcom_pull(...) or '' }}\") to count "
                "all data on purpose."
            )
        self._after = parse_after_snapshot(rendered)
        self._mark = None

    def waiting_for(self) -> str:
        """``at least 1 row(s) in partition day='2026-01-02' of sales.events``."""
        return describe_partition_wait(
            self._table, self._partition, self._where, self.min_rows, self._after, self.count_possible_rows
        )

    def execute(self, context: Context) -> Any:
        """Check once, then defer or wait (see :meth:`IcebergCatalogSensor.execute`); record the table read."""
        self.record_lineage()
        seen = super().execute(context)
        self._record_read(seen)
        return seen

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger (see :meth:`IcebergCatalogSensor.execute_complete`); record the table read."""
        seen = super().execute_complete(context, event)
        self._record_read(seen)
        return seen

    def _record_read(self, seen: object) -> None:
        """Record the table as read at the snapshot the last check saw."""
        if not isinstance(seen, dict) or "snapshot_id" not in seen:
            return

        def build() -> None:
            from iceberg_ops_provider.lineage import table_lineage

            catalog = (self._hook or IcebergCatalogHook(iceberg_conn_id=self.iceberg_conn_id)).catalog_for("read")
            table = catalog.load_table(str(seen.get("table") or self._table or self.table).strip())
            self.record_lineage(inputs=[table_lineage(catalog, table, snapshot_id=seen["snapshot_id"])])

        self.collect_lineage(build)

    def poke(self, context: Context) -> Any:
        """One metadata check (see :meth:`IcebergCatalogSensor.poke`)."""
        self._state_store = context.get("task_state_store") if hasattr(context, "get") else None
        return super().poke(context)

    def transient(self, exc: BaseException, first_check: bool) -> bool:
        """As for any check, and a missing table after the first check (dropped and being re-created)."""
        return (isinstance(exc, NoSuchTableError) and not first_check) or super().transient(exc, first_check)

    def check(self, hook: IcebergCatalogHook) -> CheckResult:
        """Count the matching rows once (reading ``after_snapshot``'s mark at the first check)."""
        if self._after is not None and self._mark is None:
            self._mark = self._stored_mark()
        probe = probe_partition(
            hook.catalog_for("read"), self._table, self._partition, self._where, self._mark or self._after
        )
        if self._mark is None and probe.after is not None:
            self._mark = probe.after
            self._store_mark(probe.after)
        return probe.enough(self.min_rows, self.count_possible_rows), probe.to_json(), probe.describe()

    def _stored_mark(self) -> SnapshotMark | None:
        """The mark an earlier try of this task stored (a rescheduled sensor runs each check as a new try)."""
        try:
            stored = self._state_store.get(_MARK_KEY) if self._state_store is not None else None
        except Exception:
            return None
        if isinstance(stored, dict) and stored.get("snapshot_id") == self._after:
            try:
                return SnapshotMark(self._after, int(stored["sequence_number"]), int(stored["timestamp_ms"]))
            except (KeyError, TypeError, ValueError):
                return None
        return None

    def _store_mark(self, mark: SnapshotMark) -> None:
        if self._state_store is None:
            return
        value = {"snapshot_id": mark.snapshot_id, "sequence_number": mark.sequence_number}
        try:
            self._state_store.set(_MARK_KEY, {**value, "timestamp_ms": mark.timestamp_ms})
        except Exception as exc:  # only a convenience for later tries
            self.log.debug("Could not keep the mark of after_snapshot: %s", exc)

    def trigger(self, **polling: Any) -> IcebergPartitionTrigger:
        """The trigger that goes on counting in the triggerer."""
        from iceberg_ops_provider.triggers.partition import IcebergPartitionTrigger

        return IcebergPartitionTrigger(
            table=self._table,
            partition=self._partition,
            where=self._where,
            min_rows=self.min_rows,
            after_snapshot=self._after,
            after_sequence_number=self._mark.sequence_number if self._mark else None,
            after_timestamp_ms=self._mark.timestamp_ms if self._mark else None,
            count_possible_rows=self.count_possible_rows,
            **polling,
        )


def _table(table: object) -> str:
    """The rendered ``table`` without surrounding spaces, checked to be ``namespace.table``."""
    text = table.strip() if isinstance(table, str) else ""
    parts = text.split(".")
    if len(parts) < 2 or any(not part or part != part.strip() for part in parts):
        raise ValueError(f"table must be 'namespace.table' (no empty part, no spaces around a dot), got {table!r}.")
    return text


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
