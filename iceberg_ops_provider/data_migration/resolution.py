"""What a move starts from: its tables, column mapping, recorded state and plan.

A new move pins the source's current snapshot, an unfinished one keeps the snapshot and unit size it started
with, a finished one is a no-op, and a finished incremental one starts a run over what was appended since.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.core.filters import bind_filter
from iceberg_ops_provider.core.name_hints import did_you_mean, missing_table
from iceberg_ops_provider.data_migration.audit_branch import is_audit_branch, owned_record, record_of
from iceberg_ops_provider.data_migration.move_files import stream_tasks
from iceberg_ops_provider.data_migration.planning import group_units, incremental_range, scan_tasks
from iceberg_ops_provider.data_migration.reconcile import (
    ColumnMapping,
    target_schema_for,
    target_sort_order_for,
    target_spec_for,
)
from iceberg_ops_provider.data_migration.results import MovePlan
from iceberg_ops_provider.data_migration.state import MoveState, file_prefix, find_state
from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError, ReconciliationError
from iceberg_ops_provider.maintenance.files import ManifestReader
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.io import FileIO
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.sorting import SortOrder

    from iceberg_ops_provider.data_migration.definition import MoveDefinition

__all__ = [
    "Resolved",
    "build_mapping",
    "check_tables",
    "create_target",
    "current_state",
    "load_source",
    "load_target",
    "metadata_at",
    "resolve",
]

log = logging.getLogger(__name__)


@dataclass
class Resolved:
    """Everything a plan was made from, kept for the run that follows it.

    ``initial_state`` is the state a new plan records with its first unit (``None`` when resuming).
    ``row_filter`` is the move's filter as the source schema reads it (:func:`bound_filter`).
    """

    source: Table
    target: Table | None
    mapping: ColumnMapping
    state: MoveState | None
    plan: MovePlan
    tasks: dict[str, FileScanTask]
    initial_state: MoveState | None
    source_metadata: TableMetadata
    row_filter: BooleanExpression


def load_source(mover: MoveDefinition) -> Table:
    """The source table (the one given, read again, or loaded from the source catalog)."""
    if mover.source_table is not None:
        return mover.source_table.refresh()
    try:
        return mover.source_catalog.load_table(mover.source)
    except NoSuchTableError as exc:
        missing = missing_table(mover.source_catalog, mover.source)
        raise InvalidMoveError(
            f"The source table {mover.source} does not exist ({missing.detail}).{did_you_mean(missing.guess)}"
        ) from exc


def load_target(mover: MoveDefinition) -> Table | None:
    """The target table, or ``None`` when it is missing and the move may create it."""
    try:
        return mover.target_catalog.load_table(mover.target)
    except NoSuchTableError as exc:
        if mover.create_target:
            return None
        missing = missing_table(mover.target_catalog, mover.target)
        raise InvalidMoveError(
            message(
                f"The target table {mover.target} does not exist ({missing.detail}).{did_you_mean(missing.guess)} "
                "Create it first, or pass {create_target} to create it from the source's schema, partition spec and "
                "sort order.",
                create_target=Arg("create_target", True),
            )
        ) from exc


def bound_filter(mover: MoveDefinition, schema: Schema) -> BooleanExpression:
    """The move's filter as ``schema`` (the source's, as the move reads it) reads it, checked against its columns.

    A date compared with a timestamp column stands for that day's midnight (UTC for ``timestamptz``),
    as in Spark (:func:`~iceberg_ops_provider.core.filters.with_timestamp_dates`).
    """
    try:
        return bind_filter(mover.where, schema)
    except Exception as exc:
        raise InvalidMoveError(
            message(
                f"{{where}} does not fit the columns of {mover.source}: {exc}. "
                f"Columns: {', '.join(f.name for f in schema.fields)}.",
                about="where",
                where=Arg("where", mover.where_text),
            )
        ) from exc


def metadata_at(table: Table, snapshot_id: int | None) -> TableMetadata:
    """``table``'s metadata with the schema of ``snapshot_id`` as its current one.

    A move reads its pinned snapshot as it was written: a column dropped or renamed in the source
    since then does not change what the move copies (PyIceberg's scan of a snapshot does the same).
    """
    snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    if snapshot is None or snapshot.schema_id is None or snapshot.schema_id == table.metadata.current_schema_id:
        return table.metadata
    return table.metadata.model_copy(update={"current_schema_id": snapshot.schema_id})


def build_mapping(mover: MoveDefinition, source_schema: Schema, target: Table | None) -> ColumnMapping:
    """The column mapping from ``source_schema`` to the target's (or the schema a created target gets)."""
    target_schema = (
        target.schema()
        if target is not None
        else target_schema_for(source_schema, columns=mover.columns, rename=mover.rename)
    )
    mapping = ColumnMapping.build(source_schema, target_schema, columns=mover.columns, rename=mover.rename)
    if mover.mode == "overwrite":
        mapping.target_expression(mover.where)  # the rows an overwrite replaces must be named in the target
    return mapping


def check_values(
    mapping: ColumnMapping,
    metadata: TableMetadata,
    io: FileIO,
    tasks: list[FileScanTask],
    row_filter: BooleanExpression,
) -> None:
    """Check, before anything is written, that the moved values fit the target's narrower or required columns.

    File statistics settle it for whole files. Under a filter, a file whose statistics show values
    that do not fit may hold them only in rows the filter leaves out: such files are read (filtered,
    nothing written) and their values checked one by one.
    """
    if row_filter == AlwaysTrue():
        mapping.check_files(task.file for task in tasks)
        return
    suspects = []
    for task in tasks:
        try:
            mapping.check_files([task.file])
        except ReconciliationError:
            suspects.append(task)
    if suspects:
        log.info("reading %d source files the filter may clear of values that do not fit", len(suspects))
        for batch in stream_tasks(metadata, io, suspects, mapping.source_columns, row_filter):
            mapping.convert(batch)


def check_tables(mover: MoveDefinition, source: Table, target: Table) -> None:
    """What :func:`resolve` checks of a move's tables, for tables given as they will be when it runs.

    A migration checks its copy against the source and target as its staged changes leave them, before
    anything commits: the filter, the column mapping and the values of the source's current snapshot.

    Raises:
        InvalidMoveError, ReconciliationError: See :func:`bound_filter`, :func:`build_mapping`, :func:`check_values`.
    """
    schema = source.schema()
    row_filter = bound_filter(mover, schema)
    mapping = build_mapping(mover, schema, target)
    tasks = scan_tasks(source, source.metadata.current_snapshot_id, row_filter, mapping.source_columns)
    check_values(mapping, source.metadata, source.io, tasks, row_filter)


def refuse_forgotten_move(mover: MoveDefinition, target: Table) -> None:
    """Refuse to start a move whose files the target holds although its state is gone from the history.

    The state lives in snapshot summaries; expiring every snapshot of a move forgets it. Its data
    files keep the move's key in their names, so a run that would copy the same rows again is
    stopped here instead.
    """
    head = target.metadata.current_snapshot()
    if head is None:
        return
    marker = f"/{file_prefix(mover.move_id)}"
    reader = ManifestReader(target.io)
    left = [path for path in reader.live_paths(reader.manifests(head)) if marker in path]
    if left:
        raise MoveStateError(
            message(
                f"{mover.target} holds {len(left)} data files written by move {mover.move_id!r} (e.g. {left[0]}), "
                "but the move's progress is no longer in the target's snapshot history (its snapshots were "
                "expired). Running it again could copy the same rows twice, so it was not started. If the target "
                "should get the rows again, use another {move_id} (or {overwrite}).",
                move_id=Arg("move_id"),
                overwrite=Arg("mode", "overwrite"),
            )
        )


def current_state(mover: MoveDefinition, target: Table | None) -> MoveState | None:
    """The move's newest state: on ``main`` once an overwrite is published, else on the move's branch.

    A move given a branch of its own keeps its state there while the branch exists; once it was
    published (the branch removed), or before it was cut, ``main`` holds the state.
    """
    if target is None:
        return None
    if is_audit_branch(mover.branch) and mover.branch not in target.metadata.refs:
        return find_state(target.metadata, mover.move_id, MAIN_BRANCH)[0]
    if mover.mode == "overwrite":
        finished, _ = find_state(target.metadata, mover.move_id, MAIN_BRANCH)
        if finished is not None:
            return finished
    return find_state(target.metadata, mover.move_id, mover.branch)[0]


def check_owner(mover: MoveDefinition, state: MoveState, source: Table) -> None:
    """Refuse a state recorded by another move under the same ``move_id``."""
    if state.source != mover.source or state.source_uuid != str(source.metadata.table_uuid):
        raise MoveStateError(
            message(
                f"{{this_move}} belongs to a move from {state.source} (table uuid {state.source_uuid}), "
                f"not from {mover.source} (uuid {source.metadata.table_uuid}). Use another {{move_id}}.",
                this_move=Arg("move_id", mover.move_id),
                move_id=Arg("move_id"),
            )
        )
    if state.definition != mover.definition:
        raise MoveStateError(
            message(
                "{this_move} was started with another filter, column list, renames or mode. Run it with the "
                "arguments it started with ({where}, {columns}, {rename}, {mode}) to finish it, or use another "
                "{move_id}.",
                this_move=Arg("move_id", mover.move_id),
                where=Arg("where"),
                columns=Arg("columns"),
                rename=Arg("rename"),
                mode=Arg("mode"),
                move_id=Arg("move_id"),
            )
        )


def _after(metadata: TableMetadata, snapshot_id: int, earlier_id: int | None) -> bool:
    """Whether ``snapshot_id`` is ``earlier_id`` or descends from it (any snapshot does from ``None``)."""
    if earlier_id is None:
        return True
    ancestry = ancestors_of(metadata.snapshot_by_id(snapshot_id), metadata)
    return any(ancestor.snapshot_id == earlier_id for ancestor in ancestry)


def _fork(mover: MoveDefinition, target: Table | None) -> int | None:
    """The snapshot of ``main`` the move's own branch was cut from (``None`` for a move without one)."""
    if target is None or not is_audit_branch(mover.branch):
        return None
    record = record_of(target.metadata, mover.branch)
    return record.fork_snapshot_id if record is not None and record.move_id == mover.move_id else None


def resolve(mover: MoveDefinition, pinned: int | None = None) -> Resolved:
    """Load, reconcile, read the state and plan (changes nothing).

    ``pinned`` is the source snapshot a new move reads when the mover names none (the snapshot of
    units planned elsewhere): a commit to the source between planning and running changes nothing.
    """
    source = load_source(mover)
    target = load_target(mover)
    if target is not None and is_audit_branch(mover.branch):
        owned_record(target.metadata, mover.branch, mover.move_id, mover.target)  # a tag, or another's branch
    state = current_state(mover, target)
    notes: list[str] = []
    current = source.metadata.current_snapshot_id
    if pinned is not None and state is not None and not _after(source.metadata, pinned, state.completed_snapshot_id):
        pinned = None  # units of a run that already finished: they are settled against the current plan
    snapshot_id = next((s for s in (mover.source_snapshot_id, pinned) if s is not None), current)
    from_snapshot: int | None = None
    commit_every = mover.commit_every_bytes
    initial: MoveState | None = None
    finished = False
    if state is not None:
        check_owner(mover, state, source)
    if state is not None and not state.complete:
        snapshot_id, from_snapshot, commit_every = state.snapshot_id, state.from_snapshot_id, state.commit_every_bytes
        notes.append(f"resuming: {len(state.done)} of {state.unit_count} units committed")
        if commit_every != mover.commit_every_bytes:
            notes.append(f"units of {commit_every} bytes, as the move started with")
    elif state is not None and mover.mode == "incremental" and snapshot_id != state.completed_snapshot_id:
        from_snapshot = state.completed_snapshot_id
        if from_snapshot is not None:
            notes.append(f"incremental: moving what was appended after source snapshot {from_snapshot}")
        else:
            notes.append("incremental: the source was empty when the move last ran; moving all of it")
    elif state is not None:
        if snapshot_id != state.snapshot_id:
            # An overwrite cannot go on incrementally (another definition: it would copy everything again).
            fix = (
                "To replace the target's rows matching the filter with the source's rows now, run {overwrite} again "
                "under another {move_id}."
                if mover.mode == "overwrite"
                else "Copying again would duplicate rows: use {incremental} (same arguments otherwise: it continues "
                "this move) to move only what was appended since, or another {move_id} to copy anew."
            )
            raise MoveStateError(
                message(
                    f"Move {mover.move_id!r} already finished copying {mover.source} at snapshot {state.snapshot_id}; "
                    f"the source is now at snapshot {snapshot_id}. {fix}",
                    overwrite=Arg("mode", "overwrite"),
                    incremental=Arg("mode", "incremental"),
                    move_id=Arg("move_id"),
                )
            )
        notes.append("already complete: nothing to do")
        finished = True
        commit_every = state.commit_every_bytes  # the units the move committed, whatever size is asked for now
    if snapshot_id is not None and source.metadata.snapshot_by_id(snapshot_id) is None:
        raise MoveStateError(
            message(
                f"Source snapshot {snapshot_id} of {mover.source} no longer exists (expired?); the move cannot "
                "resume from it. The units already committed stay in the target, so starting another {move_id} "
                "in append mode would copy their rows twice: copy again with {overwrite} and another {move_id} "
                "(it replaces the target's rows matching the filter), or delete those rows from the target first.",
                move_id=Arg("move_id"),
                overwrite=Arg("mode", "overwrite"),
            )
        )
    if target is not None and str(target.metadata.table_uuid) == str(source.metadata.table_uuid):
        raise InvalidMoveError(
            f"{mover.source} and {mover.target} are the same table (uuid {source.metadata.table_uuid}), reached "
            "through two catalogs: a move copies rows into another table."
        )
    if state is None and target is not None:
        refuse_forgotten_move(mover, target)
    source_metadata = metadata_at(source, snapshot_id)
    row_filter = bound_filter(mover, source_metadata.schema())
    mapping = build_mapping(mover, source_metadata.schema(), target)
    notes[:0] = mapping.notes()
    if target is None:  # what run() will create, checked now so a plan shows every refusal
        target_layout(mover, source, source_metadata.schema(), notes)
    tasks = scan_tasks(source, snapshot_id, row_filter, mapping.source_columns)
    if from_snapshot is not None and snapshot_id is not None:
        appended = incremental_range(source, from_snapshot, snapshot_id, mover.source)
        tasks = [task for task in tasks if task.file.file_path in appended.added_paths]
        notes.append(f"{appended.appends} appends, {appended.rewrites_skipped} rewrites skipped")
    plan_id, units = group_units(tasks, commit_every, move_id=mover.move_id, source_snapshot_id=snapshot_id)
    done: frozenset[int] = frozenset()
    if state is not None and state.plan_id == plan_id:
        done = state.done
    elif finished:
        done = frozenset(range(len(units)))
    else:
        initial = MoveState(
            move_id=mover.move_id,
            source=mover.source,
            source_uuid=str(source.metadata.table_uuid),
            definition=mover.definition,
            snapshot_id=snapshot_id,
            plan_id=plan_id,
            unit_count=len(units),
            commit_every_bytes=commit_every,
            from_snapshot_id=from_snapshot,
            completed_snapshot_id=state.completed_snapshot_id if state is not None else None,
            epoch=state.epoch + 1 if state is not None else 0,
            rows=state.rows if state is not None else 0,
            fork_snapshot_id=_fork(mover, target),
        )
    check_values(mapping, source_metadata, source.io, tasks, row_filter)
    plan = MovePlan(
        move_id=mover.move_id,
        plan_id=plan_id,
        source=mover.source,
        target=mover.target,
        source_snapshot_id=snapshot_id,
        mode=mover.mode,
        units=units,
        done=done,
        from_snapshot_id=from_snapshot,
        target_exists=target is not None,
        notes=tuple(notes),
    )
    by_path = {task.file.file_path: task for task in tasks}
    return Resolved(source, target, mapping, state, plan, by_path, initial, source_metadata, row_filter)


def target_layout(
    mover: MoveDefinition, source: Table, source_schema: Schema, notes: list[str] | None = None
) -> tuple[Schema, PartitionSpec, SortOrder]:
    """The schema, partition spec and sort order a created target gets; ``notes`` receives what they change."""
    schema = target_schema_for(source_schema, columns=mover.columns, rename=mover.rename)
    spec = target_spec_for(_spec_for(source, source_schema), source_schema, schema, rename=mover.rename, notes=notes)
    order = target_sort_order_for(source.sort_order(), source_schema, schema, rename=mover.rename, notes=notes)
    return schema, spec, order


def _spec_for(source: Table, schema: Schema) -> PartitionSpec:
    """The source's newest partition spec whose columns ``schema`` (the one the move reads) has."""
    for spec in sorted(source.metadata.partition_specs, key=lambda spec: spec.spec_id, reverse=True):
        if all(schema.find_column_name(field.source_id) is not None for field in spec.fields):
            return spec
    return source.spec()


def create_target(mover: MoveDefinition, source: Table, source_schema: Schema) -> tuple[Table, bool]:
    """Create the target (and its namespace) from the source's schema (as the move reads it), spec and sort order.

    Returns:
        The target, and whether this call created it (``False`` when another worker of the move did first).
    """
    namespace = mover.target.rsplit(".", 1)[0]
    try:
        mover.target_catalog.create_namespace(namespace)
        log.info("created namespace %s for the move's target", namespace)
    except NamespaceAlreadyExistsError:
        pass
    schema, spec, order = target_layout(mover, source, source_schema)
    try:
        table = mover.target_catalog.create_table(mover.target, schema=schema, partition_spec=spec, sort_order=order)
        log.info("created %s from the schema, partition spec and sort order of %s", mover.target, mover.source)
        return table, True
    except TableAlreadyExistsError:  # another worker of the same move created it first
        return mover.target_catalog.load_table(mover.target), False
