"""The commit journal of one migration step: its intent record, lock checks and all-or-nothing commit."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, TableAlreadyExistsError
from pyiceberg.table.update import AssertRefSnapshotId

from iceberg_ops_provider.core.atomic.changes import TableChange
from iceberg_ops_provider.core.atomic.commit import commit_atomically
from iceberg_ops_provider.core.retrying import LOST_RACE, lost_races
from iceberg_ops_provider.data_steps.restore import tag_name
from iceberg_ops_provider.errors import UnfinishedDataStepsError
from iceberg_ops_provider.history.intent import Intent, IntentAction, receipt
from iceberg_ops_provider.history.lock import NamespaceLock
from iceberg_ops_provider.history.records import HistoryRow
from iceberg_ops_provider.history.store import StagedWrite
from iceberg_ops_provider.runner.commit_modes import ATOMIC_MODES, explain_commit_mode
from iceberg_ops_provider.runner.planning import PlanStep
from iceberg_ops_provider.runner.session import RunSession, success_status
from iceberg_ops_provider.runner.step_cleanup import step_id_prefix

__all__ = ["RunJournal"]

_ATOMIC_ATTEMPTS = 40
"""Attempts of a step's all-or-nothing commit lost to other runs' commits (of other namespaces, on the
shared history table) before giving up: up to about a minute of waiting under heavy contention."""


class RunJournal:
    """The :class:`~iceberg_ops_provider.migration.context.CommitJournal` of one migration step.

    It records the intent in the lock table before the first commit and checks the lock before every
    commit. The intent is recorded again when a commit not yet listed comes, or when the body finishes after
    an early commit; a commit made together with the history row (:meth:`commit_together`) needs none.
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
        self.resuming: Intent | None = None
        """The intent of the interrupted run this step continues (:meth:`resume`), else ``None``."""

    def resume(self, intent: Intent) -> None:
        """Continue an interrupted run of this step, stopped in its data steps: its intent and step ids are kept."""
        self.intent = intent
        self.resuming = intent

    def data_step_id(self, ordinal: int) -> str:
        """The id of the step's ``ordinal``-th data step; a resumed step keeps the interrupted run's."""
        run_id = self.resuming.run_id if self.resuming is not None else self.session.run_id
        prefix = step_id_prefix(self.session.target.namespace, self.step.version, self.step.direction)
        return f"{prefix}{run_id}/{ordinal}"

    def restore_point(self) -> tuple[str, str, bool]:
        """This migration's restore point: its tag, its upgrade's data-step id prefix, whether this step takes it.

        An upgrade takes the restore point; a downgrade's ``restore_data`` returns to it.
        """
        namespace, version = self.session.target.namespace, self.step.version
        upgrade = step_id_prefix(namespace, version, "upgrade")
        return tag_name(namespace, version), upgrade, self.step.direction == "upgrade"

    def data_progress(self, event: str) -> None:
        """A data step's progress (one unit committed): reported, and the lease checked before the next unit."""
        self.session.keeper.check()
        self.session.reporter.event(f"{self.session.target.namespace}: {self.step.version}: {event}")

    def elapsed_ms(self) -> int:
        """Milliseconds since the step's body started: its one duration, taken when its history record is made."""
        return int((time.perf_counter() - self.started) * 1000)

    def receipt(self, step: int) -> str:
        """The receipt of this migration's ``step``-th commit."""
        return receipt(self.session.target.namespace, self.step.version, self.step.direction, self.session.run_id, step)

    def before_commit(self, actions: list[IntentAction], *, complete: bool) -> None:
        """Record the intent when ``actions`` are not listed yet, else check the lock is still this run's."""
        session = self.session
        session.keeper.check()
        intent = self.intent
        if self.resuming is not None:
            self._check_same_data_steps(actions)
        if intent is None:
            if not actions:
                return  # nothing was or will be committed
            intent = self._new_intent()
        elif intent.covers(actions) and (intent.complete or not complete):
            # Nothing to record; make sure the lock is still ours right before the commit, from the
            # catalog itself (the lease thread may not have noticed a takeover yet), unless the intent
            # write that came just before proved it.
            if not self._proven:
                session.target.lock.check_held(session.held)
            self._proven = False
            return
        intent = intent.with_actions(actions, complete=complete)
        session.intent_settled = False
        session.target.lock.write_intent(session.held, intent)
        self.intent = intent
        self._proven = True

    def _check_same_data_steps(self, actions: list[IntentAction]) -> None:
        """A resumed step must ask for the data steps its interrupted run started, and nothing else to commit."""
        resuming = self.resuming
        assert resuming is not None
        started = [action for action in resuming.actions if action.kind == "data"]
        asked = [action for action in actions if action.kind == "data"]
        if asked and asked != started:
            raise UnfinishedDataStepsError(
                resuming.namespace,
                resuming.version,
                resuming.direction,
                resuming.run_id,
                expected=[_data_label(n, action) for n, action in enumerate(started, 1)],
                found=[_data_label(n, action) for n, action in enumerate(asked, 1)],
            )

    def _new_intent(self) -> Intent:
        session, step = self.session, self.step
        now = datetime.now(UTC)
        return Intent(session.target.namespace, step.version, step.direction, session.run_id, session.executed_by, now)

    # -- all-or-nothing commits -----------------------------------------------------------------

    def atomic_mode(self) -> str | None:
        """The multi-table commit this step's remaining changes can use, or ``None`` (one commit per table).

        ``None`` also once the step committed something on its own (an early commit, a table or the
        catalog reached directly): its intent record then covers the rest as well.
        """
        target = self.session.target
        mode = target.commit_mode()
        if mode not in ATOMIC_MODES:
            self.not_atomic = explain_commit_mode(target.catalog, mode, atomic_commits=target.atomic_commits)
            return None
        return mode if self.intent is None else None

    def commit_together(
        self, changes: list[TableChange], actions: list[IntentAction], *, outside: list[str], record: bool = True
    ) -> bool:
        """Commit the step's table changes, its history row and a check of the lock in one commit.

        Without ``record`` the history row is left out: the step's data steps run after this commit,
        under the intent recorded before it, and its row is written once they finished.

        A commit refused because the history or the lock table moved on meanwhile (another
        namespace's run recorded its own step, the lease was renewed) is staged again and retried; one
        refused because a migrated table changed, or the lock is no longer this run's, raises.

        ``actions`` are what ``changes`` are, as the intent would list them; ``outside`` what the step
        committed separately just before. Returns ``False`` when the catalog cannot commit them together
        after all (nothing was committed).
        """
        session = self.session
        target = session.target
        session.keeper.check()
        step = self.step
        row = session.row(step.version, success_status(step.direction), step.direction, duration_ms=self.elapsed_ms())
        expected = {row.version: session.expected.get(row.version)}
        held = AssertRefSnapshotId(ref=NamespaceLock.TAG, snapshot_id=session.held.snapshot_id)
        lock = TableChange(target.lock.identifier, (), (held,))
        result = None
        others: list[BaseException] = []  # refusals that were other runs' doing: only these are retried
        retrying = lost_races(
            _ATOMIC_ATTEMPTS, what=f"{target.namespace}: {step.version}", when=lambda exc: exc in others
        )
        for attempt in retrying:
            with attempt:
                try:
                    staged = target.history_store.stage(target.namespace, [row], expected) if record else None
                except LOST_RACE as exc:  # another namespace's expiry removed the snapshot it started from
                    others.append(exc)
                    raise
                bookkeeping = [staged.change, lock] if staged is not None else [lock]
                try:
                    result = commit_atomically(target.catalog, [*changes, *bookkeeping])
                except CommitFailedException as exc:
                    _discard(staged)
                    self._explain_refusal(changes)
                    others.append(exc)
                    raise
                except CommitStateUnknownException:
                    if staged is None or not self._landed(row, actions):
                        raise  # without a history row, the intent written before tells the next run
                except BaseException:
                    _discard(staged)
                    raise
        if result is not None:
            if not result.applied:
                _discard(staged)
                self.not_atomic = result.reason
                session.reporter.event(
                    f"{target.namespace}: {step.version}: {result.reason}; committing table by table"
                )
                return False
            if staged is not None:
                staged.committed(result)
        self.recorded = row if record else None
        if outside:
            session.reporter.event(
                f"{target.namespace}: {step.version}: committed outside its all-or-nothing commit, one by one "
                f"before it: {', '.join(outside)}"
            )
        return True

    def _explain_refusal(self, changes: list[TableChange]) -> None:
        """After a refused multi-table commit: raise when a migrated table or the lock is the reason."""
        target = self.session.target
        target.lock.check_held(self.session.held)  # LockLostError
        for change in changes:
            if change.creates:
                if target.catalog.table_exists(change.identifier):
                    raise TableAlreadyExistsError(f"Table {change.label()} already exists; nothing was committed")
                continue
            metadata = target.catalog.load_table(change.identifier).metadata
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
        target = self.session.target
        try:
            rows = target.history_store.rows(target.namespace)
        except Exception:
            self.intent = self._new_intent().with_actions(actions, complete=True)
            return False
        return any(
            found.version == row.version and found.run_id == row.run_id and found.applied_at == row.applied_at
            for found in rows
        )


def _discard(staged: StagedWrite | None) -> None:
    if staged is not None:
        staged.discard()


def _data_label(number: int, action: IntentAction) -> str:
    """``step 2 on sales.orders (definition 659508830cd1f734)``."""
    return f"step {number} on {action.table} (definition {action.fingerprint})"
