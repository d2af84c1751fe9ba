"""MigrationRunner: apply, roll back, stamp, plan and report migrations for one namespace.

A changing run takes the namespace's lock (kept alive by a lease), settles what an interrupted run
left, reads the history afresh and executes one migration at a time; a failure of any kind is
recorded and stops the run, and the lock is released in every case. Reading never creates anything.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from iceberg_ops_provider.catalogs import DEFAULT_CATALOG_TIMEOUT, bound_catalog, bound_of, catalog_errors, spec_of
from iceberg_ops_provider.core.atomic.changes import CommitMode
from iceberg_ops_provider.errors import MigrationError
from iceberg_ops_provider.history.events import EventLog, MigrationEvent
from iceberg_ops_provider.history.intent import Intent, assess
from iceberg_ops_provider.history.lease import LeaseKeeper
from iceberg_ops_provider.history.lock import (
    DEFAULT_STALE_AFTER,
    LockInfo,
    LockLostError,
    NamespaceLock,
    process_identity,
)
from iceberg_ops_provider.history.records import HistoryRow
from iceberg_ops_provider.history.store import HistoryStore, default_meta_namespace
from iceberg_ops_provider.migration.discovery import BrokenFile, MigrationScript, discover, migrations_folder
from iceberg_ops_provider.migration.touched import TouchedTable, merge_touched, recording
from iceberg_ops_provider.runner.commit_modes import CommitModeProbe, commit_mode_label, explain_commit_mode
from iceberg_ops_provider.runner.namespaces import check_runner_namespaces
from iceberg_ops_provider.runner.planned_catalog import PlannedCatalog
from iceberg_ops_provider.runner.planning import (
    Direction,
    NamespaceState,
    PlanStep,
    check_integrity,
    classify,
    downgrade_steps,
    infer_direction,
    relative_hint,
    restricted_to,
    stamp_changes,
    upgrade_steps,
)
from iceberg_ops_provider.runner.results import (
    MigrationResult,
    NamespaceStatus,
    RepairReport,
    RunReport,
    current_after,
)
from iceberg_ops_provider.runner.session import Reporter, RunSession, unsettled
from iceberg_ops_provider.runner.steps import execute_step, inspect_step

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["MigrationResult", "MigrationRunner", "NamespaceStatus", "RepairReport", "RunReport"]

log = logging.getLogger("iceberg_ops_provider.runner")  # the engine's one logger, whichever module logs

_F = TypeVar("_F", bound=Callable[..., Any])


def _catalog_call(method: _F) -> _F:
    """Report a catalog that times out or cannot be reached as :class:`CatalogUnavailableError` naming it."""

    @functools.wraps(method)
    def wrapper(self: MigrationRunner, *args: Any, **kwargs: Any) -> Any:
        with catalog_errors(self.catalog_spec):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class MigrationRunner:
    """Run the migrations of one namespace against one catalog.

    Args:
        catalog: Any PyIceberg catalog.
        namespace: The namespace to migrate (``"sales"``; nested as ``"a.b"``).
        migrations_dir: The folder of ``NNNN_slug.py`` files (``migrations_dir/<namespace>/`` when it
            exists). ``None``: a runner that reads the history only; what needs the files raises.
        meta_namespace: Where the history table and the locks live; by default ``_iceberg_ops``, or
            ``iceberg_ops`` on S3 Tables (which refuses names starting with ``_``).
        keep_history_snapshots: Snapshots of the history table kept for time travel.
        on_event: Called with a one-line message at every step; every message is also logged at INFO.
        stale_after: Lease length of the namespace lock, in seconds: a lock not renewed for this long
            is taken over by the next run (at once when its process is gone from this host).
        lock_context: Where runs come from, stored with the lock and shown to whoever finds it held.
        catalog_timeout: Seconds every request to a REST catalog may take in all before the run stops
            with :class:`~iceberg_ops_provider.errors.CatalogUnavailableError`. ``None`` keeps the
            bound the catalog was opened with (60 s for a REST catalog built elsewhere).
        atomic_commits: Where the catalog can commit several tables at once, commit each migration's
            table changes with its history record, all or nothing (:meth:`commit_mode`); ``False``
            commits table by table on every catalog.
    """

    def __init__(
        self,
        catalog: Catalog,
        namespace: str,
        migrations_dir: str | Path | None = "migrations",
        meta_namespace: str | None = None,
        *,
        keep_history_snapshots: int = 10,
        on_event: Callable[[str], None] | None = None,
        stale_after: float = DEFAULT_STALE_AFTER,
        lock_context: Mapping[str, str] | None = None,
        catalog_timeout: float | None = None,
        atomic_commits: bool = True,
    ) -> None:
        meta_namespace = meta_namespace if meta_namespace is not None else default_meta_namespace(catalog)
        check_runner_namespaces(catalog, namespace, meta_namespace)
        self.catalog = catalog
        if catalog_timeout is not None or bound_of(catalog) is None:
            bound_catalog(catalog, catalog_timeout or DEFAULT_CATALOG_TIMEOUT)
        bound = bound_of(catalog)
        self.catalog_spec = spec_of(catalog) if bound is None else spec_of(catalog).with_timeout(bound)
        """The catalog's description (for the words of its errors: endpoint, bound, settings)."""
        self.catalog_timeout = self.catalog_spec.timeout
        self.endpoint = self.catalog_spec.endpoint()
        self.namespace = namespace
        self.migrations_dir: Path | None = Path(migrations_dir) if migrations_dir is not None else None
        self.meta_namespace = meta_namespace
        self.history_store = HistoryStore(catalog, meta_namespace, keep_snapshots=keep_history_snapshots)
        self.lock = NamespaceLock(catalog, meta_namespace, namespace, stale_after=stale_after)
        self.event_log = EventLog(catalog, meta_namespace)
        self.lock_context = dict(lock_context or {})
        self.atomic_commits = bool(atomic_commits)
        self._commit_modes = CommitModeProbe(catalog)
        self._reporter = Reporter(namespace, self.event_log, on_event)
        self._active: RunSession | None = None
        self.last_run: RunReport | None = None
        """What the last changing run of this runner saw (its version before and after), read under its lock."""
        self.touched: tuple[TouchedTable, ...] = ()
        """The tables the last ``upgrade``/``downgrade`` reached, net change per table, kept up to date
        step by step (also what a failed step committed before it failed)."""

    # -- reading --------------------------------------------------------------------------------

    @property
    def folder(self) -> Path:
        """The folder the migrations of this namespace are read from."""
        return migrations_folder(self._files_dir(), self.namespace)

    @property
    def files_compared(self) -> bool:
        """Whether this runner has migration files to compare with the history (``migrations_dir`` is not ``None``)."""
        return self.migrations_dir is not None

    def _files_dir(self) -> Path:
        if self.migrations_dir is None:
            raise MigrationError(
                f"This runner of {self.namespace!r} has no migration files (migrations_dir=None): it reads the "
                "history only. Pass migrations_dir to compare, plan or run migrations."
            )
        return self.migrations_dir

    def scripts(self, *, broken: list[BrokenFile] | None = None) -> list[MigrationScript]:
        """The migration files of this namespace, loaded and ordered (see :func:`discover` for ``broken``).

        Raises:
            MigrationDiscoveryError: A bad file (unless ``broken`` is given); nothing in the catalog was touched.
            MigrationError: The runner has no migration files (``migrations_dir=None``).
        """
        return discover(self._files_dir(), self.namespace, broken=broken)

    def _run_scripts(self) -> list[MigrationScript]:
        """The files for a changing run; applied files whose checksum still matches are not imported."""
        folder = self._files_dir()
        applied = [row for row in self.history_store.rows(self.namespace) if row.status == "applied"]
        return discover(
            folder,
            self.namespace,
            applied={int(row.version): row.checksum for row in applied},
            applied_sources={int(row.version): row.source_sha256 for row in applied},
        )

    @_catalog_call
    def state(self, *, report_broken: bool = False) -> NamespaceState:
        """Files compared with history (no lock, no writes); ``report_broken`` lists bad files instead of raising."""
        broken: list[BrokenFile] | None = [] if report_broken else None
        scripts = self.scripts(broken=broken)
        return classify(scripts, self.history_store.rows(self.namespace), tuple(broken or ()))

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
        """The audit trail of this namespace, oldest first."""
        return self.event_log.events(self.namespace, self.history_store.rows(self.namespace))

    @_catalog_call
    def interrupted(self) -> Intent | None:
        """The intent of a run that stopped mid-migration and is not settled yet, else ``None``."""
        holder, intent = self.lock.read()
        return unsettled(self.history_store.rows(self.namespace), holder, intent)

    @_catalog_call
    def interrupted_outcome(self, intent: Intent) -> str:
        """What an interrupted run committed, read from the tables: ``all``, ``none`` or ``partial``."""
        return assess(self.catalog, intent).outcome

    @_catalog_call
    def commit_mode(self) -> CommitMode | None:
        """How this runner commits a migration's changes to several tables.

        ``sql-transaction`` or ``rest-transaction``: table changes and history record in one commit;
        ``per-table``: one commit per table, then the history record; ``None`` when a REST catalog
        could not answer (asked again next time; table by table meanwhile).
        """
        return self._commit_modes.mode(atomic_commits=self.atomic_commits)

    def commit_mode_reason(self) -> str:
        """Why this runner commits as :meth:`commit_mode` says, for people (the status shows it)."""
        return explain_commit_mode(self.catalog, self.commit_mode(), atomic_commits=self.atomic_commits)

    @_catalog_call
    def status(self) -> NamespaceStatus:
        """Current version, applied and pending migrations, and anything odd (bad files are listed in ``broken``)."""
        if self.files_compared:
            state = self.state(report_broken=True)
        else:
            state = replace(classify([], self.history_store.rows(self.namespace)), missing=())
        holder, intent = self.lock.read()
        interrupted = unsettled(list(state.rows.values()), holder, intent)
        mode = self.commit_mode()
        return NamespaceStatus(
            namespace=self.namespace,
            current=state.current,
            applied=[state.rows[v] for v in state.applied],
            pending=[PlanStep("upgrade", v, state.description(v)) for v in state.pending],
            failed=list(state.failed),
            errors={version: state.rows[version].error or "" for version in state.failed},
            changed=list(state.changed),
            missing=list(state.missing),
            out_of_order=list(state.out_of_order),
            lock=holder,
            interrupted=interrupted,
            interrupted_outcome=self.interrupted_outcome(interrupted) if interrupted is not None else None,
            commit_mode=commit_mode_label(mode),
            commit_mode_reason=explain_commit_mode(self.catalog, mode, atomic_commits=self.atomic_commits),
            files_compared=self.files_compared,
            broken=list(state.broken),
        )

    @_catalog_call
    def plan(
        self, target: str = "head", direction: Direction | None = None, *, inspect: bool = False
    ) -> list[PlanStep]:
        """The ordered steps a run to ``target`` would take; writes nothing.

        Args:
            target: ``head``, ``base``, a version, ``+N`` or ``-N``.
            direction: ``upgrade`` or ``downgrade``; inferred from the target when omitted.
            inspect: Also dry-run each step's body (against the tables as the steps before it would
                leave them, in memory) to list what it asks for and its risk.
        """
        if direction not in (None, "upgrade", "downgrade"):
            raise ValueError(f"direction must be 'upgrade' or 'downgrade', got {direction!r}.")
        state = self.state()
        direction = direction or infer_direction(state, target)
        steps = upgrade_steps(state, target) if direction == "upgrade" else downgrade_steps(state, target)
        if not inspect:
            return steps
        planned = PlannedCatalog(self.catalog)  # each step sees what the steps before it leave
        return [inspect_step(self, step, planned) for step in steps]

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
        scripts = self._run_scripts()

        def run(state: NamespaceState, session: RunSession) -> list[MigrationResult]:
            check_integrity(
                state,
                self.namespace,
                allow_changed=allow_changed,
                allow_missing=allow_missing,
                allow_out_of_order=allow_out_of_order,
            )
            steps = upgrade_steps(state, target)
            self._reporter.event(
                f"{self.namespace}: {len(steps)} migration(s) to apply (current: {state.current or 'base'})"
            )
            return [self._execute(session, step, index, len(steps)) for index, step in enumerate(steps, 1)]

        self.touched = ()
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
        scripts = self._run_scripts()

        def run(state: NamespaceState, session: RunSession) -> list[MigrationResult]:
            steps = downgrade_steps(state, target)
            involved = {step.version for step in steps}
            check_integrity(
                restricted_to(state, involved), self.namespace, allow_changed=allow_changed, allow_out_of_order=True
            )
            message = f"{self.namespace}: {len(steps)} migration(s) to roll back (current: {state.current or 'base'})"
            if not steps and state.current is not None:  # a version that is the current one: it stays applied
                message = (
                    f"{self.namespace}: nothing to roll back: the target {target} is the current version "
                    f"{state.current}, and a downgrade keeps its target applied (a number is an absolute version; "
                    f"'-N' rolls back the last N).{relative_hint(state, target)}"
                )
            self._reporter.event(message)
            return [self._execute(session, step, index, len(steps)) for index, step in enumerate(steps, 1)]

        self.touched = ()
        return self._locked(scripts, run)

    @_catalog_call
    def stamp(self, target: str) -> list[MigrationResult]:
        """Record the namespace as migrated to ``target`` without running anything.

        Files up to ``target`` are recorded ``applied``; applied versions above it ``rolled_back``.
        All in one history commit. A stamp is also how a person settles a partly committed
        migration (:class:`~iceberg_ops_provider.errors.PartialMigrationError`): it clears that record.
        """
        scripts = self._run_scripts()

        def run(state: NamespaceState, session: RunSession) -> list[MigrationResult]:
            to_apply, to_roll_back = stamp_changes(state, target)
            rows = [session.row(v, "applied", "stamp") for v in to_apply]
            rows += [session.row(v, "rolled_back", "stamp") for v in to_roll_back]
            if rows:
                session.write(rows)
            self._reporter.event(
                f"{self.namespace}: stamped {target} ({len(to_apply)} applied, {len(to_roll_back)} rolled back)"
            )
            return [MigrationResult(r.version, r.description, r.status, 0.0, "stamp") for r in rows]

        return self._locked(scripts, run, stamping=True)

    @_catalog_call
    def repair(self, *, dry_run: bool = False) -> RepairReport:
        """Make the history agree with the files again, as Flyway's ``repair`` does; ``dry_run`` only reports.

        Applied versions whose file changed get its current checksum, and ``failed`` attempts are
        cleared; under the lock, in one history commit, recorded as an event.
        """
        scripts = self._run_scripts()
        report: list[RepairReport] = []

        def run(state: NamespaceState, session: RunSession) -> list[MigrationResult]:
            rechecked = list(state.changed)
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
                replace(state.rows[v], checksum=script.checksum, source_sha256=script.source_sha256, operation="repair")
                for v in rechecked + legacy
                if (script := state.script(v)) is not None
            ]
            expected = {v: session.expected.get(v) for v in [*rechecked, *legacy, *cleared]}
            session.keeper.check()
            self.history_store.record(self.namespace, rows, expected, removals=cleared)
            self._reporter.note(
                "repair",
                f"{self.namespace}: {found.describe()}",
                run_id=session.run_id,
                executed_by=session.executed_by,
                details=found.to_json(),
            )
            return []

        self._locked(scripts, run)
        return report[0]

    @_catalog_call
    def force_unlock(self) -> LockInfo | None:
        """Release this namespace's lock whoever holds it (after a crashed run); returns who held it.

        Its intent record stays and is checked by the next run.
        """
        holder = self.lock.force_unlock()
        if holder is not None:
            user, host, pid = process_identity()
            self._reporter.note(
                "force_unlock",
                f"{self.namespace}: released the lock held by {holder.describe()}",
                executed_by=f"{user}@{host}:{pid}",
                details=holder.to_json(),
            )
        return holder

    def stop(self) -> None:
        """Stop a run in progress from another thread or a signal handler (Airflow's ``on_kill``).

        Releases the lock and makes the run refuse any further commit.
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

    def _execute(self, session: RunSession, step: PlanStep, index: int, total: int) -> MigrationResult:
        """Execute one step, learning which tables it touched (kept in :attr:`touched` even when it fails)."""
        with recording() as touched:
            try:
                result = execute_step(session, step, index, total)
            finally:
                self.touched = merge_touched(self.touched, touched.tables())
        return replace(result, tables=touched.tables())

    def _locked(
        self,
        scripts: list[MigrationScript],
        run: Callable[[NamespaceState, RunSession], list[MigrationResult]],
        *,
        stamping: bool = False,
    ) -> list[MigrationResult]:
        run_id = uuid.uuid4().hex
        acquisition = self.lock.acquire_run(run_id, context=self.lock_context)
        keeper = LeaseKeeper(self.lock, acquisition.held).start()
        session: RunSession | None = None
        try:
            # Read the history only now: a run that held the lock before us may have just changed it.
            state = classify(scripts, self.history_store.rows(self.namespace))
            session = RunSession(self, self._reporter, run_id, state, acquisition.held, keeper)
            self._active = session
            if session.settle_previous(acquisition, stamping=stamping):
                session.state = state = classify(scripts, self.history_store.rows(self.namespace))
            before = state.current
            results = run(state, session)
            self.last_run = RunReport(run_id, before, current_after(state, results))
        except BaseException:
            self._finish(run_id, keeper, session, failed=True)
            raise
        self._finish(run_id, keeper, session, failed=False)
        return results

    def _finish(self, run_id: str, keeper: LeaseKeeper, session: RunSession | None, *, failed: bool) -> None:
        """Stop the lease, release the lock, log the run's outcomes; never hides the run's own outcome."""
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
        if session is not None:
            self.event_log.record_many(session.outcomes)
