"""Refs changed in one guarded metadata commit: set, moved or removed only while every ref read is where it was.

PyIceberg 0.12's ``ManageSnapshots`` keeps one requirement per class per transaction (a second
``AssertRefSnapshotId`` is dropped), moves an existing ref when asked to create it, and rewrites a
branch without its retention fields; :func:`commit_refs` states every requirement itself and commits
them with the updates at once (docs/tags-and-restore.md, "How a restore commits").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update import (
    AssertRefSnapshotId,
    AssertTableUUID,
    RemoveSnapshotRefUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
)

from iceberg_ops_provider.errors import RefMovedError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["commit_refs", "commits_since", "describe_commit", "move_ref"]


def commit_refs(
    table: Table,
    *,
    expected: Mapping[str, int | None],
    set_refs: Mapping[str, SnapshotRef] | None = None,
    remove: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> None:
    """One metadata commit setting ``set_refs`` and removing ``remove``, if every ref of ``expected`` is unmoved.

    ``expected`` maps each ref to the snapshot it must still point at (``None``: it must not exist); a
    ref set or removed belongs in it, so that a commit of another writer in between fails this one.
    ``properties``: table properties set in the same commit (a receipt of what it did). ``table``
    holds the new metadata afterwards.

    Raises:
        RefMovedError: A ref of ``expected`` is elsewhere now (``table`` is then refreshed).
        CommitFailedException: The catalog refused the commit for another reason.
    """
    requirements = (
        AssertTableUUID(uuid=table.metadata.table_uuid),
        *(AssertRefSnapshotId(ref=name, snapshot_id=snapshot_id) for name, snapshot_id in expected.items()),
    )
    updates = (
        *(RemoveSnapshotRefUpdate(ref_name=name) for name in remove),
        *(
            SetSnapshotRefUpdate(ref_name=name, **ref.model_dump(by_alias=True))
            for name, ref in (set_refs or {}).items()
        ),
        *((SetPropertiesUpdate(updates=dict(properties)),) if properties else ()),
    )
    try:
        table._do_commit(updates=updates, requirements=requirements)
    except CommitFailedException as exc:
        moved = _moved(table, expected)
        if moved is None:
            raise
        raise moved from exc


def move_ref(
    table: Table,
    name: str,
    snapshot_id: int,
    *,
    expected: int | None,
    also_expected: Mapping[str, int | None] | None = None,
    remove: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> None:
    """Point ref ``name`` (``main``, a branch, a tag) at ``snapshot_id`` in one commit, keeping its retention fields.

    Guarded by ``name`` still being at ``expected`` and every ref of ``also_expected`` where it says;
    ``remove``: refs removed in the same commit (list them in ``also_expected`` too), ``properties``:
    table properties set in it (:func:`commit_refs`). A ref that does
    not exist yet (``expected=None``) becomes a branch without retention fields. Nothing checks that
    the move goes forward: a caller that needs it (a fast-forward) checks ancestry first.

    Raises:
        RefMovedError: ``name`` or a ref of ``also_expected`` moved since it was read.
    """
    current = table.metadata.refs.get(name)
    ref = SnapshotRef(
        snapshot_id=snapshot_id,
        snapshot_ref_type=current.snapshot_ref_type if current is not None else SnapshotRefType.BRANCH,
        min_snapshots_to_keep=current.min_snapshots_to_keep if current is not None else None,
        max_snapshot_age_ms=current.max_snapshot_age_ms if current is not None else None,
        max_ref_age_ms=current.max_ref_age_ms if current is not None else None,
    )
    commit_refs(
        table,
        expected={**(also_expected or {}), name: expected},
        set_refs={name: ref},
        remove=remove,
        properties=properties,
    )


def commits_since(metadata: TableMetadata, head: int | None, since: int | None) -> list[Snapshot]:
    """The snapshots from ``head`` back to ``since`` (excluded), newest first.

    When ``head`` does not descend from ``since`` (history rewritten, or ``since`` is ``None``), every
    ancestor of ``head`` that is not one of ``since``: what moving from ``since`` to ``head`` brings in.
    """
    start = metadata.snapshot_by_id(head) if head is not None else None
    if start is None:
        return []
    base = metadata.snapshot_by_id(since) if since is not None else None
    shared = {s.snapshot_id for s in ancestors_of(base, metadata)} if base is not None else set()
    found = []
    for snapshot in ancestors_of(start, metadata):
        if snapshot.snapshot_id in shared:
            break
        found.append(snapshot)
    return found


def describe_commit(snapshot: Snapshot) -> str:
    """``123 (append, at 2026-12-07T15:00:00+00:00)``: a snapshot as errors name it."""
    operation = snapshot.summary.operation.value if snapshot.summary is not None else "unknown"
    at = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC).isoformat(timespec="seconds")
    return f"{snapshot.snapshot_id} ({operation}, at {at})"


def _moved(table: Table, expected: Mapping[str, int | None]) -> RefMovedError | None:
    """The first ref of ``expected`` that is elsewhere in the table's fresh metadata (``None``: none moved)."""
    table.refresh()
    metadata = table.metadata
    for name, snapshot_id in expected.items():
        ref = metadata.refs.get(name)
        found = ref.snapshot_id if ref is not None else None
        if found != snapshot_id:
            commits = [describe_commit(s) for s in commits_since(metadata, found, snapshot_id)]
            return RefMovedError(".".join(table.name()), name, snapshot_id, found, commits)
    return None
