"""The commit of one unit of a data step: its input files out, its outputs in, its state recorded, exactly once.

The unit's state is decided against the head just read, and the commit requires that head (PyIceberg's
rebase-and-retry is off), so a concurrent append makes this module read the state again and retry; a
unit whose inputs are no longer live fails :class:`~iceberg_ops_provider.maintenance.rewrite_commit.RewriteFiles`'
validation and is never applied twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.manifest import ManifestContent
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import AssertCurrentSchemaId, AssertDefaultSpecId

from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.core.transactions import cached_transaction
from iceberg_ops_provider.data_steps.state import STEP_KEY, UNIT_KEY, StepState, find_step_state, mirror_property
from iceberg_ops_provider.errors import DataStepConflictError, DataStepStateError
from iceberg_ops_provider.maintenance.candidates import referenced_paths
from iceberg_ops_provider.maintenance.rewrite_commit import RewriteFiles, RewriteValidator

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile, ManifestEntry
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

    from iceberg_ops_provider.data_steps.planning import StepPlan, StepUnit

__all__ = ["MAX_ATTEMPTS", "StaleOutputs", "UnitOutcome", "UnknownOutcome", "commit_step_unit"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 60
"""Attempts of one unit's commit that lose to concurrent commits before :class:`DataStepConflictError`."""


class UnknownOutcome(Exception):
    """The commit failed without saying whether it landed, and reading the table did not tell: keep its files."""


class StaleOutputs(Exception):
    """The table's schema or default spec changed since the unit's outputs were written: write them again."""


@dataclass(frozen=True)
class UnitOutcome:
    """What committing a unit did: ``committed`` ``False`` when the unit was found done (by another run)."""

    committed: bool
    snapshot_id: int | None
    state: StepState
    delete_files_removed: int = 0


def _lost_race(exc: BaseException) -> bool:
    return isinstance(exc, CommitFailedException) or (isinstance(exc, ValueError) and "sequence number" in str(exc))


def _live_delete_paths(table: Table) -> set[str]:
    """Locations of the live delete files of ``table``'s current snapshot."""
    snapshot = table.metadata.current_snapshot()
    if snapshot is None:
        return set()
    live: set[str] = set()
    for manifest in snapshot.manifests(table.io):
        if manifest.content == ManifestContent.DELETES:
            entries: list[ManifestEntry] = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
            live.update(entry.data_file.file_path for entry in entries)
    return live


def removable_deletes(
    table: Table, plan: StepPlan, done: frozenset[int], unit: StepUnit, cache: dict[str, frozenset[str]]
) -> list[DataFile]:
    """Position delete files of ``unit`` that are live and whose every target is an input of a done unit."""
    candidates = {d.file_path: d for task in unit.tasks for d in task.delete_files}
    if not candidates:
        return []
    rewritten = {task.file.file_path for index in done for task in plan.units[index].tasks}
    live = _live_delete_paths(table)
    return [
        delete_file
        for path, delete_file in sorted(candidates.items())
        if path in live and referenced_paths(table.io, delete_file, cache) <= rewritten
    ]


def commit_step_unit(
    table: Table,
    plan: StepPlan,
    unit: StepUnit,
    *,
    initial: StepState,
    outputs: Sequence[DataFile],
    rows: int,
    operation: Operation,
    spec_id: int,
    schema_id: int,
    caches: tuple[dict[str, list[ManifestEntry]], dict[str, frozenset[str]]],
) -> UnitOutcome:
    """Commit ``unit`` (``outputs`` replacing its inputs, ``rows`` changed) unless a state says it is done.

    ``initial`` is the state recorded with the step's first unit. ``outputs`` were written in spec
    ``spec_id`` for schema ``schema_id``: a change of either since fails the commit (a change seen
    before committing raises :class:`StaleOutputs`; one that lands while committing loses the race).

    Raises:
        DataStepStateError: Another run of the step planned other units (on another head) and
            committed first.
        StaleOutputs: The unit is not done and the table's schema or default spec is no longer the
            outputs'; nothing was committed.
        DataStepConflictError: The unit's inputs were removed by another writer (not this step), or the
            commit lost :data:`MAX_ATTEMPTS` races in a row.
        UnknownOutcome: The catalog did not answer and reading the table did not tell whether it landed.
    """
    step_id = initial.step_id
    label = f"data step {step_id!r} unit {unit.index}"
    inputs = [task.file for task in unit.tasks]
    try:
        for attempt in lost_races(MAX_ATTEMPTS, what=label, when=_lost_race):
            with attempt:
                table.refresh()
                state = find_step_state(table.metadata, step_id) or initial
                if state.plan_id != plan.plan_id:
                    # Another run of the step planned on another head and committed first: its units
                    # are not these; the next run resumes from the plan it recorded.
                    raise DataStepStateError(
                        f"Data step {step_id!r} on {'.'.join(table.name())} was started meanwhile by another run "
                        f"that planned on snapshot {state.plan_snapshot_id}, not {plan.snapshot_id}; nothing of "
                        "this run's unit was committed. Run the step again to resume from the recorded plan.",
                        step_id=step_id,
                    )
                if unit.index in state.done:
                    return UnitOutcome(False, None, state)
                metadata = table.metadata
                if metadata.current_schema_id != schema_id or metadata.default_spec_id != spec_id:
                    raise StaleOutputs(f"{label}: schema {metadata.current_schema_id}, spec {metadata.default_spec_id}")
                new_state = state.with_unit(unit.index, rows)
                deletes = removable_deletes(table, plan, new_state.done, unit, caches[1])
                transaction = cached_transaction(table)
                transaction._stage(
                    (),
                    (AssertDefaultSpecId(default_spec_id=spec_id), AssertCurrentSchemaId(current_schema_id=schema_id)),
                )
                validator = RewriteValidator(
                    table.io,
                    plan.snapshot_id,  # type: ignore[arg-type]
                    inputs,
                    deletes,
                    caches[0],
                    spec_id,
                    what="data step",
                    own=lambda snapshot: _step_of(snapshot) == step_id,
                )
                summary = {**new_state.summary(), UNIT_KEY: str(unit.index)}
                producer = RewriteFiles(transaction, table.io, validator, summary, operation)
                for data_file in [*inputs, *deletes]:
                    producer.delete_data_file(data_file)
                for data_file in outputs:
                    producer.append_data_file(data_file)
                try:
                    producer.commit()
                except ValidationException as exc:
                    producer._clean_all_uncommitted()
                    raise DataStepConflictError(
                        f"Unit {unit.index} of data step {step_id!r} on {'.'.join(table.name())} cannot commit: {exc} "
                        "Another writer changed the files it rewrites, so no later run can finish the step exactly "
                        "once; units committed before stay committed.",
                        step_id=step_id,
                        unit=unit.index,
                        reason="foreign_rewrite",
                    ) from exc
                transaction.set_properties(mirror_property(new_state, producer.snapshot_id))
                transaction._snapshot_producers = []  # a lost race comes back here, to the state check
                try:
                    transaction.commit_transaction()
                except Exception as exc:
                    if _lost_race(exc):
                        producer._clean_all_uncommitted()
                        raise
                    landed = _landed(table, producer.snapshot_id)
                    if landed:
                        log.warning("%s: the commit's answer was lost, but the commit landed", label)
                        return UnitOutcome(True, producer.snapshot_id, new_state, len(deletes))
                    if landed is None:
                        raise UnknownOutcome(str(exc)) from exc
                    producer._clean_all_uncommitted()
                    raise
                return UnitOutcome(True, producer.snapshot_id, new_state, len(deletes))
    except CommitFailedException as exc:
        raise DataStepConflictError(
            f"Unit {unit.index} of data step {step_id!r} lost {MAX_ATTEMPTS} commits in a row to concurrent commits "
            f"on {'.'.join(table.name())}; units committed before stay committed, and running the step again resumes.",
            step_id=step_id,
            unit=unit.index,
        ) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _step_of(snapshot: Snapshot) -> str | None:
    """The data step that committed ``snapshot``, if one did."""
    return snapshot.summary.additional_properties.get(STEP_KEY) if snapshot.summary is not None else None


def _landed(table: Table, snapshot_id: int) -> bool | None:
    """Whether snapshot ``snapshot_id`` is in the table; ``None`` when reading the table failed too."""
    try:
        table.refresh()
    except Exception:
        return None
    return table.metadata.snapshot_by_id(snapshot_id) is not None
