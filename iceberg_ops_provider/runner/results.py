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
        version: The migration's version.
        description: Its description.
        status: The status recorded: ``applied``, ``rolled_back`` or ``failed``.
        duration: Seconds the step took, the one duration measured for it: from the start of its
            ``upgrade()``/``downgrade()`` until its history record was ready to be written (its
            table commits included, except those committed together with that record). Its history
            row's and event's ``duration_ms`` hold the same value in milliseconds (0 for a stamp).
        direction: ``upgrade``, ``downgrade`` or ``stamp``.
        tables: The tables its commits reached, each with its net change (``create``, ``alter``,
            ``drop``, ``rename``, ``overwrite``, or ``write`` for a table it loaded to write itself);
            empty for a stamp.
        atomic: Whether its table changes and its history record were one all-or-nothing commit.
        outside_atomic_commit: What it committed one commit at a time, in order, then the namespaces
            it created (``sales.old (drop)``, ``sales.items (rename to archive.items)``,
            ``create namespace archive``): for an ``atomic`` migration, what fell outside that
            commit; otherwise every commit it made.
        not_atomic_reason: Why it was not ``atomic`` (the catalog has no multi-table commit, atomic
            commits are off, it committed early with ``ctx.commit()``, ...); ``None`` when it was,
            and for a stamp.
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
        errors: The error each of those attempts recorded, by version.
        changed: Applied versions whose file changed.
        missing: Applied versions whose file is gone.
        out_of_order: Pending versions numbered below ``current``.
        lock: Who holds the namespace's lock, if anyone.
        interrupted: The intent of a run that stopped mid-migration and is not settled yet (the next
            run settles it by itself unless it was partial), else ``None``.
        interrupted_outcome: What that run committed: ``all`` or ``none`` (the next run settles it)
            or ``partial`` (a person settles it with ``stamp``).
        commit_mode: How the catalog takes each migration's commits: ``atomic`` (its table changes
            and its history record in one all-or-nothing commit), ``per-table`` (one commit per
            table with intent and receipts, then the history record) or ``unknown`` (a REST catalog
            that could not be asked; it commits table by table until it answers).
        commit_mode_reason: Why, naming the mechanism (``sql-transaction``, ``rest-transaction``),
            the missing endpoint, or ``atomic_commits=False``.
        files_compared: Whether the migration files were compared with the history; false for a
            runner without them (``migrations_dir=None``), whose ``pending``, ``changed``,
            ``missing`` and ``out_of_order`` are then empty because they are not known (``null`` in
            :meth:`to_json`).
        broken: Migration files that could not be loaded (a syntax error, a failing import, a bad
            name), each with its path, line and error; the rest of the status is reported without them.
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

    def _compared_json(self) -> dict[str, Any]:
        """What comparing the files finds; ``null`` each when they were not compared (not known, not none)."""
        known = self.files_compared
        return {
            "pending": [step.to_json() for step in self.pending] if known else None,
            "failed": self.failed,
            "errors": self.errors,
            "changed": self.changed if known else None,
            "missing": self.missing if known else None,
            "out_of_order": self.out_of_order if known else None,
        }

    def to_json(self) -> dict[str, Any]:
        """JSON-able form.

        ``pending``, ``changed``, ``missing`` and ``out_of_order`` are ``null`` when :attr:`files_compared`
        is false: not known, which an empty list would deny.
        """
        return {
            "namespace": self.namespace,
            "current": self.current,
            "applied": [row.to_json() for row in self.applied],
            **self._compared_json(),
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
    """The versions a changing run (``upgrade``, ``downgrade``, ``stamp``) saw, read under its lock.

    Attributes:
        run_id: The run.
        version_before: The current version when the run took the lock (after settling an interrupted run).
        version_after: The current version when it finished (``None`` also at base).
    """

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
        """One line: what would be repaired (a dry run) or what was."""
        done = not self.dry_run

        def versions(listed: list[str], noun: str) -> str:
            return f"{noun}{'s' if len(listed) > 1 else ''} {', '.join(listed)}"

        parts = []
        if self.rechecked:
            verb = "re-recorded" if done else "re-record"
            parts.append(f"{verb} the checksum of changed {versions(self.rechecked, 'file')}")
        if self.modernised:
            verb = "updated" if done else "update"
            parts.append(f"{verb} the checksum format of {versions(self.modernised, 'version')}")
        if self.cleared:
            verb = "cleared" if done else "clear"
            parts.append(f"{verb} the failed attempts of {versions(self.cleared, 'version')}")
        return "; ".join(parts) or "nothing to repair"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)
