"""Which data files a step reads, and how they are grouped into units, from manifest metadata alone.

The plan depends only on the step, the snapshot and the unit size, so a resumed step plans the same units
(the plan id says so). For ``delete_rows``, files whose every row matches (strict metrics, trusted for
nulls only when :func:`~iceberg_ops_provider.data_migration.null_residuals.residual_holds` says so) are
removed without being read, in units of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, IsNull
from pyiceberg.expressions.visitors import _StrictMetricsEvaluator, bind
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER_ID

from iceberg_ops_provider.data_migration.null_residuals import negated_field_ids, residual_holds
from iceberg_ops_provider.data_migration.planning import fingerprint, group_units
from iceberg_ops_provider.maintenance.candidates import plan_candidates

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.metadata import TableMetadata

    from iceberg_ops_provider.data_steps.definition import DataStep

__all__ = ["REMOVAL_UNIT_FILES", "StepPlan", "StepUnit", "plan_step", "step_filter"]

REMOVAL_UNIT_FILES = 1000
"""Files one removal-only unit drops (nothing is read, so its size in bytes does not matter)."""


@dataclass(frozen=True)
class StepUnit:
    """One commit of a step: whole data files of the plan snapshot, read and rewritten or only removed."""

    index: int
    tasks: tuple[FileScanTask, ...]
    removal_only: bool

    @property
    def bytes(self) -> int:
        """Bytes of the unit's input data files."""
        return sum(task.file.file_size_in_bytes for task in self.tasks)

    @property
    def records(self) -> int:
        """Rows of the unit's input data files (before position deletes)."""
        return sum(task.file.record_count for task in self.tasks)


@dataclass(frozen=True)
class StepPlan:
    """A step's units on ``snapshot_id`` (``None``: the table has no snapshot) and their fingerprint."""

    snapshot_id: int | None
    plan_id: str
    units: tuple[StepUnit, ...]
    unit_bytes: int


def step_filter(step: DataStep, schema: Schema, column: str | None = None) -> BooleanExpression:
    """The files a step may change: ``where``, and for a backfill also ``column is null``."""
    where = step.row_filter(schema)
    if step.kind == "backfill" and column is not None:
        return And(where, IsNull(column)) if where != AlwaysTrue() else IsNull(column)
    return where


def _needs_rewrite(metadata: TableMetadata) -> object:
    """A file predicate: written under an older spec, or recorded as sorted by another order than the current one.

    A file that records no sort order is not rewritten for its order alone: the step's outputs record
    none either (they are sorted a batch at a time, not as whole files), so a second run finds nothing.
    """
    spec_id = metadata.default_spec_id
    order_id = metadata.default_sort_order_id

    def keep(data_file: DataFile) -> bool:
        if data_file.spec_id != spec_id:
            return True
        recorded = data_file.sort_order_id
        return recorded is not None and recorded != UNSORTED_SORT_ORDER_ID and recorded != order_id

    return keep


def plan_step(table: Table, step: DataStep, snapshot_id: int | None, unit_bytes: int) -> StepPlan:
    """The units of ``step`` on ``table``'s snapshot ``snapshot_id``, from manifests only."""
    metadata = table.metadata
    snapshot = metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    if snapshot is None:
        return StepPlan(snapshot_id, fingerprint([step.step_id, snapshot_id, []]), (), unit_bytes)
    schema = metadata.schema()
    column = next(iter(step.assignments), None)
    row_filter = step_filter(step, schema, column)
    whole: set[str] = set()
    keep = lambda _file: True  # noqa: E731
    if step.kind == "rewrite_partitions":
        keep = _needs_rewrite(metadata)  # type: ignore[assignment]
    elif step.kind == "delete_rows":
        bound = bind(schema, row_filter, case_sensitive=True)
        strict = _StrictMetricsEvaluator(schema, row_filter, case_sensitive=True, include_empty_files=True)
        negated = negated_field_ids(bound)

        def keep(data_file: DataFile) -> bool:
            # Statistics are read here: the tasks plan_candidates returns no longer carry them.
            if strict.eval(data_file) and residual_holds(data_file, negated):
                whole.add(data_file.file_path)
            return True

    tasks = sorted(
        plan_candidates(metadata, table.io, snapshot, row_filter, keep), key=lambda task: task.file.file_path
    )
    dropped = [task for task in tasks if task.file.file_path in whole and not task.delete_files]
    dropped_paths = {task.file.file_path for task in dropped}
    rewritten = [task for task in tasks if task.file.file_path not in dropped_paths]
    units: list[StepUnit] = []
    for start in range(0, len(dropped), REMOVAL_UNIT_FILES):
        units.append(StepUnit(len(units), tuple(dropped[start : start + REMOVAL_UNIT_FILES]), True))
    _plan_id, groups = group_units(rewritten, unit_bytes, move_id=step.step_id, source_snapshot_id=snapshot_id)
    by_path = {task.file.file_path: task for task in rewritten}
    for group in groups:
        units.append(StepUnit(len(units), tuple(by_path[path] for path in group.files), False))
    plan_id = fingerprint([step.step_id, snapshot_id, unit_bytes, [_paths(unit.tasks) for unit in units]])
    return StepPlan(snapshot_id, plan_id, tuple(units), unit_bytes)


def _paths(tasks: Sequence[FileScanTask]) -> list[str]:
    return [task.file.file_path for task in tasks]
