"""MigrationRunner: apply, roll back, stamp, plan and report migrations for one namespace.

A run that changes anything (``upgrade``, ``downgrade``, ``stamp``) first takes the namespace's lock
(:class:`~iceberg_ops_provider.history.NamespaceLock`), then reads the history afresh, checks it
against the files, and executes one migration at a time: the migration's staged changes are
committed (one commit per table), then its history row is written. A failure stops the run with the
cause attached; the lock is released in every case.

``plan``, ``status``, ``history`` and ``current`` only read, and never create anything.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.discovery import MigrationScript, discover, migrations_folder
from iceberg_ops_provider.errors import (
    ConcurrentMigrationError,
    IrreversibleMigrationError,
    MigrationFailedError,
    MigrationNotRecordedError,
)
from iceberg_ops_provider.history.lock import LockInfo, NamespaceLock, process_identity
from iceberg_ops_provider.history.records import HistoryRow, Operation, Status
from iceberg_ops_provider.history.store import DEFAULT_META_NAMESPACE, HistoryStore
from iceberg_ops_provider.migration.context import MigrationContext
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

__all__ = ["MigrationResult", "MigrationRunner", "NamespaceStatus"]

log = logging.getLogger(__name__)


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

    @property
    def is_clean(self) -> bool:
        """Nothing pending and nothing odd."""
        return not (self.pending or self.changed or self.missing)

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
        }


class MigrationRunner:
    """Run the migrations of one namespace against one catalog.

    Args:
        catalog: Any PyIceberg catalog.
        namespace: The namespace to migrate (``"sales"``; nested as ``"a.b"``).
        migrations_dir: The folder of ``NNNN_slug.py`` files; ``migrations_dir/<namespace>/`` is used
            instead when it exists.
        meta_namespace: Where the history table and the locks live.
        keep_history_snapshots: Snapshots of the history table kept for time travel.
        on_event: Called with a one-line message at every step (progress for CLIs and task logs);
            every message is also logged at INFO on ``iceberg_ops_provider.runner``.
    """

    def __init__(
        self,
        catalog: Catalog,
        namespace: str,
        migrations_dir: str | Path = "migrations",
        meta_namespace: str = DEFAULT_META_NAMESPACE,
        *,
        keep_history_snapshots: int = 20,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        _check_namespace("namespace", namespace)
        _check_namespace("meta_namespace", meta_namespace)
        if namespace == meta_namespace:
            raise ValueError(f"namespace {namespace!r} is the meta-namespace that holds the history; migrate another.")
        self.catalog = catalog
        self.namespace = namespace
        self.migrations_dir = Path(migrations_dir)
        self.meta_namespace = meta_namespace
        self.history_store = HistoryStore(catalog, meta_namespace, keep_snapshots=keep_history_snapshots)
        self.lock = NamespaceLock(catalog, meta_namespace, namespace)
        self._on_event = on_event

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

    def state(self) -> NamespaceState:
        """Files compared with history (no lock, no writes)."""
        return classify(self.scripts(), self.history_store.rows(self.namespace))

    def current(self) -> str | None:
        """The current version (highest applied), or ``None``."""
        return classify([], self.history_store.rows(self.namespace)).current

    def history(self) -> list[HistoryRow]:
        """The history rows of this namespace, oldest first."""
        return self.history_store.rows(self.namespace)

    def status(self) -> NamespaceStatus:
        """Current version, applied and pending migrations, and anything odd."""
        state = self.state()
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
        )

    def plan(self, target: str = "head", direction: Direction | None = None) -> list[PlanStep]:
        """The ordered steps a run to ``target`` would take; writes nothing.

        Args:
            target: ``head``, ``base``, a version, ``+N`` or ``-N``.
            direction: ``upgrade`` or ``downgrade``; inferred from the target when omitted.
        """
        if direction not in (None, "upgrade", "downgrade"):
            raise ValueError(f"direction must be 'upgrade' or 'downgrade', got {direction!r}.")
        state = self.state()
        direction = direction or infer_direction(state, target)
        return upgrade_steps(state, target) if direction == "upgrade" else downgrade_steps(state, target)

    # -- changing -------------------------------------------------------------------------------

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

    def stamp(self, target: str) -> list[MigrationResult]:
        """Record the namespace as migrated to ``target`` without running anything.

        Files up to ``target`` are recorded ``applied``; applied versions above it ``rolled_back``.
        All in one history commit.
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

        return self._locked(scripts, run)

    def force_unlock(self) -> LockInfo | None:
        """Release this namespace's lock whoever holds it (after a crashed run). Returns who held it."""
        holder = self.lock.force_unlock()
        if holder is not None:
            self._event(f"{self.namespace}: released the lock held by {holder.describe()}")
        return holder

    # -- internals ------------------------------------------------------------------------------

    def _event(self, message: str) -> None:
        log.info("%s", message)
        if self._on_event is not None:
            self._on_event(message)

    def _locked(
        self, scripts: list[MigrationScript], run: Callable[[NamespaceState, _Session], list[MigrationResult]]
    ) -> list[MigrationResult]:
        run_id = uuid.uuid4().hex
        self.lock.acquire(run_id)
        try:
            # Read the history only now: a run that held the lock before us may have just changed it.
            state = classify(scripts, self.history_store.rows(self.namespace))
            results = run(state, _Session(self, run_id, state))
        except BaseException:
            # Report the run's own error; a lock that cannot be released as well only gets a warning.
            try:
                self.lock.release(run_id)
            except Exception as release_error:
                log.warning(
                    "could not release the migration lock of %r (%s); release it with force_unlock()",
                    self.namespace,
                    release_error,
                )
            raise
        self.lock.release(run_id)
        return results


def _restricted(state: NamespaceState, versions: set[str]) -> NamespaceState:
    """``state`` with its problems limited to ``versions`` (what a downgrade will touch)."""
    return replace(
        state,
        changed=tuple(v for v in state.changed if v in versions),
        missing=tuple(v for v in state.missing if v in versions),
        out_of_order=(),
    )


def _check_namespace(what: str, value: object) -> None:
    parts = value.split(".") if isinstance(value, str) else []
    if not parts or any(not part or part != part.strip() for part in parts):
        raise ValueError(
            f"{what} {value!r} is not a valid namespace: use a name such as 'sales' or dotted parts "
            "such as 'lake.sales'."
        )


class _Session:
    """One locked run: executes steps and records them, tracking what it expects the history to hold."""

    def __init__(self, runner: MigrationRunner, run_id: str, state: NamespaceState) -> None:
        self.runner = runner
        self.state = state
        self.run_id = run_id
        user, host, pid = process_identity()
        self.executed_by = f"{user}@{host}:{pid}"
        self.expected: dict[str, str | None] = {v: row.status for v, row in state.rows.items()}
        self.completed: list[MigrationResult] = []

    def row(
        self,
        version: str,
        status: Status,
        operation: Operation,
        *,
        error: str | None = None,
        duration_ms: int | None = None,
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
            executed_by=self.executed_by,
            run_id=self.run_id,
        )

    def write(self, rows: list[HistoryRow]) -> None:
        expected = {row.version: self.expected.get(row.version) for row in rows}
        self.runner.history_store.record(self.runner.namespace, rows, expected)
        for row in rows:
            self.expected[row.version] = row.status

    def execute(self, step: PlanStep, index: int, total: int) -> MigrationResult:
        runner = self.runner
        script = step.script
        if script is None:  # check_integrity refuses missing files before we get here
            raise MigrationFailedError(step.version, step.direction, FileNotFoundError("migration file is missing"))
        verb = "applying" if step.direction == "upgrade" else "rolling back"
        runner._event(f"[{index}/{total}] {verb} {step.version} {step.description}")
        context = MigrationContext(runner.catalog, runner.namespace)
        started = time.perf_counter()
        try:
            if step.direction == "upgrade":
                script.migration.upgrade(context)
            else:
                script.migration.downgrade(context)
            context.commit()
        except IrreversibleMigrationError as exc:
            context.discard()
            raise IrreversibleMigrationError(
                f"Cannot roll back {runner.namespace!r} past {step.version} ({step.description}): "
                f"{str(exc).rstrip('.')}. Version {step.version} stays applied; {len(self.completed)} step(s) of "
                "this run were rolled back."
            ) from exc
        except Exception as exc:
            context.discard()
            raise self._failure(step, index, total, exc, context.committed, started) from exc
        duration = time.perf_counter() - started
        status: Status = "applied" if step.direction == "upgrade" else "rolled_back"
        try:
            self.write([self.row(step.version, status, step.direction, duration_ms=int(duration * 1000))])
        except ConcurrentMigrationError:
            raise
        except Exception as exc:
            raise MigrationNotRecordedError(step.version, step.direction, exc) from exc
        runner._event(f"[{index}/{total}] {step.version} {status} in {duration:.2f}s")
        result = MigrationResult(step.version, step.description, status, duration, step.direction)
        self.completed.append(result)
        return result

    def _failure(
        self, step: PlanStep, index: int, total: int, exc: Exception, committed: list[str], started: float
    ) -> MigrationFailedError:
        """Record a failed step (best effort) and build the error that stops the run."""
        duration_ms = int((time.perf_counter() - started) * 1000)
        error = f"{type(exc).__name__}: {exc}"
        if step.direction == "upgrade":
            row = self.row(step.version, "failed", "upgrade", error=error, duration_ms=duration_ms)
            hint = "It is recorded as failed and will be retried by the next upgrade."
        else:
            row = self.row(
                step.version, "applied", "downgrade", error=f"downgrade failed: {error}", duration_ms=duration_ms
            )
            hint = "The version stays applied."
        if committed:
            hint += (
                f" Changes already committed to {', '.join(committed)} stay (PyIceberg has no multi-table commit); "
                "the rest were not committed: check those tables before running it again."
            )
        else:
            hint += " None of its changes were committed."
        try:
            self.write([row])
        except Exception as record_error:  # the migration's own error matters more
            hint += f" Recording the failure in the history failed too: {type(record_error).__name__}: {record_error}"
        self.runner._event(f"[{index}/{total}] {step.version} FAILED: {error}")
        failure = MigrationFailedError(step.version, step.direction, exc, hint=hint)
        failure.completed = list(self.completed)
        return failure
