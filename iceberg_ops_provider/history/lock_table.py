"""The namespace lock's table, and the compare-and-swap commits that take, keep and give the lock back.

Each acquisition adds an empty snapshot of its own tagged ``held``; every later change asserts that snapshot, built
by hand because a PyIceberg transaction keeps one requirement per type (docs/adr/0002, 0003; docs/migrations.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
import uuid
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, RESTError, TableAlreadyExistsError
from pyiceberg.manifest import write_manifest_list
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    RemoveSnapshotsUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
)

from iceberg_ops_provider.errors import CatalogUnavailableError
from iceberg_ops_provider.history.lock_holder import PROPERTY_PREFIX, LockInfo
from iceberg_ops_provider.history.store import ensure_meta_namespace, load_meta_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableRequirement, TableUpdate

__all__ = [
    "HELD_TAG",
    "cas_commit",
    "commit_acquisition",
    "commit_if_held",
    "ensure_lock_table",
    "lock_table_name",
]

HELD_TAG = "held"
"""The tag whose existence means "locked"; it points at the snapshot of the current acquisition."""

_LOCK_SCHEMA = pa.schema([pa.field("held", pa.bool_())])
_LOCK_TABLE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "5",
}
_MAX_TABLE_NAME = 200


def lock_table_name(namespace: str) -> str:
    """The lock table's name for ``namespace``: readable, and unique even after sanitising or shortening."""
    safe = re.sub(r"[^a-z0-9_]", "_", namespace.lower())
    if safe == namespace and len(safe) <= _MAX_TABLE_NAME:
        return f"migration_lock_{safe}"
    return f"migration_lock_{safe[:_MAX_TABLE_NAME]}_{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"


def ensure_lock_table(catalog: Catalog, identifier: tuple[str, ...]) -> Table:
    """The lock table, created (with its meta-namespace) if missing, with a base snapshot on ``main``."""
    table = load_meta_table(catalog, identifier)
    if table is None:
        ensure_meta_namespace(catalog, identifier)
        with contextlib.suppress(TableAlreadyExistsError, CommitFailedException):
            catalog.create_table(identifier, _LOCK_SCHEMA, properties=_LOCK_TABLE_PROPERTIES)
        table = catalog.load_table(identifier)
    if table.current_snapshot() is None:
        # PyIceberg refuses a requirement on a tag of a table without snapshots: give it a base one.
        try:
            table.append(_LOCK_SCHEMA.empty_table())
        except CommitFailedException:
            pass  # another run gave it one first
        except ValueError as exc:
            # The same race, when PyIceberg's retry rebases onto the other run's snapshot.
            if "sequence number" not in str(exc):
                raise
        table = catalog.load_table(identifier)
    return table


def commit_acquisition(table: Table, mine: LockInfo, holder: LockInfo | None) -> int:
    """One commit: a fresh snapshot tagged ``held``, the holder's properties, old lock snapshots dropped."""
    metadata = table.metadata
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    sequence_number = metadata.last_sequence_number + 1
    manifest_list = f"{metadata.location.rstrip('/')}/metadata/lock-{snapshot_id}-{uuid.uuid4().hex[:8]}.avro"
    with write_manifest_list(
        format_version=metadata.format_version,
        output_file=table.io.new_output(manifest_list),
        snapshot_id=snapshot_id,
        parent_snapshot_id=None,
        sequence_number=sequence_number,
        avro_compression="null",
    ) as writer:
        writer.add_manifests([])
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=manifest_list,
        summary=Summary(Operation.APPEND, **{f"{PROPERTY_PREFIX}run-id": mine.run_id}),
        schema_id=metadata.current_schema_id,
    )
    referenced = {ref.snapshot_id for name, ref in metadata.refs.items() if name != HELD_TAG}
    obsolete = [s.snapshot_id for s in metadata.snapshots if s.snapshot_id not in referenced]
    updates: list[TableUpdate] = [
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(ref_name=HELD_TAG, type=SnapshotRefType.TAG, snapshot_id=snapshot_id),
        SetPropertiesUpdate(updates=mine.to_properties()),
    ]
    if obsolete:
        updates.append(RemoveSnapshotsUpdate(snapshot_ids=obsolete))
    requirement = AssertRefSnapshotId(ref=HELD_TAG, snapshot_id=holder.snapshot_id if holder else None)
    try:
        try:
            cas_commit(table, updates, [requirement])
        except ValueError as exc:
            # A SQL catalog applies the updates to the metadata current at commit time. When another run
            # acquired and released the lock since ``table`` was read, its acquisition already dropped
            # the old lock snapshots listed here, and the catalog refuses before writing anything: a
            # lost race like any other, retried on fresh metadata.
            if not str(exc).startswith("Snapshot with snapshot id"):
                raise
            raise CommitFailedException(f"The lock table changed while this run acquired it: {exc}") from exc
    except BaseException:
        with contextlib.suppress(Exception):
            table.io.delete(manifest_list)
        raise
    _delete_manifest_lists(table, [s for s in metadata.snapshots if s.snapshot_id in set(obsolete)])
    return snapshot_id


def _delete_manifest_lists(table: Table, snapshots: list[Snapshot]) -> None:
    """Delete the manifest lists of dropped lock snapshots (ours only; best effort)."""
    for snapshot in snapshots:
        if "/metadata/lock-" in snapshot.manifest_list:
            with contextlib.suppress(Exception):
                table.io.delete(snapshot.manifest_list)


def commit_if_held(table: Table, snapshot_id: int | None, updates: list[TableUpdate]) -> None:
    """One commit of ``updates`` under "``held`` still points at ``snapshot_id``" (see :func:`cas_commit`)."""
    cas_commit(table, updates, [AssertRefSnapshotId(ref=HELD_TAG, snapshot_id=snapshot_id)])


def cas_commit(table: Table, updates: list[TableUpdate], requirements: list[TableRequirement]) -> None:
    """One compare-and-swap commit to the lock table: ``updates`` apply only if ``requirements`` still hold.

    The table's UUID is asserted too, so a lock table dropped and created again refuses it.

    Raises:
        CommitFailedException: A requirement no longer holds (another run committed first).
        CatalogUnavailableError: The catalog failed the commit (a 5xx, an unknown commit state).
    """
    requirements = [AssertTableUUID(uuid=table.metadata.table_uuid), *requirements]
    try:
        table._do_commit(updates=tuple(updates), requirements=tuple(requirements))
    except CommitFailedException:
        raise
    except RESTError as exc:  # 5xx, unknown commit state: the catalog's answer, not a lost race
        raise CatalogUnavailableError(
            f"The catalog failed a commit to the migration lock table {'.'.join(table.name())} "
            f"({type(exc).__name__}: {exc}); nothing was executed. Run again; a lock this run may have "
            "taken is released by its lease, or at once by a new run from this host."
        ) from exc
