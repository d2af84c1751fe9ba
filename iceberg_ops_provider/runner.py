"""MigrationRunner: apply, roll back, stamp, plan and report migrations for one namespace.

A run that changes anything (``upgrade``, ``downgrade``, ``stamp``) first takes the namespace's lock
(:class:`~iceberg_ops_provider.history.NamespaceLock`, kept alive by a lease), then settles whatever
an earlier, interrupted run left (its intent record, checked against the receipts in the tables),
reads the history afresh, checks it against the files, and executes one migration at a time: the
migration's intent is recorded, its staged changes are committed (one commit per table, each with a
receipt), then its history row is written. A failure of any kind (an exception, a timeout, an
interrupt, ``sys.exit``) is recorded and stops the run; the lock is released in every case, and a
run killed outright leaves a lock whose lease runs out, so the next run takes over.

``plan``, ``status``, ``history`` and ``current`` only read, and never create anything.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    catalog_endpoint,
    catalog_errors,
    check_timeout,
)
from iceberg_ops_provider.discovery import MigrationScript, discover, importable, migrations_folder
from iceberg_ops_provider.errors import (
    CatalogConfigError,
    ConcurrentMigrationError,
    DryRunLimit,
    IrreversibleMigrationError,
    MigrationError,
    MigrationFailedError,
    MigrationNotRecordedError,
    PartialMigrationError,
)
from iceberg_ops_provider.history.events import EventLog, MigrationEvent
from iceberg_ops_provider.history.intent import Assessment, Intent, IntentAction, assess, receipt
from iceberg_ops_provider.history.lease import LeaseKeeper
from iceberg_ops_provider.history.lock import (
    DEFAULT_STALE_AFTER,
    Acquisition,
    LockInfo,
    LockLostError,
    NamespaceLock,
    process_identity,
)
from iceberg_ops_provider.history.records import HistoryRow, Operation, Status
from iceberg_ops_provider.history.store import HistoryStore, default_meta_namespace
from iceberg_ops_provider.migration.context import MigrationContext
from iceberg_ops_provider.namespaces import check_runner_namespaces
from iceberg_ops_provider.planning import (
    Direction,
    NamespaceState,
    PlanStep,
    check_integrity,
    classify,
    downgrade_steps,
    infer_direction,
    stamp_changes,
    upgrade_steps,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["MigrationResult", "MigrationRunner", "NamespaceStatus", "RepairReport", "RunReport"]

log = logging.getLogger(__name__)

_F = TypeVar("_F", bound=Callable[..., Any])


def _catalog_call(method: _F) -> _F:
    """Report a catalog that times out or cannot be reached as :class:`CatalogUnavailableError` naming it."""

    @functools.wraps(method)
    def wrapper(self: MigrationRunner, *args: Any, **kwargs: Any) -> Any:
        with catalog_errors(self.endpoint, self.catalog_timeout):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class MigrationResult:
    """What happened to one migration in a run.

    Attributes:
        version: The migration's version.
        description: Its description.
        status: The status recorded: ``applied``, ``rolled_back`` or ``failed``.
        duration: Seconds its ``upgrade()``/``downgrade()`` and commits took (0 for a stamp).
        direction: ``upgrade``, ``downgrade`` or ``stamp``.
    """

    version: str
    description: str
    status: Status
    duration: float
    direction: Operation

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (for XCom and ``--json``)."""
        return {
            "version": self.version,
            "description": self.description,
            "status": self.status,
            "duration": round(self.duration, 3),
            "direction": self.direction,
        }


@dataclass(frozen=True)
class NamespaceStatus:
    """The state of one namespace, as ``status()`` reports it.

    Attributes:
        namespace: The namespace.
        current: The highest applied version, or ``None``.
        applied: Applied versions with their history rows, ascending.
        pending: Migrations not applied yet, in the order ``upgrade`` would run them.
        failed: Versions whose last attempt failed (they are pending too).
        changed: Applied versions whose file changed.
        missing: Applied versions whose file is gone.
        out_of_order: Pending versions numbered below ``current``.
        lock: Who holds the namespace's lock, if anyone.
        interrupted: The intent of a run that stopped mid-migration and is not settled yet (the next
            run settles it by itself unless it was partial), else ``None``.
        interrupted_outcome: What that run committed: ``all`` or ``none`` (the next run settles it)
            or ``partial`` (a person settles it with ``stamp``).
    """

    namespace: str
    current: str | None
    applied: list[HistoryRow]
    pending: list[PlanStep]
    failed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    lock: LockInfo | None = None
    interrupted: Intent | None = None
    interrupted_outcome: str | None = None

    @property
    def is_clean(self) -> bool:
        """Nothing pending, nothing odd, no interrupted run."""
        return not (self.pending or self.changed or self.missing or self.interrupted)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "current": self.current,
            "applied": [row.to_json() for row in self.applied],
            "pending": [step.to_json() for step in self.pending],
            "failed": self.failed,
            "changed": self.changed,
            "missing": self.missing,
            "out_of_order": self.out_of_order,
            "lock": self.lock.to_json() if self.lock else None,
            "interrupted": self.interrupted.to_json() if self.interrupted else None,
            "interrupted_outcome": self.interrupted_outcome,
        }


@dataclass(frozen=True)
class RunReport:
    """The versions a changing run (``upgrade``, ``downgrade``, ``stamp``) saw, read under its lock.

    Attributes:
        run_id: The run.
        version_before: The current version when the run took the lock (after settling an interrupted run).
        version_after: The current version when it finished (``None`` also at base).
    """

    run_id: str
    version_before: str | None
    version_after: str | None


@dataclass(frozen=True)
class RepairReport:
    """What ``repair`` changed (or, with ``dry_run``, would change).

    Attributes:
        namespace: The namespace.
        rechecked: Applied versions whose changed file's checksum is recorded anew.
        modernised: Applied versions whose unchanged file had a checksum in the older byte format.
        cleared: Versions whose failed attempts are cleared (they stay pending).
        dry_run: Whether nothing was written.
    """

    namespace: str
    rechecked: list[str]
    modernised: list[str]
    cleared: list[str]
    dry_run: bool = False

    @property
    def changes(self) -> bool:
        """Whether there is anything to repair."""
        return bool(self.rechecked or self.modernised or self.cleared)

    def describe(self) -> str:
        """One line: what is (or would be) repaired."""
        parts = []
        if self.rechecked:
            parts.append(f"re-record the checksums of changed files {', '.join(self.rechecked)}")
        if self.modernised:
            parts.append(f"update the checksum format of {', '.join(self.modernised)}")
        if self.cleared:
            parts.append(f"clear the failed attempts of {', '.join(self.cleared)}")
        return "; ".join(parts) or "nothing to repair"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "rechecked": self.rechecked,
            "modernised": self.modernised,
            "cleared": self.cleared,
            "dry_run": self.dry_run,
        }


class MigrationRunner:
    """Run the migrations of one namespace against one catalog.

    Args:
        catalog: Any PyIceberg catalog.
        namespace: The namespace to migrate (``"sales"``; nested as ``"a.b"``).
        migrations_dir: The folder of ``NNNN_slug.py`` files; ``migrations_dir/<namespace>/`` is used
            instead when it exists.
        meta_namespace: Where the history table and the locks live; by default ``_iceberg_ops``, or
            ``iceberg_ops`` on S3 Tables (which refuses names starting with ``_``).
        keep_history_snapshots: Snapshots of the history table kept for time travel.
        on_event: Called with a one-line message at every step (progress for CLIs and task logs);
            every message is also logged at INFO on ``iceberg_ops_provider.runner``.
        stale_after: Lease length of the namespace lock, in seconds. A run renews its lease every
            quarter of this while it works; a lock not renewed for this long (its run was killed) is
            taken over by the next run, as is at once a lock whose process is gone from this host.
        lock_context: Where runs come from, stored with the lock and shown to whoever finds it held
            (the Airflow operator passes dag, run, task and try).
        catalog_timeout: Seconds every request to a REST catalog may take before the run stops with
            :class:`~iceberg_ops_provider.errors.CatalogUnavailableError` naming the endpoint
            (``None`` keeps the catalog as configured). SQL catalogs on SQLite wait at most 5 s for
            a database lock.
    """

    def __init__(
        self,
        catalog: Catalog,
        namespace: str,
        migrations_dir: str | Path = "migrations",
        meta_namespace: str | None = None,
        *,
        keep_history_snapshots: int = 20,
        on_event: Callable[[str], None] | None = None,
        stale_after: float = DEFAULT_STALE_AFTER,
        lock_context: Mapping[str, str] | None = None,
        catalog_timeout: float | None = DEFAULT_CATALOG_TIMEOUT,
    ) -> None:
        meta_namespace = meta_namespace if meta_namespace is not None else default_meta_namespace(catalog)
        check_runner_namespaces(catalog, namespace, meta_namespace)
        self.catalog = catalog
        if catalog_timeout is not None:
            catalog_timeout = _check_catalog_timeout(catalog_timeout)
        self.catalog_timeout = catalog_timeout
        if catalog_timeout is not None:
            bound_catalog_requests(catalog, catalog_timeout)
        self.endpoint = catalog_endpoint(catalog)
        self.namespace = namespace
        self.migrations_dir = Path(migrations_dir)
        self.meta_namespace = meta_namespace
        self.history_store = HistoryStore(catalog, meta_namespace, keep_snapshots=keep_history_snapshots)
        self.lock = NamespaceLock(catalog, meta_namespace, namespace, stale_after=stale_after)
        self.event_log = EventLog(catalog, meta_namespace)
        self.lock_context = dict(lock_context or {})
        self._on_event = on_event
        self._active: _Session | None = None
        self.last_run: RunReport | None = None
        """What the last changing run of this runner saw (its version before and after), read under its lock."""

    # -- reading --------------------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        """The folder the migrations of this namespace are read from."""
        return migrations_folder(self.migrations_dir, self.namespace)

    def scripts(self) -> list[MigrationScript]:
        """The migration files of this namespace, loaded and ordered.

        Raises:
            MigrationDiscoveryError: A bad file; nothing in the catalog was touched.
        """
        return discover(self.migrations_dir, self.namespace)

    @_catalog_call
    def state(self) -> NamespaceState:
        """Files compared with history (no lock, no writes)."""
        return classify(self.scripts(), self.history_store.rows(self.namespace))

    @_catalog_call
    def current(self) -> str | None:
        """The current version (highest applied), or ``None``."""
        return classify([], self.history_store.rows(self.namespace)).current

    @_catalog_call
    def history(self) -> list[HistoryRow]:
        """The history rows of this namespace, oldest first."""
        return self.history_store.rows(self.namespace)

    @_catalog_call
    def events(self) -> list[MigrationEvent]:
        """Lock takeovers, crash recoveries and forced unlocks of this namespace, oldest first."""
        return self.event_log.events(self.namespace)

    @_catalog_call
    def interrupted(self) -> Intent | None:
        """The intent of a run that stopped mid-migration and is not settled yet, else ``None``."""
        intent = self.lock.intent()
        if intent is None or _settled(classify([], self.history_store.rows(self.namespace)), intent):
            return None
        holder = self.lock.info()
        if holder is not None and holder.run_id == intent.run_id and holder.stale_reason() is None:
            return None  # its run is still going
        return intent

    @_catalog_call
    def interrupted_outcome(self, intent: Intent) -> str:
        """What an interrupted run committed, read from the tables: ``all``, ``none`` or ``partial``."""
        return assess(self.catalog, intent).outcome

    @_catalog_call
    def status(self) -> NamespaceStatus:
        """Current version, applied and pending migrations, and anything odd."""
        state = self.state()
        interrupted = self.interrupted()
        return NamespaceStatus(
            namespace=self.namespace,
            current=state.current,
            applied=[state.rows[v] for v in state.applied],
            pending=[PlanStep("upgrade", v, state.description(v)) for v in state.pending],
            failed=list(state.failed),
            changed=list(state.changed),
            missing=list(state.missing),
            out_of_order=list(state.out_of_order),
            lock=self.lock.info(),
            interrupted=interrupted,
            interrupted_outcome=self.interrupted_outcome(interrupted) if interrupted is not None else None,
        )

    @_catalog_call
    def plan(
        self, target: str = "head", direction: Direction | None = None, *, inspect: bool = False
    ) -> list[PlanStep]:
        """The ordered steps a run to ``target`` would take; writes nothing.

        Args:
            target: ``head``, ``base``, a version, ``+N`` or ``-N``.
            direction: ``upgrade`` or ``downgrade``; inferred from the target when omitted.
            inspect: Also run each step's body against a context that stages but never commits, to
                list what it asks for and its risk (a drop of a table or column holding rows is
                ``destructive``). Each step is inspected against the tables as they are now.
        """
        if direction not in (None, "upgrade", "downgrade"):
            raise ValueError(f"direction must be 'upgrade' or 'downgrade', got {direction!r}.")
        state = self.state()
        direction = direction or infer_direction(state, target)
        steps = upgrade_steps(state, target) if direction == "upgrade" else downgrade_steps(state, target)
        return [self._inspect(step) for step in steps] if inspect else steps

    def _inspect(self, step: PlanStep) -> PlanStep:
        """``step`` with the operations its body asks for and their highest risk, from a dry run."""
        if step.script is None:
            return replace(step, risk="unknown", operations=({"operation": "the file is missing", "risk": "unknown"},))
        context = MigrationContext(self.catalog, self.namespace, meta_namespace=self.meta_namespace, dry_run=True)
        stopped: str | None = None
        try:
            with importable(self.folder):
                if step.direction == "upgrade":
                    step.script.migration.upgrade(context)
                else:
                    step.script.migration.downgrade(context)
        except DryRunLimit as exc:
            stopped = f"unknown from here: {exc}"
        except IrreversibleMigrationError as exc:
            stopped = f"irreversible: {exc}"
        except Exception as exc:
            stopped = f"unknown: a dry run of its body raised {type(exc).__name__}: {exc}"
        operations = list(context.operations)
        if stopped is not None:
            operations.append({"operation": stopped, "risk": "unknown"})
            risk = "unknown"
        else:
            order = {"safe": 0, "review": 1, "destructive": 2}
            risk = max((op["risk"] for op in operations), key=lambda r: order.get(r, 1), default="safe")
        return replace(step, operations=tuple(operations), risk=risk)

    # -- changing -------------------------------------------------------------------------------

    @_catalog_call
    def upgrade(
        self,
        target: str = "head",
        *,
        allow_changed: bool = False,
        allow_missing: bool = False,
        allow_out_of_order: bool = False,
    ) -> list[MigrationResult]:
        """Apply pending migrations up to ``target`` (``head``, a version, ``+N``).

        Returns:
            One result per applied migration, in order.

        Raises:
            ConcurrentMigrationError: Another run holds the namespace's lock (nothing executed).
            MigrationIntegrityError: Changed, missing or out-of-order files, unless allowed.
            MigrationFailedError: A migration raised; it is recorded ``failed`` and a later run retries it.
            MigrationDiscoveryError: A bad migration file (nothing touched).
        """
        scripts = self.scripts()

        def run(state: NamespaceState, session: _Session) -> list[MigrationResult]:
            check_integrity(
                state,
                self.namespace,
                allow_changed=allow_changed,
                allow_missing=allow_missing,
                allow_out_of_order=allow_out_of_order,
            )
            steps = upgrade_steps(state, target)
            self._event(f"{self.namespace}: {len(steps)} migration(s) to apply (current: {state.current or 'base'})")
            return [session.execute(step, index, len(steps)) for index, step in enumerate(steps, 1)]

        return self._locked(scripts, run)

    @_catalog_call
    def downgrade(self, target: str, *, allow_changed: bool = False) -> list[MigrationResult]:
        """Roll back applied migrations down to ``target`` (``base``, a version that stays applied, ``-N``).

        Raises:
            IrreversibleMigrationError: A ``downgrade()`` said it cannot undo its upgrade; that version
                stays applied and the run stops there.
            MigrationFailedError: A ``downgrade()`` raised; the version stays applied.
            MigrationIntegrityError: A migration to roll back has no file, or its file changed (unless allowed).
            ConcurrentMigrationError: Another run holds the lock.
        """
        scripts = self.scripts()

        def run(state: NamespaceState, session: _Session) -> list[MigrationResult]:
            steps = downgrade_steps(state, target)
            involved = {step.version for step in steps}
            check_integrity(
                _restricted(state, involved), self.namespace, allow_changed=allow_changed, allow_out_of_order=True
            )
            self._event(
                f"{self.namespace}: {len(steps)} migration(s) to roll back (current: {state.current or 'base'})"
            )
            return [session.execute(step, index, len(steps)) for index, step in enumerate(steps, 1)]

        return self._locked(scripts, run)

    @_catalog_call
    def stamp(self, target: str) -> list[MigrationResult]:
        """Record the namespace as migrated to ``target`` without running anything.

        Files up to ``target`` are recorded ``applied``; applied versions above it ``rolled_back``.
        All in one history commit. A stamp is also how a person settles a partly committed
        migration (:class:`~iceberg_ops_provider.errors.PartialMigrationError`): it clears that record.
        """
        scripts = self.scripts()

        def run(state: NamespaceState, session: _Session) -> list[MigrationResult]:
            to_apply, to_roll_back = stamp_changes(state, target)
            rows = [session.row(v, "applied", "stamp") for v in to_apply]
            rows += [session.row(v, "rolled_back", "stamp") for v in to_roll_back]
            if rows:
                session.write(rows)
            self._event(
                f"{self.namespace}: stamped {target} ({len(to_apply)} applied, {len(to_roll_back)} rolled back)"
            )
            return [MigrationResult(r.version, r.description, r.status, 0.0, "stamp") for r in rows]

        return self._locked(scripts, run, stamping=True)

    @_catalog_call
    def repair(self, *, dry_run: bool = False) -> RepairReport:
        """Make the history agree with the files again, as Flyway's ``repair`` does.

        Applied versions whose file changed get the file's current checksum (after an edit that was
        reviewed and is wanted, e.g. a fixed comment in a newer style, or a reformat of an old file);
        recorded ``failed`` attempts are cleared, so the version is plainly pending. Runs under the
        namespace's lock, in one history commit, recorded as an event.

        Args:
            dry_run: Only report what would change.
        """
        scripts = self.scripts()
        report: list[RepairReport] = []

        def run(state: NamespaceState, session: _Session) -> list[MigrationResult]:
            rechecked = [v for v in state.changed]
            legacy = [
                v
                for v in state.applied
                if v not in state.changed
                and (row := state.rows[v]).checksum
                and state.script(v) is not None
                and row.checksum != state.script(v).checksum  # type: ignore[union-attr]
            ]
            cleared = list(state.failed)
            found = RepairReport(self.namespace, rechecked, legacy, cleared, dry_run)
            report.append(found)
            if dry_run or not (rechecked or legacy or cleared):
                return []
            rows = [
                replace(state.rows[v], checksum=state.script(v).checksum, operation="repair")  # type: ignore[union-attr]
                for v in rechecked + legacy
            ]
            expected = {v: session.expected.get(v) for v in [*rechecked, *legacy, *cleared]}
            session.keeper.check()
            self.history_store.record(self.namespace, rows, expected, removals=cleared)
            self._note(
                "repair",
                f"{self.namespace}: repair {found.describe()}",
                run_id=session.run_id,
                executed_by=session.executed_by,
                details=found.to_json(),
            )
            return []

        self._locked(scripts, run)
        return report[0]

    @_catalog_call
    def force_unlock(self) -> LockInfo | None:
        """Release this namespace's lock whoever holds it (after a crashed run). Returns who held it.

        A run whose lease expired is taken over without this; use it when a holder is known to be
        gone and waiting for its lease is not wanted. Its intent record stays and is checked by the next run.
        """
        holder = self.lock.force_unlock()
        if holder is not None:
            user, host, pid = process_identity()
            self._note(
                "force_unlock",
                f"{self.namespace}: released the lock held by {holder.describe()}",
                executed_by=f"{user}@{host}:{pid}",
                details=holder.to_json(),
            )
        return holder

    def stop(self) -> None:
        """Stop a run in progress from another thread or a signal handler (Airflow's ``on_kill``).

        Releases this runner's lock if it still holds it and makes the run refuse any further
        commit; what it committed so far is settled by the next run from its intent record.
        """
        session = self._active
        if session is None:
            return
        session.keeper.stop()
        session.keeper.lost = LockLostError(
            self.namespace, f"Run {session.run_id} of {self.namespace!r} was stopped; it commits nothing more."
        )
        try:
            self.lock.release(session.run_id)
        except Exception as exc:
            log.warning("could not release the migration lock of %r while stopping: %s", self.namespace, exc)

    # -- internals ------------------------------------------------------------------------------

    def _note(
        self,
        event: str,
        message: str,
        *,
        level: int = logging.INFO,
        version: str | None = None,
        run_id: str | None = None,
        executed_by: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Report ``message`` like any step, and keep it in the event log as ``event``."""
        self._event(message, level)
        self.event_log.record(
            self.namespace, event, message, version=version, run_id=run_id, executed_by=executed_by, details=details
        )

    def _event(self, message: str, level: int = logging.INFO) -> None:
        log.log(level, "%s", message)
        if self._on_event is not None:
            self._on_event(message)

    def _locked(
        self,
        scripts: list[MigrationScript],
        run: Callable[[NamespaceState, _Session], list[MigrationResult]],
        *,
        stamping: bool = False,
    ) -> list[MigrationResult]:
        run_id = uuid.uuid4().hex
        acquisition = self.lock.acquire_run(run_id, context=self.lock_context)
        keeper = LeaseKeeper(self.lock, acquisition.held).start()
        session: _Session | None = None
        try:
            # Read the history only now: a run that held the lock before us may have just changed it.
            state = classify(scripts, self.history_store.rows(self.namespace))
            session = _Session(self, run_id, state, acquisition.held, keeper)
            self._active = session
            if session.settle_previous(acquisition, stamping=stamping):
                session.state = state = classify(scripts, self.history_store.rows(self.namespace))
            before = state.current
            results = run(state, session)
            self.last_run = RunReport(run_id, before, _current_after(state, results))
        except BaseException:
            self._finish(run_id, keeper, session, failed=True)
            raise
        self._finish(run_id, keeper, session, failed=False)
        return results

    def _finish(self, run_id: str, keeper: LeaseKeeper, session: _Session | None, *, failed: bool) -> None:
        """Stop the lease and release the lock; never hides the run's own outcome."""
        self._active = None
        keeper.stop()
        NamespaceLock.forget_run(run_id)
        try:
            clear = session is not None and (session.intent_settled or session.clear_unreadable)
            self.lock.release(run_id, clear_intent=clear)
        except Exception as release_error:
            outcome = "The run's own error is raised" if failed else "The run itself succeeded"
            log.warning(
                "could not release the migration lock of %r (%s: %s). %s; the lock's lease runs out by itself "
                "in %g s, or release it now with force_unlock() / `iceberg-ops unlock`.",
                self.namespace,
                type(release_error).__name__,
                release_error,
                outcome,
                self.lock.stale_after,
            )


def _check_catalog_timeout(value: object) -> float:
    """``catalog_timeout`` as seconds: a finite number above zero, at most a week."""
    too_big = isinstance(value, int | float) and not isinstance(value, bool) and not value <= 7 * 24 * 3600
    if too_big:
        raise CatalogConfigError(f"Option 'catalog_timeout' must be at most a week (604800 s), got {value!r}.")
    return check_timeout(value, "catalog_timeout")


def _restricted(state: NamespaceState, versions: set[str]) -> NamespaceState:
    """``state`` with its problems limited to ``versions`` (what a downgrade will touch)."""
    return replace(
        state,
        changed=tuple(v for v in state.changed if v in versions),
        missing=tuple(v for v in state.missing if v in versions),
        out_of_order=(),
    )


def _current_after(state: NamespaceState, results: list[MigrationResult]) -> str | None:
    """The current version after ``results`` were applied to ``state``."""
    applied = {int(v): v for v in state.applied}
    for result in results:
        if result.status == "applied":
            applied[int(result.version)] = result.version
        elif result.status == "rolled_back":
            applied.pop(int(result.version), None)
    return applied[max(applied)] if applied else None


def _success_status(direction: str) -> Status:
    return "applied" if direction == "upgrade" else "rolled_back"


def _settled(state: NamespaceState, intent: Intent) -> bool:
    """Whether the history already records the outcome the intent's run reached (it finished its bookkeeping)."""
    row = next((r for v, r in state.rows.items() if int(v) == int(intent.version)), None)
    return (
        row is not None
        and row.run_id == intent.run_id
        and row.operation == intent.direction
        and row.status == _success_status(intent.direction)
    )


def _failure_hint(direction: str, outcome: str, recorded: bool) -> str:
    """What a failed step's error says happened and happens next; consistent with what was recorded."""
    if outcome == "partial":
        return " It was only partly committed; the next run stops until a person settles it with `stamp`."
    if direction == "upgrade":
        record = " It is recorded as failed" if recorded else " It could not be recorded"
        if outcome == "none":
            return record + " and will run again on the next upgrade. None of its changes were committed."
        return record + "; the next run checks what it committed before anything else."
    kept = " The version stays applied"
    if outcome == "none":
        return kept + ". None of its rollback's changes were committed."
    return kept + "; the next run checks what its rollback committed before anything else."


def _labels(actions: tuple[IntentAction, ...]) -> list[str]:
    return [action.label() for action in actions]


class _Journal:
    """The :class:`~iceberg_ops_provider.migration.context.CommitJournal` of one migration step.

    Records the intent in the lock table before the first commit (and again when a commit not yet
    listed comes, or when the body finishes after an early commit), and refuses to let a commit
    through once the lease is lost.
    """

    def __init__(self, session: _Session, step: PlanStep) -> None:
        self.session = session
        self.step = step
        self.intent: Intent | None = None

    def receipt(self, step: int) -> str:
        return receipt(self.session.runner.namespace, self.step.version, self.step.direction, self.session.run_id, step)

    def before_commit(self, actions: list[IntentAction], *, complete: bool) -> None:
        session = self.session
        session.keeper.check()
        intent = self.intent
        if intent is None:
            if not actions:
                return  # nothing was or will be committed
            intent = Intent(
                namespace=session.runner.namespace,
                version=self.step.version,
                direction=self.step.direction,
                run_id=session.run_id,
                executed_by=session.executed_by,
                started_at=datetime.now(UTC),
            )
        elif intent.covers(actions) and (intent.complete or not complete):
            # Nothing to record; make sure the lock is still ours right before the commit, from the
            # catalog itself (the lease thread may not have noticed a takeover yet).
            session.runner.lock.check_held(session.held)
            return
        intent = intent.with_actions(actions, complete=complete)
        session.intent_settled = False
        session.runner.lock.write_intent(session.held, intent)
        self.intent = intent


class _Session:
    """One locked run: settles what an earlier run left, executes steps and records them.

    It tracks what it expects the history to hold, so a run that bypassed the lock is caught when
    writing, and whether the lock table's intent record is settled (recorded in the history), so the
    release can clear it.
    """

    def __init__(
        self, runner: MigrationRunner, run_id: str, state: NamespaceState, held: LockInfo, keeper: LeaseKeeper
    ) -> None:
        self.runner = runner
        self.state = state
        self.run_id = run_id
        self.held = held
        self.keeper = keeper
        user, host, pid = process_identity()
        self.executed_by = f"{user}@{host}:{pid}"
        self.expected: dict[str, str | None] = {v: row.status for v, row in state.rows.items()}
        self.completed: list[MigrationResult] = []
        self.intent_settled = True
        self.clear_unreadable = False

    def row(
        self,
        version: str,
        status: Status,
        operation: Operation,
        *,
        error: str | None = None,
        duration_ms: int | None = None,
        run_id: str | None = None,
        executed_by: str | None = None,
    ) -> HistoryRow:
        state = self.state
        script = state.script(version)
        # Keep the version string the history already uses for this number, so rows stay one per version.
        known = next((v for v in state.rows if int(v) == int(version)), version)
        previous = state.rows.get(known)
        # A status that does not change keeps the recorded checksum: a failed downgrade must not make
        # a changed file look unchanged.
        if previous is not None and (previous.status == status or script is None):
            checksum = previous.checksum
        else:
            checksum = script.checksum if script else None
        return HistoryRow(
            version=known,
            namespace=self.runner.namespace,
            description=state.description(version),
            applied_at=datetime.now(UTC),
            status=status,
            error=error,
            checksum=checksum,
            duration_ms=duration_ms,
            operation=operation,
            executed_by=executed_by or self.executed_by,
            run_id=run_id or self.run_id,
        )

    def write(self, rows: list[HistoryRow]) -> None:
        self.keeper.check()
        expected = {row.version: self.expected.get(row.version) for row in rows}
        self.runner.history_store.record(self.runner.namespace, rows, expected)
        for row in rows:
            self.expected[row.version] = row.status

    # -- what an earlier run left ---------------------------------------------------------------

    def _note(
        self, event: str, message: str, *, version: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        """A warning-level event of this run, reported and kept in the event log."""
        self.runner._note(
            event,
            message if message.startswith(f"{self.runner.namespace}:") else f"{self.runner.namespace}: {message}",
            level=logging.WARNING,
            version=version,
            run_id=self.run_id,
            executed_by=self.executed_by,
            details=details,
        )

    def settle_previous(self, acquisition: Acquisition, *, stamping: bool) -> bool:
        """Record a takeover and settle an interrupted run's intent; returns whether the history changed.

        Raises:
            PartialMigrationError: The interrupted migration committed some of its tables and not the
                others (unless this run is a stamp, which is how a person settles it).
        """
        runner = self.runner
        if acquisition.taken_over is not None:
            holder, reason = acquisition.taken_over
            runner._note(
                "lock_taken_over",
                f"{runner.namespace}: took over the migration lock from {holder.describe()}: {reason}",
                level=logging.WARNING,
                run_id=self.run_id,
                executed_by=self.executed_by,
                details={"previous_holder": holder.to_json(), "reason": reason},
            )
        if acquisition.intent_error is not None:
            if not stamping:
                raise acquisition.intent_error
            self._note("intent_cleared", "cleared an unreadable intent record; this stamp records the outcome")
            self.intent_settled = False
            self.clear_unreadable = True
            return False
        intent = acquisition.intent
        if intent is None or intent.namespace != runner.namespace:
            return False
        if _settled(self.state, intent):
            return False  # its run recorded the outcome and stopped before clearing the record
        self.intent_settled = False
        assessment = assess(runner.catalog, intent)
        return self._settle(intent, assessment, stamping=stamping)

    def _settle(self, intent: Intent, assessment: Assessment, *, stamping: bool) -> bool:
        runner = self.runner
        version, direction = intent.version, intent.direction
        details = {
            "intent": intent.to_json(),
            "committed": _labels(assessment.committed),
            "not_committed": assessment.unfinished(),
        }
        outcome = assessment.outcome
        wrote = False
        if outcome == "all":
            row = self.row(
                version,
                _success_status(direction),
                direction,
                run_id=intent.run_id,
                executed_by=intent.executed_by,
            )
            self.write([row])
            wrote = True
            message = (
                f"{runner.namespace}: run {intent.run_id} was interrupted after committing every change of "
                f"{version} ({direction}); recorded it as {row.status} without running it again"
            )
        elif outcome == "none":
            if direction == "upgrade":
                error = f"interrupted before committing anything (run {intent.run_id})"
                self.write([self.row(version, "failed", "upgrade", error=error, run_id=intent.run_id)])
                wrote = True
            message = (
                f"{runner.namespace}: run {intent.run_id} was interrupted before committing any change of "
                f"{version} ({direction}); it will run again"
            )
        elif stamping:
            message = (
                f"{runner.namespace}: cleared the record of {version} ({direction}) partly committed by run "
                f"{intent.run_id} (committed: {', '.join(details['committed'])}); this stamp records the outcome"
            )
        else:
            partial = PartialMigrationError(
                runner.namespace,
                version,
                direction,
                details["committed"],
                details["not_committed"],
                run_id=intent.run_id,
            )
            runner._note(
                "recovery_partial",
                str(partial),
                level=logging.WARNING,
                version=version,
                run_id=self.run_id,
                executed_by=self.executed_by,
                details=details,
            )
            raise partial
        event = "recovered" if outcome != "partial" else "intent_cleared"
        self._note(event, message, version=version, details=details)
        self.intent_settled = True
        return wrote

    # -- executing ------------------------------------------------------------------------------

    def execute(self, step: PlanStep, index: int, total: int) -> MigrationResult:
        runner = self.runner
        script = step.script
        if script is None:  # check_integrity refuses missing files before we get here
            raise MigrationFailedError(step.version, step.direction, FileNotFoundError("migration file is missing"))
        verb = "applying" if step.direction == "upgrade" else "rolling back"
        runner._event(f"[{index}/{total}] {verb} {step.version} {step.description}")
        journal = _Journal(self, step)
        context = MigrationContext(runner.catalog, runner.namespace, journal, meta_namespace=runner.meta_namespace)
        started = time.perf_counter()
        try:
            with importable(runner.folder):  # a lazy `from _helpers import x` in a body works as at import time
                if step.direction == "upgrade":
                    script.migration.upgrade(context)
                else:
                    script.migration.downgrade(context)
            context.finish()
        except IrreversibleMigrationError as exc:
            context.discard()
            if journal.intent is not None:  # it committed something before refusing: a failure like any other
                raise self._failure(step, index, total, exc, journal, context, started) from exc
            raise IrreversibleMigrationError(
                f"Cannot roll back {runner.namespace!r} past {step.version} ({step.description}): "
                f"{str(exc).rstrip('.')}. Version {step.version} stays applied; {len(self.completed)} step(s) of "
                "this run were rolled back."
            ) from exc
        except BaseException as exc:
            context.discard()
            failure = self._failure(step, index, total, exc, journal, context, started)
            if isinstance(failure, MigrationResult) and isinstance(exc, Exception):
                self.completed.append(failure)
                return failure
            if isinstance(exc, Exception | SystemExit):  # a migration that exits is a failed migration
                raise failure from exc
            raise  # interrupts and task timeouts keep their type, after being recorded
        duration = time.perf_counter() - started
        status = _success_status(step.direction)
        try:
            self.write([self.row(step.version, status, step.direction, duration_ms=int(duration * 1000))])
        except ConcurrentMigrationError:
            raise
        except Exception as exc:
            raise MigrationNotRecordedError(step.version, step.direction, exc) from exc
        if journal.intent is not None:
            self.intent_settled = True
        runner._event(f"[{index}/{total}] {step.version} {status} in {duration:.2f}s")
        result = MigrationResult(step.version, step.description, status, duration, step.direction)
        self.completed.append(result)
        return result

    def _failure(
        self,
        step: PlanStep,
        index: int,
        total: int,
        exc: BaseException,
        journal: _Journal,
        context: MigrationContext,
        started: float,
    ) -> MigrationError | MigrationResult:
        """Record a failed step (best effort) and build the error that stops the run.

        Returns a result instead when every commit of the finished body landed although one of them
        reported an error (an answer lost on the way back): the migration is done and recorded so.
        """
        duration_ms = int((time.perf_counter() - started) * 1000)
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, LockLostError):
            # Another run holds the namespace now and settles this migration from the intent record.
            self.runner._event(f"[{index}/{total}] {step.version} STOPPED: {exc}", logging.WARNING)
            failure: MigrationError = exc
            failure.completed = list(self.completed)  # type: ignore[attr-defined]
            return failure
        assessment: Assessment | None = None
        checked = ""
        if journal.intent is None:
            assessment = Assessment(committed=(), not_committed=(), complete=False)
        else:
            try:
                assessment = assess(self.runner.catalog, journal.intent)
            except Exception as check_error:
                checked = (
                    f" Could not check which of its commits landed ({type(check_error).__name__}: {check_error}); "
                    "the next run checks before doing anything else."
                )
        outcome = assessment.outcome if assessment is not None else "unknown"
        done = outcome == "all"  # every commit of the finished body landed, though one reported an error
        if done:
            row = self.row(step.version, _success_status(step.direction), step.direction, duration_ms=duration_ms)
        elif step.direction == "upgrade":
            noted = (
                f"{error} (partly committed: {', '.join(_labels(assessment.committed))})"
                if (outcome == "partial" and assessment is not None and assessment.committed)
                else error
            )
            row = self.row(step.version, "failed", "upgrade", error=noted, duration_ms=duration_ms)
        else:
            row = self.row(
                step.version, "applied", "downgrade", error=f"downgrade failed: {error}", duration_ms=duration_ms
            )
        try:
            self.write([row])
            recorded = True
            if outcome in ("none", "all"):
                self.intent_settled = True
        except Exception as record_error:  # the migration's own error matters more
            recorded = False
            checked += f" Recording it in the history failed: {type(record_error).__name__}: {record_error}."
        if done:
            self.runner._event(f"[{index}/{total}] {step.version} {row.status} (a commit reported {error}, yet landed)")
            return MigrationResult(step.version, step.description, row.status, duration_ms / 1000, step.direction)
        hint = _failure_hint(step.direction, outcome, recorded) + checked
        if context.created_namespaces:
            hint += f" It created namespace(s) {', '.join(context.created_namespaces)}."
        self.runner._event(f"[{index}/{total}] {step.version} FAILED: {error.rstrip('.')}.{hint}", logging.WARNING)
        if outcome == "partial" and assessment is not None:
            failure = PartialMigrationError(
                self.runner.namespace,
                step.version,
                step.direction,
                _labels(assessment.committed),
                assessment.unfinished(),
                run_id=self.run_id,
            )
        else:
            failure = MigrationFailedError(step.version, step.direction, exc, hint=hint.strip())
        failure.completed = list(self.completed)  # type: ignore[attr-defined]
        return failure
