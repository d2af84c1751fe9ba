"""Running a resolved plan's units: copy them in a pipeline, commit each with the move's state, publish."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pyiceberg.table.refs import MAIN_BRANCH

from iceberg_ops_provider.data_migration.resolution import current_state
from iceberg_ops_provider.data_migration.state import MoveState, find_state
from iceberg_ops_provider.data_migration.unit_commit import commit_unit
from iceberg_ops_provider.errors import MoveConflictError, MoveStateError
from iceberg_ops_provider.maintenance.files import delete_files

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from iceberg_ops_provider.data_migration.copy import FileCopier
    from iceberg_ops_provider.data_migration.definition import MoveDefinition
    from iceberg_ops_provider.data_migration.pipeline import CopyPipeline, UnitCopy
    from iceberg_ops_provider.data_migration.resolution import Resolved
    from iceberg_ops_provider.data_migration.results import MoveUnit
    from iceberg_ops_provider.data_migration.unit_commit import UnitCommit
    from iceberg_ops_provider.progress import ProgressTracker

__all__ = ["publish", "published", "record_empty", "run_units"]

log = logging.getLogger(__name__)


def _check_schema_unchanged(written: Schema, current: Schema, target: str) -> None:
    """Refuse to commit files written for a target schema whose columns changed since (ids, types, nullability).

    A column dropped and added again under the same name has a new id: files written with the old
    one would read as nulls. Columns added since are fine (the files read them as nulls, as allowed).
    """
    for field in written.as_struct().fields:
        try:
            now = current.find_field(field.field_id)
        except ValueError:  # the id is gone
            now = None
        if now is None or now.field_type != field.field_type or (now.required and not field.required):
            raise MoveConflictError(
                f"The schema of {target} changed while a unit was copied (column {field.name!r}, id "
                f"{field.field_id}, is now {now.field_type if now is not None else 'gone'}); nothing of the unit "
                "was committed. Run the move again: it maps the columns to the new schema."
            )


def _discard(table: Table, written: list[str]) -> None:
    if written:
        delete_files(table.io, written, what="data files of an uncommitted unit")


def _skip_done(pipeline: CopyPipeline, units: Sequence[MoveUnit], state: MoveState | None, plan_id: str) -> None:
    """Drop from ``pipeline`` the units ``state`` records as committed under ``plan_id`` that no lane has started."""
    for position, unit in enumerate(units):
        if state is not None and state.plan_id == plan_id and unit.index in state.done:
            pipeline.skip(position)


def published(move: MoveDefinition, target: Table | None, plan_id: str | None = None) -> bool:
    """Whether the move is complete on ``main`` (always, but for an overwrite not yet published)."""
    if move.mode != "overwrite":
        return True
    if target is None:
        return False
    state, _ = find_state(target.metadata, move.move_id, MAIN_BRANCH)
    return state is not None and state.complete and plan_id in (None, state.plan_id)


def _decide(
    move: MoveDefinition, resolved: Resolved, unit: MoveUnit, rows: int
) -> Callable[[MoveState | None], MoveState | None]:
    """How a unit's commit chooses the state it records, given the state at the branch head it commits on."""
    plan = resolved.plan

    def decide(state: MoveState | None) -> MoveState | None:
        if state is not None and state.plan_id == plan.plan_id and unit.index in state.done:
            return None
        if move.mode == "overwrite" and published(move, resolved.target, plan.plan_id):
            return None  # a peer finished and published the move (and removed its branch) meanwhile
        assert resolved.target is not None
        _check_schema_unchanged(resolved.mapping.target_schema, resolved.target.schema(), move.target)
        if state is not None and state.plan_id == plan.plan_id:
            return state.with_unit(unit.index, rows)
        if resolved.initial_state is not None and state == resolved.state:
            return resolved.initial_state.with_unit(unit.index, rows)
        raise MoveStateError(
            f"Move {move.move_id!r} was taken over by another plan while unit {unit.index} was copied "
            f"(the target records plan {state.plan_id if state else None}, this run has {plan.plan_id}). "
            "Nothing of this unit was committed; plan again."
        )

    return decide


def run_units(
    move: MoveDefinition,
    resolved: Resolved,
    copier: FileCopier,
    units: list[MoveUnit],
    totals: dict[str, int],
    tracker: ProgressTracker,
    stop_requested: threading.Event,
) -> list[int]:
    """Copy ``units`` in a pipeline and commit each as soon as it is copied; the new snapshots' ids.

    A unit found committed (by another worker) before its copy started is skipped; after a
    failure, the files of every unit not committed are deleted, except those of a commit whose
    outcome is unknown. Once ``stop_requested`` is set, no further unit starts: the units copied
    ahead are discarded and the call returns. ``totals`` counts what was committed and skipped.
    """
    target = resolved.target
    assert target is not None
    target.refresh()
    state = current_state(move, target)
    tasks = [[resolved.tasks[path] for path in unit.files] for unit in units]
    snapshots: list[int] = []
    settled, unknown = 0, -1  # units whose files were committed or deleted; a commit of unknown outcome
    stopped = False
    with copier.pipeline(tasks) as pipeline:

        def discard_unsettled() -> None:
            try:
                pipeline.close()
            finally:
                for copied in pipeline.units[settled:]:
                    if copied.index != unknown:
                        _discard(target, copied.written)

        try:
            _skip_done(pipeline, units, state, resolved.plan.plan_id)
            for position, unit in enumerate(units):
                if stop_requested.is_set():
                    stopped = True
                    break
                copied = pipeline.next_unit(waiting=tracker.poll)  # the progress callback runs on this thread
                label = f"{unit.index + 1}/{unit.count}"
                if copied.skipped:
                    log.info("unit %s of move %s: already committed", label, move.move_id)
                    totals["units_skipped"] += 1
                else:
                    try:
                        commit = _commit_copied(move, resolved, unit, copied, totals, label)
                    except (MoveConflictError, MoveStateError):  # the commit did not land
                        raise
                    except BaseException:
                        unknown = position
                        log.warning(
                            "unit %s of move %s: the commit's outcome is unknown; its %d files are kept "
                            "(orphan-file removal deletes them if the commit did not land). Run the move "
                            "again to resume.",
                            label,
                            move.move_id,
                            len(copied.written),
                        )
                        raise
                    if commit is not None:
                        snapshots.append(commit.snapshot_id)
                        # Units other workers committed meanwhile are not copied (if not started yet).
                        _skip_done(pipeline, units, commit.state, resolved.plan.plan_id)
                settled = position + 1
                pipeline.release(copied)
                tracker.unit_done()
        except BaseException:
            discard_unsettled()
            raise
        if stopped:
            discard_unsettled()
            log.info(
                "move %s stopped on request with %d of %d units of this run done; run it again to resume",
                move.move_id,
                settled,
                len(units),
            )
    return snapshots


def _commit_copied(
    move: MoveDefinition, resolved: Resolved, unit: MoveUnit, copied: UnitCopy, totals: dict[str, int], label: str
) -> UnitCommit | None:
    """Commit a copied unit with the move's state; ``None`` if another worker committed it meanwhile."""
    target = resolved.target
    assert target is not None
    commit = commit_unit(
        target,
        copied.data_files,
        move_id=move.move_id,
        branch=move.branch,
        decide=_decide(move, resolved, unit, copied.rows),
        unit_label=label,
    )
    if not commit.committed:
        log.info("unit %s of move %s: committed by another worker meanwhile", label, move.move_id)
        _discard(target, copied.written)
        totals["units_skipped"] += 1
        return None
    totals["units_committed"] += 1
    totals["rows"] += copied.rows
    totals["bytes_read"] += copied.bytes_read
    totals["bytes_written"] += copied.bytes_written
    totals["files_written"] += len(copied.data_files)
    log.info(
        "unit %s of move %s committed: %d rows, %d files, target snapshot %s",
        label,
        move.move_id,
        copied.rows,
        len(copied.data_files),
        commit.snapshot_id,
    )
    return commit


def record_empty(move: MoveDefinition, resolved: Resolved) -> int | None:
    """Record a move whose plan has no units (nothing matched), so it counts as finished."""
    target = resolved.target
    initial = resolved.initial_state
    assert target is not None and initial is not None
    finished = replace(initial, completed_snapshot_id=initial.snapshot_id)

    def decide(state: MoveState | None) -> MoveState | None:
        if state is not None and state.plan_id == finished.plan_id:
            return None
        if state == resolved.state:
            return finished
        raise MoveStateError(f"Move {move.move_id!r} was taken over by another plan meanwhile; plan again.")

    commit = commit_unit(target, [], move_id=move.move_id, branch=move.branch, decide=decide, unit_label="0/0")
    return commit.snapshot_id


def publish(move: MoveDefinition, resolved: Resolved, branch_state: MoveState) -> list[int]:
    """An overwrite's last step: replace the target's matching rows with the staged ones, then drop the branch."""
    target = resolved.target
    assert target is not None
    staged_head = target.metadata.snapshot_by_name(move.branch)
    finished, _ = find_state(target.metadata, move.move_id, MAIN_BRANCH)
    snapshots: list[int] = []
    if not (finished is not None and finished.complete) and staged_head is not None:
        files = [task.file for task in target.scan(snapshot_id=staged_head.snapshot_id).plan_files()]
        delete_filter = resolved.mapping.target_expression(resolved.row_filter)

        def decide(state: MoveState | None) -> MoveState | None:
            return None if state is not None and state.complete else branch_state

        commit = commit_unit(
            target,
            files,
            move_id=move.move_id,
            branch=MAIN_BRANCH,
            decide=decide,
            unit_label="publish",
            delete_filter=delete_filter,
        )
        if commit.snapshot_id is not None:
            snapshots.append(commit.snapshot_id)
            log.info("move %s published to main: %d files replace the matching rows", move.move_id, len(files))
    if move.branch in target.metadata.refs:
        try:
            with target.manage_snapshots() as manage:
                manage.remove_branch(move.branch)
        except Exception as exc:  # a rerun removes it
            log.warning("could not remove the staging branch %s (%s); the next run removes it", move.branch, exc)
    return snapshots
