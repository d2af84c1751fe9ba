"""Finds a compaction's candidate files in a snapshot's manifests, keeping only what rewriting needs.

``plan_files()`` keeps every entry with all its column statistics (about 4.5 KiB per file) until the
plan is complete; here entries are decoded one at a time and only candidates kept, without statistics
(about 0.6 KiB). Filtering and delete matching are PyIceberg's own (``ManifestGroupPlanner``'s
evaluators, ``DeleteFileIndex``), so a candidate carries exactly the delete files a scan would apply.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pyiceberg.avro.file import AvroFile
from pyiceberg.expressions import BooleanExpression
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    INITIAL_SEQUENCE_NUMBER,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
)
from pyiceberg.table import FileScanTask, ManifestGroupPlanner
from pyiceberg.table.delete_file_index import DeleteFileIndex

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["plan_candidates"]

_READERS = 8
"""Manifests read at once (object stores answer each read with latency, not bandwidth)."""


def _entries(io: FileIO, manifest: ManifestFile) -> Any:
    """The live entries of ``manifest``, decoded one at a time (PyIceberg's reader, without the list)."""
    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        for entry in reader:
            if entry.status != ManifestEntryStatus.DELETED:
                yield _inherit_from_manifest(entry, manifest)


def _slim(data_file: DataFile) -> DataFile:
    """``data_file`` without its column statistics (rewriting and committing it do not use them)."""
    slim = DataFile.from_args(
        content=data_file.content,
        file_path=data_file.file_path,
        file_format=data_file.file_format,
        partition=data_file.partition,
        record_count=data_file.record_count,
        file_size_in_bytes=data_file.file_size_in_bytes,
        sort_order_id=data_file.sort_order_id,
    )
    slim.spec_id = data_file.spec_id
    return slim


def plan_candidates(
    metadata: TableMetadata,
    io: FileIO,
    snapshot: Snapshot,
    row_filter: BooleanExpression,
    keep: Callable[[DataFile], bool],
) -> list[FileScanTask]:
    """The data files of ``snapshot`` that may match ``row_filter`` and that ``keep`` accepts.

    Args:
        metadata: The table metadata (schema and specs for the evaluators).
        io: The table's FileIO.
        snapshot: The snapshot to plan.
        row_filter: Only files whose partition and column statistics may match it.
        keep: Which of those to return (the compaction's candidate rule).

    Returns:
        A task per kept file: a statistics-free copy of the file with the position delete files
        that apply to it.
    """
    planner = ManifestGroupPlanner(metadata, io, row_filter)
    manifests = snapshot.manifests(io)
    spec_ids = {manifest.partition_spec_id for manifest in manifests}
    # Built up front, once per spec: the readers below share them from several threads.
    partition_matches = {spec_id: planner._build_partition_evaluator(spec_id) for spec_id in spec_ids}
    manifest_matches = {spec_id: planner._build_manifest_evaluator(spec_id) for spec_id in spec_ids}
    metrics_match = planner._build_metrics_evaluator()
    manifests = [m for m in manifests if manifest_matches[m.partition_spec_id](m)]

    def read(manifest: ManifestFile) -> list[Any]:
        matches = partition_matches[manifest.partition_spec_id]
        if manifest.content == ManifestContent.DELETES:
            return [entry for entry in _entries(io, manifest) if matches(entry.data_file)]
        kept = []
        for entry in _entries(io, manifest):
            data_file = entry.data_file
            if matches(data_file) and metrics_match(data_file) and keep(data_file):
                kept.append((_slim(data_file), entry.sequence_number or INITIAL_SEQUENCE_NUMBER))
        return kept

    deletes = DeleteFileIndex()
    candidates: list[tuple[DataFile, int]] = []
    with ThreadPoolExecutor(max_workers=max(1, min(_READERS, len(manifests)))) as pool:
        for manifest, found in zip(manifests, pool.map(read, manifests), strict=True):
            if manifest.content == ManifestContent.DELETES:
                for entry in found:
                    if entry.data_file.content == DataFileContent.POSITION_DELETES:
                        deletes.add_delete_file(entry, partition_key=entry.data_file.partition)
            else:
                candidates.extend(found)
    return [
        FileScanTask(data_file, delete_files=deletes.for_data_file(sequence, data_file, data_file.partition))
        for data_file, sequence in candidates
    ]
