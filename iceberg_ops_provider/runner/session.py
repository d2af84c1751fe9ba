"""One locked migration run: settling what an earlier run left, executing steps, recording outcomes.

:class:`~iceberg_ops_provider.runner.migration_runner.MigrationRunner` takes the namespace's lock and hands the run to
a :class:`RunSession`; each migration step gets a :class:`RunJournal`, the commit journal of its
:class:`~iceberg_ops_provider.migration.context.MigrationContext` (the intent record and the lock
check before every commit).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, TableAlreadyExistsError
from pyiceberg.table.update import AssertRefSnapshotId

from iceberg_ops_provider.core.atomic.commit import TableChange, commit_atomically
from iceberg_ops_provider.core.contention import backoff_seconds
from iceberg_ops_provider.errors import (
    ConcurrentMigrationError,
    IrreversibleMigrationError,
    MigrationError,
    MigrationFailedError,
    MigrationNotRecordedError,
    PartialMigrationError,
)
from iceberg_ops_provider.history.events import MigrationEvent
from iceberg_ops_provider.history.intent import Assessment, Intent, IntentAction, assess, receipt
from iceberg_ops_provider.history.lease import LeaseKeeper
from iceberg_ops_provider.history.lock import Acquisition, LockInfo, LockLostError, NamespaceLock, process_identity
from iceberg_ops_provider.history.records import HistoryRow, Operation, Status
from iceberg_ops_provider.migration.context import MigrationContext
from iceberg_ops_provider.migration.discovery import importable
from iceberg_ops_provider.runner.planning import NamespaceState, PlanStep
from iceberg_ops_provider.runner.results import MigrationResult

if TYPE_CHECKING:
    from iceberg_ops_provider.runner.migration_runner import MigrationRunner

__all__ = ["RunJournal", "RunSession", "is_settled", "success_status"]

log = logging.getLogger("iceberg_ops_provider.runner.migration_runner")

_ATOMIC_ATTEMPTS = 40
"""Attempts of a step's all-or-nothing commit lost to other runs' commits (of other namespaces, on the
shared history table) before giving up: up to about a minute of waiting under heavy contention."""


def success_status(direction: str) -> Status:
    """The status a successful step records: ``applied`` for an upgrade, ``rolled_back`` for a downgrade."""
    return "applied" if direction == "upgrade" else "rolled_back"


def is_settled(state: NamespaceState, intent: Intent) -> bool:
    """Whether the history already records the outcome the intent's run reached (it finished its bookkeeping)."""
    row = next((r for v, r in state.rows.items() if int(v) == int(intent.version)), None)
    return (
        row is not None
        and row.run_id == intent.run_id
        and row.operation == intent.direction
        and row.status == success_status(intent.direction)
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


def _result(
    step: PlanStep, status: Status, duration: float, journal: RunJournal, context: MigrationContext
) -> MigrationResult:
    """The result of a step whose changes were all committed: how they were committed, and what fell outside."""
    atomic = journal.recorded is not None
    reason = None
    if not atomic:
        reason = journal.not_atomic or context.not_atomic_reason or "its changes were committed table by table"
    return MigrationResult(
        step.version,
        step.description,
        status,
        duration,
        step.direction,
        atomic=atomic,
        outside_atomic_commit=tuple(context.separate_commits),
        not_atomic_reason=reason,
    )


class RunJournal:
    """The :class:`~iceberg_ops_provider.migration.context.CommitJournal` of one migration step.

    Records the intent in the lock table before the first commit (and again when a commit not yet
    listed comes, or when the body finishes after an early commit), and refuses to let a commit
    through once the lease is lost.

    Where the catalog can commit several tables at once (:meth:`atomic_mode`), a finished body's
    table changes are committed together with the step's history row and a check that the lock is
    still this run's, in one commit (:meth:`commit_together`): the step is then applied and recorded,
    or nothing of it is, and no intent is needed for that commit.
    """

    def __init__(self, session: RunSession, step: PlanStep) -> None:
        self.session = session
        self.step = step
        self.intent: Intent | None = None
        self._proven = False  # the intent write just now was itself a check that the lock is ours
        self.started = time.perf_counter()
        self.recorded: HistoryRow | None = None
        """The history row committed together with the step's changes, when they were (else ``None``)."""
        self.not_atomic: str | None = None
        """Why the catalog did not take the step's changes in one commit (it cannot, or atomic commits are off)."""

    def receipt(self, step: int) -> str:
        """The receipt of this migration's ``step``-th commit."""
        return receipt(self.session.runner.namespace, self.step.version, self.step.direction, self.session.run_id, step)

    def before_commit(self, actions: list[IntentAction], *, complete: bool) -> None:
        """Record the intent when ``actions`` are not listed yet, else check the lock is still this run's."""
        session = self.session
        session.keeper.check()
        intent = self.intent
        if intent is None:
            if not actions:
                return  # nothing was or will be committed
            intent = self._new_intent()
        elif intent.covers(actions) and (intent.complete or not complete):
            # Nothing to record; make sure the lock is still ours right before the commit, from the
            # catalog itself (the lease thread may not have noticed a takeover yet), unless the intent
            # write that came just before proved it.
            if not self._proven:
                session.runner.lock.check_held(session.held)
            self._proven = False
            return
        intent = intent.with_actions(actions, complete=complete)
        session.intent_settled = False
        session.runner.lock.write_intent(session.held, intent)
        self.intent = intent
        self._proven = True

    def _new_intent(self) -> Intent:
        session = self.session
        return Intent(
            namespace=session.runner.namespace,
            version=self.step.version,
            direction=self.step.direction,
            run_id=session.run_id,
            executed_by=session.executed_by,
            started_at=datetime.now(UTC),
        )

    # -- all-or-nothing commits -----------------------------------------------------------------

    def atomic_mode(self) -> str | None:
        """The multi-table commit this step's remaining changes can use, or ``None`` (one commit per table).

        ``None`` also once the step committed something on its own (an early commit, a table or the
        catalog reached directly): its intent record then covers the rest as well.
        """
        runner = self.session.runner
        mode = runner.commit_mode()
        if mode not in ("sql-transaction", "rest-transaction"):
            self.not_atomic = runner._commit_mode_reason(mode)
            return None
        return mode if self.intent is None else None

    def commit_together(self, changes: list[TableChange], actions: list[IntentAction], *, outside: list[str]) -> bool:
        """Commit the step's table changes, its history row and a check of the lock in one commit.

        A commit refused because the history or the lock table moved on meanwhile (another
        namespace's run recorded its own step, the lease was renewed) is staged again and retried; one
        refused because a migrated table changed, or the lock is no longer this run's, raises.

        Args:
            changes: The step's table changes, receipts included.
            actions: What they are, as the intent would list them (used to check an unknown outcome).
            outside: What the step committed separately just before (for the log).

        Returns:
            Whether they were committed (false: the catalog cannot commit them together after all;
            nothing was committed).

        Raises:
            CommitFailedException, TableAlreadyExistsError: A migrated table changed (or appeared)
                under this run; nothing of the step was committed.
            LockLostError: The lock is no longer this run's; nothing was committed.
            ConcurrentMigrationError: The history changed under this run.
            CommitStateUnknownException: The catalog failed while committing and its outcome could
                not be read back.
        """
        session = self.session
        runner = session.runner
        session.keeper.check()
        step = self.step
        duration_ms = int((time.perf_counter() - self.started) * 1000)
        row = session.row(step.version, success_status(step.direction), step.direction, duration_ms=duration_ms)
        expected = {row.version: session.expected.get(row.version)}
        held = AssertRefSnapshotId(ref=NamespaceLock.TAG, snapshot_id=session.held.snapshot_id)
        lock = TableChange(runner.lock.identifier, (), (held,))
        for attempt in range(1, _ATOMIC_ATTEMPTS + 1):
            staged = runner.history_store.stage(runner.namespace, [row], expected)
            try:
                result = commit_atomically(runner.catalog, [*changes, staged.change, lock])
            except CommitFailedException:
                staged.discard()
                self._explain_refusal(changes)
                if attempt == _ATOMIC_ATTEMPTS:
                    raise
                time.sleep(backoff_seconds(attempt))
                continue
            except CommitStateUnknownException:
                if not self._landed(row, actions):
                    raise
                break
            except BaseException:
                staged.discard()
                raise
            if not result.applied:
                staged.discard()
                self.not_atomic = result.reason
                runner._event(f"{runner.namespace}: {step.version}: {result.reason}; committing table by table")
                return False
            staged.committed()
            break
        self.recorded = row
        if outside:
            runner._event(
                f"{runner.namespace}: {step.version}: committed outside its all-or-nothing commit, one by one "
                f"before it: {', '.join(outside)}"
            )
        return True

    def _explain_refusal(self, changes: list[TableChange]) -> None:
        """After a refused multi-table commit: raise when a migrated table or the lock is the reason."""
        runner = self.session.runner
        runner.lock.check_held(self.session.held)  # LockLostError
        for change in changes:
            if change.creates:
                if runner.catalog.table_exists(change.identifier):
                    raise TableAlreadyExistsError(f"Table {change.label()} already exists; nothing was committed")
                continue
            metadata = runner.catalog.load_table(change.identifier).metadata
            for requirement in change.requirements:
                try:
                    requirement.validate(metadata)
                except CommitFailedException as exc:
                    raise CommitFailedException(
                        f"{change.label()} changed under this run ({exc}); nothing was committed"
                    ) from exc

    def _landed(self, row: HistoryRow, actions: list[IntentAction]) -> bool:
        """Whether a commit of unknown outcome landed, read back from the history it would have written.

        When that cannot be read either, the intent is kept here (not written anywhere): the step's
        failure handling then checks its receipts in the tables.
        """
        runner = self.session.runner
        try:
            rows = runner.history_store.rows(runner.namespace)
        except Exception:
            self.intent = self._new_intent().with_actions(actions, complete=True)
            return False
        return any(
            found.version == row.version and found.run_id == row.run_id and found.applied_at == row.applied_at
            for found in rows
        )


class RunSession:
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
        self.outcomes: list[MigrationEvent] = []
        """The outcomes this run recorded, appended to the event log in one commit when it ends."""
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
        """A history row of this run for ``version`` (keeping the version string and checksum the history uses)."""
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
        """Write history rows, checking they replace what this run last saw."""
        self.keeper.check()
        expected = {row.version: self.expected.get(row.version) for row in rows}
        self.runner.history_store.record(self.runner.namespace, rows, expected)
        self._written(rows)

    def _written(self, rows: list[HistoryRow]) -> None:
        """Note history rows that reached the history table (written here, or with the step's changes)."""
        for row in rows:
            self.expected[row.version] = row.status
        self.outcomes += [self.outcome(row) for row in rows]

    def outcome(self, row: HistoryRow, **details: Any) -> MigrationEvent:
        """The event of a history row this run writes (or tried to write)."""
        if row.run_id != self.run_id:  # settled from an interrupted run's intent record
            details["recorded_by_run"] = self.run_id
        if self.runner.lock_context:  # which Airflow dag run / task / try ran it
            details["context"] = dict(self.runner.lock_context)
        return MigrationEvent.from_history_row(row, **details)

    def refused(self, step: PlanStep, reason: str) -> None:
        """Keep, as an event, a step refused before it committed anything (an irreversible rollback)."""
        event = MigrationEvent(
            namespace=self.runner.namespace,
            at=datetime.now(UTC),
            event="rollback_refused",
            version=step.version,
            run_id=self.run_id,
            executed_by=self.executed_by,
            message=f"refused to roll back {step.version} {step.description}: {reason}",
            details={"context": dict(self.runner.lock_context)} if self.runner.lock_context else {},
            error=reason,
        )
        self.outcomes.append(event)

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
        if is_settled(self.state, intent):
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
                success_status(direction),
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
        """Run one step: its body, its commits (with intent and receipts), then its history row."""
        runner = self.runner
        script = step.script
        if script is None:  # check_integrity refuses missing files before we get here
            raise MigrationFailedError(step.version, step.direction, FileNotFoundError("migration file is missing"))
        verb = "applying" if step.direction == "upgrade" else "rolling back"
        runner._event(f"[{index}/{total}] {verb} {step.version} {step.description}")
        journal = RunJournal(self, step)
        context = MigrationContext(runner.catalog, runner.namespace, journal, meta_namespace=runner.meta_namespace)
        started = journal.started = time.perf_counter()
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
            self.refused(step, str(exc))
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
        status = success_status(step.direction)
        if journal.recorded is not None:  # committed together with the step's changes
            self._written([journal.recorded])
        else:
            try:
                self.write([self.row(step.version, status, step.direction, duration_ms=int(duration * 1000))])
            except ConcurrentMigrationError:
                raise
            except Exception as exc:
                raise MigrationNotRecordedError(step.version, step.direction, exc) from exc
        if journal.intent is not None:
            self.intent_settled = True
        result = _result(step, status, duration, journal, context)
        how = (
            "all-or-nothing, with its history record"
            if result.atomic
            else f"table by table: {result.not_atomic_reason}"
        )
        runner._event(f"[{index}/{total}] {step.version} {status} in {duration:.2f}s ({how})")
        self.completed.append(result)
        return result

    def _failure(
        self,
        step: PlanStep,
        index: int,
        total: int,
        exc: BaseException,
        journal: RunJournal,
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
            row = self.row(step.version, success_status(step.direction), step.direction, duration_ms=duration_ms)
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
            self.outcomes.append(
                self.outcome(row, history_write_failed=f"{type(record_error).__name__}: {record_error}")
            )
            checked += f" Recording it in the history failed: {type(record_error).__name__}: {record_error}."
        if done:
            self.runner._event(f"[{index}/{total}] {step.version} {row.status} (a commit reported {error}, yet landed)")
            return _result(step, row.status, duration_ms / 1000, journal, context)
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
