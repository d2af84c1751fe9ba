"""The moves that copy into a table, and how far each has got, read from the table's metadata.

:func:`moves_into` finds every move a target knows (from the ``iceberg-ops.move.<move_id>``
properties and the snapshot summaries) and reports each; it never raises for one move whose state
cannot be read: that move is reported with its ``error``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyiceberg.table.refs import MAIN_BRANCH

from iceberg_ops_provider.data_migration.audit_branch import RECORD_PREFIX, record_of
from iceberg_ops_provider.data_migration.state import (
    MOVE_ID_KEY,
    PROPERTY_PREFIX,
    STAGING_BRANCH_PREFIX,
    find_state,
    move_snapshots,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["MoveProgress", "moves_into"]


@dataclass(frozen=True)
class MoveProgress:
    """How far one move into a table has got.

    ``source`` is ``None`` and ``error`` says why when the state cannot be read. ``branch`` is ``main``,
    an ``overwrite`` move's staging branch, or the branch of a move given one, until it is published.
    ``bytes`` counts the data files added by the move's commits still in the history
    (``added-files-size``), ``last_commit_at`` the newest of them (UTC).
    ``runs``: runs the move started (an ``incremental`` move adds one per run; 1 otherwise).
    :attr:`state` sums it up: ``complete``, ``broken`` (its state cannot be read, or none is recorded where
    its commits are: no run can resume it) or ``in_progress``.
    """

    move_id: str
    source: str | None = None
    branch: str = MAIN_BRANCH
    units_committed: int = 0
    units_planned: int = 0
    rows: int = 0
    bytes: int = 0
    complete: bool = False
    last_commit_at: datetime | None = None
    runs: int = 1
    error: str | None = None

    @property
    def state(self) -> str:
        """``complete``, ``broken`` (an ``error`` and not complete) or ``in_progress``."""
        if self.complete:
            return "complete"
        return "broken" if self.error is not None else "in_progress"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (with :attr:`state`)."""
        last = self.last_commit_at.isoformat() if self.last_commit_at else None
        return {**asdict(self), "last_commit_at": last, "state": self.state}


def _known_moves(table: Table) -> list[str]:
    """Every move the table knows: from its mirror properties and its snapshot summaries."""
    metadata = table.metadata
    moves = [key.removeprefix(PROPERTY_PREFIX) for key in metadata.properties if key.startswith(PROPERTY_PREFIX)]
    moves += [s.summary.additional_properties.get(MOVE_ID_KEY) for s in metadata.snapshots if s.summary]
    return [move_id for move_id in dict.fromkeys(moves) if move_id]


def _own_branch(table: Table, move_id: str) -> str | None:
    """The branch of its own a move writes to (``DataMover(branch=...)``), while it exists."""
    metadata = table.metadata
    for key in metadata.properties:
        record = record_of(metadata, key.removeprefix(RECORD_PREFIX)) if key.startswith(RECORD_PREFIX) else None
        if record is not None and record.move_id == move_id and record.branch in metadata.refs:
            return record.branch
    return None


def _progress(table: Table, move_id: str) -> MoveProgress:
    """A move's progress: on its own branch while it has one, else on ``main`` or an unpublished overwrite's staging."""
    metadata = table.metadata
    staging = f"{STAGING_BRANCH_PREFIX}{move_id}"
    branch = MAIN_BRANCH
    try:
        own = _own_branch(table, move_id)
        if own is not None:
            branch = own
        state, _ = find_state(metadata, move_id, branch)
        if state is None and staging in metadata.refs:
            branch = staging
            state, _ = find_state(metadata, move_id, staging)
    except Exception as exc:
        return MoveProgress(move_id, branch=branch, error=f"{type(exc).__name__}: {exc}")
    snapshots = move_snapshots(metadata, move_id, branch)
    added = 0
    for snapshot in snapshots:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        try:
            added += int(summary.get("added-files-size", 0))
        except ValueError:
            continue
    last = datetime.fromtimestamp(snapshots[0].timestamp_ms / 1000, UTC) if snapshots else None
    if state is None:
        return MoveProgress(
            move_id, branch=branch, bytes=added, last_commit_at=last, error=f"no state recorded on {branch}"
        )
    done, runs = len(state.done), state.epoch + 1
    return MoveProgress(
        move_id, state.source, branch, done, state.unit_count, state.rows, added, state.complete, last, runs
    )


def moves_into(table: Table) -> list[MoveProgress]:
    """Every move into ``table`` the table's metadata knows, the most recently committed first."""
    found = [_progress(table, move_id) for move_id in _known_moves(table)]
    oldest = datetime.min.replace(tzinfo=UTC)
    return sorted(found, key=lambda move: (move.last_commit_at or oldest, move.move_id), reverse=True)
