"""The tables of a catalog that need maintenance, ranked by benefit per byte rewritten, from metadata alone.

:func:`maintenance_queue` runs :func:`~iceberg_ops_provider.maintenance.health.table_health_report` on every
table of the catalog (or of one namespace) under the table's own policy, and keeps the tables whose report
calls for work. Tables whose policy turns maintenance off or is in its quiet hours are listed apart, not
ranked; a table that cannot be read is listed with its error and the others are still measured.

The rank (:attr:`QueuedTable.score`) is defined once, here: the objects the work takes away from every scan
planner and from the metadata, per MiB the work rewrites::

    benefit        = data files compaction removes      (candidates - files it writes)
                   + manifests the rewrite removes      (manifests - manifests after the rewrite)
                   + snapshots expiry removes
    rewrite_bytes  = bytes of the files compaction rewrites
                   + bytes of the current manifests (when they are rewritten)
                   + bytes of metadata.json (when snapshots expire, it is written again)
    score          = benefit / max(rewrite_bytes / MiB, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.catalogs import failure, spec_of
from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.errors import MaintenancePolicyError
from iceberg_ops_provider.maintenance.binpack import expected_output_files
from iceberg_ops_provider.maintenance.health import TableHealthReport, table_health_report
from iceberg_ops_provider.maintenance.overview import DEFAULT_PARALLELISM, catalog_namespaces
from iceberg_ops_provider.maintenance.policy import MaintenancePolicy, table_policy

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table
    from pyiceberg.typedef import Identifier

__all__ = [
    "MaintenanceQueue",
    "QueueError",
    "QueuedTable",
    "compaction_bytes",
    "maintenance_queue",
    "measure_table",
    "work_benefit",
]

MIB = 1024 * 1024


@dataclass(frozen=True)
class QueuedTable:
    """One table whose health report calls for work, and what the work is worth.

    ``held`` is why the policy keeps maintenance from running now (``disabled``, ``quiet_hours``), or ``None``
    for a ranked table; a ``disabled`` table's report recommends nothing, so its ``needs`` are empty.
    ``max_rewrite_bytes`` is the policy's cap on the bytes one compaction run rewrites (``None``: no cap);
    ``compaction_bytes`` the bytes of the data files the due compaction rewrites (0 when none is due).
    """

    table: str
    needs: tuple[str, ...]
    files_removed: int
    manifests_removed: int
    snapshots_expired: int
    rewrite_bytes: int
    held: str | None
    report: TableHealthReport | None
    max_rewrite_bytes: int | None = None
    compaction_bytes: int = 0

    @property
    def over_budget(self) -> bool:
        """Whether the due compaction rewrites more than the policy lets one run rewrite (the rest waits a run)."""
        return self.max_rewrite_bytes is not None and self.compaction_bytes > self.max_rewrite_bytes

    @property
    def benefit(self) -> int:
        """The files, manifests and snapshots the work takes away (the module's formula)."""
        return self.files_removed + self.manifests_removed + self.snapshots_expired

    @property
    def score(self) -> float:
        """The benefit per MiB rewritten, at least one MiB counted: the rank of the queue (higher first)."""
        return round(self.benefit / max(self.rewrite_bytes / MIB, 1.0), 3)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: the numbers and each needed recommendation (function and parameters)."""
        needed = [] if self.report is None else [r.to_json() for r in self.report.recommendations if r.needed]
        return {
            "table": self.table,
            "needs": list(self.needs),
            "held": self.held,
            "score": self.score,
            "benefit": self.benefit,
            "files_removed": self.files_removed,
            "manifests_removed": self.manifests_removed,
            "snapshots_expired": self.snapshots_expired,
            "rewrite_bytes": self.rewrite_bytes,
            "max_rewrite_bytes": self.max_rewrite_bytes,
            "compaction_bytes": self.compaction_bytes,
            "over_budget": self.over_budget,
            "recommendations": needed,
        }


@dataclass(frozen=True)
class QueueError:
    """A table that could not be measured: what failed (``kind``), the error's type, and its message.

    ``message`` is ``None`` for a failure of the catalog call (its text may be a server's answer).
    """

    table: str
    kind: str
    error: str
    message: str | None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"table": self.table, "kind": self.kind, "error": self.error, "message": self.message}


@dataclass(frozen=True)
class MaintenanceQueue:
    """What :func:`maintenance_queue` found: ranked work, work held by policy, failures, and healthy tables."""

    namespaces: tuple[str, ...]
    generated_at: datetime
    ranked: tuple[QueuedTable, ...]
    held: tuple[QueuedTable, ...]
    errors: tuple[QueueError, ...]
    healthy: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what a DAG reads): ``ranked`` in order, highest score first."""
        return {
            "namespaces": list(self.namespaces),
            "generated_at": self.generated_at.isoformat(),
            "ranked": [entry.to_json() for entry in self.ranked],
            "held": [entry.to_json() for entry in self.held],
            "errors": [error.to_json() for error in self.errors],
            "healthy": list(self.healthy),
        }


def work_benefit(report: TableHealthReport) -> tuple[int, int, int, int]:
    """``(files_removed, manifests_removed, snapshots_expired, rewrite_bytes)`` of the work ``report`` calls for."""
    needs = report.needs
    files = manifests = snapshots = rewrite = 0
    if "compact" in needs:
        due = [p for p in report.partitions if p.needs_compaction]
        after = sum(expected_output_files(p.compaction_candidate_bytes, report.target_file_size_bytes) for p in due)
        files = max(0, sum(p.compaction_candidates for p in due) - after)
        rewrite += sum(p.compaction_candidate_bytes for p in due)
    if "rewrite_manifests" in needs:
        manifests = max(0, report.manifests.manifests - report.manifests.manifests_after_rewrite)
        rewrite += report.manifests.bytes
    if "expire_snapshots" in needs:
        snapshots = report.snapshots.expirable_snapshots
        rewrite += report.metadata.file_bytes or 0
    return files, manifests, snapshots, rewrite


def compaction_bytes(report: TableHealthReport) -> int:
    """The bytes of the data files the compaction ``report`` calls for rewrites (0 when none is due)."""
    if "compact" not in report.needs:
        return 0
    return sum(p.compaction_candidate_bytes for p in report.partitions if p.needs_compaction)


def _entry(table: str, report: TableHealthReport | None, policy: MaintenancePolicy, held: str | None) -> QueuedTable:
    numbers = (0, 0, 0, 0) if report is None else work_benefit(report)
    needs = () if report is None else report.needs
    return QueuedTable(
        table,
        needs,
        *numbers,
        held=held,
        report=report,
        max_rewrite_bytes=policy.max_rewrite_bytes,
        compaction_bytes=0 if report is None else compaction_bytes(report),
    )


def measure_table(
    name: str,
    table: Table,
    moment: datetime,
    *,
    health: Callable[[Table], TableHealthReport] | None = None,
) -> QueuedTable | QueueError | str:
    """A loaded table as the queue lists it: its entry (ranked, or held at ``moment``), its error, or its name.

    The name alone means the table is healthy. Whatever measuring the table raises is its error (a bad policy,
    or metadata that is missing or damaged), never the caller's: one table must not stop a look at the others.

    A table whose policy turns maintenance off is not measured; one in its quiet hours is (and held).
    ``health`` measures the table (default :func:`table_health_report` without the kept snapshots' manifest
    lists, which no ranking reads; a caller keeping reports per metadata location passes its own, which must
    judge the table by its policy as that function does).
    """
    try:
        policy = table_policy(table)
        held = policy.skip_reason(moment)
        if held == "disabled":
            return _entry(name, None, policy, held)
        report = health(table) if health is not None else table_health_report(table, kept_snapshots=False)
    except Exception as exc:  # damaged metadata raises what its reader meets (EOFError, UnicodeDecodeError, ...)
        kind = "policy" if isinstance(exc, MaintenancePolicyError) else "metadata"
        return QueueError(name, kind, type(exc).__name__, str(exc))
    return name if report.healthy else _entry(name, report, policy, held)


def maintenance_queue(
    catalog: Catalog,
    namespace: str | None = None,
    *,
    moment: datetime | None = None,
    parallelism: int = DEFAULT_PARALLELISM,
) -> MaintenanceQueue:
    """The tables of ``namespace`` (default: every namespace of the catalog) that need maintenance, ranked.

    Reads metadata and manifests only, ``parallelism`` tables at a time; changes nothing. ``moment``
    (default now) decides the quiet hours.

    Raises:
        NoSuchNamespaceError: ``namespace`` does not exist (listing it fails as the catalog says).
    """
    moment = datetime.now(UTC) if moment is None else moment
    namespaces = [tuple(namespace.split("."))] if namespace else catalog_namespaces(catalog)
    identifiers = sorted(tuple(i) for ns in namespaces for i in catalog.list_tables(ns))
    spec = spec_of(catalog)

    def measure(identifier: Identifier) -> QueuedTable | QueueError | str:
        name = ".".join(identifier)
        try:
            table = catalog.load_table(identifier)
        except Exception as exc:  # one unreadable table must not hide the others
            found = failure(exc, spec)
            return QueueError(name, found.kind, type(exc).__name__, None)
        return measure_table(name, table, moment)

    workers = max(1, min(parallelism, len(identifiers)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="queue") as pool:
        results = list(pool.map(carrying_context(measure), identifiers))
    queued = [r for r in results if isinstance(r, QueuedTable)]
    return MaintenanceQueue(
        namespaces=tuple(".".join(ns) for ns in namespaces),
        generated_at=moment,
        ranked=tuple(sorted((q for q in queued if q.held is None), key=lambda q: (-q.score, q.table))),
        held=tuple(q for q in queued if q.held is not None),
        errors=tuple(r for r in results if isinstance(r, QueueError)),
        healthy=tuple(r for r in results if isinstance(r, str)),
    )
