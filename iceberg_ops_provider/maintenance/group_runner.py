"""Writes compaction groups and commits them, one group or several together per ``replace`` snapshot.

Groups are written on a pool while the caller's thread commits those written before; if anything raises,
the files of every uncommitted group are deleted and the exception goes on (a ``SIGKILL`` leaves orphans).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence, Sized
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import CommitFailedException, ValidationException

from iceberg_ops_provider.maintenance import files as _files
from iceberg_ops_provider.maintenance.candidates import removable_delete_files
from iceberg_ops_provider.maintenance.rewrite_commit import RewriteValidator, commit_rewrite
from iceberg_ops_provider.maintenance.streaming import GroupRewriter
from iceberg_ops_provider.progress import ProgressTracker, size_text

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile, ManifestEntry
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadata

    from iceberg_ops_provider.maintenance.binpack import FileGroup

__all__ = [
    "OPERATION_PROPERTY",
    "CompactionGroupResult",
    "CompactionResult",
    "build_result",
    "COMMIT_INTERVAL_SECONDS",
    "COMMIT_KEY",
    "GroupBatches",
    "GroupCancelledError",
    "GroupRunner",
    "WrittenGroup",
    "delete_written",
    "planned_result",
]

log = logging.getLogger(__name__)

COMMIT_KEY = "iceberg-ops.compaction.commit-id"
"""Snapshot summary key: a fresh id per commit, to tell after an interrupted commit whether it landed."""


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
    deferred_groups_count: int = 0
    """Groups planned but left for a later run because ``max_rewrite_bytes`` would have been exceeded."""
    deferred_bytes_count: int = 0
    """Bytes of those groups."""

    def to_json(self, include_files: bool = False) -> dict[str, Any]:
        """JSON-able form (also what the operator pushes to XCom); file paths only with ``include_files``."""
        data = asdict(self)
        data["groups"] = [group.to_json(include_files) for group in self.groups]
        return data


def build_result(
    base: dict[str, Any],
    planned_snapshot: int | None,
    groups: Sized,
    results: list[CompactionGroupResult],
    planning_seconds: float,
    duration_seconds: float,
    **extra: Any,
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
        **extra,
    )


def planned_result(group: FileGroup, removable: Sequence[DataFile] = ()) -> CompactionGroupResult:
    """``group`` as planned: what it rewrites, and the delete files ``removable`` it would remove."""
    return CompactionGroupResult(
        index=group.index,
        partition=group.partition_path,
        spec_id=group.spec_id,
        status="planned",
        data_files=[data_file.file_path for data_file in group.data_files],
        bytes=group.bytes,
        delete_files=[delete_file.file_path for delete_file in removable],
        expected_output_files=group.output_files,
    )


class GroupCancelledError(Exception):
    """Raised inside a group being written once the call gave up (another group failed, or it was interrupted)."""


@dataclass
class WrittenGroup:
    """A group whose new files are written and not yet committed."""

    group: FileGroup
    planned: CompactionGroupResult
    added: list[DataFile]
    written: list[str]
    seconds: float


def _group_text(groups: Sequence[FileGroup], total: int) -> str:
    indexes = [group.index for group in groups]
    if len(indexes) == 1:
        return f"{indexes[0]}/{total}"
    if indexes == list(range(indexes[0], indexes[0] + len(indexes))):
        return f"{indexes[0]}-{indexes[-1]}/{total}"
    return f"{','.join(map(str, indexes))}/{total}"


def _summary(groups: Sequence[FileGroup], total: int, strategy: str, removed_deletes: int) -> dict[str, str]:
    partitions = sorted({group.partition_path for group in groups})
    return {
        OPERATION_PROPERTY: "compaction",
        COMMIT_KEY: uuid.uuid4().hex,
        "iceberg-ops.compaction.strategy": strategy,
        "iceberg-ops.compaction.group": _group_text(groups, total),
        "iceberg-ops.compaction.partition": partitions[0] if len(partitions) == 1 else f"{len(partitions)} partitions",
        "iceberg-ops.compaction.rewritten-data-files": str(sum(len(group.tasks) for group in groups)),
        "iceberg-ops.compaction.rewritten-bytes": str(sum(group.bytes for group in groups)),
        "iceberg-ops.compaction.removed-delete-files": str(removed_deletes),
    }


class _GroupProgress:
    """Counts a group's input as the rewriter consumes it (bytes, rows, files) and tells it when the call gave up."""

    def __init__(self, tracker: ProgressTracker, group: FileGroup, cancelled: threading.Event) -> None:
        self.tracker = tracker
        self.cancelled = cancelled
        self.files = [(task.file.file_size_in_bytes, task.file.record_count) for task in group.tasks]
        self.index = 0  # the file being read
        self.into = 0  # bytes of it consumed

    def __call__(self, consumed: int) -> None:
        if self.cancelled.is_set():
            raise GroupCancelledError("the compaction stopped")
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


class GroupRunner:
    """Writes and commits the groups of one call, carrying what they share (caches, the size ratio, progress).

    ``write`` may run on several threads at once; everything else runs on the caller's thread.
    """

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
        self.cancelled = threading.Event()
        """Set when the call gives up: groups being written stop at their next batch of rows."""
        self.rewritten: set[str] = set()
        """Data files replaced by this runner's commits."""
        self.removed_deletes: set[str] = set()
        """Delete files removed by this runner's commits."""
        self._references: dict[str, frozenset[str]] = {}

    def _label(self, groups: Sequence[FileGroup]) -> str:
        word = "group" if len(groups) == 1 else "groups"
        return f"{'.'.join(self.table.name())}: {word} {_group_text(groups, self.groups)}: "

    def write(self, group: FileGroup, planned: CompactionGroupResult) -> WrittenGroup | CompactionGroupResult:
        """Write ``group``'s new files; a file it reads gone missing returns a ``failed`` result, anything else raises.

        The files written are deleted when it fails or raises.
        """
        label = self._label([group])
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
        try:
            rewriter = GroupRewriter(
                self.metadata,
                self.table.io,
                group.tasks,
                partition=None if group.repartition else group.partition,
                target_file_size_bytes=self.target,
                sort_order=self.sort_order,
                written=written,
                label=label,
                ratio_hint=self.ratio,
            )
            progress = _GroupProgress(self.tracker, group, self.cancelled)
            added = rewriter.run(progress)
            progress.finish()
            self.ratio = rewriter.ratio() or self.ratio
        except FileNotFoundError as exc:
            # A concurrent expiry deleted an input file: the group was replaced or removed meanwhile,
            # a conflict like any other; the other groups go on.
            delete_written(self.table, written, label)
            log.warning("%snot committed, a file it reads was removed meanwhile: %s", label, exc)
            return _failed(planned, exc, time.monotonic() - started)
        except BaseException:
            delete_written(self.table, written, label)
            raise
        return WrittenGroup(group, planned, added, written, time.monotonic() - started)

    def removable(self, groups: Sequence[FileGroup]) -> list[list[DataFile]]:
        """For each of ``groups``, the delete files a commit of all of them together removes."""
        done = set(self.rewritten).union(data_file.file_path for group in groups for data_file in group.data_files)
        removed = set(self.removed_deletes)
        chosen = []
        for group in groups:
            files = removable_delete_files(self.table.io, group, done, removed, self._references)
            removed.update(delete_file.file_path for delete_file in files)
            chosen.append(files)
        return chosen

    def commit(
        self, batch: Sequence[WrittenGroup], removable: Sequence[Sequence[DataFile]] | None = None
    ) -> list[CompactionGroupResult]:
        """Commit ``batch`` as one ``replace`` snapshot; returns one result per group, in order.

        ``removable`` gives each group's delete files to remove (default: :meth:`removable`). On a
        conflict a batch of several groups is committed group by group; a group that still
        conflicts is ``failed`` and its files deleted. Anything else raises, after deleting the
        batch's files unless the commit may have landed.
        """
        if not batch:
            return []
        table, metadata = self.table, self.metadata
        groups = [item.group for item in batch]
        label = self._label(groups)
        written = [path for item in batch for path in item.written]
        replaced = [data_file for group in groups for data_file in group.data_files]
        added = [data_file for item in batch for data_file in item.added]
        started = time.monotonic()
        committing = False
        summary: dict[str, str] = {}
        chosen: list[Sequence[DataFile]] = []
        try:
            # Reads the delete files (which data files each covers): a concurrent expiry may have removed one.
            chosen = list(removable) if removable is not None else self.removable(groups)
            deletes = [delete_file for files in chosen for delete_file in files]
            summary = _summary(groups, self.groups, self.strategy, len(deletes))
            table.refresh()
            validator = RewriteValidator(
                table.io, metadata.current_snapshot_id, replaced, deletes, self.manifest_cache, metadata.default_spec_id
            )
            committing = True
            snapshot_id = commit_rewrite(
                table, validator, removed=[*replaced, *deletes], added=added, snapshot_properties=summary
            )
        except (ValidationException, CommitFailedException, FileNotFoundError) as exc:
            if len(batch) > 1 and isinstance(exc, ValidationException):
                log.info("%sa concurrent commit conflicts (%s); committing them one by one", label, exc)
                return self._commit_one_by_one(batch, removable)
            # A file missing: the validation read a manifest a concurrent expiry removed (the files were
            # replaced meanwhile). Otherwise the commit certainly did not land.
            missing = isinstance(exc, FileNotFoundError)
            if missing and committing:
                log.error("%sthe commit's outcome is unknown; its files are kept: %s", label, ", ".join(written))
            else:
                delete_written(table, written, label)
            why = "a file it reads was removed meanwhile" if missing else "a concurrent commit conflicts"
            log.warning("%snot committed, %s: %s", label, why, exc)
            return [_failed(item.planned, exc, item.seconds + time.monotonic() - started) for item in batch]
        except BaseException:
            landed = _landed(table, summary[COMMIT_KEY]) if committing and summary else False
            if landed is None:  # it may have landed: its files may be referenced, so they stay
                log.error("%sthe commit's outcome is unknown; its files are kept: %s", label, ", ".join(written))
            elif not landed:
                delete_written(table, written, label)
            raise
        self.rewritten.update(data_file.file_path for data_file in replaced)
        self.removed_deletes.update(delete_file.file_path for delete_file in deletes)
        commit_seconds = time.monotonic() - started
        added_bytes = sum(data_file.file_size_in_bytes for data_file in added)
        log.info(
            "%scommitted snapshot %d: %d -> %d file(s), %s -> %s, written at %s/s, committed in %.1f s",
            label,
            snapshot_id,
            len(replaced),
            len(added),
            size_text(sum(group.bytes for group in groups)),
            size_text(added_bytes),
            size_text(sum(group.bytes for group in groups) / max(sum(item.seconds for item in batch), 1e-9)),
            commit_seconds,
        )
        return [
            replace(
                item.planned,
                status="committed",
                delete_files=[delete_file.file_path for delete_file in files],
                added_data_files=[data_file.file_path for data_file in item.added],
                added_bytes=sum(data_file.file_size_in_bytes for data_file in item.added),
                snapshot_id=snapshot_id,
                seconds=item.seconds + commit_seconds,
            )
            for item, files in zip(batch, chosen, strict=True)
        ]

    def _commit_one_by_one(
        self, batch: Sequence[WrittenGroup], removable: Sequence[Sequence[DataFile]] | None
    ) -> list[CompactionGroupResult]:
        """Commit a conflicting batch group by group; if that stops part way, the rest's files are deleted."""
        given: list[Sequence[Sequence[DataFile]] | None] = (
            [None] * len(batch) if removable is None else [[files] for files in removable]
        )
        results: list[CompactionGroupResult] = []
        for index, (item, one) in enumerate(zip(batch, given, strict=True)):
            try:
                results.extend(self.commit([item], one))
            except BaseException:
                for rest in batch[index + 1 :]:
                    delete_written(self.table, rest.written, self._label([rest.group]))
                raise
        return results

    def run(
        self, group: FileGroup, planned: CompactionGroupResult, removable: Sequence[DataFile]
    ) -> CompactionGroupResult:
        """Write and commit ``group`` alone, removing ``removable``; a conflict returns a ``failed`` result."""
        written = self.write(group, planned)
        if isinstance(written, CompactionGroupResult):
            return written
        return self.commit([written], [removable])[0]


def _failed(planned: CompactionGroupResult, exc: BaseException, seconds: float) -> CompactionGroupResult:
    return replace(planned, status="failed", error=f"{type(exc).__name__}: {exc}", seconds=seconds)


def _landed(table: Table, commit_id: str) -> bool | None:
    """Whether the interrupted commit ``commit_id`` landed; ``None`` when the catalog cannot tell."""
    try:
        table.refresh()
    except BaseException:
        return None
    return any(
        snapshot.summary is not None and snapshot.summary.additional_properties.get(COMMIT_KEY) == commit_id
        for snapshot in table.metadata.snapshots
    )


def delete_written(table: Table, written: Sequence[str], label: str) -> None:
    """Delete files written for groups that will not be committed (failures become orphans, logged)."""
    if written:
        _, failures = _files.delete_files(table.io, list(written), what=f"files of {label.rstrip(': ')}")
        for failure in failures:
            log.warning("%scould not delete an uncommitted file (an orphan now): %s", label, failure)


COMMIT_INTERVAL_SECONDS = 60.0
"""Written groups are committed at least this often, however little they rewrote."""


class GroupBatches:
    """Writes and commits the groups of one compaction call; ``results`` holds each group's outcome.

    ``commit_bytes`` of input written make a batch due (``0`` commits each group alone); ``started`` and
    ``total_bytes`` are for the log lines.
    """

    def __init__(
        self, runner: GroupRunner, *, commit_bytes: int, concurrency: int, started: float, total_bytes: int
    ) -> None:
        self.runner = runner
        self.commit_bytes = commit_bytes
        self.concurrency = concurrency
        self.started = started
        self.total_bytes = total_bytes
        self.results: list[CompactionGroupResult] = []
        self._pending: list[WrittenGroup] = []
        self._in_flight: deque[Future[WrittenGroup | CompactionGroupResult]] = deque()
        self._last_commit = time.monotonic()
        self._done_bytes = 0

    def run(self, groups: Sequence[FileGroup], should_stop: Callable[[], bool] | None) -> bool:
        """Write and commit ``groups``; returns whether ``should_stop`` stopped it before the last one started."""
        stopped = False
        name = ".".join(self.runner.table.name())
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="iceberg-ops-compaction")
        try:
            for group in groups:
                while len(self._in_flight) >= self.concurrency:
                    self._collect()
                if should_stop is not None and should_stop():
                    stopped = True
                    break
                self._in_flight.append(pool.submit(self.runner.write, group, planned_result(group)))
                self._commit_if_due()
            while self._in_flight:
                self._collect()
                self._commit_if_due()
            self._commit()
        except BaseException:
            self._abandon()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if len(self.results) < len(groups):
                log.warning("%s: stopped after %d of %d group(s)", name, len(self.results), len(groups))
        return stopped

    def _collect(self) -> None:
        """Wait for the oldest group being written; it joins the batch, or its failure the results."""
        outcome = self._in_flight.popleft().result()
        if isinstance(outcome, WrittenGroup):
            self._pending.append(outcome)
        else:
            self._record([outcome])

    def _commit_if_due(self) -> None:
        waiting = sum(item.group.bytes for item in self._pending)
        if self._pending and (
            waiting >= self.commit_bytes or time.monotonic() - self._last_commit >= COMMIT_INTERVAL_SECONDS
        ):
            self._commit()

    def _commit(self) -> None:
        batch, self._pending = self._pending, []
        self._last_commit = time.monotonic()
        if batch:
            self._record(self.runner.commit(batch))

    def _record(self, outcomes: list[CompactionGroupResult]) -> None:
        runner = self.runner
        for outcome in outcomes:
            runner.tracker.unit_done()
            self.results.append(outcome)
            self._done_bytes += outcome.bytes
            log.info(
                "%s: group %d/%d %s; %s of %s done in %.1f s",
                ".".join(runner.table.name()),
                outcome.index,
                runner.groups,
                outcome.status,
                size_text(self._done_bytes),
                size_text(self.total_bytes),
                time.monotonic() - self.started,
            )

    def _abandon(self) -> None:
        """Stop the groups being written and delete the files of every group not committed."""
        self.runner.cancelled.set()
        for future in self._in_flight:
            # Each stops at its next batch of rows and deletes its own files; its outcome no longer matters.
            try:
                outcome = future.result()
            except BaseException:  # the first error is the one raised
                continue
            if isinstance(outcome, WrittenGroup):
                self._pending.append(outcome)
        self._in_flight.clear()
        batch, self._pending = self._pending, []
        for item in batch:
            delete_written(self.runner.table, item.written, f"group {item.group.index}: ")
