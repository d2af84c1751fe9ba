"""A per-namespace migration lock with a lease, built on compare-and-swap commits every catalog checks.

Each operation is one commit to the namespace's lock table that the catalog accepts only if the lock
is still the acquisition the run read (see :mod:`~iceberg_ops_provider.history.lock_table`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table.update import RemovePropertiesUpdate, RemoveSnapshotRefUpdate, SetPropertiesUpdate

from iceberg_ops_provider.core.retrying import lock_races
from iceberg_ops_provider.errors import ConcurrentMigrationError, IntentRecordError
from iceberg_ops_provider.history.intent import INTENT_PROPERTY, Intent
from iceberg_ops_provider.history.lock_holder import (
    ACTIVE_RUNS,
    DEFAULT_STALE_AFTER,
    PROPERTY_PREFIX,
    LockInfo,
    check_stale_after,
    process_identity,
)
from iceberg_ops_provider.history.lock_table import (
    HELD_TAG,
    commit_acquisition,
    commit_if_held,
    ensure_lock_table,
    lock_table_name,
)
from iceberg_ops_provider.history.store import load_meta_table
from iceberg_ops_provider.messages import Hint, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.table.update import TableUpdate

__all__ = [
    "DEFAULT_STALE_AFTER",
    "FORCE_UNLOCK_HINT",
    "check_stale_after",
    "LockInfo",
    "LockLostError",
    "NamespaceLock",
    "lock_table_name",
    "process_identity",
]

log = logging.getLogger(__name__)

FORCE_UNLOCK_HINT = Hint("force_unlock", "runner.force_unlock() or `iceberg-ops unlock`")
"""How a lock whose run is gone is released at once; the command line words it as the command alone."""


class LockLostError(ConcurrentMigrationError):
    """This run's lock was taken over (its lease expired) or force-released while it ran.

    The run stops before its next commit; what it committed so far is known from its intent record
    and receipts, so the run that now holds the lock (or the next one) finishes the bookkeeping.
    """


@dataclass(frozen=True)
class Acquisition:
    """The lock held, the stale holder taken over and why, and the intent record an earlier run left."""

    held: LockInfo
    taken_over: tuple[LockInfo, str] | None = None
    intent: Intent | None = None
    intent_error: IntentRecordError | None = None


class NamespaceLock:
    """The migration lock of ``namespace``; a holder not renewed for ``stale_after`` seconds may be taken over."""

    TAG = HELD_TAG
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

    @staticmethod
    def clock() -> datetime:
        """What "now" (UTC) is when the lock is taken, renewed and judged stale (replaceable on an instance)."""
        return datetime.now(UTC)

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

    def acquire(self, run_id: str, *, context: Mapping[str, str] | None = None) -> LockInfo:
        """Take the lock for ``run_id`` (see :meth:`acquire_run`); returns the lock now held.

        Raises:
            ConcurrentMigrationError: A live run holds it.
        """
        return self.acquire_run(run_id, context=context).held

    def acquire_run(self, run_id: str, *, context: Mapping[str, str] | None = None) -> Acquisition:
        """Take the lock for ``run_id`` (``context``: shown with the holder), taking over from a stale holder.

        Raises:
            ConcurrentMigrationError: A live run holds it; the message says who, since when, and when
                its lease runs out.
        """
        user, host, pid = process_identity()
        try:
            table = ensure_lock_table(self.catalog, self.identifier)
        except CommitFailedException as exc:  # lost a creation race in a catalog that reports it this way
            raise self._busy_error(exc) from exc
        try:
            for attempt in lock_races():
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        table = self.catalog.load_table(self.identifier)  # someone committed first: look again
                    now = self.clock()
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
                    ACTIVE_RUNS.add(run_id)
                    try:
                        snapshot_id = commit_acquisition(table, mine, holder)
                    except BaseException:
                        ACTIVE_RUNS.discard(run_id)  # if the commit did land, this process may take it over at once
                        raise
        except CommitFailedException as exc:
            raise self._busy_error(None) from exc
        held = replace(mine, snapshot_id=snapshot_id)
        if taken_over is not None:
            log.warning(
                "TOOK OVER the migration lock of %r from %s: %s. Its last migration is checked before anything runs.",
                self.namespace,
                taken_over[0].describe(),
                taken_over[1],
            )
        try:
            return Acquisition(held, taken_over, Intent.from_properties(table.properties))
        except IntentRecordError as exc:
            return Acquisition(held, taken_over, None, exc)

    def _held_error(self, holder: LockInfo) -> ConcurrentMigrationError:
        return ConcurrentMigrationError(
            self.namespace,
            message(
                f"Namespace {self.namespace!r} is being migrated by {holder.describe()}. Nothing was executed. Wait "
                f"for that run to finish; its lease runs until {holder.expires_at().isoformat()}, after which a new "
                "run takes the lock over by itself. To release it at once (only if that run is really gone): "
                "{unlock}.",
                unlock=FORCE_UNLOCK_HINT,
            ),
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

    def _guarded(self, held: LockInfo, build: Any, what: str, table: Table | None = None) -> Table:
        """Commit ``build(table)`` updates under "``held`` is still mine" (from ``table`` when just read).

        Raises:
            LockLostError: The lock changed hands (taken over or force-released).
        """
        table = table or self._table()
        try:
            for attempt in lock_races():
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        table = self._table()
                    ref = table.metadata.refs.get(self.TAG) if table is not None else None
                    if table is None or ref is None or ref.snapshot_id != held.snapshot_id:
                        holder = self._holder(table) if table is not None else None
                        now_held = f"it is now held by {holder.describe()}" if holder else "it is no longer held"
                        raise LockLostError(
                            self.namespace,
                            f"Run {held.run_id} lost the migration lock of {self.namespace!r} while it ran "
                            f"({now_held}); could not {what}. It stops before committing anything more; the run "
                            "holding the lock, or the next one, records what it committed.",
                            holder.to_json() if holder else None,  # type: ignore[arg-type]
                        )
                    updates = build(table)
                    if updates:
                        commit_if_held(table, held.snapshot_id, updates)
        except CommitFailedException as exc:
            raise self._busy_error(None) from exc
        return table

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
        expires = self.clock() + timedelta(seconds=held.stale_after)
        self._guarded(
            held,
            lambda _table: [SetPropertiesUpdate(updates={f"{PROPERTY_PREFIX}lease-expires-at": expires.isoformat()})],
            "renew its lease",
        )
        return replace(held, lease_expires_at=expires)

    def write_intent(self, held: LockInfo, intent: Intent) -> None:
        """Record what the run is about to commit (before its first commit), and renew the lease.

        Raises:
            LockLostError: The lock is no longer this run's: nothing is written, and the run must stop.
        """
        expires = self.clock() + timedelta(seconds=held.stale_after)
        updates = {INTENT_PROPERTY: intent.to_json_text(), f"{PROPERTY_PREFIX}lease-expires-at": expires.isoformat()}
        self._guarded(held, lambda _table: [SetPropertiesUpdate(updates=updates)], "record its intent")

    @staticmethod
    def forget_run(run_id: str) -> None:
        """Note that ``run_id`` ended in this process (its lock, if left behind, may be taken over at once)."""
        ACTIVE_RUNS.discard(run_id)

    def release(self, run_id: str, *, clear_intent: bool = False) -> bool:
        """Release the lock if ``run_id`` still holds it (with its intent record, ``clear_intent``); whether it did."""
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
            self._guarded(holder, updates, "release it", table)
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
        try:
            for attempt in lock_races():
                with attempt:
                    table = self._table()
                    holder = self._holder(table) if table is not None else None
                    if table is None or holder is None:
                        return None
                    commit_if_held(table, holder.snapshot_id, [RemoveSnapshotRefUpdate(ref_name=self.TAG)])
        except CommitFailedException as exc:
            raise self._busy_error(None) from exc
        return holder
