"""Which files a compaction rewrites, in which groups, into how many files (pure: reads no file).

Spark's ``rewrite_data_files`` bin-packing; the rules (75% of the target, older specs, ``min_input_files``,
:data:`MAX_GROUP_OUTPUT_FILES`) are in ``docs/maintenance/compact_small_files_streaming.md``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask
    from pyiceberg.typedef import Record

__all__ = [
    "MAX_GROUP_OUTPUT_FILES",
    "MIN_FILE_SIZE_RATIO",
    "FileGroup",
    "expected_output_files",
    "is_candidate",
    "min_input_files_problem",
    "plan_groups",
]

MIN_FILE_SIZE_RATIO = 0.75
"""Files below this fraction of the target size are small (Spark's ``min-file-size-bytes`` default)."""

MIN_INPUT_FILES = 1
"""The least ``min_input_files`` may be (as Spark's): rewriting a lone file sorts it, applies its deletes, or moves
it to the current spec."""

MAX_GROUP_OUTPUT_FILES = 10
"""A group holds at most this many target sizes of input; larger partitions are split into several groups."""


def min_input_files_problem(value: Any) -> str | None:
    """What is wrong with ``value`` as ``min_input_files``, to follow the argument's name, or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_INPUT_FILES:
        return f"must be an integer of at least {MIN_INPUT_FILES}, got {value!r}"
    return None


@dataclass(frozen=True)
class FileGroup:
    """Candidate files of one partition (``partition_path`` ``day=2024-01-02``) that one commit rewrites.

    ``repartition``: the files were written under an older spec, so rows are split by the current spec's
    partitions while they are rewritten.
    """

    index: int
    spec_id: int
    partition: Record
    partition_path: str
    tasks: tuple[FileScanTask, ...]
    output_files: int
    repartition: bool

    @property
    def data_files(self) -> list[DataFile]:
        """The data files the group rewrites."""
        return [task.file for task in self.tasks]

    @property
    def bytes(self) -> int:
        """Their total size on storage."""
        return sum(task.file.file_size_in_bytes for task in self.tasks)

    @property
    def delete_files(self) -> list[DataFile]:
        """The position delete files that apply to at least one of the group's files."""
        seen = {d.file_path: d for task in self.tasks for d in task.delete_files}
        return [seen[path] for path in sorted(seen)]


def is_candidate(data_file: DataFile, *, current_spec_id: int, target_file_size_bytes: int) -> bool:
    """Whether compaction rewrites ``data_file``: it is small, or written under an older spec."""
    small = data_file.file_size_in_bytes < MIN_FILE_SIZE_RATIO * target_file_size_bytes
    return data_file.spec_id != current_spec_id or small


def expected_output_files(total_bytes: int, target_file_size_bytes: int) -> int:
    """How many files of about equal size ``total_bytes`` of input become (Spark's rule, at least 1)."""
    whole, remainder = divmod(total_bytes, target_file_size_bytes)
    if remainder > MIN_FILE_SIZE_RATIO * target_file_size_bytes or whole == 0:
        whole += 1
    return max(1, whole)


def _split(tasks: list[FileScanTask], parts: int) -> list[list[FileScanTask]]:
    """Consecutive runs of ``tasks`` of about equal total size."""
    if parts <= 1:
        return [tasks]
    share = sum(task.file.file_size_in_bytes for task in tasks) / parts
    runs: list[list[FileScanTask]] = [[]]
    filled = 0
    for task in tasks:
        if runs[-1] and filled >= share * len(runs) and len(runs) < parts:
            runs.append([])
        runs[-1].append(task)
        filled += task.file.file_size_in_bytes
    return runs


def _partition_path(spec: PartitionSpec, partition: Record, schema: Schema) -> str:
    if spec.is_unpartitioned():
        return ""
    try:
        return spec.partition_to_path(partition, schema)
    except Exception:  # an old spec whose source column was dropped since
        return f"spec {spec.spec_id}: {partition}"


def plan_groups(
    tasks: Iterable[FileScanTask],
    *,
    specs: Mapping[int, PartitionSpec],
    schema: Schema,
    current_spec_id: int,
    target_file_size_bytes: int,
    min_input_files: int,
) -> list[FileGroup]:
    """Group the candidate files of ``tasks`` by partition, in a stable order (current spec first)."""
    by_partition: dict[tuple[int, Record], list[FileScanTask]] = {}
    for task in tasks:
        data_file = task.file
        if is_candidate(data_file, current_spec_id=current_spec_id, target_file_size_bytes=target_file_size_bytes):
            by_partition.setdefault((data_file.spec_id, data_file.partition), []).append(task)

    keyed = [
        (
            _partition_path(specs[spec_id], partition, schema),
            spec_id,
            partition,
            sorted(members, key=lambda task: task.file.file_path),
        )
        for (spec_id, partition), members in by_partition.items()
        if len(members) >= min_input_files
    ]
    keyed.sort(key=lambda item: (item[1] != current_spec_id, item[1], item[0]))

    groups: list[FileGroup] = []
    max_group_bytes = MAX_GROUP_OUTPUT_FILES * target_file_size_bytes
    for path, spec_id, partition, members in keyed:
        total = sum(task.file.file_size_in_bytes for task in members)
        for run in _split(members, math.ceil(total / max_group_bytes)):
            run_bytes = sum(task.file.file_size_in_bytes for task in run)
            groups.append(
                FileGroup(
                    index=len(groups) + 1,
                    spec_id=spec_id,
                    partition=partition,
                    partition_path=path,
                    tasks=tuple(run),
                    output_files=expected_output_files(run_bytes, target_file_size_bytes),
                    repartition=spec_id != current_spec_id,
                )
            )
    return groups
