"""A per-namespace migration lock that is a real compare-and-swap in every catalog.

Appending a "lock row" is no lock: PyIceberg retries and rebases appends, so two runs would both
succeed. Creating a table is no reliable lock either: some REST catalogs answer a second create of
the same name with the existing table instead of a conflict. What every catalog checks is a commit's
requirements, and creating a tag carries "this ref must not exist yet" (checked by the catalog, not
the client). So each namespace has a small lock table, ``<meta_namespace>.migration_lock_<namespace>``
(created once, with one empty snapshot), and the lock is its tag ``held``: acquiring creates the tag,
in the same commit as table properties saying who holds it (owner, host, pid, run id, since when);
releasing removes the tag.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import logging
import os
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.table.update.snapshot import ManageSnapshots

from iceberg_ops_provider.core.catalog import ensure_namespace
from iceberg_ops_provider.errors import ConcurrentMigrationError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["LockInfo", "NamespaceLock", "lock_table_name", "process_identity"]

log = logging.getLogger(__name__)

_LOCK_SCHEMA = pa.schema([pa.field("held", pa.bool_())])
_PREFIX = "iceberg-ops.lock."
_LOCK_TABLE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "5",
}
_ACQUIRE_ATTEMPTS = 10


def process_identity() -> tuple[str, str, int]:
    """``(user, host, pid)`` of this process."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return user, socket.gethostname(), os.getpid()


def lock_table_name(namespace: str) -> str:
    """The lock table's name for ``namespace``: readable, and unique even after sanitising."""
    safe = re.sub(r"[^a-z0-9_]", "_", namespace.lower())
    if safe == namespace:
        return f"migration_lock_{safe}"
    return f"migration_lock_{safe}_{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class LockInfo:
    """Who holds a namespace's lock.

    Attributes:
        namespace: The locked namespace.
        owner: The user that took it.
        host: The host it was taken on.
        pid: The process id.
        run_id: The runner invocation that holds it.
        acquired_at: When it was taken (UTC).
    """

    namespace: str
    owner: str
    host: str
    pid: int
    run_id: str
    acquired_at: datetime

    def describe(self) -> str:
        """``run 1a2b... (alice@etl-3, pid 42) since 2026-11-30T10:00:00+00:00 (5 minutes ago)``."""
        age = datetime.now(UTC) - self.acquired_at
        minutes = int(age.total_seconds() // 60)
        ago = f"{minutes} minute(s) ago" if minutes else f"{int(age.total_seconds())} second(s) ago"
        return (
            f"run {self.run_id} ({self.owner}@{self.host}, pid {self.pid}) since {self.acquired_at.isoformat()} ({ago})"
        )

    def to_properties(self) -> dict[str, str]:
        """The table properties that store it."""
        return {
            f"{_PREFIX}namespace": self.namespace,
            f"{_PREFIX}owner": self.owner,
            f"{_PREFIX}host": self.host,
            f"{_PREFIX}pid": str(self.pid),
            f"{_PREFIX}run-id": self.run_id,
            f"{_PREFIX}acquired-at": self.acquired_at.isoformat(),
        }

    @classmethod
    def from_properties(cls, namespace: str, properties: dict[str, str]) -> LockInfo:
        """Read it back from table properties (tolerating a lock written by hand)."""
        acquired = properties.get(f"{_PREFIX}acquired-at")
        return cls(
            namespace=properties.get(f"{_PREFIX}namespace", namespace),
            owner=properties.get(f"{_PREFIX}owner", "unknown"),
            host=properties.get(f"{_PREFIX}host", "unknown"),
            pid=int(properties.get(f"{_PREFIX}pid", "0") or 0),
            run_id=properties.get(f"{_PREFIX}run-id", "unknown"),
            acquired_at=datetime.fromisoformat(acquired) if acquired else datetime.fromtimestamp(0, UTC),
        )

    def to_json(self) -> dict[str, object]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "run_id": self.run_id,
            "acquired_at": self.acquired_at.isoformat(),
        }


class NamespaceLock:
    """The migration lock of one namespace.

    Args:
        catalog: The catalog holding the meta-namespace.
        meta_namespace: Where the lock table lives (the history's meta-namespace).
        namespace: The namespace being migrated.
    """

    TAG = "held"
    """The tag whose existence means "locked"."""

    def __init__(self, catalog: Catalog, meta_namespace: str, namespace: str) -> None:
        self.catalog = catalog
        self.meta_namespace = meta_namespace
        self.namespace = namespace
        self.identifier = (*meta_namespace.split("."), lock_table_name(namespace))

    def _table(self) -> Table | None:
        try:
            return self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def _holder(self, table: Table) -> LockInfo | None:
        if self.TAG not in table.metadata.refs:
            return None
        return LockInfo.from_properties(self.namespace, dict(table.properties))

    def info(self) -> LockInfo | None:
        """Who holds the lock now, or ``None``. Creates nothing."""
        table = self._table()
        return self._holder(table) if table is not None else None

    def _ensure_table(self) -> Table:
        table = self._table()
        if table is None:
            ensure_namespace(self.catalog, self.identifier[:-1])
            with contextlib.suppress(TableAlreadyExistsError):
                self.catalog.create_table(self.identifier, _LOCK_SCHEMA, properties=_LOCK_TABLE_PROPERTIES)
            table = self.catalog.load_table(self.identifier)
        if table.current_snapshot() is None:
            table.append(_LOCK_SCHEMA.empty_table())  # a snapshot for the tag to point at
            table = self.catalog.load_table(self.identifier)
        return table

    def acquire(self, run_id: str) -> LockInfo:
        """Take the lock for ``run_id``.

        Raises:
            ConcurrentMigrationError: Another run holds it; the message says who and since when.
        """
        user, host, pid = process_identity()
        mine = LockInfo(self.namespace, user, host, pid, run_id, datetime.now(UTC))
        table = self._ensure_table()
        for _attempt in range(_ACQUIRE_ATTEMPTS):
            holder = self._holder(table)
            if holder is not None:
                raise self._held_error(holder)
            snapshot = table.current_snapshot()
            assert snapshot is not None
            try:
                with table.transaction() as transaction:
                    transaction.set_properties(mine.to_properties())
                    # The requirement "tag must not exist" travels with this commit and is checked by the catalog.
                    ManageSnapshots(transaction).create_tag(snapshot.snapshot_id, self.TAG).commit()
            except CommitFailedException:
                table = self.catalog.load_table(self.identifier)  # someone committed first: look again
                continue
            log.debug("acquired migration lock %s for run %s", ".".join(self.identifier), run_id)
            return mine
        raise ConcurrentMigrationError(
            self.namespace, f"Could not take the migration lock of {self.namespace!r}: too many concurrent commits."
        )

    def _held_error(self, holder: LockInfo) -> ConcurrentMigrationError:
        return ConcurrentMigrationError(
            self.namespace,
            f"Namespace {self.namespace!r} is being migrated by {holder.describe()}. Nothing was executed. Wait "
            "for that run to finish; if it crashed, release its lock with runner.force_unlock() or "
            "`iceberg-ops unlock`.",
            holder.to_json(),  # type: ignore[arg-type]
        )

    def release(self, run_id: str) -> None:
        """Release the lock if ``run_id`` still holds it (a force-unlocked lock taken by another run is left alone)."""
        table = self._table()
        holder = self._holder(table) if table is not None else None
        if table is None or holder is None:
            log.warning("migration lock of %r was already released (force-unlocked?)", self.namespace)
            return
        if holder.run_id != run_id:
            log.warning("migration lock of %r now belongs to %s; leaving it", self.namespace, holder.describe())
            return
        self._remove_tag(table, run_id)

    def force_unlock(self) -> LockInfo | None:
        """Release the lock whoever holds it; returns who held it, or ``None`` if it was free."""
        table = self._table()
        holder = self._holder(table) if table is not None else None
        if table is not None and holder is not None:
            self._remove_tag(table)
        return holder

    def _remove_tag(self, table: Table, run_id: str | None = None) -> None:
        """Remove the tag; with ``run_id``, only while that run still holds it (checked again after a race)."""
        for _attempt in range(_ACQUIRE_ATTEMPTS):
            try:
                table.manage_snapshots().remove_tag(self.TAG).commit()
                return
            except CommitFailedException:
                table = self.catalog.load_table(self.identifier)
                holder = self._holder(table)
                if holder is None or (run_id is not None and holder.run_id != run_id):
                    return
