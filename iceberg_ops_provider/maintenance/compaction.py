"""Data compaction without a JVM: small files bin-packed into files near the target size, streaming.

Guarantees (what the tests check):

- **Same rows.** The multiset of rows the table reads is identical before and after; position
  deletes (written by Spark or Flink merge-on-read) are applied while rewriting, and a table with
  equality deletes is refused before anything is written (PyIceberg cannot apply them).
- **Bounded memory.** Files are read one at a time and written one row group at a time (one whole
  output file with ``strategy="sort"``), on two threads, whatever the table size.
- **Partial progress.** Groups (a partition's small files, large partitions split) commit one by
  one, each as an atomic ``replace`` snapshot that keeps files appended concurrently and fails if a
  file it rewrites was removed, replaced or given new deletes since the plan (Spark's
  ``RewriteFiles`` rules). A crash or a conflict loses at most one group; a rerun finds only what
  is still small.
- **Crash safety.** The table is only changed by those commits. A process killed mid-group leaves
  the files it was writing behind as orphans (unreferenced, removed by orphan-file removal); the
  table reads exactly as before.
- **Time travel.** Nothing is deleted: older snapshots keep reading their files until expired.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import BooleanExpression

from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import files as _files
from iceberg_ops_provider.maintenance.binpack import FileGroup, is_candidate, plan_groups
from iceberg_ops_provider.maintenance.candidates import plan_candidates
from iceberg_ops_provider.maintenance.compaction_arguments import check_arguments
from iceberg_ops_provider.maintenance.compaction_deletes import refuse_equality_deletes, removable_delete_files
from iceberg_ops_provider.maintenance.rewrite_commit import RewriteValidator, commit_rewrite
from iceberg_ops_provider.maintenance.streaming import GroupRewriter
from iceberg_ops_provider.progress import ProgressCallback, ProgressTracker, size_text

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile, ManifestEntry
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

__all__ = ["CompactionGroupResult", "CompactionResult", "compact_small_files_streaming"]

log = logging.getLogger(__name__)

OPERATION_PROPERTY = "iceberg-ops.operation"
"""Snapshot summary key naming the maintenance operation that wrote a snapshot (value ``compaction``)."""


@dataclass(frozen=True)
class CompactionGroupResult:
    """One group of a compaction: what it rewrote (or, in a dry run, would rewrite) and how it ended.

    Attributes:
        index: Position in the plan, from 1.
        partition: The partition the files were written in (``""`` when unpartitioned).
        spec_id: The partition spec they were written under.
        status: ``planned`` (dry run), ``committed``, ``failed`` (a conflict: nothing committed) or, for
            units run by :func:`~iceberg_ops_provider.maintenance.compaction_units.run_compaction_units`,
            ``skipped`` (another run already replaced its files).
        data_files: The data files rewritten (or to rewrite).
        bytes: Their size.
        delete_files: The position delete files removed because every row they delete is rewritten.
        expected_output_files: How many files the plan expects from the input size (rewritten small
            files usually shrink, so fewer may be written).
        added_data_files: The files written (empty unless committed).
        added_bytes: Their size.
        snapshot_id: The ``replace`` snapshot the group committed.
        error: Why a failed group failed.
        seconds: How long the group took (reading, writing and committing).
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
        if not include_files:
            for key in ("data_files", "delete_files", "added_data_files"):
                data[key] = len(data[key])
        return data


@dataclass(frozen=True)
class CompactionResult:
    """What :func:`compact_small_files_streaming` did (or, with ``dry_run``, would do).

    Counts use the names of Spark's ``rewrite_data_files`` procedure; a dry run reports the files it
    would rewrite and adds none.
    """

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


def _identifier(table: Table) -> str:
    return ".".join(table.name())


_COMMIT_KEY = "iceberg-ops.compaction.commit-id"
"""Snapshot summary key: a fresh id per group commit, to tell after an interrupted commit whether it landed."""


def _summary(group: FileGroup, groups: int, strategy: str, removed_deletes: int) -> dict[str, str]:
    return {
        OPERATION_PROPERTY: "compaction",
        _COMMIT_KEY: uuid.uuid4().hex,
        "iceberg-ops.compaction.strategy": strategy,
        "iceberg-ops.compaction.group": f"{group.index}/{groups}",
        "iceberg-ops.compaction.partition": group.partition_path,
        "iceberg-ops.compaction.rewritten-data-files": str(len(group.tasks)),
        "iceberg-ops.compaction.rewritten-bytes": str(group.bytes),
        "iceberg-ops.compaction.removed-delete-files": str(removed_deletes),
    }


class _GroupProgress:
    """Counts a group's input as the rewriter consumes it: bytes, and rows and files derived from them.

    The rewriter reads the group's files in order and reports each file's bytes in full by its end,
    so the bytes consumed tell which files are done; rows are prorated within the file being read.
    """

    def __init__(self, tracker: ProgressTracker, group: FileGroup) -> None:
        self.tracker = tracker
        self.files = [(task.file.file_size_in_bytes, task.file.record_count) for task in group.tasks]
        self.index = 0  # the file being read
        self.into = 0  # bytes of it consumed

    def __call__(self, consumed: int) -> None:
        rows = files = 0
        left = consumed
        while self.index < len(self.files):
            size, records = self.files[self.index]
            take = min(left, size - self.into)
            before = records * self.into // size if size else 0
            self.into += take
            left -= take
            if self.into < size:
                rows += records * self.into // size - before
                break
            rows += records - before
            files += 1
            self.index += 1
            self.into = 0
        self.tracker.add(rows, consumed, files)

    def finish(self) -> None:
        """Count whatever the rewriter did not report (empty files) once the group is written."""
        rows = sum(records for _, records in self.files[self.index :])
        if self.index < len(self.files):
            size, records = self.files[self.index]
            rows -= records * self.into // size if size else 0
        files = len(self.files) - self.index
        self.index, self.into = len(self.files), 0
        if rows or files:
            self.tracker.add(rows, 0, files)


def compact_small_files_streaming(
    table: Table,
    target_file_size_bytes: int | None = None,
    min_input_files: int = 5,
    where: str | BooleanExpression | None = None,
    strategy: Literal["binpack", "sort"] = "binpack",
    dry_run: bool = False,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> CompactionResult:
    """Rewrite the small data files of ``table`` into files near the target size, group by group.

    Args:
        table: The table (refreshed by the call); compacts its ``main`` branch.
        target_file_size_bytes: The output file size to aim at; default: the table property
            ``write.target-file-size-bytes`` (Iceberg's default, 512 MiB). Files under 75% of it are small.
        min_input_files: A partition with fewer small files than this is left alone.
        where: A PyIceberg filter (string or expression): only files whose partition or column
            statistics may match it are considered (whole files are rewritten, never split by it).
        strategy: ``binpack`` keeps the rows' order; ``sort`` also sorts each output file by the
            table's sort order (memory then holds one output file).
        dry_run: Plan, and report the groups, files and bytes a real run would rewrite; write nothing.
        on_progress: Receives :class:`~iceberg_ops_provider.progress.Progress` (rows, bytes and small
            files read, groups done, rate, ETA) as the groups are rewritten; not called in a dry run.
        should_stop: Asked before each group (it must be quick, e.g. ``threading.Event.is_set``):
            once it returns ``True`` no further group starts and the result is ``stopped``, listing
            the groups done. A group being written when it turns ``True`` is finished and committed.

    Raises:
        ValueError: A bad argument, ``strategy="sort"`` on a table without a sort order, or a
            non-integer ``write.target-file-size-bytes``.
        UnsupportedDeleteFilesError: The table holds equality delete files; nothing was written.
        MaintenanceConflictError: A concurrent commit removed, replaced or added deletes to files of
            some groups; those groups were not committed (their files were deleted), the others
            were. The result is the exception's ``result`` attribute. Running again redoes them.
    """
    started = time.monotonic()
    target, expression = check_arguments(table, target_file_size_bytes, min_input_files, where, strategy)
    name = _identifier(table)
    table.refresh()
    metadata = table.metadata
    snapshot = table.current_snapshot()
    base = {"table": name, "dry_run": dry_run, "strategy": strategy, "target_file_size_bytes": target}
    if snapshot is None:
        return CompactionResult(**base, duration_seconds=time.monotonic() - started)
    refuse_equality_deletes(table, snapshot)

    def small(data_file: DataFile) -> bool:
        return is_candidate(data_file, current_spec_id=metadata.default_spec_id, target_file_size_bytes=target)

    groups = plan_groups(
        plan_candidates(metadata, table.io, snapshot, expression, small),
        specs=metadata.specs(),
        schema=metadata.schema(),
        current_spec_id=metadata.default_spec_id,
        target_file_size_bytes=target,
        min_input_files=min_input_files,
    )
    planning_seconds = time.monotonic() - started
    total_bytes = sum(group.bytes for group in groups)
    log.info(
        "%s: %s%d group(s), %d small file(s), %s to rewrite (target %s, %s), planned on snapshot %d",
        name,
        "dry run: " if dry_run else "",
        len(groups),
        sum(len(group.tasks) for group in groups),
        size_text(total_bytes),
        size_text(target),
        strategy,
        snapshot.snapshot_id,
    )
    references: dict[str, frozenset[str]] = {}
    rewritten: set[str] = set()
    removed_deletes: set[str] = set()
    results: list[CompactionGroupResult] = []
    tracker = ProgressTracker(
        f"compact {name}",
        total_bytes=total_bytes,
        units_total=len(groups),
        on_progress=on_progress,
        log_every=0 if dry_run else 10.0,
        files_total=sum(len(group.tasks) for group in groups),
        unit_name="group",
    )
    runner = _GroupRunner(table, metadata, len(groups), strategy, target, tracker)
    done_bytes = 0
    stopped = False
    try:
        for group in groups:
            if should_stop is not None and not dry_run and should_stop():
                stopped = True
                break
            removable = removable_delete_files(table.io, group, rewritten, removed_deletes, references)
            planned = CompactionGroupResult(
                index=group.index,
                partition=group.partition_path,
                spec_id=group.spec_id,
                status="planned",
                data_files=[data_file.file_path for data_file in group.data_files],
                bytes=group.bytes,
                delete_files=[delete_file.file_path for delete_file in removable],
                expected_output_files=group.output_files,
            )
            if dry_run:
                rewritten.update(planned.data_files)
                removed_deletes.update(planned.delete_files)
                results.append(planned)
                continue
            outcome = runner.run(group, planned, removable)
            tracker.unit_done()
            results.append(outcome)
            if outcome.status == "committed":
                rewritten.update(outcome.data_files)
                removed_deletes.update(outcome.delete_files)
            done_bytes += group.bytes
            log.info(
                "%s: group %d/%d %s; %s of %s done in %.1f s",
                name,
                group.index,
                len(groups),
                outcome.status,
                size_text(done_bytes),
                size_text(total_bytes),
                time.monotonic() - started,
            )
    finally:
        if len(results) < len(groups) and not dry_run:
            log.warning("%s: stopped after %d of %d group(s)", name, len(results), len(groups))
    if groups and not dry_run:
        tracker.finish()
    result = _result(base, snapshot.snapshot_id, groups, results, planning_seconds, time.monotonic() - started)
    result = replace(result, stopped=stopped)
    if result.failed_groups_count:
        failed = [group for group in result.groups if group.status == "failed"]
        missing = sum(str(group.error or "").startswith("FileNotFoundError") for group in failed)
        lost = "a file they read was missing (removed by a concurrent expiry, or lost from storage)"
        reason = lost if missing == len(failed) else "concurrent commits changed their files"
        if 0 < missing < len(failed):
            reason += f", or {lost}"
        error = MaintenanceConflictError(
            f"{name}: {len(failed)} of {len(groups)} compaction group(s) were not committed because {reason} "
            f"(first: group {failed[0].index}, {failed[0].error}). The other "
            f"{result.committed_groups_count} group(s) were committed. Run the compaction again to redo them."
        )
        error.result = result
        raise error
    return result


class _GroupRunner:
    """Writes and commits the groups of one call, carrying what they share (caches, the size ratio, progress)."""

    def __init__(
        self, table: Table, metadata: TableMetadata, groups: int, strategy: str, target: int, tracker: ProgressTracker
    ) -> None:
        self.table = table
        self.tracker = tracker
        self.metadata = metadata
        self.groups = groups
        self.strategy = strategy
        self.target = target
        self.sort_order = metadata.sort_order_by_id(metadata.default_sort_order_id) if strategy == "sort" else None
        self.manifest_cache: dict[str, list[ManifestEntry]] = {}
        self.ratio: float | None = None
        """Output bytes per input byte of the groups written so far."""

    def run(self, group: FileGroup, planned: CompactionGroupResult, removable: list[DataFile]) -> CompactionGroupResult:
        """Write and commit ``group``; a conflict returns a ``failed`` result, anything else raises."""
        table, metadata = self.table, self.metadata
        label = f"{_identifier(table)}: group {group.index}/{self.groups}: "
        log.info(
            "%s%d file(s), %s of partition %r -> about %d file(s)",
            label,
            len(group.tasks),
            size_text(group.bytes),
            group.partition_path or "(unpartitioned)",
            group.output_files,
        )
        started = time.monotonic()
        written: list[str] = []
        committing = False
        summary = _summary(group, self.groups, self.strategy, len(removable))
        try:
            rewriter = GroupRewriter(
                metadata,
                table.io,
                group.tasks,
                partition=None if group.repartition else group.partition,
                target_file_size_bytes=self.target,
                sort_order=self.sort_order,
                written=written,
                label=label,
                ratio_hint=self.ratio,
            )
            progress = _GroupProgress(self.tracker, group)
            added = rewriter.run(progress)
            progress.finish()
            self.ratio = rewriter.ratio() or self.ratio
            table.refresh()
            validator = RewriteValidator(
                table.io,
                metadata.current_snapshot_id,
                group.data_files,
                removable,
                cache=self.manifest_cache,
                spec_id=metadata.default_spec_id,
            )
            committing = True
            snapshot_id = commit_rewrite(
                table,
                validator,
                removed=[*group.data_files, *removable],
                added=added,
                snapshot_properties=summary,
            )
        except (ValidationException, CommitFailedException) as exc:  # the commit certainly did not land
            _delete_written(table, written, label)
            log.warning("%snot committed, a concurrent commit conflicts: %s", label, exc)
            seconds = time.monotonic() - started
            return _with(planned, status="failed", error=f"{type(exc).__name__}: {exc}", seconds=seconds)
        except FileNotFoundError as exc:
            # A concurrent expiry deleted an input file (or a manifest the validation reads): the group
            # was replaced or removed meanwhile, a conflict like any other; the other groups go on.
            if committing:
                log.error("%sthe commit's outcome is unknown; its files are kept: %s", label, ", ".join(written))
            else:
                _delete_written(table, written, label)
            log.warning("%snot committed, a file it reads was removed meanwhile: %s", label, exc)
            seconds = time.monotonic() - started
            return _with(planned, status="failed", error=f"{type(exc).__name__}: {exc}", seconds=seconds)
        except BaseException:
            landed = _landed(table, summary[_COMMIT_KEY]) if committing else False
            if landed is None:  # it may have landed: its files may be referenced, so they stay
                log.error("%sthe commit's outcome is unknown; its files are kept: %s", label, ", ".join(written))
            elif not landed:
                _delete_written(table, written, label)
            raise
        seconds = time.monotonic() - started
        added_bytes = sum(data_file.file_size_in_bytes for data_file in added)
        log.info(
            "%scommitted snapshot %d: %d -> %d file(s), %s -> %s in %.1f s (%s/s)",
            label,
            snapshot_id,
            len(group.tasks),
            len(added),
            size_text(group.bytes),
            size_text(added_bytes),
            seconds,
            size_text(group.bytes / max(seconds, 1e-9)),
        )
        return _with(
            planned,
            status="committed",
            added_data_files=[data_file.file_path for data_file in added],
            added_bytes=added_bytes,
            snapshot_id=snapshot_id,
            seconds=seconds,
        )


def _landed(table: Table, commit_id: str) -> bool | None:
    """Whether the commit with ``commit_id`` is in the table's history, after an interrupted commit call.

    ``None`` when the catalog cannot tell (it does not answer, or a second interrupt stops the look).
    The client's commit call was abandoned when it was interrupted, so what the catalog holds now is
    its outcome.
    """
    try:
        table.refresh()
    except BaseException:
        return None
    return any(
        snapshot.summary is not None and snapshot.summary.additional_properties.get(_COMMIT_KEY) == commit_id
        for snapshot in table.metadata.snapshots
    )


def _with(result: CompactionGroupResult, **changes: Any) -> CompactionGroupResult:
    return CompactionGroupResult(**{**asdict(result), **changes})


def _delete_written(table: Table, written: list[str], label: str) -> None:
    if written:
        _, failures = _files.delete_files(table.io, written, what=f"files of {label.rstrip(': ')}")
        for failure in failures:
            log.warning("%scould not delete an uncommitted file (an orphan now): %s", label, failure)


def _result(
    base: dict[str, Any],
    planned_snapshot: int,
    groups: list[FileGroup],
    results: list[CompactionGroupResult],
    planning_seconds: float,
    duration_seconds: float,
) -> CompactionResult:
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
        snapshot_ids=[r.snapshot_id for r in results if r.snapshot_id is not None],
        groups=results,
        planning_seconds=planning_seconds,
        duration_seconds=duration_seconds,
    )
