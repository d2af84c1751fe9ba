"""A per-namespace migration lock with a lease, built on compare-and-swap commits every catalog checks.

Appending a "lock row" is no lock: PyIceberg retries and rebases appends, so two runs would both
succeed. Creating a table is no reliable lock either: some REST catalogs answer a second create of
the same name with the existing table instead of a conflict. What every catalog checks is a commit's
requirements, and "ref ``held`` must point at snapshot S (or not exist)" is one of them.

So each namespace has a small lock table, ``<meta_namespace>.migration_lock_<namespace>`` (with one
empty base snapshot on ``main``), and every acquisition adds a snapshot of its own (no data, an
empty manifest list) tagged ``held``:

* acquire: add snapshot S, tag it ``held``, write the holder's properties, under the requirement
  "``held`` does not exist";
* take over a stale lock: the same, under "``held`` points at the stale holder's snapshot";
* renew the lease, write the run's intent, release: each under "``held`` points at S".

Because S is unique to one acquisition, none of these can act on a lock that changed hands since it
was read: a release after a forced unlock and a new acquisition fails its requirement and leaves the
new holder alone. The lease (``lease-expires-at``, renewed by :class:`~iceberg_ops_provider.history.lease.LeaseKeeper`)
lets a later run take over from a holder that died without releasing: once the lease has expired, or
at once when the holder ran on this host and its process is gone.

The commits are built by hand and sent with ``Table._do_commit`` (pinned PyIceberg 0.12), because a
PyIceberg transaction keeps only one requirement per type and would drop the ``held`` assertion.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import logging
import math
import os
import re
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, RESTError, TableAlreadyExistsError
from pyiceberg.manifest import write_manifest_list
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    RemovePropertiesUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
)

from iceberg_ops_provider.errors import CatalogUnavailableError, ConcurrentMigrationError, IntentRecordError
from iceberg_ops_provider.history.intent import INTENT_PROPERTY, Intent
from iceberg_ops_provider.history.store import ensure_meta_namespace, load_meta_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableRequirement, TableUpdate

__all__ = [
    "DEFAULT_STALE_AFTER",
    "check_stale_after",
    "LockInfo",
    "LockLostError",
    "NamespaceLock",
    "lock_table_name",
    "process_identity",
]

log = logging.getLogger(__name__)

DEFAULT_STALE_AFTER = 180.0
"""Seconds without a lease renewal after which a lock counts as abandoned and may be taken over."""

_LOCK_SCHEMA = pa.schema([pa.field("held", pa.bool_())])
_PREFIX = "iceberg-ops.lock."
_LOCK_TABLE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "5",
}
_ATTEMPTS = 10
_MAX_TABLE_NAME = 200
_MIN_STALE_AFTER = 1.0

# Runs of this process that hold (or are taking) a lock: a lock naming this process and a run not
# listed here was left by a run that ended without releasing it, and may be taken over at once.
_ACTIVE_RUNS: set[str] = set()


class LockLostError(ConcurrentMigrationError):
    """This run's lock was taken over (its lease expired) or force-released while it ran.

    The run stops before its next commit; what it committed so far is known from its intent record
    and receipts, so the run that now holds the lock (or the next one) finishes the bookkeeping.
    """


def process_identity() -> tuple[str, str, int]:
    """``(user, host, pid)`` of this process."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return user, socket.gethostname(), os.getpid()


def lock_table_name(namespace: str) -> str:
    """The lock table's name for ``namespace``: readable, and unique even after sanitising or shortening."""
    safe = re.sub(r"[^a-z0-9_]", "_", namespace.lower())
    if safe == namespace and len(safe) <= _MAX_TABLE_NAME:
        return f"migration_lock_{safe}"
    return f"migration_lock_{safe[:_MAX_TABLE_NAME]}_{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"


def _process_is_gone(pid: int) -> bool:
    """Whether no process with ``pid`` exists on this host (a live process of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: it exists, under another user
        return False
    return False


def _timestamp(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _seconds(value: str | None) -> float:
    try:
        seconds = float(value) if value is not None else DEFAULT_STALE_AFTER
    except ValueError:
        return DEFAULT_STALE_AFTER
    return seconds if math.isfinite(seconds) and seconds > 0 else DEFAULT_STALE_AFTER


def _pid(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def check_stale_after(value: object) -> float:
    """A valid lease length in seconds.

    Raises:
        ValueError: Not a finite number of at least one second (renewals run every quarter of it).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not _MIN_STALE_AFTER <= value <= 7 * 24 * 3600  # also refuses NaN, and ints too big for a float
    ):
        raise ValueError(
            f"stale_after must be a number of seconds between {_MIN_STALE_AFTER:g} and one week, got {value!r}: "
            "the lock is renewed every quarter of it and taken over after it."
        )
    return float(value)


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
        lease_expires_at: When the lease runs out unless renewed (``None`` for a lock written by an
            older release, which had no lease: it counts from ``acquired_at``).
        stale_after: The lease length the holder uses, in seconds.
        snapshot_id: The lock table snapshot of this acquisition (what release and renewal assert).
        context: Where the holder runs, beyond the process (for example Airflow's dag, run, task and try).
    """

    namespace: str
    owner: str
    host: str
    pid: int
    run_id: str
    acquired_at: datetime
    lease_expires_at: datetime | None = None
    stale_after: float = DEFAULT_STALE_AFTER
    snapshot_id: int | None = field(default=None, compare=False)
    context: Mapping[str, str] = field(default_factory=dict, compare=False)

    def expires_at(self) -> datetime:
        """When the lease runs out."""
        return self.lease_expires_at or self.acquired_at + timedelta(seconds=self.stale_after)

    def describe(self) -> str:
        """``run 1a2b... (alice@etl-3, pid 42) since 2026-11-30T10:00:00+00:00 (5 minute(s) ago)``."""
        age = datetime.now(UTC) - self.acquired_at
        minutes = int(age.total_seconds() // 60)
        ago = f"{minutes} minute(s) ago" if minutes else f"{int(age.total_seconds())} second(s) ago"
        where = "".join(f", {key} {value}" for key, value in self.context.items())
        return (
            f"run {self.run_id} ({self.owner}@{self.host}, pid {self.pid}{where}) since "
            f"{self.acquired_at.isoformat()} ({ago})"
        )

    def to_properties(self) -> dict[str, str]:
        """The table properties that store it."""
        properties = {
            f"{_PREFIX}namespace": self.namespace,
            f"{_PREFIX}owner": self.owner,
            f"{_PREFIX}host": self.host,
            f"{_PREFIX}pid": str(self.pid),
            f"{_PREFIX}run-id": self.run_id,
            f"{_PREFIX}acquired-at": self.acquired_at.isoformat(),
            f"{_PREFIX}lease-expires-at": self.expires_at().isoformat(),
            f"{_PREFIX}stale-after": repr(float(self.stale_after)),
            f"{_PREFIX}context": json.dumps(dict(self.context), sort_keys=True),
        }
        return properties

    @classmethod
    def from_properties(cls, namespace: str, properties: Mapping[str, str], snapshot_id: int | None = None) -> LockInfo:
        """Read it back from table properties (tolerating a lock written by hand or by an older release)."""
        acquired = _timestamp(properties.get(f"{_PREFIX}acquired-at")) or datetime.fromtimestamp(0, UTC)
        stale_after = _seconds(properties.get(f"{_PREFIX}stale-after"))
        try:
            context = json.loads(properties.get(f"{_PREFIX}context", "{}"))
        except ValueError:
            context = {}
        return cls(
            namespace=properties.get(f"{_PREFIX}namespace", namespace),
            owner=properties.get(f"{_PREFIX}owner", "unknown"),
            host=properties.get(f"{_PREFIX}host", "unknown"),
            pid=_pid(properties.get(f"{_PREFIX}pid")),
            run_id=properties.get(f"{_PREFIX}run-id", "unknown"),
            acquired_at=acquired,
            lease_expires_at=_timestamp(properties.get(f"{_PREFIX}lease-expires-at")),
            stale_after=stale_after,
            snapshot_id=snapshot_id,
            context={str(k): str(v) for k, v in context.items()} if isinstance(context, dict) else {},
        )

    def stale_reason(self, now: datetime | None = None) -> str | None:
        """Why this lock may be taken over (lease expired, holder process gone), or ``None`` if it is live."""
        now = now or datetime.now(UTC)
        if now >= self.expires_at():
            return f"its lease expired at {self.expires_at().isoformat()} (no renewal for {self.stale_after:g} s)"
        if self.host == socket.gethostname():
            if self.pid != os.getpid() and _process_is_gone(self.pid):
                return f"its process (pid {self.pid}) no longer runs on this host"
            if self.pid == os.getpid() and self.run_id not in _ACTIVE_RUNS:
                return "its run, in this very process, ended without releasing it"
        return None

    def to_json(self) -> dict[str, object]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "run_id": self.run_id,
            "acquired_at": self.acquired_at.isoformat(),
            "lease_expires_at": self.expires_at().isoformat(),
            "stale_after": self.stale_after,
            "context": dict(self.context),
        }


@dataclass(frozen=True)
class Acquisition:
    """The outcome of :meth:`NamespaceLock.acquire`.

    Attributes:
        held: This run's lock.
        taken_over: The stale holder this run replaced, if any, and why it was stale.
        intent: The intent record left by an earlier run that did not clear it (it crashed, or
            stopped on a partial migration); the runner resolves it before doing anything else.
        intent_error: Why such a record could not be read, when it could not.
    """

    held: LockInfo
    taken_over: tuple[LockInfo, str] | None = None
    intent: Intent | None = None
    intent_error: IntentRecordError | None = None


class NamespaceLock:
    """The migration lock of one namespace.

    Args:
        catalog: The catalog holding the meta-namespace.
        meta_namespace: Where the lock table lives (the history's meta-namespace).
        namespace: The namespace being migrated.
        stale_after: Lease length in seconds: a holder that has not renewed for this long may be taken over.
    """

    TAG = "held"
    """The tag whose existence means "locked"."""

    def __init__(
        self, catalog: Catalog, meta_namespace: str, namespace: str, *, stale_after: float = DEFAULT_STALE_AFTER
    ) -> None:
        stale_after = check_stale_after(stale_after)
        self.catalog = catalog
        self.meta_namespace = meta_namespace
        self.namespace = namespace
        self.stale_after = float(stale_after)
        self.identifier = (*meta_namespace.split("."), lock_table_name(namespace))

    # -- reading --------------------------------------------------------------------------------

    def _table(self) -> Table | None:
        return load_meta_table(self.catalog, self.identifier)

    def _holder(self, table: Table) -> LockInfo | None:
        ref = table.metadata.refs.get(self.TAG)
        if ref is None:
            return None
        return LockInfo.from_properties(self.namespace, dict(table.properties), ref.snapshot_id)

    def info(self) -> LockInfo | None:
        """Who holds the lock now, or ``None``. Creates nothing."""
        return self.read()[0]

    def intent(self) -> Intent | None:
        """The intent record left in the lock table, if any. Creates nothing."""
        return self.read()[1]

    def read(self) -> tuple[LockInfo | None, Intent | None]:
        """Who holds the lock and the intent record, from one read of the lock table. Creates nothing.

        Raises:
            IntentRecordError: The intent record cannot be read.
        """
        table = self._table()
        if table is None:
            return None, None
        return self._holder(table), Intent.from_properties(table.properties)

    # -- acquiring ------------------------------------------------------------------------------

    def _ensure_table(self) -> Table:
        table = self._table()
        if table is None:
            ensure_meta_namespace(self.catalog, self.identifier)
            with contextlib.suppress(TableAlreadyExistsError, CommitFailedException):
                self.catalog.create_table(self.identifier, _LOCK_SCHEMA, properties=_LOCK_TABLE_PROPERTIES)
            table = self.catalog.load_table(self.identifier)
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
            table = self.catalog.load_table(self.identifier)
        return table

    def acquire(self, run_id: str, *, context: Mapping[str, str] | None = None) -> LockInfo:
        """Take the lock for ``run_id`` (see :meth:`acquire_run`); returns the lock now held.

        Raises:
            ConcurrentMigrationError: A live run holds it.
        """
        return self.acquire_run(run_id, context=context).held

    def acquire_run(self, run_id: str, *, context: Mapping[str, str] | None = None) -> Acquisition:
        """Take the lock for ``run_id``, taking over from a holder whose lease expired or whose process is gone.

        Args:
            run_id: This run's id.
            context: Where the run comes from (shown with the holder), e.g. Airflow's dag and task ids.

        Raises:
            ConcurrentMigrationError: A live run holds it; the message says who, since when, and when
                its lease runs out.
        """
        user, host, pid = process_identity()
        try:
            table = self._ensure_table()
        except CommitFailedException as exc:  # lost a creation race in a catalog that reports it this way
            raise self._busy_error(exc) from exc
        for _attempt in range(_ATTEMPTS):
            now = datetime.now(UTC)
            mine = LockInfo(
                self.namespace,
                user,
                host,
                pid,
                run_id,
                now,
                now + timedelta(seconds=self.stale_after),
                self.stale_after,
                context=dict(context or {}),
            )
            holder = self._holder(table)
            taken_over: tuple[LockInfo, str] | None = None
            if holder is not None:
                reason = holder.stale_reason(now)
                if reason is None:
                    raise self._held_error(holder)
                taken_over = (holder, reason)
            _ACTIVE_RUNS.add(run_id)
            try:
                snapshot_id = self._commit_acquisition(table, mine, holder)
            except CommitFailedException:
                _ACTIVE_RUNS.discard(run_id)
                table = self.catalog.load_table(self.identifier)  # someone committed first: look again
                continue
            except BaseException:
                _ACTIVE_RUNS.discard(run_id)  # if the commit did land, this process may take it over at once
                raise
            held = replace(mine, snapshot_id=snapshot_id)
            if taken_over is not None:
                log.warning(
                    "TOOK OVER the migration lock of %r from %s: %s. Its last migration is checked before "
                    "anything runs.",
                    self.namespace,
                    taken_over[0].describe(),
                    taken_over[1],
                )
            try:
                return Acquisition(held, taken_over, Intent.from_properties(table.properties))
            except IntentRecordError as exc:
                return Acquisition(held, taken_over, None, exc)
        raise self._busy_error(None)

    def _commit_acquisition(self, table: Table, mine: LockInfo, holder: LockInfo | None) -> int:
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
            summary=Summary(Operation.APPEND, **{f"{_PREFIX}run-id": mine.run_id}),
            schema_id=metadata.current_schema_id,
        )
        referenced = {ref.snapshot_id for name, ref in metadata.refs.items() if name != self.TAG}
        obsolete = [s.snapshot_id for s in metadata.snapshots if s.snapshot_id not in referenced]
        updates: list[TableUpdate] = [
            AddSnapshotUpdate(snapshot=snapshot),
            SetSnapshotRefUpdate(ref_name=self.TAG, type=SnapshotRefType.TAG, snapshot_id=snapshot_id),
            SetPropertiesUpdate(updates=mine.to_properties()),
        ]
        if obsolete:
            updates.append(RemoveSnapshotsUpdate(snapshot_ids=obsolete))
        requirement = AssertRefSnapshotId(ref=self.TAG, snapshot_id=holder.snapshot_id if holder else None)
        try:
            try:
                self._commit(table, updates, [requirement])
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
        self._delete_manifest_lists(table, [s for s in metadata.snapshots if s.snapshot_id in set(obsolete)])
        return snapshot_id

    @staticmethod
    def _delete_manifest_lists(table: Table, snapshots: list[Snapshot]) -> None:
        """Delete the manifest lists of dropped lock snapshots (ours only; best effort)."""
        for snapshot in snapshots:
            if "/metadata/lock-" in snapshot.manifest_list:
                with contextlib.suppress(Exception):
                    table.io.delete(snapshot.manifest_list)

    @staticmethod
    def _commit(table: Table, updates: list[TableUpdate], requirements: list[TableRequirement]) -> None:
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

    def _held_error(self, holder: LockInfo) -> ConcurrentMigrationError:
        return ConcurrentMigrationError(
            self.namespace,
            f"Namespace {self.namespace!r} is being migrated by {holder.describe()}. Nothing was executed. Wait "
            f"for that run to finish; its lease runs until {holder.expires_at().isoformat()}, after which a new "
            "run takes the lock over by itself. To release it at once (only if that run is really gone): "
            "runner.force_unlock() or `iceberg-ops unlock`.",
            holder.to_json(),  # type: ignore[arg-type]
        )

    def _busy_error(self, cause: BaseException | None) -> ConcurrentMigrationError:
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return ConcurrentMigrationError(
            self.namespace,
            f"Could not take the migration lock of {self.namespace!r}: other runs kept committing to the "
            f"lock table at the same time{detail}. Nothing was executed; run again.",
        )

    # -- while holding --------------------------------------------------------------------------

    def _guarded(self, held: LockInfo, build: Any, what: str) -> Table:
        """Commit ``build(table)`` updates under "``held`` is still mine", retrying unrelated conflicts.

        Raises:
            LockLostError: The lock changed hands (taken over or force-released).
        """
        table = self._table()
        for _attempt in range(_ATTEMPTS):
            if (
                table is None
                or (table.metadata.refs.get(self.TAG) is None)
                or (table.metadata.refs[self.TAG].snapshot_id != held.snapshot_id)
            ):
                holder = self._holder(table) if table is not None else None
                now_held = f"it is now held by {holder.describe()}" if holder else "it is no longer held"
                raise LockLostError(
                    self.namespace,
                    f"Run {held.run_id} lost the migration lock of {self.namespace!r} while it ran ({now_held}); "
                    f"could not {what}. It stops before committing anything more; the run holding the lock, "
                    "or the next one, records what it committed.",
                    holder.to_json() if holder else None,  # type: ignore[arg-type]
                )
            updates = build(table)
            if not updates:
                return table
            try:
                self._commit(table, updates, [AssertRefSnapshotId(ref=self.TAG, snapshot_id=held.snapshot_id)])
                return table
            except CommitFailedException:
                table = self._table()
        raise self._busy_error(None)

    def check_held(self, held: LockInfo) -> None:
        """Make sure ``held`` is still the lock, reading the catalog (not the lease thread's last word).

        Raises:
            LockLostError: The lock changed hands or was released.
        """
        self._guarded(held, lambda _table: [], "commit")

    def renew(self, held: LockInfo) -> LockInfo:
        """Extend the lease of ``held`` by :attr:`stale_after` from now.

        Raises:
            LockLostError: The lock is no longer this run's.
        """
        expires = datetime.now(UTC) + timedelta(seconds=held.stale_after)
        self._guarded(
            held,
            lambda _table: [SetPropertiesUpdate(updates={f"{_PREFIX}lease-expires-at": expires.isoformat()})],
            "renew its lease",
        )
        return replace(held, lease_expires_at=expires)

    def write_intent(self, held: LockInfo, intent: Intent) -> None:
        """Record what the run is about to commit (before its first commit), and renew the lease.

        Raises:
            LockLostError: The lock is no longer this run's: nothing is written, and the run must stop.
        """
        expires = datetime.now(UTC) + timedelta(seconds=held.stale_after)
        updates = {INTENT_PROPERTY: intent.to_json_text(), f"{_PREFIX}lease-expires-at": expires.isoformat()}
        self._guarded(held, lambda _table: [SetPropertiesUpdate(updates=updates)], "record its intent")

    @staticmethod
    def forget_run(run_id: str) -> None:
        """Note that ``run_id`` ended in this process (its lock, if left behind, may be taken over at once)."""
        _ACTIVE_RUNS.discard(run_id)

    def release(self, run_id: str, *, clear_intent: bool = False) -> bool:
        """Release the lock if ``run_id`` still holds it; a lock that changed hands is left alone.

        Args:
            run_id: The run that took it.
            clear_intent: Also remove the run's intent record in the same commit (its outcome is recorded).

        Returns:
            Whether this call released it.
        """
        table = self._table()
        holder = self._holder(table) if table is not None else None
        if table is None or holder is None:
            log.warning("migration lock of %r was already released (force-unlocked?)", self.namespace)
            return False
        if holder.run_id != run_id:
            log.warning("migration lock of %r now belongs to %s; leaving it", self.namespace, holder.describe())
            return False

        def updates(current: Table) -> list[TableUpdate]:
            changes: list[TableUpdate] = [RemoveSnapshotRefUpdate(ref_name=self.TAG)]
            if clear_intent and INTENT_PROPERTY in current.properties:
                changes.append(RemovePropertiesUpdate(removals=[INTENT_PROPERTY]))
            return changes

        try:
            self._guarded(holder, updates, "release it")
        except LockLostError as exc:
            log.warning("did not release the migration lock of %r: %s", self.namespace, exc)
            return False
        return True

    def clear_intent(self, held: LockInfo) -> None:
        """Remove the intent record while holding the lock (after a person resolved it, or it was recorded)."""
        self._guarded(
            held,
            lambda table: (
                [RemovePropertiesUpdate(removals=[INTENT_PROPERTY])] if INTENT_PROPERTY in table.properties else []
            ),
            "clear the intent record",
        )

    def force_unlock(self) -> LockInfo | None:
        """Release the lock whoever holds it; returns who held it, or ``None`` if it was free.

        The intent record stays: the next run still checks what the released run committed.
        """
        for _attempt in range(_ATTEMPTS):
            table = self._table()
            holder = self._holder(table) if table is not None else None
            if table is None or holder is None:
                return None
            try:
                self._commit(
                    table,
                    [RemoveSnapshotRefUpdate(ref_name=self.TAG)],
                    [AssertRefSnapshotId(ref=self.TAG, snapshot_id=holder.snapshot_id)],
                )
                return holder
            except CommitFailedException:
                continue
        raise self._busy_error(None)
