"""A table's health from its metadata alone, and which maintenance to run with which parameters.

:func:`table_health_report` opens no data file and changes nothing; ``report.needs`` names the actions
due (``compact``, ``rewrite_manifests``, ``expire_snapshots``). ``remove_orphan_files`` is never due:
unreferenced files cannot be seen in metadata, so it is only advised, for a schedule of its own.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyiceberg.table import TableProperties

from iceberg_ops_provider.maintenance.binpack import expected_output_files
from iceberg_ops_provider.maintenance.expire import MAX_SNAPSHOT_AGE_MS, ExpirePlan, plan_expiry
from iceberg_ops_provider.maintenance.files import ManifestReader, size_property
from iceberg_ops_provider.maintenance.health_stats import (
    DataFileStats,
    DeleteFileStats,
    FileScan,
    ManifestStats,
    MetadataStats,
    PartitionHealth,
    SnapshotStats,
    manifest_stats,
    metadata_stats,
)
from iceberg_ops_provider.maintenance.health_thresholds import HealthThresholds
from iceberg_ops_provider.maintenance.manifests import DEFAULT_TARGET_SIZE, TARGET_SIZE_PROPERTY
from iceberg_ops_provider.maintenance.policy import ENABLED_KEY, table_policy
from iceberg_ops_provider.messages import Hint
from iceberg_ops_provider.progress import size_text as _size  # the one size formatter of logs and the CLI

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["ACTIONS", "HealthThresholds", "Recommendation", "TableHealthReport", "table_health_report"]

log = logging.getLogger(__name__)

ACTIONS: dict[str, str] = {
    "compact": "compact_small_files_streaming",
    "rewrite_manifests": "rewrite_manifests",
    "expire_snapshots": "expire_snapshots",
    "remove_orphan_files": "remove_orphan_files",
}
"""Each action name of ``report.needs`` and the function that performs it, in the order to run them."""


@dataclass(frozen=True)
class Recommendation:
    """One maintenance call the report advises: ``function(table, **params)`` (``None``: its default), and why.

    ``needed`` is whether ``action`` is in ``report.needs``; ``False`` for advice to act on a schedule.
    """

    action: str
    function: str
    params: dict[str, Any]
    reason: str
    needed: bool = True

    def call(self) -> str:
        """The call as Python source, e.g. ``rewrite_manifests(table, target_manifest_size_bytes=8388608)``."""
        arguments = ", ".join(f"{key}={_literal(value)}" for key, value in self.params.items())
        return f"{self.function}(table{', ' if arguments else ''}{arguments})"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (datetimes as ISO 8601 strings)."""
        params = {key: _jsonable(value) for key, value in self.params.items()}
        return {**asdict(self), "params": params, "call": self.call()}


@dataclass(frozen=True)
class TableHealthReport:
    """What :func:`table_health_report` found in one table, and what to run.

    ``partitions`` lists those needing compaction first; ``partition_skew`` is the largest partition's bytes
    over the median's (``None`` with fewer than two); ``recommendations`` put needed calls first;
    ``warnings`` are findings no maintenance function here fixes, with what to do instead.
    """

    table: str
    generated_at: datetime
    snapshot_id: int | None
    format_version: int
    target_file_size_bytes: int
    target_manifest_size_bytes: int
    thresholds: HealthThresholds
    data_files: DataFileStats
    delete_files: DeleteFileStats
    partitions: tuple[PartitionHealth, ...]
    partition_skew: float | None
    snapshots: SnapshotStats
    manifests: ManifestStats
    metadata: MetadataStats
    recommendations: tuple[Recommendation, ...] = ()
    warnings: tuple[str, ...] = ()
    duration_seconds: float = field(default=0.0, compare=False)
    policy_enabled: bool = True
    """``False``: the table's policy turns maintenance off, so nothing is recommended (the numbers still are)."""

    @property
    def needs(self) -> tuple[str, ...]:
        """The actions due, in the order to run them (a subset of :data:`ACTIONS`)."""
        due = {r.action for r in self.recommendations if r.needed}
        return tuple(action for action in ACTIONS if action in due)

    @property
    def healthy(self) -> bool:
        """Whether no action is due."""
        return not self.needs

    def recommendation(self, action: str) -> Recommendation | None:
        """The recommendation for ``action``, if any."""
        if action not in ACTIONS:
            raise ValueError(f"Unknown maintenance action {action!r}; the actions are {list(ACTIONS)}.")
        return next((r for r in self.recommendations if r.action == action), None)

    def to_json(self, max_partitions: int | None = 100) -> dict[str, Any]:
        """JSON-able form (what the Airflow operator pushes to XCom).

        Args:
            max_partitions: List at most this many partitions (those needing compaction first, then
                by small files); ``None`` lists all. ``partitions_total`` always counts them all.
        """
        listed = self.partitions if max_partitions is None else self.partitions[: max(0, max_partitions)]
        return {
            "table": self.table,
            "generated_at": self.generated_at.isoformat(),
            "snapshot_id": self.snapshot_id,
            "format_version": self.format_version,
            "healthy": self.healthy,
            "policy_enabled": self.policy_enabled,
            "needs": list(self.needs),
            "recommendations": [r.to_json() for r in self.recommendations],
            "warnings": list(self.warnings),
            "target_file_size_bytes": self.target_file_size_bytes,
            "target_manifest_size_bytes": self.target_manifest_size_bytes,
            "data_files": {
                **asdict(self.data_files),
                "histogram": [asdict(bucket) for bucket in self.data_files.histogram],
                "mean_bytes": self.data_files.mean_bytes,
                "small_file_ratio": self.data_files.small_file_ratio,
            },
            "delete_files": asdict(self.delete_files),
            "partitions_total": len(self.partitions),
            "partitions_needing_compaction": sum(p.needs_compaction for p in self.partitions),
            "partition_skew": self.partition_skew,
            "partitions": [{**asdict(p), "small_file_ratio": p.small_file_ratio} for p in listed],
            "snapshots": asdict(self.snapshots),
            "manifests": asdict(self.manifests),
            "metadata": asdict(self.metadata),
            "thresholds": self.thresholds.to_json(),
            "duration_seconds": self.duration_seconds,
        }

    def summary(self, call: Callable[[Recommendation], str] | None = None) -> str:
        """A few lines for a person: the verdict, the numbers behind it, the calls to make.

        Args:
            call: How each recommendation's call is written (default :meth:`Recommendation.call`, the
                Python call; the command line passes one writing the ``iceberg-ops maintain`` command).
        """
        write = call or Recommendation.call
        data, deletes, manifests, snaps = self.data_files, self.delete_files, self.manifests, self.snapshots
        verdict = f"needs {', '.join(self.needs)}" if self.needs else "healthy, no maintenance due"
        if not self.policy_enabled:
            verdict = f"maintenance off by its policy ({ENABLED_KEY}=false), nothing recommended"
        small_limit = int(self.target_file_size_bytes * self.thresholds.small_file_fraction)
        needing = sum(p.needs_compaction for p in self.partitions)
        lines = [
            f"{self.table}: {verdict}",
            f"data: {_n(data.files, 'file')}, {_size(data.bytes)}, {data.small_file_ratio:.0%} small "
            f"(< {_size(small_limit)} of the {_size(self.target_file_size_bytes)} target); "
            f"{needing} of {_n(len(self.partitions), 'partition')} {'needs' if needing == 1 else 'need'} compaction; "
            f"delete files: {deletes.position_delete_files} position, {deletes.equality_delete_files} equality",
            f"manifests: {manifests.manifests:,} in the current snapshot ({manifests.small_manifests:,} small); "
            f"snapshots: {snaps.snapshots:,} (oldest {_age(snaps.oldest_age_seconds)}, "
            f"newest {_age(snaps.newest_age_seconds)}); refs: {_n(snaps.branches, 'branch')}, {_n(snaps.tags, 'tag')}; "
            "metadata.json "
            f"{'?' if self.metadata.file_bytes is None else _size(self.metadata.file_bytes)}, "
            f"log of {self.metadata.log_length}",
        ]
        for r in self.recommendations:
            lines += [f"{r.action}: {r.reason}", f"  {'run' if r.needed else 'advice'}: {write(r)}"]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def table_health_report(
    table: Table, thresholds: HealthThresholds | None = None, *, kept_snapshots: bool = True
) -> TableHealthReport:
    """Measure ``table`` (a ``StaticTable`` too) from its metadata and say which maintenance it needs, and how.

    ``kept_snapshots=False`` skips reading every kept snapshot's manifest list: the report's kept-snapshot
    manifest figures are then ``None``, and its verdict and recommendations are the same.

    Read-only; the table is reported as loaded, unless a concurrent expiry deleted files that metadata
    lists: then it is refreshed and measured once more. Without ``thresholds``, the table is judged by
    its maintenance policy (:func:`~iceberg_ops_provider.maintenance.policy.table_policy`); with them,
    only the policy's ``enabled`` key is read. A policy that turns maintenance off leaves the report
    without recommendations (``policy_enabled`` is ``False``).

    Raises:
        MaintenancePolicyError: A policy property of the table holds a value its key does not accept (without
            ``thresholds``; with them, only a bad ``iceberg-ops.maintenance.enabled``).
        FileNotFoundError: A manifest list or manifest of the current metadata is missing (the table is damaged).
        ValueError: ``thresholds`` is not a :class:`HealthThresholds`, or a target size property is not a
            positive integer (and no threshold overrides it).
    """
    started = time.monotonic()
    if thresholds is None:
        policy = table_policy(table)
        thresholds = policy.thresholds()
    else:  # the caller's thresholds replace the policy's, which then only says whether maintenance is on
        properties = table.metadata.properties
        only = {ENABLED_KEY: properties[ENABLED_KEY]} if ENABLED_KEY in properties else {}
        policy = table_policy(only, ".".join(table.name()))
    if not isinstance(thresholds, HealthThresholds):
        raise ValueError(
            f"thresholds must be a HealthThresholds (HealthThresholds.from_json builds one from a dict), "
            f"got {type(thresholds).__name__}."
        )
    try:
        return _enabled(_report(table, thresholds, started, kept_snapshots), policy.enabled)
    except FileNotFoundError:
        # A concurrent expiry deletes the manifest lists (and manifests) of the snapshots it removes:
        # a handle loaded before it may point at them. Measure the fresh metadata once.
        before = table.metadata_location
        try:
            table.refresh()
            moved = table.metadata_location != before
        except Exception:  # a StaticTable cannot refresh; a catalog error: report the missing file
            moved = False
        if not moved:
            raise
        log.info("%s: files of the loaded metadata were removed meanwhile; reporting on the fresh metadata", before)
        return _enabled(_report(table, thresholds, started, kept_snapshots), policy.enabled)


def _enabled(report: TableHealthReport, enabled: bool) -> TableHealthReport:
    """``report``, without recommendations when the table's policy turns maintenance off."""
    return report if enabled else replace(report, recommendations=(), policy_enabled=False)


def _report(table: Table, thresholds: HealthThresholds, started: float, kept_snapshots: bool) -> TableHealthReport:
    name = ".".join(table.name())
    metadata = table.metadata
    now_ms = int(time.time() * 1000)
    target = thresholds.target_file_size_bytes or size_property(
        metadata.properties,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
        _threshold("target_file_size_bytes"),
    )
    manifest_target = thresholds.target_manifest_size_bytes or size_property(
        metadata.properties, TARGET_SIZE_PROPERTY, DEFAULT_TARGET_SIZE, _threshold("target_manifest_size_bytes")
    )
    snapshot = table.current_snapshot()
    current = [] if snapshot is None else ManifestReader(table.io).manifests(snapshot)
    log.info("%s: reading %d manifest(s) of the current snapshot", name, len(current))
    scan = FileScan(table, target, thresholds.small_file_fraction, thresholds.large_file_factor)
    scan.run(current)
    partitions = scan.partition_health(thresholds.min_input_files, thresholds.max_small_file_ratio)
    data_files, delete_files = scan.data_file_stats(), scan.delete_file_stats()
    manifests = manifest_stats(
        table, current, manifest_target, thresholds.small_manifest_fraction, kept_snapshots=kept_snapshots
    )
    meta = metadata_stats(table)

    warnings: list[str] = []
    compact = _compaction(table, partitions, delete_files, target, thresholds, warnings)
    rewrite = None
    if manifests.small_manifests >= thresholds.min_manifests_to_rewrite:
        rewrite = _rewrite_manifests(manifests, manifest_target, thresholds)
    expire, plan = _expiry(table, now_ms, thresholds, warnings)
    recommendations = [r for r in (compact, rewrite, expire, _orphan_advice(meta)) if r is not None]

    skew = _skew(partitions)
    if skew is not None and skew > thresholds.max_partition_skew:
        largest = max(partitions, key=lambda p: p.data_bytes)
        warnings.append(
            f"partition skew {skew:.1f}x: {largest.path or 'the largest partition'} holds {_size(largest.data_bytes)}, "
            f"the median partition {_size(int(largest.data_bytes / skew))} (limit {thresholds.max_partition_skew:g}x); "
            "compaction cannot fix skew: a finer partition spec (e.g. a bucket transform on a busy key) can"
        )
    if delete_files.position_delete_files > thresholds.max_position_delete_files:
        warnings.append(
            f"{delete_files.position_delete_files} position delete files ({_size(delete_files.position_delete_bytes)}) "
            f"exceed {thresholds.max_position_delete_files}: every scan reads them; compaction applies them to the "
            "data files it rewrites"
        )
    if meta.file_bytes is not None and meta.file_bytes > thresholds.max_metadata_file_bytes:
        warnings.append(
            f"metadata.json is {_size(meta.file_bytes)} (limit {_size(thresholds.max_metadata_file_bytes)}): every "
            "commit rewrites it and every reader loads it; expire snapshots sooner (max_snapshot_age or max_snapshots)"
        )

    snapshot_stats = _snapshot_stats(table, now_ms, plan)
    recommendations.sort(key=lambda r: not r.needed)  # stable: in the order of ACTIONS otherwise
    report = TableHealthReport(
        table=name,
        generated_at=datetime.fromtimestamp(now_ms / 1000, UTC),
        snapshot_id=None if snapshot is None else snapshot.snapshot_id,
        format_version=metadata.format_version,
        target_file_size_bytes=target,
        target_manifest_size_bytes=manifest_target,
        thresholds=thresholds,
        data_files=data_files,
        delete_files=delete_files,
        partitions=tuple(partitions),
        partition_skew=skew,
        snapshots=snapshot_stats,
        manifests=manifests,
        metadata=meta,
        recommendations=tuple(recommendations),
        warnings=tuple(warnings),
        duration_seconds=round(time.monotonic() - started, 3),
    )
    log.info(
        "%s: health report in %.2fs: %s (%d data files, %d manifests, %d snapshots)",
        name,
        report.duration_seconds,
        ", ".join(report.needs) or "healthy",
        data_files.files,
        manifests.manifests,
        snapshot_stats.snapshots,
    )
    return report


def _threshold(name: str) -> Hint:
    return Hint("threshold", f"{name} in HealthThresholds", {"name": name})


def _n(count: int, noun: str) -> str:
    """``1 file``, ``2 files``, ``2 branches``."""
    return f"{count:,} {noun}{'' if count == 1 else 'es' if noun.endswith('ch') else 's'}"


def _compaction(
    table: Table,
    partitions: list[PartitionHealth],
    deletes: DeleteFileStats,
    target: int,
    thresholds: HealthThresholds,
    warnings: list[str],
) -> Recommendation | None:
    due = [p for p in partitions if p.needs_compaction]
    if not due:
        return None
    candidates = sum(p.compaction_candidates for p in due)
    if deletes.equality_delete_files:
        warnings.append(
            f"{_n(len(due), 'partition')} {'needs' if len(due) == 1 else 'need'} compaction "
            f"({_n(candidates, 'file')} to rewrite), but the table holds "
            f"{deletes.equality_delete_files} equality delete files, which compact_small_files_streaming refuses "
            "(PyIceberg cannot apply them): compact with the engine that wrote them (Spark's rewrite_data_files)"
        )
        return None
    after = sum(expected_output_files(p.compaction_candidate_bytes, target) for p in due)
    older = sum(p.compaction_candidates for p in due if p.spec_id != table.metadata.default_spec_id)
    sorted_table = not table.sort_order().is_unsorted
    of_all = "" if len(due) == len(partitions) else f" (of {len(partitions)})"
    kinds = []
    if candidates - older:
        kinds.append(
            f"{_n(candidates - older, 'small file')} (under {_size(int(target * thresholds.small_file_fraction))}, "
            f"{thresholds.small_file_fraction:.0%} of the {_size(target)} target)"
        )
    if older:
        kinds.append(f"{older} written under an older partition spec (rewritten into the current one)")
    reason = (
        f"{_n(len(due), 'partition')}{of_all} {'holds' if len(due) == 1 else 'hold'} at least "
        f"{_n(thresholds.min_input_files, 'file')} to rewrite, more than "
        f"{thresholds.max_small_file_ratio:.0%} of their files: {' and '.join(kinds)}"
    )
    reason += f", {_size(sum(p.compaction_candidate_bytes for p in due))}, about {_n(after, 'file')} after compaction"
    if sorted_table:
        reason += "; the table has a sort order, so each output file is sorted by it"
    return Recommendation(
        action="compact",
        function=ACTIONS["compact"],
        params={
            "target_file_size_bytes": target,
            "min_input_files": thresholds.min_input_files,
            "where": None,
            "strategy": "sort" if sorted_table else "binpack",
        },
        reason=reason,
    )


def _rewrite_manifests(manifests: ManifestStats, target: int, thresholds: HealthThresholds) -> Recommendation:
    return Recommendation(
        action="rewrite_manifests",
        function=ACTIONS["rewrite_manifests"],
        params={"target_manifest_size_bytes": target},
        reason=(
            f"the current snapshot lists {manifests.manifests} manifests, {manifests.small_manifests} of them under "
            f"{_size(int(target * thresholds.small_manifest_fraction))} (at least "
            f"{thresholds.min_manifests_to_rewrite}); scan planning opens every one; rewritten to "
            f"{_size(target)} they become about {manifests.manifests_after_rewrite}"
        ),
    )


def _expiry(
    table: Table, now_ms: int, thresholds: HealthThresholds, warnings: list[str]
) -> tuple[Recommendation | None, ExpirePlan | None]:
    """The ``expire_snapshots`` call due, planned exactly as that function plans it."""
    metadata = table.metadata
    if not metadata.snapshots:
        return None, None
    age = thresholds.max_snapshot_age
    older_than = None if age is None else datetime.fromtimestamp(now_ms / 1000, UTC) - age
    older_than_ms = None if older_than is None else int(older_than.timestamp() * 1000)
    retain_last = thresholds.retain_last
    try:
        plan = plan_expiry(metadata, now_ms=now_ms, older_than_ms=older_than_ms, retain_last=retain_last)
        by_count = False
        if thresholds.max_snapshots is not None and len(plan.retained_snapshot_ids) > thresholds.max_snapshots:
            by_count, older_than, older_than_ms = True, datetime.fromtimestamp(now_ms / 1000, UTC), now_ms
            retain_last = max(retain_last, thresholds.max_snapshots)
            plan = plan_expiry(metadata, now_ms=now_ms, older_than_ms=older_than_ms, retain_last=retain_last)
    except ValueError as exc:
        warnings.append(f"snapshot expiry cannot be planned: {exc}")
        return None, None
    if not plan.expired_snapshot_ids and not plan.removed_refs:
        return None, plan
    expired = set(plan.expired_snapshot_ids)
    oldest = min((s.timestamp_ms for s in metadata.snapshots if s.snapshot_id in expired), default=now_ms)
    if by_count:
        why = (
            f"{len(metadata.snapshots)} snapshots exceed max_snapshots={thresholds.max_snapshots}: "
            f"keeping the last {retain_last} per branch (and tagged ones) expires {len(expired)}"
        )
    else:
        table_age = f"{_age((now_ms - (plan.cutoff_ms or now_ms)) / 1000)} (the table's {MAX_SNAPSHOT_AGE_MS})"
        cutoff = table_age if age is None else _age(age.total_seconds())
        why = f"{len(expired)} of {len(metadata.snapshots)} snapshots are older than {cutoff}"
    if plan.removed_refs:
        why += f"; ref(s) past their max-ref-age-ms: {', '.join(plan.removed_refs)}"
    why += (
        f" (the oldest is {_age((now_ms - oldest) / 1000)} old); expiring deletes the files only they reach "
        "and shrinks metadata.json"
    )
    params = {"older_than": older_than, "retain_last": retain_last, "delete_files": True}
    return Recommendation("expire_snapshots", ACTIONS["expire_snapshots"], params, why), plan


def _orphan_advice(meta: MetadataStats) -> Recommendation | None:
    """Advice to schedule orphan removal when the metadata proves files were left on storage."""
    if meta.delete_after_commit or not meta.dropped_files:
        return None
    return Recommendation(
        action="remove_orphan_files",
        function=ACTIONS["remove_orphan_files"],
        params={"older_than": None, "location": None},
        reason=(
            f"up to {meta.dropped_files} earlier metadata file(s) left the metadata log without being deleted "
            "(write.metadata.delete-after-commit.enabled is off); files no metadata references cannot be seen "
            "in metadata, so run this on a schedule (weekly, say), not from this report; it keeps files younger "
            "than 3 days"
        ),
        needed=False,
    )


def _skew(partitions: list[PartitionHealth]) -> float | None:
    sizes = [p.data_bytes for p in partitions if p.data_files]
    if len(sizes) < 2:
        return None
    median = statistics.median(sizes)
    return round(max(sizes) / median, 2) if median else None


def _snapshot_stats(table: Table, now_ms: int, plan: ExpirePlan | None) -> SnapshotStats:
    metadata = table.metadata
    stamps = [s.timestamp_ms for s in metadata.snapshots]
    refs = metadata.refs.values()
    oldest, newest = (min(stamps), max(stamps)) if stamps else (None, None)
    return SnapshotStats(
        snapshots=len(stamps),
        branches=sum(ref.snapshot_ref_type == "branch" for ref in refs),
        tags=sum(ref.snapshot_ref_type == "tag" for ref in refs),
        oldest_timestamp_ms=oldest,
        newest_timestamp_ms=newest,
        oldest_age_seconds=None if oldest is None else max(0.0, (now_ms - oldest) / 1000),
        newest_age_seconds=None if newest is None else max(0.0, (now_ms - newest) / 1000),
        expirable_snapshots=0 if plan is None else len(plan.expired_snapshot_ids),
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def _literal(value: Any) -> str:
    if isinstance(value, datetime):
        return f"datetime.fromisoformat({value.isoformat()!r})"
    return repr(value)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds / length:.1f}{unit}"
    return f"{seconds:.0f}s"
