"""What a compaction did: per group and in all (Spark's ``rewrite_data_files`` names for the counts)."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["OPERATION_PROPERTY", "CompactionGroupResult", "CompactionResult", "build_result"]

OPERATION_PROPERTY = "iceberg-ops.operation"
"""Snapshot summary key naming the maintenance operation that wrote a snapshot (value ``compaction``)."""


@dataclass(frozen=True)
class CompactionGroupResult:
    """One group of a compaction: what it rewrote (or, in a dry run, would rewrite) and how it ended.

    ``status`` is ``planned`` (dry run), ``committed``, ``failed`` (a conflict: nothing committed; ``error``
    says why) or, for units, ``skipped`` (another run already replaced its files). ``delete_files`` are the
    position delete files removed because every row they delete is rewritten.
    """

    index: int
    partition: str
    spec_id: int
    status: str
    data_files: list[str]
    bytes: int
    delete_files: list[str] = field(default_factory=list)
    expected_output_files: int = 0
    added_data_files: list[str] = field(default_factory=list)
    added_bytes: int = 0
    snapshot_id: int | None = None
    error: str | None = None
    seconds: float = 0.0

    def to_json(self, include_files: bool = False) -> dict[str, Any]:
        """JSON-able form; file lists become counts unless ``include_files``."""
        data = asdict(self)
        lists = ("data_files", "delete_files", "added_data_files")
        return data if include_files else {**data, **{key: len(data[key]) for key in lists}}


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`compact_small_files_streaming` did (or, with ``dry_run``, would do), in Spark's names."""

    table: str
    dry_run: bool
    strategy: str
    target_file_size_bytes: int
    planned_snapshot_id: int | None = None
    """The snapshot the plan was made on; every commit is validated against what landed since."""
    rewritten_data_files_count: int = 0
    added_data_files_count: int = 0
    rewritten_bytes_count: int = 0
    added_bytes_count: int = 0
    failed_data_files_count: int = 0
    removed_delete_files_count: int = 0
    file_groups_count: int = 0
    committed_groups_count: int = 0
    failed_groups_count: int = 0
    skipped_groups_count: int = 0
    """Units another run had already replaced (only from ``run_compaction_units``)."""
    snapshot_ids: list[int] = field(default_factory=list)
    groups: list[CompactionGroupResult] = field(default_factory=list)
    planning_seconds: float = 0.0
    duration_seconds: float = 0.0
    stopped: bool = False
    """``should_stop`` asked to stop before every group was done: ``groups`` are those that were."""

    def to_json(self, include_files: bool = False) -> dict[str, Any]:
        """JSON-able form (also what the operator pushes to XCom); file paths only with ``include_files``."""
        data = asdict(self)
        data["groups"] = [group.to_json(include_files) for group in self.groups]
        return data


def build_result(
    base: dict[str, Any],
    planned_snapshot: int,
    groups: Sized,
    results: list[CompactionGroupResult],
    planning_seconds: float,
    duration_seconds: float,
) -> CompactionResult:
    """The totals of ``results`` (one per group or unit of ``groups``, the plan) as a :class:`CompactionResult`."""
    counted = [r for r in results if r.status in ("committed", "planned")]
    failed = [r for r in results if r.status == "failed"]
    return CompactionResult(
        **base,
        planned_snapshot_id=planned_snapshot,
        rewritten_data_files_count=sum(len(r.data_files) for r in counted),
        added_data_files_count=sum(len(r.added_data_files) for r in counted),
        rewritten_bytes_count=sum(r.bytes for r in counted),
        added_bytes_count=sum(r.added_bytes for r in counted),
        failed_data_files_count=sum(len(r.data_files) for r in failed),
        removed_delete_files_count=sum(len(r.delete_files) for r in counted),
        file_groups_count=len(groups),
        committed_groups_count=sum(r.status == "committed" for r in results),
        failed_groups_count=len(failed),
        snapshot_ids=list(dict.fromkeys(r.snapshot_id for r in results if r.snapshot_id is not None)),
        groups=results,
        planning_seconds=planning_seconds,
        duration_seconds=duration_seconds,
    )
