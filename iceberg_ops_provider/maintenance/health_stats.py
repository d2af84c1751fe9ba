"""What a table's metadata says about its files, read once and aggregated as it streams.

Only metadata is read (manifest lists, manifests, the size of ``metadata.json``), and memory holds one
manifest's entries per reading thread and one small aggregate per partition, never one object per file.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import DataFileContent, ManifestContent, read_manifest_list

from iceberg_ops_provider.maintenance.expire import deletes_metadata
from iceberg_ops_provider.maintenance.files import window_map

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

_PROGRESS_EVERY_S = 10.0


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

    ``small_files`` are under ``small_file_fraction`` of the target, ``large_files`` over ``large_file_factor``
    times it; ``older_spec_files`` were written under an older partition spec; ``histogram`` has
    power-of-two buckets (empty ones left out).
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

    ``partition`` maps field names to values as Iceberg prints them; ``path`` is ``region=eu/day=2024-01-01``
    (empty when unpartitioned). ``compaction_candidates`` are the small files, or every file of an older
    spec; ``needs_compaction``: at least ``min_input_files`` of them, more than ``max_small_file_ratio``.
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
    """Manifests of the current snapshot (``manifests`` to ``manifests_after_rewrite``) and of every kept snapshot.

    The kept snapshots' figures (``max_manifests_per_snapshot`` to ``distinct_manifest_bytes``) are ``None`` when
    their manifest lists were not read.
    """

    manifests: int
    data_manifests: int
    delete_manifests: int
    bytes: int
    min_bytes: int
    max_bytes: int
    small_manifests: int
    manifests_after_rewrite: int
    max_manifests_per_snapshot: int | None
    mean_manifests_per_snapshot: float | None
    distinct_manifests: int | None
    distinct_manifest_bytes: int | None


@dataclass(frozen=True)
class SnapshotStats:
    """The table's snapshots and refs; ``expirable_snapshots`` are those the recommended expiry would expire."""

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

    ``dropped_files`` counts earlier metadata files already dropped from the log, from the version in the
    file name (``None`` without one); with ``delete_after_commit`` off they were left on storage.
    """

    location: str
    file_bytes: int | None
    log_length: int
    previous_versions_max: int
    delete_after_commit: bool
    dropped_files: int | None


@dataclass(slots=True)
class _Partition:
    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    small_files: int = 0
    small_bytes: int = 0
    position_delete_files: int = 0
    equality_delete_files: int = 0


class FileScan:
    """Aggregates the live entries of the current snapshot's manifests."""

    def __init__(
        self, table: Table, target_file_size_bytes: int, small_file_fraction: float, large_file_factor: float
    ) -> None:
        self.table = table
        self.small_limit = target_file_size_bytes * small_file_fraction
        self.large_limit = target_file_size_bytes * large_file_factor
        self.partitions: dict[tuple[int, tuple[Any, ...]], _Partition] = {}
        self.buckets: dict[int, list[int]] = {}
        self.large_files = 0
        self.current_spec_id = table.metadata.default_spec_id
        self.min_bytes: int | None = None
        self.max_bytes = 0
        self.deletes = [0] * 6  # position files, bytes, records; equality files, bytes, records

    def run(self, manifests: list[ManifestFile]) -> None:
        """Read each manifest once (on threads) and fold its live entries into the totals."""
        io = self.table.io
        name = ".".join(self.table.name())
        # A v1 manifest list may leave the file counts out: such a manifest must be read.
        todo = [
            m
            for m in manifests
            if m.added_files_count is None
            or m.existing_files_count is None
            or m.added_files_count + m.existing_files_count
        ]
        last_log = time.monotonic()
        for done, (manifest, entries) in enumerate(
            window_map(lambda m: (m, m.fetch_manifest_entry(io, discard_deleted=True)), todo), 1
        ):
            spec_id = manifest.partition_spec_id
            for entry in entries:
                self._add(spec_id, entry.data_file)
            if time.monotonic() - last_log > _PROGRESS_EVERY_S:
                last_log = time.monotonic()
                files = sum(p.data_files for p in self.partitions.values())
                log.info("%s: read %d of %d manifests (%d data files so far)", name, done, len(todo), files)

    def _add(self, spec_id: int, data_file: Any) -> None:
        size = data_file.file_size_in_bytes
        partition = self.partitions.setdefault((spec_id, tuple(data_file.partition)), _Partition())
        if data_file.content == DataFileContent.DATA:
            self.min_bytes = size if self.min_bytes is None else min(self.min_bytes, size)
            self.max_bytes = max(self.max_bytes, size)
            bucket = self.buckets.setdefault(max(size, 1).bit_length() - 1, [0, 0])
            bucket[0] += 1
            bucket[1] += size
            partition.data_files += 1
            partition.data_bytes += size
            partition.records += data_file.record_count
            if size < self.small_limit:
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
        parts = self.partitions.values()
        return DataFileStats(
            files=sum(p.data_files for p in parts),
            bytes=sum(p.data_bytes for p in parts),
            records=sum(p.records for p in parts),
            min_bytes=self.min_bytes or 0,
            max_bytes=self.max_bytes,
            small_files=sum(p.small_files for p in parts),
            small_bytes=sum(p.small_bytes for p in parts),
            large_files=self.large_files,
            older_spec_files=sum(
                p.data_files for (spec, _), p in self.partitions.items() if spec != self.current_spec_id
            ),
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
                    **asdict(totals),
                    compaction_candidates=candidates,
                    compaction_candidate_bytes=totals.data_bytes if older else totals.small_bytes,
                    needs_compaction=candidates >= min_input_files and ratio > max_small_file_ratio,
                )
            )
        result.sort(key=lambda p: (not p.needs_compaction, -p.compaction_candidates, p.spec_id, p.path))
        return result


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
            except Exception:  # a source column dropped since: the raw values are shown
                self.types[spec_id] = None
        types = self.types[spec_id]
        human: dict[str, str | None] = {}
        for pos, field in enumerate(spec.fields):
            value = values[pos] if pos < len(values) else None
            try:
                human[field.name] = (
                    None if value is None else field.transform.to_human_string(types[pos].field_type, value)
                )
            except Exception:  # no types (a source column dropped since), or a value the transform cannot print
                human[field.name] = str(value)
        path = "/".join(f"{name}={'null' if value is None else value}" for name, value in human.items())
        return human, path


def manifest_stats(
    table: Table,
    current: list[ManifestFile],
    target_manifest_size_bytes: int,
    small_manifest_fraction: float,
    *,
    kept_snapshots: bool = True,
) -> ManifestStats:
    """Measure the current snapshot's manifests and, with ``kept_snapshots``, every kept snapshot's manifest list.

    Each list is read once; with a manifest per commit, N snapshots list about N*N/2 manifests (a second or more
    for a thousand snapshots), which no recommendation needs: callers that only decide what to run skip them.
    """
    small_limit = target_manifest_size_bytes * small_manifest_fraction
    sizes = [m.manifest_length for m in current]
    groups: Counter[tuple[int, int]] = Counter()
    for manifest in current:
        groups[(manifest.partition_spec_id, int(manifest.content))] += manifest.manifest_length
    after = sum(max(1, -(-size // target_manifest_size_bytes)) for size in groups.values())

    def read_list(snapshot: Snapshot) -> list[tuple[str, int]]:
        # Streamed, not cached: with one manifest per commit, N snapshots list about N*N/2 manifests.
        return [
            (m.manifest_path, m.manifest_length) for m in read_manifest_list(table.io.new_input(snapshot.manifest_list))
        ]

    distinct: dict[str, int] = {}
    counts: list[int] = []
    snapshots = table.metadata.snapshots if kept_snapshots else []
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
        max_manifests_per_snapshot=max(counts, default=0) if kept_snapshots else None,
        mean_manifests_per_snapshot=(sum(counts) / len(counts) if counts else 0.0) if kept_snapshots else None,
        distinct_manifests=len(distinct) if kept_snapshots else None,
        distinct_manifest_bytes=sum(distinct.values()) if kept_snapshots else None,
    )


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
    # The version in ``00042-<uuid>.metadata.json`` (the naming of Iceberg's catalogs).
    version = re.fullmatch(r"(\d+)-.*\.metadata\.json", location.rsplit("/", 1)[-1])
    dropped = None if version is None else max(0, int(version[1]) - len(metadata.metadata_log))
    return MetadataStats(
        location=location,
        file_bytes=file_bytes,
        log_length=len(metadata.metadata_log),
        previous_versions_max=keep,
        delete_after_commit=deletes_metadata(metadata),
        dropped_files=dropped,
    )
