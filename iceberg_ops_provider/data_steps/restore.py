"""Restore points of a migration's data steps: a tag on ``main`` before the first step, and the move back to it.

Before a migration's first data step on a table, ``main``'s head is tagged; ``restore_to`` moves ``main``
back to that snapshot in one metadata commit guarded by ``main``'s head, but only while every commit
since is one of that migration's own data steps: anything else that committed would be lost, so it
refuses and names those commits (docs/data-steps.md, "Restore points").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.core.refs import commit_refs
from iceberg_ops_provider.core.retrying import lost_races
from iceberg_ops_provider.data_steps.state import recorded_step
from iceberg_ops_provider.errors import RestorePointError

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = [
    "DEFAULT_MAX_AGE_MS",
    "MAX_AGE_PROPERTY",
    "Restored",
    "check_restore",
    "restore_to",
    "tag_name",
    "tag_restore_point",
]

MAX_AGE_PROPERTY = "iceberg-ops.restore-point.max-age-ms"
"""Table property: how long a restore point's tag is kept (its ``max-ref-age-ms``); the project's snapshot
expiry removes older ones, and with them the files only they hold."""

DEFAULT_MAX_AGE_MS = 7 * 24 * 3600 * 1000
"""A restore point's age limit without :data:`MAX_AGE_PROPERTY`: seven days."""

TAG_ATTEMPTS = 20
"""Attempts of the tag's commit that lose to other writers' commits (an append landing meanwhile)."""


def tag_name(namespace: str, version: str) -> str:
    """The tag of a migration's restore point: ``iceberg-ops/sales/0004``."""
    return f"iceberg-ops/{namespace}/{version}"


def tag_restore_point(table: Table, name: str, *, mark_empty: bool = False) -> int | None:
    """Tag ``main``'s head as ``name`` unless that tag exists (a resumed step keeps the first); its snapshot id.

    A commit that loses to another writer's (an append) tags the head that writer left.

    A table without a snapshot has nothing to restore to (``None``), unless ``mark_empty``: then it first
    gets a snapshot of no rows to tag, the point a step that adds rows to it (a copy) is undone to.
    """
    for attempt in lost_races(TAG_ATTEMPTS, what=f"restore point {name} of {'.'.join(table.name())}"):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                table.refresh()  # another writer committed meanwhile: tag the head it left
            ref = table.metadata.refs.get(name)
            if ref is not None:
                return ref.snapshot_id
            if table.metadata.current_snapshot_id is None and mark_empty:
                with table.transaction() as transaction:
                    transaction.update_snapshot().fast_append().commit()
            head = table.metadata.current_snapshot_id
            if head is None:
                return None
            max_age = int(table.properties.get(MAX_AGE_PROPERTY, DEFAULT_MAX_AGE_MS))
            table.manage_snapshots().create_tag(head, name, max_ref_age_ms=max_age).commit()
            return head
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class Restored:
    """What :func:`restore_to` did: ``main`` moved from ``from_snapshot_id`` back to ``to_snapshot_id``.

    ``undone``: the data-step commits between them; 0 (and equal ids) when ``main`` was there already.
    """

    table: str
    tag: str
    from_snapshot_id: int | None
    to_snapshot_id: int
    undone: int

    def to_json(self) -> dict[str, object]:
        """JSON-able form, beside the data steps' results."""
        return {"kind": "restore_data", **asdict(self)}


def restore_to(table: Table, name: str, step_prefix: str) -> Restored:
    """Move ``main`` back to the tag ``name`` and remove the tag, in one commit guarded by ``main``'s head.

    Every snapshot on ``main`` after the tagged one must carry a data-step id (or a copy step's move id)
    starting with ``step_prefix`` (this migration's upgrade). Moving a table that is already there only
    removes the tag.

    Raises:
        RestorePointError: See :func:`check_restore`; nothing changed.
    """
    tagged, since = check_restore(table, name, step_prefix)
    head = table.metadata.current_snapshot_id
    # Guarded by main's head: a commit meanwhile fails it. main keeps its retention settings.
    commit_refs(table, expect={MAIN_BRANCH: head}, move={MAIN_BRANCH: tagged}, remove=(name,))
    return Restored(".".join(table.name()), name, head, tagged, since)


def check_restore(table: Table, name: str, step_prefix: str) -> tuple[int, int]:
    """Whether :func:`restore_to` can move ``main`` back to tag ``name``: the tagged snapshot and the commits to undo.

    Raises:
        RestorePointError: No such tag (never taken, expired or removed), ``main`` no longer descends
            from it, or other commits landed since (each named with its id, operation and time).
    """
    label = ".".join(table.name())
    ref = table.metadata.refs.get(name)
    if ref is None or ref.snapshot_ref_type != SnapshotRefType.TAG:
        raise RestorePointError(label, name, reason="missing")
    head = table.metadata.current_snapshot_id
    since = []
    if head is not None and head != ref.snapshot_id:
        for snapshot in ancestors_of(table.metadata.snapshot_by_id(head), table.metadata):
            if snapshot.snapshot_id == ref.snapshot_id:
                break
            since.append(snapshot)
        else:  # main no longer descends from the tag: its history was rewritten
            raise RestorePointError(label, name, reason="not_an_ancestor")
    foreign = [s for s in since if not (recorded_step(s) or "").startswith(step_prefix)]
    if foreign:
        raise RestorePointError(
            label,
            name,
            reason="foreign_commits",
            commits=[
                f"{s.snapshot_id} ({s.summary.operation.value if s.summary else 'unknown'}, at "
                f"{datetime.fromtimestamp(s.timestamp_ms / 1000, tz=UTC).isoformat(timespec='seconds')})"
                for s in foreign
            ],
        )
    return ref.snapshot_id, len(since)
