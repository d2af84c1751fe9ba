"""Guarded moves of a table's refs: one metadata commit that applies only while the refs are where they were read.

PyIceberg 0.12 has no fast-forward, and its ``ManageSnapshots`` keeps one ref requirement per
transaction (a second one staged later is dropped). :func:`commit_refs` sends every requirement with
its updates in one catalog commit, so a ref another writer moved, created or removed meanwhile fails it
with ``CommitFailedException`` and nothing changes. The catalog checks the requirements against the
table's current metadata (SQL catalogs in their conditional swap, REST as ``assert-ref-snapshot-id``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyiceberg.table.refs import SnapshotRefType
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

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["commit_refs"]


def commit_refs(
    table: Table,
    *,
    expect: Mapping[str, int | None],
    move: Mapping[str, int] | None = None,
    remove: Sequence[str] = (),
    set_properties: Mapping[str, str] | None = None,
    remove_properties: Sequence[str] = (),
) -> None:
    """Move and remove refs of ``table`` and change its properties in one commit guarded by ``expect``.

    Args:
        table: The table, as read when ``expect`` was decided (refreshed by the commit).
        expect: ``{ref: snapshot_id}`` each ref must still point at; ``None`` for a ref that must not exist.
        move: ``{ref: snapshot_id}`` to point each ref at. An existing ref keeps its type and retention
            settings; a missing one is created as a branch without retention settings.
        remove: Refs to remove (branches or tags).
        set_properties: Table properties to set in the same commit.
        remove_properties: Table properties to remove in the same commit.

    Raises:
        CommitFailedException: A ref in ``expect`` moved, appeared or disappeared meanwhile; nothing changed.
        ValueError: A snapshot in ``move`` is not in the table's metadata.
    """
    metadata = table.metadata
    updates: list[TableUpdate] = []
    for name, snapshot_id in (move or {}).items():
        if metadata.snapshot_by_id(snapshot_id) is None:
            raise ValueError(
                f"Cannot point {name} at snapshot {snapshot_id}: {'.'.join(table.name())} has no such snapshot"
            )
        ref = metadata.refs.get(name)
        if ref is None:
            updates.append(SetSnapshotRefUpdate(ref_name=name, type=SnapshotRefType.BRANCH, snapshot_id=snapshot_id))
        elif ref.snapshot_id != snapshot_id:
            # PyIceberg's own ref updates drop the retention settings; this keeps them.
            updates.append(
                SetSnapshotRefUpdate(ref_name=name, **{**ref.model_dump(by_alias=True), "snapshot-id": snapshot_id})
            )
    updates += [RemoveSnapshotRefUpdate(ref_name=name) for name in remove if name in metadata.refs]
    if set_properties:
        updates.append(SetPropertiesUpdate(updates=dict(set_properties)))
    gone = [key for key in remove_properties if key in metadata.properties]
    if gone:
        updates.append(RemovePropertiesUpdate(removals=gone))
    if not updates:
        return
    requirements: list[TableRequirement] = [AssertTableUUID(uuid=metadata.table_uuid)]
    requirements += [AssertRefSnapshotId(ref=name, snapshot_id=snapshot_id) for name, snapshot_id in expect.items()]
    table._do_commit(updates=tuple(updates), requirements=tuple(requirements))
