"""Data compaction without a JVM: small files bin-packed into files near the target size, streaming.

Rows read are the rows written; groups commit as atomic ``replace`` snapshots with Spark's ``RewriteFiles`` rules,
a kill leaves only orphans and nothing is deleted: ``docs/maintenance/compact_small_files_streaming.md``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.table import Table, TableProperties

from iceberg_ops_provider.core.filters import bind_filter
from iceberg_ops_provider.errors import MaintenanceConflictError, MaintenanceError
from iceberg_ops_provider.maintenance.binpack import FileGroup, is_candidate, min_input_files_problem, plan_groups
from iceberg_ops_provider.maintenance.candidates import plan_candidates, refuse_equality_deletes, removable_delete_files
from iceberg_ops_provider.maintenance.files import size_property
from iceberg_ops_provider.maintenance.group_runner import (
    COMMIT_INTERVAL_SECONDS,
    OPERATION_PROPERTY,
    CompactionGroupResult,
    CompactionResult,
    GroupBatches,
    GroupRunner,
    build_result,
    planned_result,
)
from iceberg_ops_provider.messages import Arg, Hint, message
from iceberg_ops_provider.progress import ProgressCallback, ProgressTracker, size_text

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

__all__ = [
    "COMMIT_INTERVAL_SECONDS",
    "OPERATION_PROPERTY",
    "CompactionGroupResult",
    "CompactionResult",
    "compact_small_files_streaming",
]

log = logging.getLogger(__name__)


STRATEGIES = ("binpack", "sort")


def check_arguments(
    table: Table,
    target_file_size_bytes: int | None,
    min_input_files: int,
    where: str | BooleanExpression | None,
    strategy: str,
    commit_every_bytes: int | None = None,
    max_concurrent_groups: int | None = None,
) -> tuple[int, BooleanExpression]:
    """Validate the arguments; returns the target size and the bound-checked filter."""
    if not isinstance(table, Table):
        raise TypeError(f"table must be a pyiceberg Table (from catalog.load_table), got {type(table).__name__}.")
    if strategy not in STRATEGIES:
        raise ValueError(
            message(
                f"{{strategy}} must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}.",
                about="strategy",
                strategy=Arg("strategy"),
            )
        )
    problem = min_input_files_problem(min_input_files)
    if problem is not None:
        raise ValueError(
            message(f"{{min_input_files}} {problem}.", about="min_input_files", min_input_files=Arg("min_input_files"))
        )
    counts = (
        ("target_file_size_bytes", target_file_size_bytes, 1),
        ("commit_every_bytes", commit_every_bytes, 0),
        ("max_concurrent_groups", max_concurrent_groups, 1),
    )
    for name, value, least in counts:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            text = f"{{name}} must be an integer of at least {least}, got {value!r}."
            raise ValueError(message(text, about=name, name=Arg(name)))
    target = target_file_size_bytes or size_property(
        table.metadata.properties,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
        Arg("target_file_size_bytes"),
    )
    if where is None:
        expression: BooleanExpression = AlwaysTrue()
    elif isinstance(where, str):
        try:
            expression = parse(where)
        except Exception as exc:
            raise ValueError(
                message(
                    f"{{where}} is not a filter PyIceberg can parse: {exc}", about="where", where=Arg("where", where)
                )
            ) from exc
    elif isinstance(where, BooleanExpression):
        expression = where
    else:
        raise ValueError(f"where must be a filter string or a pyiceberg BooleanExpression, got {type(where).__name__}.")
    try:
        expression = bind_filter(expression, table.schema())
    except Exception as exc:
        raise ValueError(
            message(
                f"{{where}} does not fit the schema of {'.'.join(table.name())}: {exc}. "
                f"Columns: {', '.join(f.name for f in table.schema().fields)}.",
                about="where",
                where=Arg("where", where),
            )
        ) from exc
    if strategy == "sort" and table.sort_order().is_unsorted:
        name = ".".join(table.name())
        namespace, _, bare = name.rpartition(".")
        raise ValueError(
            message(
                f"{{sort}} sorts by the table's sort order, and {name} has none. Set one ({{set_one}}) or use "
                "{binpack}.",
                about="strategy",
                sort=Arg("strategy", "sort"),
                set_one=Hint(
                    "set_sort_order",
                    "with table.update_sort_order(), or ctx.set_sort_order() in a migration",
                    {"table": name, "name": bare, "namespace": namespace},
                ),
                binpack=Arg("strategy", "binpack"),
            )
        )
    if table.format_version > 2:
        raise MaintenanceError(
            f"{'.'.join(table.name())} is a format v{table.format_version} table; PyIceberg 0.12 writes v1 and v2 only."
        )
    return target, expression


def compact_small_files_streaming(
    table: Table,
    target_file_size_bytes: int | None = None,
    min_input_files: int = 5,
    where: str | BooleanExpression | None = None,
    strategy: Literal["binpack", "sort"] = "binpack",
    dry_run: bool = False,
    on_progress: ProgressCallback | None = None,
    should_stop: Callable[[], bool] | None = None,
    commit_every_bytes: int | None = None,
    max_concurrent_groups: int | None = None,
    max_rewrite_bytes: int | None = None,
) -> CompactionResult:
    """Rewrite the small data files of ``table``'s ``main`` (refreshed) into files near the target size.

    Args:
        table: The table.
        target_file_size_bytes: Default: the table's ``write.target-file-size-bytes`` (512 MiB); files under
            75% of it are small.
        min_input_files: A partition with fewer small files than this is left alone.
        where: A PyIceberg filter: only files whose statistics may match it are considered (rewritten whole).
        strategy: ``binpack`` keeps the rows' order; ``sort`` sorts each output file by the table's sort
            order (memory then holds one output file).
        dry_run: Report the groups, files and bytes a real run would rewrite; write nothing.
        on_progress: Receives :class:`~iceberg_ops_provider.progress.Progress` as groups are rewritten.
        should_stop: Asked before each group (it must be quick): once ``True`` no further group starts and
            the result is ``stopped``; groups being written are finished and committed.
        commit_every_bytes: Written groups are committed together, one snapshot, once their input reaches
            this (or a minute passed); default: the target size; ``0``: each group alone. A crash loses
            the groups written since the last commit.
        max_concurrent_groups: Groups written side by side; default 2 with ``binpack``, 1 with ``sort``.
        max_rewrite_bytes: Rewrite at most this many bytes of input: the planned groups are taken in order
            while their total stays within it, the rest are left for a later run (``deferred_groups_count``);
            a policy's ``iceberg-ops.maintenance.max-rewrite-bytes``. Default: no limit.

    Raises:
        ValueError: A bad argument, ``sort`` on a table without a sort order, or a non-integer
            ``write.target-file-size-bytes``.
        UnsupportedDeleteFilesError: The table holds equality delete files; nothing was written.
        MaintenanceConflictError: Concurrent commits changed the files of some groups: those were not
            committed (their files deleted), the others were (the exception's ``result``); a rerun redoes them.
    """
    started = time.monotonic()
    target, expression = check_arguments(
        table, target_file_size_bytes, min_input_files, where, strategy, commit_every_bytes, max_concurrent_groups
    )
    if max_rewrite_bytes is not None and (
        isinstance(max_rewrite_bytes, bool) or not isinstance(max_rewrite_bytes, int) or max_rewrite_bytes < 1
    ):
        raise ValueError(
            message(
                f"{{max_rewrite_bytes}} must be an integer of at least 1, got {max_rewrite_bytes!r}.",
                about="max_rewrite_bytes",
                max_rewrite_bytes=Arg("max_rewrite_bytes"),
            )
        )
    name = ".".join(table.name())
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
    groups, deferred = _within(groups, max_rewrite_bytes)
    if deferred:
        base = {**base, "deferred_groups_count": len(deferred), "deferred_bytes_count": sum(g.bytes for g in deferred)}
        log.info(
            "%s: %d group(s), %s, left for a later run: the run may rewrite at most %s",
            name,
            len(deferred),
            size_text(base["deferred_bytes_count"]),
            size_text(max_rewrite_bytes or 0),
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
    stopped = False
    if dry_run:
        results = _dry_run(table, groups)
    else:
        tracker = ProgressTracker(
            f"compact {name}",
            total_bytes=total_bytes,
            units_total=len(groups),
            on_progress=on_progress,
            files_total=sum(len(group.tasks) for group in groups),
            unit_name="group",
        )
        runner = GroupRunner(table, metadata, len(groups), strategy, target, tracker)
        default_concurrency = 2 if strategy == "binpack" else 1
        batches = GroupBatches(
            runner,
            commit_bytes=target if commit_every_bytes is None else commit_every_bytes,
            concurrency=max_concurrent_groups or default_concurrency,
            started=started,
            total_bytes=total_bytes,
        )
        stopped = batches.run(groups, should_stop)
        results = sorted(batches.results, key=lambda each: each.index)
        if groups:
            tracker.finish()
    seconds = time.monotonic() - started
    result = build_result(base, snapshot.snapshot_id, groups, results, planning_seconds, seconds, stopped=stopped)
    if result.failed_groups_count:
        failed = [group for group in result.groups if group.status == "failed"]
        missing = sum(str(group.error or "").startswith("FileNotFoundError") for group in failed)
        lost = "a file they read was missing (removed by a concurrent expiry, or lost from storage)"
        contended = sum(str(group.error or "").startswith("CommitFailedException") for group in failed)
        reason = lost if missing == len(failed) else "concurrent commits changed their files"
        if contended == len(failed):
            reason = (
                "other writers committed to the table so often that every retry of their commit lost the race "
                "(commit.retry.num-retries)"
            )
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


def _within(groups: list[FileGroup], max_bytes: int | None) -> tuple[list[FileGroup], list[FileGroup]]:
    """The groups, in plan order, whose total stays within ``max_bytes`` (all without one), and the rest."""
    if max_bytes is None:
        return groups, []
    taken: list[FileGroup] = []
    total = 0
    for index, group in enumerate(groups):
        if total + group.bytes > max_bytes:
            return taken, groups[index:]
        taken.append(group)
        total += group.bytes
    return taken, []


def _dry_run(table: Table, groups: list[FileGroup]) -> list[CompactionGroupResult]:
    """The groups as a run would rewrite them, each assuming the ones before it committed."""
    references: dict[str, frozenset[str]] = {}
    rewritten: set[str] = set()
    removed_deletes: set[str] = set()
    results = []
    for group in groups:
        removable = removable_delete_files(table.io, group, rewritten, removed_deletes, references)
        planned = planned_result(group, removable)
        rewritten.update(planned.data_files)
        removed_deletes.update(planned.delete_files)
        results.append(planned)
    return results
