"""Table maintenance operators: health, compaction, manifest rewrite, snapshot expiry, orphan removal.

Each is a thin front over one function of :mod:`iceberg_ops_provider.maintenance`, its result in XCom as its
``to_json()``; every one is safe to retry (``docs/airflow.md``; lineage: ``docs/lineage.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import AirflowException, AirflowFailException
from iceberg_ops_provider.maintenance.times import parse_older_than
from iceberg_ops_provider.operators.data_move import unit_list
from iceberg_ops_provider.operators.lineage import IcebergLineageMixin
from iceberg_ops_provider.operators.rendered import as_flag
from iceberg_ops_provider.operators.wording import operator_message
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from airflow.sdk import Context
    from pyiceberg.table import Table


__all__ = [
    "IcebergCompactOperator",
    "IcebergExpireSnapshotsOperator",
    "IcebergPlanCompactionOperator",
    "IcebergRemoveOrphanFilesOperator",
    "IcebergRewriteManifestsOperator",
    "IcebergTableHealthOperator",
    "as_flag",
    "parse_older_than",
]


class _TableMaintenanceOperator(IcebergLineageMixin, BaseOperator):
    """Shared front of the maintenance operators: open the table, call the function, push its result."""

    template_fields: Sequence[str] = ("table", "iceberg_conn_id")
    ui_color = "#d5f5e3"
    verb: ClassVar[str] = ""

    def __init__(
        self, *, table: str, iceberg_conn_id: str = IcebergCatalogHook.default_conn_name, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.iceberg_conn_id = iceberg_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        """Run the maintenance function on the table and return its result's JSON for XCom.

        Raises:
            AirflowFailException: A permanent error: retrying cannot help.
            IcebergOpsError: A transient one (a commit conflict, storage that did not answer): retried.
        """
        from iceberg_ops_provider.errors import IcebergOpsError
        from iceberg_ops_provider.lineage import table_lineage

        self.record_lineage()
        try:
            hook = IcebergCatalogHook(iceberg_conn_id=self.iceberg_conn_id)
            catalog = hook.catalog_for("write" if self.changes_table() else "read")
            table = self._load(catalog)
            skipped = self._skipped(table)
            if skipped is not None:
                return skipped
            self.collect_lineage(lambda: self.record_lineage(inputs=[table_lineage(catalog, table)]))
            loaded_at = table.metadata_location
            try:
                result = self.run(table)
            except BaseException as exc:
                # A run that fails part way may have committed (a compaction group, say): report what it did.
                if self.changes_table():
                    self.collect_lineage(partial(self._record_output, catalog, getattr(exc, "result", None), loaded_at))
                raise
        except IcebergOpsError as exc:
            if exc.transient:
                raise
            raise AirflowFailException(operator_message(exc)) from exc
        except ValueError as exc:  # a bad argument or table property: the same on every try
            raise AirflowFailException(operator_message(exc)) from exc
        payload = result if isinstance(result, dict) else result.to_json()  # a plan is its JSON already
        self.log.info("%s of %s: %s", self.verb, self.table, _brief(payload))
        if self.changes_table():
            self.collect_lineage(lambda: self._record_output(catalog, result))
        self.publish_asset_extras(
            context, {"table": self.table, "operation": self.verb, **_counts(payload)}, {"operation": self.verb}
        )
        return payload

    def _skipped(self, table: Table) -> dict[str, Any] | None:
        """The XCom of a run its table's maintenance policy skips (off, or in its quiet hours); else ``None``.

        Only runs that change the table are skipped. A bad policy value raises its error (the task fails).
        """
        from iceberg_ops_provider.maintenance.policy import ENABLED_KEY, PREFIX, table_policy

        self.policy = table_policy(table)
        reason = self.policy.skip_reason() if self.changes_table() else None
        if reason is None:
            return None
        why = f"{ENABLED_KEY}=false" if reason == "disabled" else f"inside {PREFIX}quiet-hours (UTC)"
        self.log.info("%s of %s skipped by the table's maintenance policy: %s", self.verb, self.table, why)
        return {"table": self.table, "skipped": reason}

    def changes_table(self) -> bool:
        """Whether this run may have changed the table (not a dry run): it is then a lineage output too."""
        return not as_flag(getattr(self, "dry_run", False))

    def written(self, table: Table, result: Any) -> tuple[int, int, int] | None:
        """Rows, bytes and data files the run wrote, when it wrote data (compaction); else ``None``."""
        return None

    def _record_output(self, catalog: Any, result: Any, loaded_at: str | None = None) -> None:
        """Record the table as written now, with what ``result`` wrote (not when still at ``loaded_at``)."""
        from iceberg_ops_provider.lineage import table_lineage

        after = catalog.load_table(self.table)
        if loaded_at is not None and after.metadata_location == loaded_at:
            return
        rows, size, files = (self.written(after, result) if result is not None else None) or (None, None, None)
        self.record_lineage(self.lineage_inputs, [table_lineage(catalog, after, rows=rows, bytes=size, files=files)])

    def _load(self, catalog: Any) -> Table:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return catalog.load_table(self.table)
        except NoSuchTableError as exc:
            raise AirflowFailException(
                f"Table {self.table!r} does not exist in the catalog of connection {self.iceberg_conn_id!r} ({exc}). "
                "Check the `table` argument (namespace.table)."
            ) from exc

    def run(self, table: Table) -> Any:
        """Call the maintenance function (each operator's one job)."""
        raise NotImplementedError


def _counts(payload: dict[str, Any]) -> dict[str, int | float]:
    """The counts of a result (its numbers)."""
    return {k: v for k, v in payload.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _brief(payload: dict[str, Any]) -> str:
    """The counts of a result, for the task log; byte counts as the command line shows sizes (``812.4 KiB``)."""
    return ", ".join(f"{k}={size_text(v) if 'bytes' in k else v}" for k, v in _counts(payload).items()) or "done"


class IcebergCompactOperator(_TableMaintenanceOperator):
    """Compact the small data files of a table (``compact_small_files_streaming``), or given units of it.

    With ``units`` (from :class:`IcebergPlanCompactionOperator`), only those units are rewritten, each
    as one commit, exactly once; they carry their own strategy and target size, so the planning
    arguments must be left unset.

    Args:
        table, iceberg_conn_id: ``namespace.table`` and the catalog's Airflow connection (templated).
        target_file_size_bytes: Output file size; default the table's ``write.target-file-size-bytes``.
        min_input_files: Partitions with fewer small files are left alone; default the table's policy
            (``iceberg-ops.maintenance.min-input-files``, 5).
        where: A filter restricting the files considered, e.g. ``"day >= '2026-11-01'"`` (templated).
        strategy: ``binpack`` or ``sort`` (also sort each output file by the table's sort order).
        dry_run: Only report what would be rewritten (not with ``units``: the plan is the dry run).
        units: Units of the table to run (``CompactionUnit.to_json()`` each; templated).
        commit_every_bytes: Commit the groups written, as one snapshot, once their input reaches this
            many bytes (default: the target size; ``0``: every group its own snapshot). Not with ``units``.
        max_concurrent_groups: Groups written side by side (default 2 with ``binpack``, 1 with ``sort``).
            Not with ``units``.

    Returns (XCom): the compaction result (``rewritten_data_files_count``, ``added_data_files_count``,
    ``skipped_groups_count``, ...).
    """

    template_fields: Sequence[str] = ("table", "iceberg_conn_id", "where", "dry_run", "units")
    verb = "compaction"

    def __init__(
        self,
        *,
        table: str,
        target_file_size_bytes: int | None = None,
        min_input_files: int | None = None,
        where: str | None = None,
        strategy: str = "binpack",
        dry_run: bool = False,
        units: list[dict[str, Any]] | None = None,
        commit_every_bytes: int | None = None,
        max_concurrent_groups: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.commit_every_bytes = commit_every_bytes
        self.max_concurrent_groups = max_concurrent_groups
        self.target_file_size_bytes = target_file_size_bytes
        self.min_input_files = min_input_files
        self.where = where
        self.strategy = strategy
        self.dry_run = dry_run
        self.units = units

    def run(self, table: Table) -> Any:
        """Compact the table, or run the given units."""
        from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
        from iceberg_ops_provider.maintenance.compaction_units import planning_arguments, run_compaction_units

        if self.units is not None:
            units = unit_list(
                self.units, "pass the units IcebergPlanCompactionOperator returned, e.g. .expand_kwargs(plan.output)"
            )
            if as_flag(self.dry_run):
                raise ValueError(
                    "dry_run=True with units: units are a plan already, and running them writes. See the plan in "
                    "the XCom of IcebergPlanCompactionOperator instead, or set dry_run=False."
                )
            batching = [
                name for name in ("commit_every_bytes", "max_concurrent_groups") if getattr(self, name) is not None
            ]
            if batching:
                raise ValueError(
                    f"{' and '.join(batching)} given with units: units run one at a time and each is its own commit. "
                    "Leave them unset, or leave units unset to compact the whole table."
                )
            planning = planning_arguments({k: v for k, v in _planning(self).items() if v is not None})
            if planning:
                raise ValueError(
                    f"{', '.join(planning)} given with units: each unit carries the strategy and target size it was "
                    "planned with. Pass these to IcebergPlanCompactionOperator, or leave units unset."
                )
            return run_compaction_units(table, units)
        return compact_small_files_streaming(
            table,
            **_planning(self, self.policy),
            max_rewrite_bytes=self.policy.max_rewrite_bytes,
            dry_run=as_flag(self.dry_run),
            commit_every_bytes=self.commit_every_bytes,
            max_concurrent_groups=self.max_concurrent_groups,
        )

    def written(self, table: Table, result: Any) -> tuple[int, int, int] | None:
        """What the compaction's commits added, from their snapshot summaries."""
        from iceberg_ops_provider.lineage import written_statistics

        return written_statistics(table, result.snapshot_ids)


def _planning(operator: IcebergCompactOperator | IcebergPlanCompactionOperator, policy: Any = None) -> dict[str, Any]:
    """The planning arguments of a compact or plan task, for the engine (an empty ``where``: none).

    With the table's ``policy``, an unset ``min_input_files`` is the policy's.
    """
    minimum = operator.min_input_files
    return {
        "target_file_size_bytes": operator.target_file_size_bytes,
        "min_input_files": policy.min_input_files if minimum is None and policy is not None else minimum,
        "where": operator.where or None,
        "strategy": operator.strategy,
    }


class IcebergPlanCompactionOperator(_TableMaintenanceOperator):
    """Plan a table's compaction as units for mapped compact tasks (``plan_compaction_units``); writes nothing.

    The XCom is a list of keyword arguments, one per compact task (``{"table": ..., "units": [...]}``),
    ready for ``IcebergCompactOperator.partial(...).expand_kwargs(plan.output)``.

    Args:
        table, iceberg_conn_id, target_file_size_bytes, min_input_files, where, strategy: As for
            :class:`IcebergCompactOperator` (``table``, ``iceberg_conn_id`` and ``where`` templated). The
            plan holds only the units the table policy's ``max-rewrite-bytes`` lets one run rewrite.
        units_per_task: Units each compact task runs, one after the other (at least 1).
        max_tasks: At most this many compact tasks (at least 1).

    Returns (XCom): the list of compact tasks' keyword arguments (empty: nothing to compact).
    """

    template_fields: Sequence[str] = ("table", "iceberg_conn_id", "where")
    verb = "compaction plan"

    def __init__(
        self,
        *,
        table: str,
        target_file_size_bytes: int | None = None,
        min_input_files: int | None = None,
        where: str | None = None,
        strategy: str = "binpack",
        units_per_task: int = 1,
        max_tasks: int = 256,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        for name, value in (("units_per_task", units_per_task), ("max_tasks", max_tasks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: give a whole number of at least 1.")
        self.target_file_size_bytes = target_file_size_bytes
        self.min_input_files = min_input_files
        self.where = where
        self.strategy = strategy
        self.units_per_task = units_per_task
        self.max_tasks = max_tasks

    def changes_table(self) -> bool:
        """Never: planning only reads the table."""
        return False

    def execute(self, context: Context) -> list[dict[str, Any]]:  # type: ignore[override]
        """Plan, log the plan, and return the compact tasks' keyword arguments."""
        return super().execute(context)["tasks"]

    def run(self, table: Table) -> Any:
        """Plan the units and split them into tasks."""
        from iceberg_ops_provider.maintenance.compaction_units import plan_compaction_units

        units = plan_compaction_units(
            table, **_planning(self, self.policy), max_rewrite_bytes=self.policy.max_rewrite_bytes
        )
        per_task = max(self.units_per_task, -(-len(units) // self.max_tasks))
        tasks = [
            {"table": self.table, "units": [unit.to_json() for unit in units[start : start + per_task]]}
            for start in range(0, len(units), per_task)
        ]
        for unit in units[:_UNITS_LOGGED]:  # a table of thousands of partitions: the first ones, then a count
            self.log.info(
                "unit %d (%s): %d file(s), %s, partition %s",
                unit.index,
                unit.unit_id,
                len(unit.data_files),
                size_text(unit.bytes),
                unit.partition or "-",
            )
        if len(units) > _UNITS_LOGGED:
            self.log.info("... and %d more unit(s), all in the XCom", len(units) - _UNITS_LOGGED)
        return {
            "units_count": len(units),
            "tasks_count": len(tasks),
            "data_files_count": sum(len(unit.data_files) for unit in units),
            "bytes_count": sum(unit.bytes for unit in units),
            "tasks": tasks,
        }


_UNITS_LOGGED = 50


class IcebergExpireSnapshotsOperator(_TableMaintenanceOperator):
    """Expire old snapshots and delete the files nothing reaches any more (``expire_snapshots``).

    Args:
        table, iceberg_conn_id: ``namespace.table`` and the catalog's Airflow connection (templated).
        older_than: Snapshots older than this may go: a datetime, an age (``timedelta`` or ``"7d"``) or
            an ISO timestamp (templated); default the table's ``history.expire.max-snapshot-age-ms`` (5 days).
        retain_last: Latest snapshots of each branch kept whatever their age.
        delete_files: Delete unreachable files (``False``: metadata only).
        dry_run: Only report what would be expired and deleted.

    Returns (XCom): the expiry result (``expired_snapshot_ids``, ``deleted_data_files_count``, ...).
    """

    template_fields: Sequence[str] = ("table", "iceberg_conn_id", "older_than", "dry_run")
    verb = "snapshot expiry"

    def __init__(
        self,
        *,
        table: str,
        older_than: datetime | timedelta | str | None = None,
        retain_last: int = 1,
        delete_files: bool = True,
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.older_than = older_than
        self.retain_last = retain_last
        self.delete_files = delete_files
        self.dry_run = dry_run

    def run(self, table: Table) -> Any:
        """Expire."""
        from iceberg_ops_provider.maintenance.expire import expire_snapshots

        return expire_snapshots(
            table,
            older_than=parse_older_than(self.older_than),
            retain_last=self.retain_last,
            delete_files=self.delete_files,
            dry_run=as_flag(self.dry_run),
        )


class IcebergRemoveOrphanFilesOperator(_TableMaintenanceOperator):
    """Delete files under the table's location that no metadata references (``remove_orphan_files``).

    Args:
        table, iceberg_conn_id: ``namespace.table`` and the catalog's Airflow connection (templated).
        older_than: Only files older than this (default: the table's policy, ``iceberg-ops.maintenance.orphan-age``,
            3 days, so writes in flight are safe);
            the same forms as :class:`IcebergExpireSnapshotsOperator` (templated).
        location: A folder inside the table's location to limit the listing to (templated).
        dry_run: Only report the orphans found.
        check_nested_tables: Leave alone the files of the catalog's other tables located inside this one's.

    Returns (XCom): the result (``orphan_file_locations``, ``deleted_orphan_files_count``, ``nested_tables``, ...).
    """

    template_fields: Sequence[str] = ("table", "iceberg_conn_id", "older_than", "location", "dry_run")
    verb = "orphan file removal"

    def __init__(
        self,
        *,
        table: str,
        older_than: datetime | timedelta | str | None = None,
        location: str | None = None,
        dry_run: bool = False,
        check_nested_tables: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.older_than = older_than
        self.location = location
        self.dry_run = dry_run
        self.check_nested_tables = check_nested_tables

    def run(self, table: Table) -> Any:
        """Remove orphans."""
        from iceberg_ops_provider.maintenance.orphans import remove_orphan_files

        return remove_orphan_files(
            table,
            older_than=parse_older_than(self.older_than) or self.policy.orphan_age,
            dry_run=as_flag(self.dry_run),
            location=self.location or None,
            check_nested_tables=as_flag(self.check_nested_tables),
        )


class IcebergRewriteManifestsOperator(_TableMaintenanceOperator):
    """Merge many small manifests into few (``rewrite_manifests``); data is untouched.

    Args:
        table, iceberg_conn_id: ``namespace.table`` and the catalog's Airflow connection (templated).
        target_manifest_size_bytes: Manifest size to aim for; default the table's
            ``commit.manifest.target-size-bytes``.
        dry_run: Only report what would be rewritten.

    Returns (XCom): the result (``rewritten_manifests_count``, ``added_manifests_count``).
    """

    template_fields: Sequence[str] = ("table", "iceberg_conn_id", "dry_run")
    verb = "manifest rewrite"

    def __init__(
        self, *, table: str, target_manifest_size_bytes: int | None = None, dry_run: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(table=table, **kwargs)
        self.target_manifest_size_bytes = target_manifest_size_bytes
        self.dry_run = dry_run

    def run(self, table: Table) -> Any:
        """Rewrite manifests."""
        from iceberg_ops_provider.maintenance.manifests import rewrite_manifests

        return rewrite_manifests(
            table, target_manifest_size_bytes=self.target_manifest_size_bytes, dry_run=as_flag(self.dry_run)
        )


_NEEDS = ("compact", "rewrite_manifests", "expire_snapshots", "remove_orphan_files", "any")


class IcebergTableHealthOperator(_TableMaintenanceOperator):
    """Report a table's health and what maintenance it needs (``table_health_report``); changes nothing.

    Args:
        table, iceberg_conn_id: ``namespace.table`` and the catalog's Airflow connection (templated).
        thresholds: Overrides of :class:`~iceberg_ops_provider.maintenance.health.HealthThresholds`
            (a dict of its field names, or an instance).
        fail_on: Needs that fail the task when the report finds them (``"compact"``,
            ``"rewrite_manifests"``, ``"expire_snapshots"``, ``"remove_orphan_files"``, or ``"any"``):
            a quality gate. Default: never fail, only report.

    Returns (XCom): the report, whose ``needs`` lists the maintenance recommended.
    """

    verb = "health report"

    def __init__(self, *, table: str, thresholds: Any = None, fail_on: str | Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        self.thresholds = thresholds
        self.fail_on = (fail_on,) if isinstance(fail_on, str) else tuple(fail_on)
        unknown = [need for need in self.fail_on if need not in _NEEDS]
        if unknown:
            raise ValueError(f"fail_on={fail_on!r} names {', '.join(map(repr, unknown))}; use {', '.join(_NEEDS)}.")

    def changes_table(self) -> bool:
        """Never: the report only reads the table (its lineage is the table as an input)."""
        return False

    def run(self, table: Table) -> Any:
        """Report, then fail when a need named in ``fail_on`` was found."""
        from iceberg_ops_provider.maintenance.health import HealthThresholds, table_health_report

        thresholds = self.thresholds
        if isinstance(thresholds, dict):
            thresholds = HealthThresholds.from_json(thresholds)
        report = table_health_report(table, thresholds)
        needs = list(report.to_json().get("needs", []))
        failing = needs if "any" in self.fail_on else [need for need in needs if need in self.fail_on]
        for line in report.summary().splitlines():
            self.log.info("%s", line)
        if failing:
            raise AirflowException(f"Table {self.table!r} needs {', '.join(failing)}: {report.summary()}")
        return report
