"""What a page, a dashboard or a script shows of a namespace: its versions, and its audit trail a page at a time.

The **origins** of runs group the ``context`` the runs recorded (``lock_context`` of the runner)
without the keys that change from run to run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.history.events import MigrationEvent
from iceberg_ops_provider.history.records import HistoryRow
from iceberg_ops_provider.migration.discovery import MigrationScript

if TYPE_CHECKING:
    from iceberg_ops_provider.runner.migration_runner import MigrationRunner
    from iceberg_ops_provider.runner.results import NamespaceStatus

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "PER_RUN_KEYS",
    "AuditTrail",
    "RunOrigin",
    "VersionRow",
    "audit_trail",
    "origins",
    "version_table",
]

DEFAULT_PAGE_SIZE = 50
"""Events on one page unless asked otherwise."""

MAX_PAGE_SIZE = 500
"""The most events one page may hold."""

PER_RUN_KEYS = frozenset({"run_id", "try_number"})
"""Context keys that differ between runs of one origin (left out when grouping runs by origin)."""


@dataclass(frozen=True)
class RunOrigin:
    """Where a group of runs came from: one context without its per-run keys.

    Attributes:
        context: The newest full context of the group (``{"dag_id", "run_id", "task_id", "try_number"}``
            for the Airflow operator).
        last_at: When the newest event of the group happened.
        events: How many events the group recorded.
    """

    context: dict[str, str]
    last_at: datetime
    events: int

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"context": dict(self.context), "last_at": self.last_at.isoformat(), "events": self.events}


@dataclass(frozen=True)
class AuditTrail:
    """One page of a namespace's events, newest first.

    Attributes:
        namespace: The namespace.
        events: The page's events, newest first.
        total: Events in the whole trail.
        offset: How many newer events come before this page.
        limit: The page size asked for.
        origins: Where the runs of the whole trail came from, the most recent origin first.
    """

    namespace: str
    events: list[MigrationEvent]
    total: int
    offset: int
    limit: int
    origins: list[RunOrigin]

    @property
    def has_newer(self) -> bool:
        """Whether newer events come before this page."""
        return self.offset > 0

    @property
    def has_older(self) -> bool:
        """Whether older events come after this page."""
        return self.offset + len(self.events) < self.total

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "namespace": self.namespace,
            "events": [event.to_json() for event in self.events],
            "total": self.total,
            "offset": self.offset,
            "limit": self.limit,
            "origins": [origin.to_json() for origin in self.origins],
        }


def _check_page(offset: object, limit: object) -> tuple[int, int]:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an integer of at least 0, got {offset!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}, got {limit!r}")
    return offset, limit


def origins(events: list[MigrationEvent]) -> list[RunOrigin]:
    """The origins of ``events`` (any order): each distinct context without :data:`PER_RUN_KEYS`, newest first.

    Events without a context (a run from the command line) have no origin.
    """
    groups: dict[tuple[tuple[str, str], ...], list[MigrationEvent]] = {}
    for event in events:
        context = event.details.get("context") if isinstance(event.details, dict) else None
        if not isinstance(context, dict) or not context:
            continue
        key = tuple(sorted((str(k), str(v)) for k, v in context.items() if k not in PER_RUN_KEYS))
        groups.setdefault(key, []).append(event)
    found = []
    for members in groups.values():
        newest = max(members, key=lambda event: event.at)
        context = {str(k): str(v) for k, v in newest.details["context"].items()}
        found.append(RunOrigin(context=context, last_at=newest.at, events=len(members)))
    return sorted(found, key=lambda origin: origin.last_at, reverse=True)


def audit_trail(runner: MigrationRunner, *, offset: int = 0, limit: int = DEFAULT_PAGE_SIZE) -> AuditTrail:
    """A page of the namespace's events, newest first, with the origins of its runs.

    Args:
        runner: A runner of the namespace (one without migration files is enough).
        offset: How many of the newest events to skip (0: the newest page).
        limit: Events on the page, 1 to :data:`MAX_PAGE_SIZE`.

    Raises:
        ValueError: ``offset`` or ``limit`` out of range.
        CatalogUnavailableError: The catalog did not answer.
    """
    offset, limit = _check_page(offset, limit)
    events = runner.events()
    newest_first = sorted(events, key=lambda event: event.at)[::-1]  # equal times: the later recorded first
    return AuditTrail(
        namespace=runner.namespace,
        events=newest_first[offset : offset + limit],
        total=len(newest_first),
        offset=offset,
        limit=limit,
        origins=origins(newest_first),
    )


@dataclass(frozen=True)
class VersionRow:
    """One migration version of a namespace, as files and history say together.

    Attributes:
        state: ``applied``, ``pending`` (never run or rolled back), ``failed`` (pending again),
            ``changed``, ``missing`` or ``rolled_back`` (a history row without a file).
        recorded_checksum: The file's checksum when the history row was written.
        file_checksum: The checksum of a pending version's file (the file that would run).
        at: When the history row was written.
    """

    version: str
    description: str
    state: str
    recorded_checksum: str | None = None
    file_checksum: str | None = None
    at: datetime | None = None
    duration_ms: int | None = None
    executed_by: str | None = None
    error: str | None = None
    out_of_order: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**asdict(self), "at": self.at.isoformat() if self.at else None}


def version_table(
    status: NamespaceStatus, history: list[HistoryRow], scripts: list[MigrationScript] | None = None
) -> list[VersionRow]:
    """One row per version the files or the history know, in version order.

    Args:
        status: The namespace's ``status()``.
        history: Its ``history()`` rows (every version's latest state).
        scripts: Its migration files (``runner.scripts(broken=[])``), for the checksums of the
            pending ones; without them a pending version has no ``file_checksum``.
    """
    files = {script.number: script for script in scripts or ()}
    rows = {row.version: row for row in history}
    pending = {step.version: step for step in status.pending}
    failed, changed, missing = set(status.failed), set(status.changed), set(status.missing)
    out_of_order = set(status.out_of_order)
    versions = sorted({*rows, *pending}, key=int)
    table = []
    for version in versions:
        row = rows.get(version)
        step = pending.get(version)
        script = (step.script or files.get(int(version))) if step is not None else None
        if version in failed:
            state = "failed"
        elif step is not None:
            state = "pending"
        elif version in missing:
            state = "missing"
        elif version in changed:
            state = "changed"
        elif row is not None:
            state = row.status
        else:  # pragma: no cover - a version is in the history or pending
            state = "unknown"
        recorded: dict[str, Any] = {}
        if row is not None:
            recorded = {"recorded_checksum": row.checksum, "at": row.applied_at, "duration_ms": row.duration_ms}
            recorded.update(executed_by=row.executed_by, error=row.error)
        description = step.description if step is not None else (row.description if row else "")
        file_checksum = script.checksum if script is not None else None  # pending files only
        out = version in out_of_order
        table.append(VersionRow(version, description, state, file_checksum=file_checksum, out_of_order=out, **recorded))
    return table
