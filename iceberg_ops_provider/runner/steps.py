"""Executing one step of a locked run: its body, its commits, its history row, or the failure that stops the run.

:func:`inspect_step` runs a body as a dry run instead, for ``plan(inspect=True)``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from iceberg_ops_provider.data_steps.restore import tag_name
from iceberg_ops_provider.errors import (
    ConcurrentMigrationError,
    DryRunLimit,
    IrreversibleMigrationError,
    MigrationError,
    MigrationFailedError,
    MigrationNotRecordedError,
    PartialMigrationError,
    UnfinishedDataStepsError,
)
from iceberg_ops_provider.history.intent import Assessment, assess
from iceberg_ops_provider.history.lock import LockLostError
from iceberg_ops_provider.history.records import Status
from iceberg_ops_provider.migration.context import MigrationContext
from iceberg_ops_provider.migration.discovery import importable
from iceberg_ops_provider.migration.risks import ORDER
from iceberg_ops_provider.runner.journal import RunJournal
from iceberg_ops_provider.runner.planned_catalog import PlannedCatalog
from iceberg_ops_provider.runner.planning import PlanStep
from iceberg_ops_provider.runner.results import MigrationResult
from iceberg_ops_provider.runner.session import RunSession, RunTarget, action_labels, success_status
from iceberg_ops_provider.runner.step_cleanup import forget_data_steps, step_id_prefix

__all__ = ["execute_step", "inspect_step"]


def _failure_hint(direction: str, outcome: str, recorded: bool) -> str:
    """What a failed step's error says happened and happens next; consistent with what was recorded."""
    if outcome == "resumable":
        return (
            f" Its schema changes are committed and its data steps stopped; the next {direction} of it finishes "
            "them, each from its last committed unit."
        )
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


def _result(
    step: PlanStep, status: Status, duration: float, journal: RunJournal, context: MigrationContext
) -> MigrationResult:
    """The result of a step whose changes were all committed: how they were committed, and what fell outside."""
    atomic = journal.recorded is not None
    reason = journal.not_atomic or context.not_atomic_reason or "its changes were committed table by table"
    return MigrationResult(
        step.version,
        step.description,
        status,
        duration,
        step.direction,
        atomic=atomic,
        outside_atomic_commit=tuple(context.separate_commits),
        not_atomic_reason=None if atomic else reason,
        data_steps=tuple(result.to_json() for result in context.data_results),
    )


def execute_step(session: RunSession, step: PlanStep, index: int, total: int) -> MigrationResult:
    """Run one step: its body, its commits (with intent and receipts), then its history row."""
    target = session.target
    script = step.script
    if script is None:  # check_integrity refuses missing files before we get here
        raise MigrationFailedError(step.version, step.direction, FileNotFoundError("migration file is missing"))
    verb = "applying" if step.direction == "upgrade" else "rolling back"
    session.reporter.event(f"[{index}/{total}] {verb} {step.version} {step.description}")
    journal = RunJournal(session, step)
    resume = session.resume
    if resume is not None:  # an interrupted run's data steps come first, then anything else
        if (resume.version, resume.direction) != (step.version, step.direction):
            raise UnfinishedDataStepsError(target.namespace, resume.version, resume.direction, resume.run_id)
        journal.resume(resume)
        session.resume = None
    context = MigrationContext(
        target.catalog, target.namespace, journal, meta_namespace=target.meta_namespace, resuming=resume is not None
    )
    journal.started = time.perf_counter()
    try:
        with importable(target.folder):  # a lazy `from _helpers import x` in a body works as at import time
            getattr(script.migration, step.direction)(context)
        context.finish()
    except IrreversibleMigrationError as exc:
        context.discard()
        if journal.intent is not None:  # it committed something before refusing: a failure like any other
            raise _failure(session, step, index, total, exc, journal, context) from exc
        session.refused(step, str(exc))
        raise IrreversibleMigrationError(
            f"Cannot roll back {target.namespace!r} past {step.version} ({step.description}): "
            f"{str(exc).rstrip('.')}. Version {step.version} stays applied; {len(session.completed)} step(s) of "
            "this run were rolled back."
        ) from exc
    except UnfinishedDataStepsError:
        context.discard()  # nothing of this run committed: the interrupted run's record stays for the next
        raise
    except BaseException as exc:
        context.discard()
        failure = _failure(session, step, index, total, exc, journal, context)
        if isinstance(failure, MigrationResult) and isinstance(exc, Exception):
            session.completed.append(failure)
            return failure
        if isinstance(exc, Exception | SystemExit):  # a migration that exits is a failed migration
            raise failure from exc
        raise  # interrupts and task timeouts keep their type, after being recorded
    status = success_status(step.direction)
    # One duration per step, measured once, when its history record is made: the record, the result
    # (the CLI's table and --json), the progress line and the event all show this value.
    row = journal.recorded  # committed together with the step's changes, its duration measured then
    data_steps = {"data_steps": [result.to_json() for result in context.data_results]} if context.data_results else {}
    if row is None:
        row = session.row(step.version, status, step.direction, duration_ms=journal.elapsed_ms())
        try:
            session.write([row], **data_steps)
        except ConcurrentMigrationError:
            raise
        except Exception as exc:
            raise MigrationNotRecordedError(step.version, step.direction, exc) from exc
    else:
        session.written([row])
    if journal.intent is not None:
        session.intent_settled = True
    forget_data_steps(target.catalog, journal.intent)  # only now: the history row says no run resumes them
    duration = (row.duration_ms or 0) / 1000
    result = _result(step, status, duration, journal, context)
    how = "all-or-nothing, with its history record" if result.atomic else f"table by table: {result.not_atomic_reason}"
    session.reporter.event(f"[{index}/{total}] {step.version} {status} in {duration:.2f}s ({how})")
    session.completed.append(result)
    return result


def _failure(
    session: RunSession,
    step: PlanStep,
    index: int,
    total: int,
    exc: BaseException,
    journal: RunJournal,
    context: MigrationContext,
) -> MigrationError | MigrationResult:
    """Record a failed step (best effort) and build the error that stops the run.

    Returns a result instead when every commit of the finished body landed although one of them
    reported an error (an answer lost on the way back): the migration is done and recorded so.
    """
    duration_ms = journal.elapsed_ms()
    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__  # Ctrl-C says nothing more
    if isinstance(exc, LockLostError):
        # Another run holds the namespace now and settles this migration from the intent record. The
        # error raised says so in full; the step line only marks where the run stopped.
        session.reporter.event(
            f"[{index}/{total}] {step.version} STOPPED: this run lost the namespace's lock ({type(exc).__name__})",
            logging.WARNING,
        )
        failure: MigrationError = exc
        failure.completed = list(session.completed)  # type: ignore[attr-defined]
        return failure
    assessment: Assessment | None = None
    checked = ""
    if journal.intent is None:
        assessment = Assessment(committed=(), not_committed=(), complete=False)
    else:
        try:
            assessment = assess(session.target.catalog, journal.intent)
        except Exception as check_error:
            checked = (
                f" Could not check which of its commits landed ({type(check_error).__name__}: {check_error}); "
                "the next run checks before doing anything else."
            )
    outcome = assessment.outcome if assessment is not None else "unknown"
    done = outcome == "all"  # every commit of the finished body landed, though one reported an error
    if done:
        row = session.row(step.version, success_status(step.direction), step.direction, duration_ms=duration_ms)
    elif step.direction == "upgrade":
        noted = (
            f"{error} (partly committed: {', '.join(action_labels(assessment.committed))})"
            if (outcome == "partial" and assessment is not None and assessment.committed)
            else error
        )
        row = session.row(step.version, "failed", "upgrade", error=noted, duration_ms=duration_ms)
    else:
        row = session.row(
            step.version, "applied", "downgrade", error=f"downgrade failed: {error}", duration_ms=duration_ms
        )
    try:
        session.write([row])
        recorded = True
        if outcome in ("none", "all"):
            session.intent_settled = True
    except Exception as record_error:  # the migration's own error matters more
        recorded = False
        session.outcomes.append(
            session.outcome(row, history_write_failed=f"{type(record_error).__name__}: {record_error}")
        )
        checked += f" Recording it in the history failed: {type(record_error).__name__}: {record_error}."
    if done:
        if recorded:
            forget_data_steps(session.target.catalog, journal.intent)
        session.reporter.event(f"[{index}/{total}] {step.version} {row.status} (a commit reported {error}, yet landed)")
        return _result(step, row.status, duration_ms / 1000, journal, context)
    hint = _failure_hint(step.direction, outcome, recorded) + checked
    if context.created_namespaces:
        hint += f" It created namespace(s) {', '.join(context.created_namespaces)}."
    # The step line says which step failed and how; the error that stops the run carries the whole
    # message (cause and what happens next), so a front that prints both shows it once. A partly
    # committed step's error has a message of its own: what could not be recorded goes on the line.
    extra = f".{checked}" if outcome == "partial" and checked else ""
    session.reporter.event(
        f"[{index}/{total}] {step.version} FAILED: its {step.direction}() raised {type(exc).__name__}{extra}",
        logging.WARNING,
    )
    if outcome == "partial" and assessment is not None:
        failure = PartialMigrationError(
            session.target.namespace,
            step.version,
            step.direction,
            action_labels(assessment.committed),
            assessment.unfinished(),
            run_id=session.run_id,
        )
    else:
        failure = MigrationFailedError(step.version, step.direction, exc, hint=hint.strip())
    failure.completed = list(session.completed)  # type: ignore[attr-defined]
    return failure


def inspect_step(target: RunTarget, step: PlanStep, planned: PlannedCatalog | None = None) -> PlanStep:
    """``step`` with the operations its body asks for and their highest risk, from a dry run.

    An irreversible ``downgrade()`` is ``irreversible``, a body that raises ``failed``, one that cannot
    be followed to its end ``unknown``. With ``planned``, the body sees the catalog as the steps before
    it leave it, and what it stages is added for the steps after it.
    """
    if step.script is None:
        return replace(step, risk="unknown", operations=({"operation": "the file is missing", "risk": "unknown"},))
    catalog: Any = planned if planned is not None else target.catalog
    namespace, version = target.namespace, step.version
    restore_point = (tag_name(namespace, version), step_id_prefix(namespace, version, "upgrade"), False)
    context = MigrationContext(
        catalog, namespace, meta_namespace=target.meta_namespace, dry_run=True, restore_point=restore_point
    )
    problem: tuple[str, str] | None = None  # what stopped the dry run, and the risk it means
    what = "a dry run of its body raised"
    try:
        with importable(target.folder):
            getattr(step.script.migration, step.direction)(context)
        what = "its data operations were refused:"
        context.finish()  # commits nothing: checks and estimates the data operations on the tables as left
    except DryRunLimit as exc:
        problem = (f"unknown from here: {exc}", "unknown")
    except IrreversibleMigrationError as exc:  # known: a rollback stops here, whatever the body staged before
        problem = (str(exc) or f"{step.version} cannot be rolled back", "irreversible")
    except Exception as exc:  # a run would fail here too
        problem = (f"failed: {what} {type(exc).__name__}: {exc}", "failed")
    operations = list(context.operations)
    changes = tuple(context.pending_changes())
    if planned is not None and (problem is None or problem[1] != "irreversible"):
        planned.apply(context)
    if problem is not None:
        operations.append({"operation": problem[0], "risk": problem[1]})
        risk = problem[1]
    else:
        risk = max((op["risk"] for op in operations), key=lambda r: ORDER.get(r, 1), default="safe")
    return replace(step, operations=tuple(operations), risk=risk, changes=changes)
