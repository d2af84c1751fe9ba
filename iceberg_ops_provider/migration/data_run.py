"""Running a migration's data operations once its schema changes are committed.

The body records its data operations (:mod:`.data_operations`); when it returns, :func:`finish_with_data`
checks each against the table as the migration leaves it, commits the schema changes under an intent
that lists the data steps, then runs the steps in order (:func:`iceberg_ops_provider.data_steps.run_step`),
each in units that commit once (a copy: the data mover, :mod:`.data_copy`). A run stopped anywhere in them is
finished by the next run of the same migration: the step ids come from the run that started them
(docs/migrations.md, "Data operations").
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from iceberg_ops_provider.core.name_hints import did_you_mean, missing_table
from iceberg_ops_provider.data_migration.resolution import check_tables
from iceberg_ops_provider.data_steps import (
    DataStep,
    Estimate,
    StepProgress,
    StepResult,
    estimate_step,
    run_step,
    validate_step,
)
from iceberg_ops_provider.data_steps.restore import Restored, check_restore, restore_to, restored_by, tag_restore_point
from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.history.intent import IntentAction
from iceberg_ops_provider.migration.data_copy import Copied, copy_fingerprint, copy_mover, run_copy
from iceberg_ops_provider.migration.data_operations import CopyRows, RestoreData
from iceberg_ops_provider.progress import duration_text, size_text

if TYPE_CHECKING:
    from iceberg_ops_provider.data_migration import DataMover
    from iceberg_ops_provider.migration.data_operations import DataOperation
    from iceberg_ops_provider.migration.staging import Identifier, TableStaging

__all__ = [
    "UNIT_BYTES_PROPERTY",
    "PlannedStep",
    "estimate_fields",
    "estimate_text",
    "finish_with_data",
    "operation_line",
    "planned_steps",
    "progress_line",
]

UNIT_BYTES_PROPERTY = "iceberg-ops.data-step.unit-bytes"
"""Table property: the bytes of data files one unit of a data step rewrites and commits at once (the
engine's default without it); smaller units lose less work to a crash and make more snapshots."""


@dataclass(frozen=True)
class PlannedStep:
    """A data step the migration asked for: the operation, what runs it, unit size.

    ``step``: the engine's step of a delete, update, backfill or rewrite; ``mover``: a copy's data mover,
    whose move id derives from ``step_id``; neither for a restore. ``identifier``: the table it changes.
    """

    operation: DataOperation | RestoreData
    identifier: Identifier
    step_id: str
    step: DataStep | None = None
    unit_bytes: int | None = None
    estimate: Estimate | None = None
    """In a dry run: what the step would rewrite, from manifest metadata (``None`` for a restore)."""
    mover: DataMover | None = None

    def action(self) -> IntentAction:
        """The step in the intent record; its ``operation`` tells how the step's own record is read."""
        if self.step is not None:
            fingerprint = self.step.fingerprint()
        elif self.mover is not None:
            fingerprint = copy_fingerprint(self.mover)
        else:
            fingerprint = f"restore_data:{self.operation.table}"
        table, kind = ".".join(self.identifier), self.operation.kind
        return IntentAction(table, "data", receipt=self.step_id, fingerprint=fingerprint, operation=kind)


def planned_steps(staging: TableStaging) -> list[PlannedStep]:
    """The data steps the migration asked for, with ids, each checked against its table as the migration leaves it.

    A dry run also estimates each step on that table (:func:`~iceberg_ops_provider.data_steps.estimate_step`:
    manifests only, no data file read; a table the migration creates holds nothing yet), and checks a restore
    where the runner gives it its restore point (a run's journal, or ``plan``'s dry run).

    Raises:
        InvalidOperationError, InvalidDataStepError, RestorePointError: A table that will not exist, a bad
            column, value or ``where``, or a restore point that is gone or was written over.
    """
    journal: Any = staging.commits.journal
    standalone = uuid.uuid4().hex  # without a runner: ids unique to this context
    point = journal.restore_point() if journal is not None and hasattr(journal, "restore_point") else None
    point = point or staging.restore_point
    steps = []
    for ordinal, operation in enumerate(staging.data, 1):
        if journal is not None and hasattr(journal, "data_step_id"):
            step_id = journal.data_step_id(ordinal)
        else:
            step_id = f"{staging.namespace}/standalone/{standalone}/{ordinal}"
        identifier = staging.identifier(operation.table)
        table = _as_left(staging, identifier)
        if isinstance(operation, RestoreData):
            if point is None and staging.dry_run:
                steps.append(PlannedStep(operation, identifier, step_id))
                continue
            if point is None:
                raise InvalidOperationError(
                    "restore_data returns a table to the restore point the runner takes before a migration's data "
                    "steps; it runs in a migration run by the runner."
                )
            if not restored_by(table, step_id):  # done by the interrupted run this one resumes: its tag is gone
                check_restore(table, point[0], point[1])
            steps.append(PlannedStep(operation, identifier, step_id))
            continue
        if isinstance(operation, CopyRows):
            source, unit_bytes = staging.identifier(operation.source), _unit_bytes(staging, table)
            mover = copy_mover(staging.catalog, operation, source, identifier, step_id, unit_bytes)
            check_tables(mover, _as_left(staging, source), table)
            steps.append(PlannedStep(operation, identifier, step_id, unit_bytes=unit_bytes, mover=mover))
            continue
        step = DataStep(step_id, operation.step_kind, identifier, operation.where, dict(operation.assignments()))
        validate_step(table, step)
        unit_bytes = _unit_bytes(staging, table)
        estimate = estimate_step(table, step, unit_bytes) if staging.dry_run else None
        steps.append(PlannedStep(operation, identifier, step_id, step, unit_bytes, estimate))
    return steps


def _as_left(staging: TableStaging, identifier: Identifier) -> Table:
    """The table as the migration's staged changes leave it: its pending schema, spec and sort order on its data."""
    commits = staging.commits
    if identifier in commits.gone:  # a drop or rename after the data operation: it commits first
        raise InvalidOperationError(
            f"Table {staging.label(identifier)} is dropped or renamed later in this migration; its data operations "
            "run after every schema change of the migration, when no table has that name."
        )
    transaction = commits.pending.get(identifier)
    if transaction is None:
        try:
            return staging.catalog.load_table(identifier)
        except NoSuchTableError as exc:
            missing = missing_table(staging.catalog, ".".join(identifier))
            raise InvalidOperationError(
                f"Table {staging.label(identifier)} does not exist ({missing.detail}).{did_you_mean(missing.guess)} "
                "A data operation needs an existing table, or one the migration creates before it."
            ) from exc
    staging.schemas.fold(identifier)
    table = transaction._table
    return Table(identifier, transaction.table_metadata, table.metadata_location, table.io, staging.catalog)


def finish_with_data(staging: TableStaging) -> list[StepResult | Restored | Copied]:
    """Commit the schema changes (the intent listing the data steps first), then run the data steps in order.

    An upgrade tags each table's ``main`` before its first data step (the restore point a downgrade's
    ``restore_data`` returns to); a copy's target without a snapshot first gets an empty one to tag. A dry
    run commits nothing: each data operation's entry in ``staging.operations`` gets its estimate
    (:func:`estimate_fields`) instead.
    """
    steps = planned_steps(staging)
    commits = staging.commits
    if staging.dry_run:
        for planned, noted in zip(steps, staging.data_notes, strict=True):
            if planned.estimate is not None:
                noted["estimate"] = estimate_fields(planned.estimate)
        commits.commit(complete=True)
        return []
    commits.commit(complete=True, then=[planned.action() for planned in steps])
    commits.not_atomic = commits.not_atomic or "its data steps commit in units of files, after its schema changes"
    journal: Any = commits.journal
    point = journal.restore_point() if hasattr(journal, "restore_point") else None
    progress = getattr(journal, "data_progress", None)
    tagged: set[Identifier] = set()
    results: list[StepResult | Restored | Copied] = []
    for planned in steps:
        identifier, catalog = planned.identifier, staging.catalog
        if planned.step is None and planned.mover is None:
            assert point is not None  # planned_steps refuses a restore without one
            results.append(restore_to(catalog.load_table(identifier), point[0], point[1], planned.step_id))
        else:
            if point is not None and point[2] and identifier not in tagged:
                tag_restore_point(catalog.load_table(identifier), point[0], mark_empty=planned.mover is not None)
                tagged.add(identifier)
            what = planned.operation.describe()
            if planned.mover is not None:
                results.append(run_copy(planned.mover, planned.step_id, what, progress))
            else:
                assert planned.step is not None
                report = (lambda done, what=what: progress(f"{what}: {progress_line(done)}")) if progress else None
                results.append(run_step(catalog, planned.step, progress=report, unit_bytes=planned.unit_bytes))
        staging.touched.altered(staging.label(identifier))
    return results


def estimate_fields(estimate: Estimate) -> dict[str, int | None]:
    """What ``plan`` carries of an estimate: its numbers and the snapshot it was made from.

    The files, bytes and rows rewritten, those a delete drops whole, the delete files applied and the commits.
    """
    fields = estimate.to_json()
    return {name: fields[name] for name in _ESTIMATE_FIELDS}


def estimate_text(estimate: Mapping[str, Any]) -> str:
    """An estimate (:func:`estimate_fields`) in words: ``rewrites 2 files, 1.4 KiB, 50 rows; 2 commits``."""
    parts = []
    if estimate["files"]:
        parts.append(f"rewrites {_files(estimate['files'])}, {size_text(estimate['bytes'])}, {estimate['rows']:,} rows")
    if estimate["files_dropped"]:
        parts.append(
            f"removes {_files(estimate['files_dropped'])} whole, {size_text(estimate['bytes_dropped'])}, "
            f"{estimate['rows_dropped']:,} rows"
        )
    if estimate["delete_files"]:
        parts.append(f"applies {estimate['delete_files']:,} delete file(s)")
    if not parts:
        return "no file to rewrite"
    units = estimate["units"]
    return f"{'; '.join(parts)}; {units:,} commit{'s' if units != 1 else ''}"


def operation_line(operation: Mapping[str, Any]) -> str:
    """One operation of a plan (``MigrationContext.operations``): ``[data] backfill ... (estimate: ...)``."""
    estimate = operation.get("estimate")
    shown = f" (estimate: {estimate_text(estimate)})" if estimate is not None else ""
    return f"[{operation['risk']}] {operation['operation']}{shown}"


def _files(count: int) -> str:
    return f"{count:,} file{'s' if count != 1 else ''}"


_ESTIMATE_FIELDS = (
    "snapshot_id",
    "files",
    "bytes",
    "rows",
    "files_dropped",
    "bytes_dropped",
    "rows_dropped",
    "delete_files",
    "units",
)


def _unit_bytes(staging: TableStaging, table: Table) -> int | None:
    """The table's :data:`UNIT_BYTES_PROPERTY`, else ``None`` (the engine's default)."""
    value = table.properties.get(UNIT_BYTES_PROPERTY)
    if value is None:
        return None
    try:
        size = int(value)
        if size <= 0:
            raise ValueError(value)
    except ValueError as exc:
        raise InvalidOperationError(
            f"Table {staging.label(table.name())} has {UNIT_BYTES_PROPERTY}={value!r}; it must be a positive "
            "number of bytes (for example 268435456), or unset for the default."
        ) from exc
    return size


def progress_line(progress: StepProgress) -> str:
    """``unit 3/10, 120,000 rows written (4,000 changed), 48.0 MiB read, 9.6 MiB/s, ETA 5s``.

    Sizes as ``size_text`` writes them. The rows are those written to new files: a delete writes the
    rows it keeps, and a file it drops whole writes none.
    """
    rate = progress.bytes_read / progress.seconds if progress.seconds > 0 else 0.0
    left = progress.units_total - progress.units_done
    # Units are of similar size: the time per unit so far (a resumed step's earlier units count as done
    # in no time, so its first estimates run short) times the units left.
    eta = f", ETA {duration_text(progress.seconds / max(progress.units_done, 1) * left)}" if left else ""
    return (
        f"unit {progress.units_done}/{progress.units_total}, {progress.rows:,} rows written ({progress.rows_changed:,} "
        f"changed), {size_text(progress.bytes_read)} read, {size_text(rate)}/s{eta}"
    )
