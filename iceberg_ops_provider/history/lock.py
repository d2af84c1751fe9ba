"""A per-namespace migration lock that is a real compare-and-swap in every catalog.

Appending a "lock row" is no lock: PyIceberg retries and rebases appends, so two runs would both
succeed. Creating a table is atomic everywhere (SQL catalogs insert under a unique key; REST, Glue
and Hive refuse an existing name), so the lock *is* a small table,
``<meta_namespace>.migration_lock_<namespace>``, created to acquire and dropped to release. Its table
properties record who holds it: owner, host, pid, run id and since when.
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
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

from iceberg_ops_provider.errors import ConcurrentMigrationError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["LockInfo", "NamespaceLock", "lock_table_name", "process_identity"]

log = logging.getLogger(__name__)

_LOCK_SCHEMA = pa.schema([pa.field("held", pa.bool_())])
_PREFIX = "iceberg-ops.lock."


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

    def __init__(self, catalog: Catalog, meta_namespace: str, namespace: str) -> None:
        self.catalog = catalog
        self.meta_namespace = meta_namespace
        self.namespace = namespace
        self.identifier = (*meta_namespace.split("."), lock_table_name(namespace))

    def info(self) -> LockInfo | None:
        """Who holds the lock now, or ``None``. Creates nothing."""
        try:
            table = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None
        return LockInfo.from_properties(self.namespace, dict(table.properties))

    def acquire(self, run_id: str) -> LockInfo:
        """Take the lock for ``run_id``.

        Raises:
            ConcurrentMigrationError: Another run holds it; the message says who and since when.
        """
        user, host, pid = process_identity()
        mine = LockInfo(self.namespace, user, host, pid, run_id, datetime.now(UTC))
        self.catalog.create_namespace_if_not_exists(self.identifier[:-1])
        try:
            self.catalog.create_table(self.identifier, _LOCK_SCHEMA, properties=mine.to_properties())
        except TableAlreadyExistsError:
            holder = self.info()
            who = holder.describe() if holder else "another run (it released the lock just now; try again)"
            raise ConcurrentMigrationError(
                self.namespace,
                f"Namespace {self.namespace!r} is being migrated by {who}. Nothing was executed. Wait for that "
                "run to finish; if it crashed, release its lock with runner.force_unlock() or "
                "`iceberg-ops unlock`.",
                holder.to_json() if holder else None,  # type: ignore[arg-type]
            ) from None
        log.debug("acquired migration lock %s for run %s", ".".join(self.identifier), run_id)
        return mine

    def release(self, run_id: str) -> None:
        """Release the lock if ``run_id`` still holds it (a force-unlocked lock taken by another run is left alone)."""
        holder = self.info()
        if holder is None:
            log.warning("migration lock of %r was already released (force-unlocked?)", self.namespace)
            return
        if holder.run_id != run_id:
            log.warning("migration lock of %r now belongs to %s; leaving it", self.namespace, holder.describe())
            return
        self._drop()

    def force_unlock(self) -> LockInfo | None:
        """Release the lock whoever holds it; returns who held it, or ``None`` if it was free."""
        holder = self.info()
        if holder is not None:
            self._drop()
        return holder

    def _drop(self) -> None:
        with contextlib.suppress(NoSuchTableError):
            self.catalog.purge_table(self.identifier)
