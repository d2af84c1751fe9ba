"""Refs changed in one guarded metadata commit: set, moved or removed only while every ref read is where it was.

PyIceberg 0.12's ``ManageSnapshots`` keeps one requirement per class per transaction (a second
``AssertRefSnapshotId`` is dropped), moves an existing ref when asked to create it, and rewrites a
branch without its retention fields; :func:`commit_refs` states every requirement itself and commits
them with the updates at once (docs/tags-and-restore.md, "How a restore commits").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update import (
    AssertRefSnapshotId,
    AssertTableUUID,
    RemovePropertiesUpdate,
    RemoveSnapshotRefUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)

from iceberg_ops_provider.errors import RefMovedError

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "RECORD_PREFIX",
    "BranchRecord",
    "commit_refs",
    "commits_since",
    "describe_commit",
    "history_to_keep",
    "move_ref",
    "record_of",
]

RECORD_PREFIX = "iceberg-ops.branch."
"""Table properties ``iceberg-ops.branch.<name>`` record the move that owns each branch (:class:`BranchRecord`)."""


@dataclass(frozen=True)
class BranchRecord:
    """What the table property of a move's branch says: its owner, where it was cut, what an audit passed.

    ``audited_snapshot_id`` is the branch head the last passing audit read (``None`` before one passed);
    publishing requires it to still be the head. ``audited_scope`` is that audit's scope (``move`` or
    ``branch``): a fast-forward carries every commit on the branch, so commits that are not the move's
    are published that way only after an audit of scope ``branch`` read their rows.
    """

    branch: str
    move_id: str
    fork_snapshot_id: int
    audited_snapshot_id: int | None = None
    audited_scope: str | None = None

    @property
    def key(self) -> str:
        """The table property holding this record."""
        return RECORD_PREFIX + self.branch

    def to_properties(self) -> dict[str, str]:
        """The table property recording this."""
        payload = {k: v for k, v in asdict(self).items() if k != "branch"}
        return {self.key: json.dumps(payload, sort_keys=True, separators=(",", ":"))}

    def audited(self, snapshot_id: int | None, scope: str | None) -> BranchRecord:
        """This record once an audit of ``snapshot_id`` with ``scope`` passed (``None``, ``None``: none did)."""
        return replace(self, audited_snapshot_id=snapshot_id, audited_scope=scope)


def record_of(metadata: TableMetadata, branch: str) -> BranchRecord | None:
    """The record of ``branch`` in the table's properties; ``None`` without one (or when it cannot be read)."""
    text = metadata.properties.get(RECORD_PREFIX + branch)
    if text is None:
        return None
    try:
        payload = json.loads(text)
        return BranchRecord(
            branch=branch,
            move_id=str(payload["move_id"]),
            fork_snapshot_id=int(payload["fork_snapshot_id"]),
            audited_snapshot_id=None
            if payload.get("audited_snapshot_id") is None
            else int(payload["audited_snapshot_id"]),
            audited_scope=None if payload.get("audited_scope") is None else str(payload["audited_scope"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


def history_to_keep(metadata: TableMetadata) -> set[int]:
    """The snapshots each move's branch needs until it is published or discarded: both heads back to the fork.

    For every branch with a :class:`BranchRecord`, its ancestors and ``main``'s back to its fork
    snapshot (included), when they descend from it: an audit tells the move's rows by them, and an
    appending publish finds the commits on ``main`` since the fork. Snapshot expiry keeps them whatever
    their age.
    """
    kept: set[int] = set()
    main = metadata.refs.get(MAIN_BRANCH)
    for name, ref in metadata.refs.items():
        record = record_of(metadata, name) if ref.snapshot_ref_type == SnapshotRefType.BRANCH else None
        if record is None:
            continue
        for head in (ref.snapshot_id, main.snapshot_id if main is not None else None):
            chain = []
            for snapshot in ancestors_of(metadata.snapshot_by_id(head) if head is not None else None, metadata):
                chain.append(snapshot.snapshot_id)
                if snapshot.snapshot_id == record.fork_snapshot_id:
                    kept.update(chain)
                    break
    return kept


def commit_refs(
    table: Table,
    *,
    expected: Mapping[str, int | None],
    move: Mapping[str, int] | None = None,
    set_refs: Mapping[str, SnapshotRef] | None = None,
    remove: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
    remove_properties: Sequence[str] = (),
) -> None:
    """One metadata commit changing refs and properties, if every ref of ``expected`` is where it was read.

    Args:
        table: The table as read when ``expected`` was decided; it holds the new metadata afterwards.
        expected: ``{ref: snapshot id}`` each ref must still point at (``None``: it must not exist). A
            ref changed belongs in it, so that a commit of another writer in between fails this one.
        move: ``{ref: snapshot id}`` to point each ref at; an existing ref keeps its type and retention
            fields, a missing one becomes a branch without them.
        set_refs: Refs to set as given (a new tag with its ``max-ref-age-ms``).
        remove: Refs to remove (those that exist).
        properties: Table properties set in the same commit (a receipt of what it did).
        remove_properties: Table properties removed in the same commit (those that exist).

    Raises:
        RefMovedError: A ref of ``expected`` is elsewhere now (``table`` is then refreshed); it is a
            ``CommitFailedException`` too.
        CommitFailedException: The catalog refused the commit for another reason.
        ValueError: A snapshot of ``move`` is not in the table's metadata.
    """
    metadata = table.metadata
    updates: list[TableUpdate] = []
    for name, snapshot_id in (move or {}).items():
        if metadata.snapshot_by_id(snapshot_id) is None:
            raise ValueError(
                f"Cannot point {name} at snapshot {snapshot_id}: {'.'.join(table.name())} has no such snapshot"
            )
        current = metadata.refs.get(name)
        if current is None:
            updates.append(SetSnapshotRefUpdate(ref_name=name, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id))
        elif current.snapshot_id != snapshot_id:  # PyIceberg's own ref updates drop the retention fields
            fields = {**current.model_dump(by_alias=True), "snapshot-id": snapshot_id}
            updates.append(SetSnapshotRefUpdate(ref_name=name, **fields))
    updates += [
        SetSnapshotRefUpdate(ref_name=name, **ref.model_dump(by_alias=True)) for name, ref in (set_refs or {}).items()
    ]
    updates += [RemoveSnapshotRefUpdate(ref_name=name) for name in remove if name in metadata.refs]
    if properties:
        updates.append(SetPropertiesUpdate(updates=dict(properties)))
    gone = [key for key in remove_properties if key in metadata.properties]
    if gone:
        updates.append(RemovePropertiesUpdate(removals=gone))
    if not updates:
        return
    requirements: list[TableRequirement] = [AssertTableUUID(uuid=metadata.table_uuid)]
    requirements += [AssertRefSnapshotId(ref=name, snapshot_id=snapshot_id) for name, snapshot_id in expected.items()]
    try:
        table._do_commit(updates=tuple(updates), requirements=tuple(requirements))
    except CommitFailedException:
        moved = _moved(table, expected)
        if moved is None:
            raise
        raise moved from None


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

    Guarded by ``name`` still being at ``expected`` and every ref of ``also_expected`` where it says
    (:func:`commit_refs`, with ``remove`` and ``properties`` in the same commit). Nothing checks that
    the move goes forward: a caller that needs it (a fast-forward) checks ancestry first.

    Raises:
        RefMovedError: ``name`` or a ref of ``also_expected`` moved since it was read.
    """
    commit_refs(
        table,
        expected={**(also_expected or {}), name: expected},
        move={name: snapshot_id},
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
