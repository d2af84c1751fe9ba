"""One locked run's bookkeeping: its history rows and outcomes, and settling what an earlier run left.

A :class:`RunSession` knows its runner only as a :class:`RunTarget` and reports through a :class:`Reporter`,
so nothing here imports the runner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from iceberg_ops_provider.errors import PartialMigrationError
from iceberg_ops_provider.history.events import EventLog, MigrationEvent
from iceberg_ops_provider.history.intent import Assessment, Intent, IntentAction, assess
from iceberg_ops_provider.history.lease import LeaseKeeper
from iceberg_ops_provider.history.lock import Acquisition, LockInfo, NamespaceLock, process_identity
from iceberg_ops_provider.history.records import HistoryRow, Operation, Status
from iceberg_ops_provider.history.store import HistoryStore
from iceberg_ops_provider.runner.planning import NamespaceState, PlanStep, classify
from iceberg_ops_provider.runner.results import MigrationResult
from iceberg_ops_provider.runner.step_cleanup import forget_data_steps

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.core.atomic.changes import CommitMode

__all__ = [
    "Reporter",
    "RunSession",
    "RunTarget",
    "action_labels",
    "is_settled",
    "success_status",
    "unsettled",
]

log = logging.getLogger("iceberg_ops_provider.runner")


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


def unsettled(rows: list[HistoryRow], holder: LockInfo | None, intent: Intent | None) -> Intent | None:
    """``intent`` when its run stopped mid-migration and the history does not settle it; ``None`` otherwise."""
    if intent is None or is_settled(classify([], rows), intent):
        return None
    if holder is not None and holder.run_id == intent.run_id and holder.stale_reason() is None:
        return None  # its run is still going
    return intent


def action_labels(actions: tuple[IntentAction, ...]) -> list[str]:
    """The labels of intent actions, for messages and event details."""
    return [action.label() for action in actions]


class Reporter:
    """Where a runner's messages go: every one to ``on_event`` and the log, notable ones to the event log too."""

    def __init__(self, namespace: str, event_log: EventLog, on_event: Callable[[str], None] | None) -> None:
        self.namespace = namespace
        self.event_log = event_log
        self.on_event = on_event

    def event(self, message: str, level: int = logging.INFO) -> None:
        """Report ``message``: logged on ``iceberg_ops_provider.runner.migration_runner`` and passed to ``on_event``."""
        log.log(level, "%s", message, extra={"progress": self.on_event is not None})
        if self.on_event is not None:
            self.on_event(message)

    def note(
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
        self.event(message, level)
        self.event_log.record(
            self.namespace, event, message, version=version, run_id=run_id, executed_by=executed_by, details=details
        )


class RunTarget(Protocol):
    """What a run needs of its runner (:class:`~iceberg_ops_provider.runner.migration_runner.MigrationRunner`)."""

    catalog: Catalog
    namespace: str
    meta_namespace: str
    lock: NamespaceLock
    history_store: HistoryStore
    lock_context: dict[str, str]
    atomic_commits: bool

    @property
    def folder(self) -> Path:
        """The folder the migrations of the namespace are read from."""
        ...

    def commit_mode(self) -> CommitMode | None:
        """How a migration's changes to several tables are committed (``None``: not known yet)."""
        ...


class RunSession:
    """One locked run: settles what an earlier run left, and records the steps it executes.

    It tracks what it expects the history to hold, so a run that bypassed the lock is caught when
    writing, and whether the lock table's intent record is settled (recorded in the history), so the
    release can clear it. ``state`` is the files compared with the history, read under the lock
    ``held``, whose lease ``keeper`` renews.
    """

    def __init__(
        self,
        target: RunTarget,
        reporter: Reporter,
        run_id: str,
        state: NamespaceState,
        held: LockInfo,
        keeper: LeaseKeeper,
    ) -> None:
        self.target = target
        self.reporter = reporter
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
        self.resume: Intent | None = None
        """An interrupted run's intent, stopped in its migration's data steps: this run's first step finishes them."""

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
            checksum, source_sha256 = previous.checksum, previous.source_sha256
        else:
            checksum, source_sha256 = (script.checksum, script.source_sha256 or None) if script else (None, None)
        return HistoryRow(
            version=known,
            namespace=self.target.namespace,
            description=state.description(version),
            applied_at=datetime.now(UTC),
            status=status,
            error=error,
            checksum=checksum,
            duration_ms=duration_ms,
            operation=operation,
            executed_by=executed_by or self.executed_by,
            run_id=run_id or self.run_id,
            source_sha256=source_sha256,
        )

    def write(self, rows: list[HistoryRow], **details: Any) -> None:
        """Write history rows, checking they replace what this run last saw and that the lock is still this run's.

        The lock is read from the catalog, not taken from the lease thread's last word: a lock released by
        ``unlock`` (or taken over) moments ago must stop the run before it records anything.
        """
        self.keeper.check()
        self.target.lock.check_held(self.held)
        expected = {row.version: self.expected.get(row.version) for row in rows}
        self.target.history_store.record(self.target.namespace, rows, expected)
        self.written(rows, **details)

    def written(self, rows: list[HistoryRow], **details: Any) -> None:
        """Note history rows that reached the history table (written here, or with the step's changes).

        ``details`` go into each row's event (a step's data steps: what they read and changed).
        """
        for row in rows:
            self.expected[row.version] = row.status
        self.outcomes += [self.outcome(row, **details) for row in rows]

    def outcome(self, row: HistoryRow, **details: Any) -> MigrationEvent:
        """The event of a history row this run writes (or tried to write)."""
        if row.run_id != self.run_id:  # settled from an interrupted run's intent record
            details["recorded_by_run"] = self.run_id
        if self.target.lock_context:  # which Airflow dag run / task / try ran it
            details["context"] = dict(self.target.lock_context)
        return MigrationEvent.from_history_row(row, **details)

    def refused(self, step: PlanStep, reason: str) -> None:
        """Keep, as an event, a step refused before it committed anything (an irreversible rollback)."""
        event = MigrationEvent(
            namespace=self.target.namespace,
            at=datetime.now(UTC),
            event="rollback_refused",
            version=step.version,
            run_id=self.run_id,
            executed_by=self.executed_by,
            message=f"refused to roll back {step.version} {step.description}: {reason}",
            details={"context": dict(self.target.lock_context)} if self.target.lock_context else {},
            error=reason,
        )
        self.outcomes.append(event)

    # -- what an earlier run left ---------------------------------------------------------------

    def _note(
        self, event: str, message: str, *, version: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        """A warning-level event of this run, reported and kept in the event log."""
        self.reporter.note(
            event,
            message if message.startswith(f"{self.target.namespace}:") else f"{self.target.namespace}: {message}",
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
        target = self.target
        if acquisition.taken_over is not None:
            holder, reason = acquisition.taken_over
            message = f"took over the migration lock from {holder.describe()}: {reason}"
            self._note("lock_taken_over", message, details={"previous_holder": holder.to_json(), "reason": reason})
            self._sweep_meta_tables()
        if acquisition.intent_error is not None:
            if not stamping:
                raise acquisition.intent_error
            self._note("intent_cleared", "cleared an unreadable intent record; this stamp records the outcome")
            self.intent_settled = False
            self.clear_unreadable = True
            return False
        intent = acquisition.intent
        if intent is None or intent.namespace != target.namespace:
            return False
        if is_settled(self.state, intent):
            # Its run recorded the outcome and stopped before clearing the record, perhaps before forgetting
            # its data steps too.
            forget_data_steps(target.catalog, intent)
            return False
        self.intent_settled = False
        assessment = assess(target.catalog, intent)
        return self._settle(intent, assessment, stamping=stamping)

    def _sweep_meta_tables(self) -> None:
        """After a takeover: delete the files a run killed mid-write left in the history and event tables.

        Such a run wrote files it never committed, or committed an expiry and died before deleting what it
        expired. The namespace's own history folder is written only under its lock: all of it is swept. The
        rest is shared with other namespaces' runs: only files older than half a lease go (a live writer's
        are seconds old). Best effort.
        """
        from pyiceberg.table.locations import SimpleLocationProvider
        from pyiceberg.typedef import Record

        from iceberg_ops_provider.history.store import load_meta_table
        from iceberg_ops_provider.maintenance.orphans import remove_orphan_files

        target = self.target
        shared = timedelta(seconds=target.lock.stale_after / 2)
        for identifier in (target.history_store.identifier, self.reporter.event_log.identifier):
            name = ".".join(identifier)
            try:
                table = load_meta_table(target.catalog, identifier)
                if table is None:
                    continue
                sweeps: list[tuple[str | None, datetime | timedelta]] = [(None, shared)]
                provider = table.location_provider()
                if identifier == target.history_store.identifier and isinstance(provider, SimpleLocationProvider):
                    own = table.spec().partition_to_path(Record(target.namespace), table.schema())
                    sweeps.insert(0, (f"{provider.data_path}/{own}", datetime.now(UTC)))
                for location, older_than in sweeps:
                    swept = remove_orphan_files(table, older_than, location=location, check_nested_tables=False)
                    log.info("%s: deleted %d file(s) a killed run left", name, swept.deleted_orphan_files_count)
            except Exception as exc:
                log.warning("could not sweep %s after a takeover: %s: %s", name, type(exc).__name__, exc)

    def _settle(self, intent: Intent, assessment: Assessment, *, stamping: bool) -> bool:
        target = self.target
        version, direction = intent.version, intent.direction
        details = {
            "intent": intent.to_json(),
            "committed": action_labels(assessment.committed),
            "not_committed": assessment.unfinished(),
        }
        outcome = assessment.outcome
        if outcome == "all":
            row = self.row(
                version, success_status(direction), direction, run_id=intent.run_id, executed_by=intent.executed_by
            )
            self.write([row])
            forget_data_steps(target.catalog, intent)
            message = (
                f"{target.namespace}: run {intent.run_id} was interrupted after committing every change of "
                f"{version} ({direction}); recorded it as {row.status} without running it again"
            )
        elif outcome == "none":
            if direction == "upgrade":
                error = f"interrupted before committing anything (run {intent.run_id})"
                self.write([self.row(version, "failed", "upgrade", error=error, run_id=intent.run_id)])
            message = (
                f"{target.namespace}: run {intent.run_id} was interrupted before committing any change of "
                f"{version} ({direction}); it will run again"
            )
        elif stamping:
            message = (
                f"{target.namespace}: cleared the record of {version} ({direction}) left unsettled by run "
                f"{intent.run_id} ({_committed_text(details['committed'])}); this stamp records the outcome"
            )
        elif outcome == "resumable":
            self.resume = intent
            self._note(
                "resuming",
                f"{target.namespace}: run {intent.run_id} stopped in the data steps of {version} ({direction}) after "
                "committing its schema changes; this run finishes them, each from its last committed unit",
                version=version,
                details=details,
            )
            return False
        else:
            partial = PartialMigrationError(
                target.namespace,
                version,
                direction,
                details["committed"],
                details["not_committed"],
                run_id=intent.run_id,
            )
            self.reporter.note(
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
        return outcome == "all" or (outcome == "none" and direction == "upgrade")  # a history row was written


def _committed_text(committed: list[str]) -> str:
    """What an interrupted run is known to have committed, for a message."""
    return f"committed: {', '.join(committed)}" if committed else "no change of it was found committed"
