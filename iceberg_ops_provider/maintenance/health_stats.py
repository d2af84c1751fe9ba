"""What a table's metadata says about its files, read once and aggregated as it streams.

The measurements behind :func:`~iceberg_ops_provider.maintenance.health.table_health_report`: data
and delete files of the current snapshot per partition, their sizes against the target, manifests
of the current snapshot and of every snapshot, and the size of the metadata file. Only metadata is
read (manifest lists, manifests, a size lookup of ``metadata.json``); no data file is opened.

Memory: one manifest's entries at a time per reading thread, one small aggregate per partition, a
fixed histogram, and the path of each distinct manifest of the table's history; never one object
per data file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pyiceberg.manifest import DataFileContent, ManifestContent, read_manifest_list

from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.maintenance.files import ManifestReader

if TYPE_CHECKING:
    from pyiceberg.manifest import ManifestFile
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "DataFileStats",
    "DeleteFileStats",
    "ManifestStats",
    "MetadataStats",
    "PartitionHealth",
    "SizeBucket",
    "SnapshotStats",
]

log = logging.getLogger(__name__)

_WORKERS = 8
_PROGRESS_EVERY_S = 10.0
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class SizeBucket:
    """Data files whose size is in ``[min_bytes, max_bytes)``."""

    min_bytes: int
    max_bytes: int
    files: int
    bytes: int


@dataclass(frozen=True)
class DataFileStats:
    """The live data files of the current snapshot, against the target size.

    Attributes:
        files: How many.
        bytes: Their total size.
        records: Their total row count (before deletes).
        min_bytes: The smallest file (0 without files).
        max_bytes: The largest file.
        small_files: Files under ``small_file_fraction`` of the target.
        small_bytes: Their total size.
        large_files: Files over ``large_file_factor`` times the target.
        older_spec_files: Files written under an older partition spec (compaction rewrites them into
            the current one whatever their size).
        histogram: Files by size, in power-of-two buckets (empty buckets left out).
    """

    files: int
    bytes: int
    records: int
    min_bytes: int
    max_bytes: int
    small_files: int
    small_bytes: int
    large_files: int
    older_spec_files: int
    histogram: tuple[SizeBucket, ...]

    @property
    def mean_bytes(self) -> int:
        """The mean file size (0 without files)."""
        return self.bytes // self.files if self.files else 0

    @property
    def small_file_ratio(self) -> float:
        """Small files as a share of all data files (0 without files)."""
        return self.small_files / self.files if self.files else 0.0


@dataclass(frozen=True)
class DeleteFileStats:
    """The live delete files of the current snapshot (merge-on-read deletes of Spark or Flink)."""

    position_delete_files: int
    position_delete_bytes: int
    position_delete_records: int
    equality_delete_files: int
    equality_delete_bytes: int
    equality_delete_records: int


@dataclass(frozen=True)
class PartitionHealth:
    """One partition of the current snapshot (files of an older partition spec count apart).

    Attributes:
        spec_id: The partition spec the files were written with.
        partition: Partition field name to its value, as Iceberg prints it (``None`` for null).
        path: The partition as a path (``region=eu/day=2024-01-01``; empty when unpartitioned).
        data_files: Live data files.
        data_bytes: Their total size.
        records: Their total row count.
        small_files: Data files under ``small_file_fraction`` of the target.
        small_bytes: Their total size.
        compaction_candidates: Data files compaction would rewrite: the small ones, or every one when
            the partition is of an older partition spec (rewritten into the current spec).
        compaction_candidate_bytes: Their total size.
        position_delete_files: Live position delete files.
        equality_delete_files: Live equality delete files.
        needs_compaction: At least ``min_input_files`` candidates, more than ``max_small_file_ratio``
            of the partition's data files.
    """

    spec_id: int
    partition: dict[str, str | None]
    path: str
    data_files: int
    data_bytes: int
    records: int
    small_files: int
    small_bytes: int
    compaction_candidates: int
    compaction_candidate_bytes: int
    position_delete_files: int
    equality_delete_files: int
    needs_compaction: bool

    @property
    def small_file_ratio(self) -> float:
        """Small files as a share of the partition's data files (0 without data files)."""
        return self.small_files / self.data_files if self.data_files else 0.0


@dataclass(frozen=True)
class ManifestStats:
    """Manifests of the current snapshot, and of every snapshot the table keeps.

    Attributes:
        manifests: Manifests of the current snapshot (what scan planning reads).
        data_manifests: Of those, manifests of data files.
        delete_manifests: Of those, manifests of delete files.
        bytes: Their total size.
        min_bytes: The smallest (0 without manifests).
        max_bytes: The largest.
        small_manifests: Manifests under ``small_manifest_fraction`` of the manifest target.
        manifests_after_rewrite: About how many a rewrite to the target leaves (per spec and content).
        max_manifests_per_snapshot: The most manifests any kept snapshot lists.
        mean_manifests_per_snapshot: The mean over kept snapshots.
        distinct_manifests: Manifest files the kept snapshots list, each counted once.
        distinct_manifest_bytes: Their total size.
    """

    manifests: int
    data_manifests: int
    delete_manifests: int
    bytes: int
    min_bytes: int
    max_bytes: int
    small_manifests: int
    manifests_after_rewrite: int
    max_manifests_per_snapshot: int
    mean_manifests_per_snapshot: float
    distinct_manifests: int
    distinct_manifest_bytes: int


@dataclass(frozen=True)
class SnapshotStats:
    """The table's snapshots and refs.

    Attributes:
        snapshots: Snapshots in the metadata.
        branches: Branches, ``main`` included.
        tags: Tags.
        oldest_timestamp_ms: Commit time of the oldest snapshot (``None`` without snapshots).
        newest_timestamp_ms: Commit time of the newest.
        oldest_age_seconds: Age of the oldest at report time.
        newest_age_seconds: Age of the newest at report time.
        expirable_snapshots: Snapshots the recommended ``expire_snapshots`` call would expire.
    """

    snapshots: int
    branches: int
    tags: int
    oldest_timestamp_ms: int | None
    newest_timestamp_ms: int | None
    oldest_age_seconds: float | None
    newest_age_seconds: float | None
    expirable_snapshots: int


@dataclass(frozen=True)
class MetadataStats:
    """The table's metadata file and its log.

    Attributes:
        location: The current ``metadata.json``.
        file_bytes: Its size (``None`` when storage did not say).
        log_length: Earlier metadata files the metadata log keeps.
        previous_versions_max: The table's ``write.metadata.previous-versions-max``.
        delete_after_commit: The table's ``write.metadata.delete-after-commit.enabled``.
        dropped_files: Earlier metadata files already dropped from the log, as counted from the
            version in the file name (``None`` when the name has none); with ``delete_after_commit``
            off they were left on storage unless a later cleanup removed them.
    """

    location: str
    file_bytes: int | None
    log_length: int
    previous_versions_max: int
    delete_after_commit: bool
    dropped_files: int | None


def window_map(fn: Callable[[T], R], items: Iterable[T], workers: int = _WORKERS) -> Iterator[R]:
    """``map(fn, items)`` on threads, in order, with at most ``2 * workers`` results pending.

    ``Executor.map`` submits everything at once and would hold every result of a slow consumer.
    """
    items = list(items)
    if len(items) < 2:
        yield from map(fn, items)
        return
    carried = carrying_context(fn)
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        pending: list[Future[R]] = []
        feed = iter(items)
        for item in feed:
            pending.append(pool.submit(carried, item))
            if len(pending) >= 2 * workers:
                break
        while pending:
            result = pending.pop(0).result()
            for item in feed:
                pending.append(pool.submit(carried, item))
                break
            yield result


class _Partition:
    """Running totals of one partition."""

    __slots__ = (
        "data_bytes",
        "data_files",
        "equality_delete_files",
        "position_delete_files",
        "records",
        "small_bytes",
        "small_files",
    )

    def __init__(self) -> None:
        self.data_files = self.data_bytes = self.records = 0
        self.small_files = self.small_bytes = 0
        self.position_delete_files = self.equality_delete_files = 0


class FileScan:
    """Aggregates the live entries of the current snapshot's manifests.

    Args:
        table: The table.
        target_file_size_bytes: The data file size to judge against.
        small_file_fraction: Below this fraction of the target a file is small.
        large_file_factor: Above this multiple of the target a file is large.
    """

    def __init__(
        self, table: Table, target_file_size_bytes: int, small_file_fraction: float, large_file_factor: float
    ) -> None:
        self.table = table
        self.small_limit = target_file_size_bytes * small_file_fraction
        self.large_limit = target_file_size_bytes * large_file_factor
        self.partitions: dict[tuple[int, tuple[Any, ...]], _Partition] = {}
        self.buckets: dict[int, list[int]] = {}
        self.files = self.bytes = self.records = self.small_files = self.small_bytes = self.large_files = 0
        self.current_spec_id = table.metadata.default_spec_id
        self.older_spec_files = 0
        self.min_bytes: int | None = None
        self.max_bytes = 0
        self.deletes = [0] * 6  # position files, bytes, records; equality files, bytes, records

    def run(self, manifests: list[ManifestFile]) -> None:
        """Read each manifest once (on threads) and fold its live entries into the totals."""
        io = self.table.io
        name = ".".join(self.table.name())
        todo = [m for m in manifests if (m.added_files_count or 0) + (m.existing_files_count or 0) > 0 or _unknown(m)]
        last_log = time.monotonic()
        for done, (manifest, entries) in enumerate(
            window_map(lambda m: (m, m.fetch_manifest_entry(io, discard_deleted=True)), todo), 1
        ):
            spec_id = manifest.partition_spec_id
            for entry in entries:
                self._add(spec_id, entry.data_file)
            if time.monotonic() - last_log > _PROGRESS_EVERY_S:
                last_log = time.monotonic()
                log.info("%s: read %d of %d manifests (%d data files so far)", name, done, len(todo), self.files)

    def _add(self, spec_id: int, data_file: Any) -> None:
        size = data_file.file_size_in_bytes
        key = (spec_id, tuple(data_file.partition))
        partition = self.partitions.get(key)
        if partition is None:
            partition = self.partitions[key] = _Partition()
        if data_file.content == DataFileContent.DATA:
            self.files += 1
            self.bytes += size
            self.records += data_file.record_count
            self.min_bytes = size if self.min_bytes is None else min(self.min_bytes, size)
            self.max_bytes = max(self.max_bytes, size)
            bucket = self.buckets.setdefault(max(size, 1).bit_length() - 1, [0, 0])
            bucket[0] += 1
            bucket[1] += size
            partition.data_files += 1
            partition.data_bytes += size
            partition.records += data_file.record_count
            if spec_id != self.current_spec_id:
                self.older_spec_files += 1
            if size < self.small_limit:
                self.small_files += 1
                self.small_bytes += size
                partition.small_files += 1
                partition.small_bytes += size
            elif size > self.large_limit:
                self.large_files += 1
        elif data_file.content == DataFileContent.POSITION_DELETES:
            partition.position_delete_files += 1
            self.deletes[0] += 1
            self.deletes[1] += size
            self.deletes[2] += data_file.record_count
        else:
            partition.equality_delete_files += 1
            self.deletes[3] += 1
            self.deletes[4] += size
            self.deletes[5] += data_file.record_count

    def data_file_stats(self) -> DataFileStats:
        """The totals over every live data file."""
        histogram = tuple(
            SizeBucket(min_bytes=0 if k == 0 else 1 << k, max_bytes=1 << (k + 1), files=files, bytes=size)
            for k, (files, size) in sorted(self.buckets.items())
        )
        return DataFileStats(
            files=self.files,
            bytes=self.bytes,
            records=self.records,
            min_bytes=self.min_bytes or 0,
            max_bytes=self.max_bytes,
            small_files=self.small_files,
            small_bytes=self.small_bytes,
            large_files=self.large_files,
            older_spec_files=self.older_spec_files,
            histogram=histogram,
        )

    def delete_file_stats(self) -> DeleteFileStats:
        """The totals over every live delete file."""
        return DeleteFileStats(*self.deletes)

    def partition_health(self, min_input_files: int, max_small_file_ratio: float) -> list[PartitionHealth]:
        """One entry per partition, those needing compaction first, then by compaction candidates."""
        names = _PartitionNames(self.table)
        result = []
        for (spec_id, values), totals in self.partitions.items():
            older = spec_id != self.current_spec_id
            candidates = totals.data_files if older else totals.small_files
            ratio = candidates / totals.data_files if totals.data_files else 0.0
            human, path = names.describe(spec_id, values)
            result.append(
                PartitionHealth(
                    spec_id=spec_id,
                    partition=human,
                    path=path,
                    data_files=totals.data_files,
                    data_bytes=totals.data_bytes,
                    records=totals.records,
                    small_files=totals.small_files,
                    small_bytes=totals.small_bytes,
                    compaction_candidates=candidates,
                    compaction_candidate_bytes=totals.data_bytes if older else totals.small_bytes,
                    position_delete_files=totals.position_delete_files,
                    equality_delete_files=totals.equality_delete_files,
                    needs_compaction=candidates >= min_input_files and ratio > max_small_file_ratio,
                )
            )
        result.sort(key=lambda p: (not p.needs_compaction, -p.compaction_candidates, p.spec_id, p.path))
        return result


def _unknown(manifest: ManifestFile) -> bool:
    """A v1 manifest list may leave the file counts out: such a manifest must be read."""
    return manifest.added_files_count is None or manifest.existing_files_count is None


class _PartitionNames:
    """Human names of partition values, per partition spec."""

    def __init__(self, table: Table) -> None:
        self.schema = table.schema()
        self.specs = table.specs()
        self.types: dict[int, Any] = {}

    def describe(self, spec_id: int, values: tuple[Any, ...]) -> tuple[dict[str, str | None], str]:
        spec = self.specs.get(spec_id)
        if spec is None or not spec.fields:
            return {}, ""
        if spec_id not in self.types:
            try:
                self.types[spec_id] = spec.partition_type(self.schema).fields
            except Exception:  # a source column dropped since: fall back to the raw values
                self.types[spec_id] = None
        types = self.types[spec_id]
        human: dict[str, str | None] = {}
        for pos, field in enumerate(spec.fields):
            value = values[pos] if pos < len(values) else None
            if value is None:
                human[field.name] = None
            elif types is None:
                human[field.name] = str(value)
            else:
                try:
                    human[field.name] = field.transform.to_human_string(types[pos].field_type, value)
                except Exception:
                    human[field.name] = str(value)
        path = "/".join(f"{name}={'null' if value is None else value}" for name, value in human.items())
        return human, path


def manifest_stats(
    table: Table,
    current: list[ManifestFile],
    target_manifest_size_bytes: int,
    small_manifest_fraction: float,
) -> ManifestStats:
    """Measure the current snapshot's manifests and every kept snapshot's manifest list (each read once)."""
    small_limit = target_manifest_size_bytes * small_manifest_fraction
    sizes = [m.manifest_length for m in current]
    groups: dict[tuple[int, int], int] = {}
    for manifest in current:
        key = (manifest.partition_spec_id, int(manifest.content))
        groups[key] = groups.get(key, 0) + manifest.manifest_length
    after = sum(max(1, -(-size // target_manifest_size_bytes)) for size in groups.values())

    def read_list(snapshot: Snapshot) -> list[tuple[str, int]]:
        # Streamed, not cached: with one manifest per commit, N snapshots list about N*N/2 manifests.
        return [
            (m.manifest_path, m.manifest_length) for m in read_manifest_list(table.io.new_input(snapshot.manifest_list))
        ]

    distinct: dict[str, int] = {}
    counts: list[int] = []
    snapshots = table.metadata.snapshots
    last_log = time.monotonic()
    for done, listed in enumerate(window_map(read_list, snapshots), 1):
        counts.append(len(listed))
        distinct.update(listed)
        if time.monotonic() - last_log > _PROGRESS_EVERY_S:
            last_log = time.monotonic()
            log.info("%s: read %d of %d manifest lists", ".".join(table.name()), done, len(snapshots))
    return ManifestStats(
        manifests=len(current),
        data_manifests=sum(m.content == ManifestContent.DATA for m in current),
        delete_manifests=sum(m.content == ManifestContent.DELETES for m in current),
        bytes=sum(sizes),
        min_bytes=min(sizes, default=0),
        max_bytes=max(sizes, default=0),
        small_manifests=sum(size < small_limit for size in sizes),
        manifests_after_rewrite=after if current else 0,
        max_manifests_per_snapshot=max(counts, default=0),
        mean_manifests_per_snapshot=sum(counts) / len(counts) if counts else 0.0,
        distinct_manifests=len(distinct),
        distinct_manifest_bytes=sum(distinct.values()),
    )


def current_manifests(table: Table) -> list[ManifestFile]:
    """The manifests of the current snapshot (none for an empty table)."""
    snapshot = table.current_snapshot()
    return [] if snapshot is None else ManifestReader(table.io).manifests(snapshot)


def metadata_stats(table: Table) -> MetadataStats:
    """Size of the current metadata file and what its log keeps."""
    metadata = table.metadata
    properties = metadata.properties
    location = table.metadata_location
    try:
        file_bytes: int | None = len(table.io.new_input(location))
    except Exception as exc:  # the report still stands without it
        log.warning("%s: could not read the size of %s: %s", ".".join(table.name()), location, exc)
        file_bytes = None
    try:
        keep = int(properties.get("write.metadata.previous-versions-max", 100))
    except ValueError:
        keep = 100
    delete_after = str(properties.get("write.metadata.delete-after-commit.enabled", "false")).lower() == "true"
    version = _metadata_version(location)
    dropped = None if version is None else max(0, version - len(metadata.metadata_log))
    return MetadataStats(
        location=location,
        file_bytes=file_bytes,
        log_length=len(metadata.metadata_log),
        previous_versions_max=keep,
        delete_after_commit=delete_after,
        dropped_files=dropped,
    )


def _metadata_version(location: str) -> int | None:
    """The version in ``00042-<uuid>.metadata.json`` (the naming of Iceberg's catalogs), else ``None``."""
    name = location.rsplit("/", 1)[-1]
    head = name.split("-", 1)[0]
    if name.endswith(".metadata.json") and head.isdigit() and "-" in name:
        return int(head)
    return None
