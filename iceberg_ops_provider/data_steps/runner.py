"""Runs a data step unit by unit on ``main``, resuming from its recorded state, and estimates one.

Each unit is a group of whole data files of the plan snapshot, read a row group at a time by the data
mover's :class:`~iceberg_ops_provider.data_migration.copy.FileCopier`, changed by the step's
:class:`~iceberg_ops_provider.data_steps.transform.BatchTransform` and written in the table's current spec,
then committed alone (:mod:`.unit_commit`). The copier's lanes copy the next unit while one commits (its
files are the plan snapshot's, fixed), so no core idles on a commit or on a unit's last file. Files
written for a unit that did not commit are deleted, except after an unknown outcome.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.table.snapshots import Operation, ancestors_of

from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.data_migration.copy import FileCopier
from iceberg_ops_provider.data_migration.state import file_prefix
from iceberg_ops_provider.data_steps.definition import UNIT_BYTES, Estimate, StepProgress, StepResult
from iceberg_ops_provider.data_steps.planning import StepPlan, StepUnit, plan_step
from iceberg_ops_provider.data_steps.state import STEP_KEY, StepState, find_step_state, mirror_property
from iceberg_ops_provider.data_steps.transform import BatchTransform
from iceberg_ops_provider.data_steps.unit_commit import MAX_ATTEMPTS, StaleOutputs, UnknownOutcome, commit_step_unit
from iceberg_ops_provider.data_steps.validation import validate_step
from iceberg_ops_provider.errors import DataStepStateError
from iceberg_ops_provider.maintenance.candidates import refuse_equality_deletes
from iceberg_ops_provider.maintenance.group_runner import delete_written

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import ManifestEntry
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

    from iceberg_ops_provider.data_migration.pipeline import UnitCopy
    from iceberg_ops_provider.data_steps.definition import DataStep

__all__ = ["estimate_step", "run_step"]

log = logging.getLogger(__name__)


@dataclass
class _Totals:
    """What this call did so far (the result's counters)."""

    units_skipped: int = 0
    files_rewritten: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows: int = 0
    rows_changed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    delete_files_removed: int = 0
    snapshot_ids: list[int] = field(default_factory=list)


def _appended_meanwhile(table: Table, plan_snapshot_id: int | None, step_id: str) -> tuple[int, int]:
    """Snapshots (and their rows) that other writers appended on ``main`` after the plan snapshot."""
    metadata = table.metadata
    head = metadata.current_snapshot()
    if head is None or plan_snapshot_id is None:
        return 0, 0
    snapshots = rows = 0
    for snapshot in ancestors_of(head, metadata):
        if snapshot.snapshot_id == plan_snapshot_id:
            break
        summary = snapshot.summary
        if summary is None or summary.additional_properties.get(STEP_KEY) == step_id:
            continue
        if summary.operation == Operation.APPEND:
            snapshots += 1
            rows += int(summary.additional_properties.get("added-records", 0))
    return snapshots, rows


def _operation(step: DataStep, unit: StepUnit, rows_changed: int) -> Operation:
    """The label of a unit's snapshot: ``replace`` when no row changed, ``delete`` when files are only removed."""
    if unit.removal_only:
        return Operation.DELETE
    if step.kind == "rewrite_partitions" or rows_changed == 0:
        return Operation.REPLACE
    return Operation.OVERWRITE


class _StepRun:
    """One call of :func:`run_step` on a loaded table, from its plan to its last unit."""

    def __init__(
        self,
        table: Table,
        step: DataStep,
        plan: StepPlan,
        initial: StepState,
        progress: Callable[[StepProgress], None] | None,
    ) -> None:
        self.table = table
        self.step = step
        self.plan = plan
        self.initial = initial
        self.progress = progress
        self.totals = _Totals()
        self.manifest_cache: dict[str, list[ManifestEntry]] = {}
        self.reference_cache: dict[str, frozenset[str]] = {}
        self.started = time.monotonic()
        self.units_done = len(initial.done)

    def run(self) -> None:
        """Apply every unit not recorded as done, copying the next unit while one commits."""
        pending = [unit for unit in self.plan.units if unit.index not in self.initial.done]
        self.totals.units_skipped += len(self.plan.units) - len(pending)
        while pending:
            pending = self._pipeline(pending)
            if pending:  # the schema changed under the step: a column it names may be gone
                validate_step(self.table.refresh(), self.step)

    def _pipeline(self, pending: list[StepUnit]) -> list[StepUnit]:
        """Copy and commit ``pending`` in order; the units left when the table's schema or spec changed.

        The lanes copy at most one unit ahead of the commits. After a failure, the files of every unit
        not committed are deleted, except those of a commit whose outcome is unknown.
        """
        table = self.table
        table.refresh()
        metadata = table.metadata
        transform = BatchTransform(self.step, metadata.schema(), metadata.sort_order())
        copier = FileCopier(
            source_metadata=metadata,
            source_io=table.io,
            target_metadata=metadata,
            target_io=table.io,
            convert=transform,
            changed_rows=transform.changed_rows,
            file_name_prefix=file_prefix(self.step.step_id),
        )
        settled, unknown = 0, -1  # units whose files were committed or deleted; a commit of unknown outcome
        with copier.pipeline([() if unit.removal_only else unit.tasks for unit in pending]) as pipeline:
            try:
                for position, unit in enumerate(pending):
                    copied = pipeline.next_unit()
                    try:
                        referenced = self._commit(unit, copied, metadata)
                    except StaleOutputs:
                        log.info(
                            "data step %s: the table's schema or spec changed; units left: %d",
                            self.step.step_id,
                            len(pending) - position,
                        )
                        return pending[position:]
                    except UnknownOutcome:
                        unknown = position
                        log.error(
                            "data step %s unit %d: outcome unknown; its files are kept: %s",
                            self.step.step_id,
                            unit.index,
                            copied.written,
                        )
                        raise
                    except BaseException as exc:
                        if not isinstance(exc, Exception):
                            # Ctrl-C or an exit raised inside the commit: it may have landed, so its files stay.
                            unknown = position
                        raise
                    settled = position + 1
                    if not referenced:  # a unit done by another run, or one that changed no row
                        delete_written(table, copied.written, f"{self.step.step_id}: ")
                    pipeline.release(copied)
                    self._report()
            finally:
                pipeline.close()
                for copied in pipeline.units[settled:]:
                    if copied.index != unknown:
                        delete_written(table, copied.written, f"{self.step.step_id}: ")
        return []

    def _commit(self, unit: StepUnit, copied: UnitCopy, metadata: TableMetadata) -> bool:
        """Commit ``unit`` from what its copy wrote (nothing for a unit that only drops files), and count it.

        Returns whether the table now references the files the copy wrote (the caller deletes them if not).
        """
        table, step = self.table, self.step
        rows_changed = unit.records if unit.removal_only else copied.rows_changed
        # A unit that changed no row is recorded with its files left as they are, unless position
        # deletes apply to them: those are removed once their data files are all rewritten.
        replaced = unit.removal_only or bool(rows_changed) or step.kind == "rewrite_partitions" or _has_deletes(unit)
        outputs = list(copied.data_files) if replaced and not unit.removal_only else []
        outcome = commit_step_unit(
            table,
            self.plan,
            unit if replaced else _no_files(unit),
            initial=self.initial,
            outputs=outputs,
            rows=rows_changed,
            operation=_operation(step, unit, rows_changed),
            spec_id=metadata.default_spec_id,
            schema_id=metadata.current_schema_id,
            caches=(self.manifest_cache, self.reference_cache),
        )
        totals = self.totals
        self.units_done = len(outcome.state.done)
        if not outcome.committed:
            totals.units_skipped += 1
            return False
        assert outcome.snapshot_id is not None
        totals.snapshot_ids.append(outcome.snapshot_id)
        if unit.removal_only:
            totals.files_removed += len(unit.tasks)
        elif replaced:
            totals.files_rewritten += len(unit.tasks)
        totals.files_added += len(outputs)
        totals.rows += copied.rows
        totals.rows_changed += rows_changed
        totals.bytes_read += copied.bytes_read
        totals.bytes_written += sum(data_file.file_size_in_bytes for data_file in outputs)
        totals.delete_files_removed += outcome.delete_files_removed
        return replaced

    def _report(self) -> None:
        """Hand the progress so far to the callback, if there is one."""
        totals = self.totals
        if self.progress is not None:
            self.progress(
                StepProgress(
                    step_id=self.step.step_id,
                    table=self.step.table_name,
                    units_done=self.units_done,
                    units_total=len(self.plan.units),
                    rows=totals.rows,
                    rows_changed=totals.rows_changed,
                    bytes_read=totals.bytes_read,
                    bytes_written=totals.bytes_written,
                    seconds=time.monotonic() - self.started,
                )
            )

    def result(self) -> StepResult:
        """The result of this call."""
        self.table.refresh()
        appended, appended_rows = _appended_meanwhile(self.table, self.plan.snapshot_id, self.step.step_id)
        totals = self.totals
        return StepResult(
            step_id=self.step.step_id,
            kind=self.step.kind,
            table=self.step.table_name,
            plan_snapshot_id=self.plan.snapshot_id,
            units=len(self.plan.units),
            units_skipped=totals.units_skipped,
            files_rewritten=totals.files_rewritten,
            files_removed=totals.files_removed,
            files_added=totals.files_added,
            rows_changed=totals.rows_changed,
            bytes_read=totals.bytes_read,
            bytes_written=totals.bytes_written,
            appended_meanwhile=appended,
            rows_appended_meanwhile=appended_rows,
            delete_files_removed=totals.delete_files_removed,
            snapshot_ids=tuple(totals.snapshot_ids),
        )


def _has_deletes(unit: StepUnit) -> bool:
    return any(task.delete_files for task in unit.tasks)


def _no_files(unit: StepUnit) -> StepUnit:
    """``unit`` committed as a record only: it changed no row, so its files stay in the table."""
    return StepUnit(unit.index, (), unit.removal_only)


def _record_nothing_to_do(table: Table, state: StepState) -> None:
    """Record a step that has no unit as complete (in the property alone: no snapshot for nothing).

    A commit lost to another writer's (an append) is made again on the table that writer left.
    """
    for attempt in lost_races(MAX_ATTEMPTS, what=f"data step {state.step_id!r}"):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                table.refresh()
            transaction = table.transaction()
            transaction.set_properties(mirror_property(state, state.plan_snapshot_id))
            transaction.commit_transaction()


def _plan(table: Table, step: DataStep, state: StepState | None, unit_bytes: int | None) -> tuple[StepPlan, StepState]:
    """The step's plan (the recorded one when resuming) and the state its first unit starts from."""
    if state is None:
        plan = plan_step(table, step, table.metadata.current_snapshot_id, unit_bytes or UNIT_BYTES)
        initial = StepState(
            step.step_id, step.fingerprint(), plan.snapshot_id or 0, plan.plan_id, len(plan.units), plan.unit_bytes
        )
        return plan, initial
    if table.metadata.snapshot_by_id(state.plan_snapshot_id) is None:
        raise DataStepStateError(
            f"Data step {step.step_id!r} planned on snapshot {state.plan_snapshot_id} of {step.table_name}, which "
            f"was expired before the step finished ({state.units_done} of {state.units_total} units done), so its "
            "remaining units cannot be read.",
            step_id=step.step_id,
        )
    plan = plan_step(table, step, state.plan_snapshot_id, state.unit_bytes)
    if plan.plan_id != state.plan_id:
        raise DataStepStateError(
            f"Data step {step.step_id!r} on {step.table_name} plans other units on snapshot {state.plan_snapshot_id} "
            f"than it recorded (plan {plan.plan_id}, recorded {state.plan_id}): the table's metadata of that "
            "snapshot, or the release planning it, changed.",
            step_id=step.step_id,
        )
    return plan, state


def run_step(
    catalog: Catalog,
    step: DataStep,
    *,
    progress: Callable[[StepProgress], None] | None = None,
    unit_bytes: int | None = None,
) -> StepResult:
    """Apply ``step`` to its table unit by unit on ``main``, exactly once; resume it if it started before.

    A new step plans on ``main``'s head (the plan snapshot); a started one continues from the plan
    snapshot and units its state records (``unit_bytes`` then has no effect); a finished one does
    nothing. ``progress`` is called after each unit.

    Raises:
        InvalidDataStepError: The step does not fit the table (:func:`validate_step`); nothing committed.
        UnsupportedDeleteFilesError: The table holds equality delete files; nothing committed.
        DataStepStateError: The step id's recorded state belongs to another step definition, or its plan
            snapshot expired.
        DataStepConflictError: Another writer rewrote or removed files of a unit; earlier units stay.
    """
    table = catalog.load_table(step.identifier)
    state = find_step_state(table.metadata, step.step_id)
    if state is not None and state.definition != step.fingerprint():
        raise DataStepStateError(
            f"Data step {step.step_id!r} on {step.table_name} was recorded with another definition "
            f"({state.definition}, now {step.fingerprint()}): one step id names one change; "
            "a changed step takes a new id.",
            step_id=step.step_id,
        )
    if state is not None and state.complete:
        appended, appended_rows = _appended_meanwhile(table, state.plan_snapshot_id, step.step_id)
        return StepResult(
            step.step_id,
            step.kind,
            step.table_name,
            state.plan_snapshot_id or None,
            state.units_total,
            state.units_total,
            appended_meanwhile=appended,
            rows_appended_meanwhile=appended_rows,
        )
    head = table.metadata.current_snapshot()
    if head is not None:
        refuse_equality_deletes(table, head)
    validate_step(table, step)
    plan, initial = _plan(table, step, state, unit_bytes)
    run = _StepRun(table, step, plan, initial, progress)
    if plan.units:
        run.run()
    else:
        _record_nothing_to_do(table, initial)
    result = run.result()
    log.info(
        "data step %s on %s: %d unit(s), %d skipped, %d row(s) changed",
        step.step_id,
        step.table_name,
        result.units,
        result.units_skipped,
        result.rows_changed,
    )
    return result


def estimate_step(table: Table, step: DataStep, unit_bytes: int | None = None) -> Estimate:
    """What ``step`` would read and change on ``table``'s current snapshot, from manifest metadata only.

    ``unit_bytes``: the unit size the run would use (``run_step``'s), for the count of commits.
    """
    plan = plan_step(table, step, table.metadata.current_snapshot_id, unit_bytes or UNIT_BYTES)
    rewritten = [task for unit in plan.units if not unit.removal_only for task in unit.tasks]
    dropped = [task for unit in plan.units if unit.removal_only for task in unit.tasks]
    deletes = {d.file_path for task in rewritten for d in task.delete_files}
    return Estimate(
        step_id=step.step_id,
        kind=step.kind,
        table=step.table_name,
        snapshot_id=plan.snapshot_id,
        files=len(rewritten),
        bytes=sum(task.file.file_size_in_bytes for task in rewritten),
        rows=sum(task.file.record_count for task in rewritten),
        files_dropped=len(dropped),
        bytes_dropped=sum(task.file.file_size_in_bytes for task in dropped),
        rows_dropped=sum(task.file.record_count for task in dropped),
        delete_files=len(deletes),
        units=len(plan.units),
    )
