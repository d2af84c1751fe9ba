"""The commit of one unit of a move: its data files and the move's new state, exactly once.

The check that the unit is not done is part of the commit (it requires the branch head the state was read
at, without PyIceberg's rebase-and-retry); an unknown outcome is settled by reading the table again.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.table.update import AssertCurrentSchemaId

from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.data_migration.audit_branch import is_audit_branch
from iceberg_ops_provider.data_migration.state import UNIT_KEY, MoveState, find_state, mirror_properties
from iceberg_ops_provider.errors import MoveConflictError, MoveStateError

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableRequirement
    from pyiceberg.table.update.snapshot import _SnapshotProducer

__all__ = ["UnitCommit", "commit_unit"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 60
"""Attempts of one unit's commit before giving up with :class:`MoveConflictError` (transient)."""


@dataclass(frozen=True)
class UnitCommit:
    """What committing a unit did.

    ``committed`` is ``False`` when the unit was already done; ``state`` is the move's state after the
    commit, ``None`` when the branch is gone because the move was published meanwhile.
    """

    committed: bool
    snapshot_id: int | None
    state: MoveState | None
    attempts: int


def _stage(
    table: Table,
    files: Sequence[DataFile],
    state: MoveState,
    properties: dict[str, str],
    branch: str,
    delete_filter: BooleanExpression | None,
) -> tuple[object, list[_SnapshotProducer]]:
    transaction = table.transaction()
    # The files were written for the schema the state check saw: a schema change since fails the commit.
    transaction._stage((), (AssertCurrentSchemaId(current_schema_id=table.metadata.current_schema_id),))
    if delete_filter is not None:
        with warnings.catch_warnings():  # replacing rows of an empty target is not worth a warning
            warnings.filterwarnings("ignore", message="Delete operation did not match any records")
            transaction.delete(delete_filter, snapshot_properties=properties, branch=branch)
    with transaction.update_snapshot(snapshot_properties=properties, branch=branch).fast_append() as append:
        for data_file in files:
            append.append_data_file(data_file)
    transaction.set_properties(mirror_properties(state, branch, append.snapshot_id))
    producers = list(transaction._snapshot_producers)
    # No rebase-and-retry by PyIceberg: a failed requirement must bring us back to the state check.
    transaction._snapshot_producers = []
    return transaction, producers


def _settle_unknown(
    table: Table,
    producers: Sequence[_SnapshotProducer],
    state: MoveState,
    attempt: int,
    unit_label: str,
    error: Exception,
) -> UnitCommit:
    """An attempt failed without saying whether it landed: read the table to find out (raises ``error`` if not)."""
    snapshot_ids = {producer.snapshot_id for producer in producers}
    table.refresh()
    if any(table.metadata.snapshot_by_id(snapshot_id) is not None for snapshot_id in snapshot_ids):
        log.warning("unit %s: the commit's answer was lost, but the commit landed", unit_label)
        return UnitCommit(True, producers[-1].snapshot_id, state, attempt)
    raise error


def _lost_race(exc: BaseException) -> bool:
    """Whether the catalog refused the commit because another one, on any branch, advanced the table meanwhile."""
    if isinstance(exc, CommitFailedException | ValidationException):
        return True
    return isinstance(exc, ValueError) and "sequence number" in str(exc)


def commit_unit(
    table: Table,
    files: Sequence[DataFile],
    *,
    move_id: str,
    branch: str,
    decide: Callable[[MoveState | None], MoveState | None],
    unit_label: str,
    delete_filter: BooleanExpression | None = None,
    summary: Mapping[str, str] | None = None,
    requirements: Sequence[TableRequirement] = (),
) -> UnitCommit:
    """Commit ``files`` to ``branch`` with the state ``decide`` returns, unless the unit is already done.

    ``decide`` gets the move's state at the branch head (the table read again just before each
    attempt) and returns the state to record, or ``None`` when the unit is done (nothing is
    committed); it may raise ``MoveStateError`` to refuse. ``delete_filter``: rows of the branch to
    delete in the same commit (an overwrite's final commit); ``summary``: more snapshot summary
    properties (a publish's receipt); ``requirements``: more the catalog checks with the commit (a
    publish's: its branch still at the audited snapshot). A move's own branch (``DataMover(branch=...)``) must exist:
    ``MoveStateError`` otherwise, as PyIceberg would create it without its history. The caller
    deletes ``files`` when the result's ``committed`` is ``False``.
    """
    try:
        for attempt in lost_races(MAX_ATTEMPTS, what=f"unit {unit_label}", when=_lost_race):
            with attempt:
                number = attempt.retry_state.attempt_number
                table.refresh()
                if is_audit_branch(branch) and branch not in table.metadata.refs:
                    # PyIceberg would create it, parentless, holding only this unit's rows.
                    raise MoveStateError(
                        f"Branch {branch!r} of {'.'.join(table.name())} was removed (discarded or published) while "
                        f"unit {unit_label} of move {move_id!r} was copied; nothing of the unit was committed."
                    )
                state, _head = find_state(table.metadata, move_id, branch)
                new_state = decide(state)
                if new_state is None:
                    return UnitCommit(False, None, state, number - 1)
                properties = {**new_state.to_summary(), UNIT_KEY: unit_label, **(summary or {})}
                transaction, producers = _stage(table, files, new_state, properties, branch, delete_filter)
                # Added as they are: Transaction._stage keeps one requirement per class, and the
                # append's own AssertRefSnapshotId on the branch is one.
                transaction._requirements += tuple(requirements)  # type: ignore[attr-defined]
                try:
                    transaction.commit_transaction()  # type: ignore[attr-defined]
                except Exception as exc:
                    if not _lost_race(exc):
                        return _settle_unknown(table, producers, new_state, number, unit_label, exc)
                    for producer in producers:
                        producer._clean_all_uncommitted()
                    raise
                return UnitCommit(True, producers[-1].snapshot_id, new_state, number)
    except Exception as exc:
        if not _lost_race(exc):
            raise
        raise MoveConflictError(
            f"Unit {unit_label} of move {move_id!r} lost {MAX_ATTEMPTS} commits in a row to concurrent commits on "
            f"{'.'.join(table.name())}; what was committed stays committed. Run the move again to resume."
        ) from exc
    raise AssertionError("unreachable")  # pragma: no cover
