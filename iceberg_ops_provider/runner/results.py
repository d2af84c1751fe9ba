"""What the migration runner reports: per-migration results, namespace status, run and repair reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from iceberg_ops_provider.history.intent import Intent
from iceberg_ops_provider.history.lock import LockInfo
from iceberg_ops_provider.history.records import HistoryRow, Operation, Status
from iceberg_ops_provider.migration.discovery import BrokenFile
from iceberg_ops_provider.migration.touched import TouchedTable
from iceberg_ops_provider.runner.planning import NamespaceState, PlanStep

__all__ = ["MigrationResult", "NamespaceStatus", "RepairReport", "RunReport", "current_after"]


@dataclass(frozen=True)
class MigrationResult:
    """What happened to one migration in a run.

    Attributes:
        status: The status recorded: ``applied``, ``rolled_back`` or ``failed``.
        duration: Seconds from the start of its body until its history record was ready (the same
            value as its history row's ``duration_ms``; 0 for a stamp).
        direction: ``upgrade``, ``downgrade`` or ``stamp``.
        tables: The tables its commits reached, each with its net change; empty for a stamp.
        atomic: Whether its table changes and its history record were one all-or-nothing commit.
        outside_atomic_commit: What it committed one commit at a time (``sales.old (drop)``, ``create
            namespace archive``): for an ``atomic`` migration, what fell outside that commit.
        not_atomic_reason: Why it was not ``atomic``; ``None`` when it was, and for a stamp.
        data_steps: What each of its data steps did (``StepResult.to_json()``: rows changed, files,
            units, the snapshot it read, rows others appended meanwhile and left as they were).
    """

    version: str
    description: str
    status: Status
    duration: float
    direction: Operation
    tables: tuple[TouchedTable, ...] = ()
    atomic: bool = False
    outside_atomic_commit: tuple[str, ...] = ()
    not_atomic_reason: str | None = None
    data_steps: tuple[dict[str, Any], ...] = ()

    @property
    def duration_ms(self) -> int:
        """:attr:`duration` in milliseconds, as the history row and the event of this step hold it."""
        return round(self.duration * 1000)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (for XCom and the command line's JSON output)."""
        return {
            "version": self.version,
            "description": self.description,
            "status": self.status,
            "duration": round(self.duration, 3),
            "duration_ms": self.duration_ms,
            "direction": self.direction,
            "tables": [table.to_json() for table in self.tables],
            "atomic": self.atomic,
            "outside_atomic_commit": list(self.outside_atomic_commit),
            "not_atomic_reason": self.not_atomic_reason,
            "data_steps": list(self.data_steps),
        }


@dataclass(frozen=True)
class NamespaceStatus:
    """The state of one namespace, as ``status()`` reports it.

    Attributes:
        failed: Versions whose last attempt failed (they are pending too); ``errors`` their errors.
        interrupted: The intent of a run that stopped mid-migration and is not settled yet.
        interrupted_outcome: What that run committed: ``all`` or ``none`` (the next run settles it)
            or ``partial`` (a person settles it with ``stamp``).
        commit_mode: ``atomic`` (table changes and history record in one commit), ``per-table`` or
            ``unknown`` (a REST catalog that could not be asked); ``commit_mode_reason`` says why.
        files_compared: False for a runner without migration files, whose ``pending``, ``changed``,
            ``missing`` and ``out_of_order`` are then not known (``null`` in :meth:`to_json`).
        broken: Migration files that could not be loaded; the rest is reported without them.
    """

    namespace: str
    current: str | None
    applied: list[HistoryRow]
    pending: list[PlanStep]
    failed: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    lock: LockInfo | None = None
    interrupted: Intent | None = None
    interrupted_outcome: str | None = None
    commit_mode: Literal["atomic", "per-table", "unknown"] = "per-table"
    commit_mode_reason: str = ""
    files_compared: bool = True
    broken: list[BrokenFile] = field(default_factory=list)

    @property
    def is_clean(self) -> bool:
        """Nothing pending, nothing odd (broken files included), no interrupted run."""
        return not (self.pending or self.changed or self.missing or self.interrupted or self.broken)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form; what comparing the files finds is ``null`` when they were not compared (not known)."""
        known = self.files_compared
        return {
            "namespace": self.namespace,
            "current": self.current,
            "applied": [row.to_json() for row in self.applied],
            "pending": [step.to_json() for step in self.pending] if known else None,
            "failed": self.failed,
            "errors": self.errors,
            "changed": self.changed if known else None,
            "missing": self.missing if known else None,
            "out_of_order": self.out_of_order if known else None,
            "lock": self.lock.to_json() if self.lock else None,
            "interrupted": self.interrupted.to_json() if self.interrupted else None,
            "interrupted_outcome": self.interrupted_outcome,
            "commit_mode": self.commit_mode,
            "commit_mode_reason": self.commit_mode_reason,
            "files_compared": self.files_compared,
            "broken": [file.to_json() for file in self.broken],
        }


@dataclass(frozen=True)
class RunReport:
    """The current versions a changing run saw under its lock, before (after settling an interrupted run) and after."""

    run_id: str
    version_before: str | None
    version_after: str | None


def current_after(state: NamespaceState, results: list[MigrationResult]) -> str | None:
    """The current version after ``results`` were applied to ``state`` (what a run reports as its version after)."""
    applied = {int(v): v for v in state.applied}
    for result in results:
        if result.status == "applied":
            applied[int(result.version)] = result.version
        elif result.status == "rolled_back":
            applied.pop(int(result.version), None)
    return applied[max(applied)] if applied else None


@dataclass(frozen=True)
class RepairReport:
    """What ``repair`` changed (or, with ``dry_run``, would change).

    Attributes:
        rechecked: Applied versions whose changed file's checksum is recorded anew.
        modernised: Applied versions whose unchanged file had a checksum in the older byte format.
        cleared: Versions whose failed attempts are cleared (they stay pending).
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
        """One line: what would be repaired (a dry run) or what was."""
        kinds = (
            (self.rechecked, ("re-record", "re-recorded"), "the checksum of changed file"),
            (self.modernised, ("update", "updated"), "the checksum format of version"),
            (self.cleared, ("clear", "cleared"), "the failed attempts of version"),
        )
        parts = [
            f"{verb[not self.dry_run]} {what}{'s' if len(listed) > 1 else ''} {', '.join(listed)}"
            for listed, verb, what in kinds
            if listed
        ]
        return "; ".join(parts) or "nothing to repair"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)
