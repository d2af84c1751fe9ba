"""Shared builders for the compaction tests: tables of many small files, delete files, row multisets.

No tests here. Position and equality delete files are written as Spark and Flink write them (a
Parquet file plus a manifest entry of the right content) and committed through a real snapshot,
since PyIceberg 0.12 cannot write merge-on-read deletes itself.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles

from iceberg_ops_provider.maintenance.rewrite_commit import delete_manifest_writer

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("category", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("note", pa.string()),
    ]
)

PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545


def batch(start: int, count: int, categories: tuple[str, ...] = ("a", "b")) -> pa.Table:
    """``count`` rows with ids from ``start``; categories cycle; every 7th amount is null."""
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "category": [categories[i % len(categories)] for i in ids],
            "amount": [None if i % 7 == 0 else i * 1.5 for i in ids],
            "note": [f"note-{i:06d}" for i in ids],
        },
        schema=SCHEMA,
    )


def small_files_table(catalog: Any, name: str, *, appends: int, rows: int, partitioned: bool = False) -> Any:
    """A table written by ``appends`` appends of ``rows`` rows (one file per append and partition)."""
    namespace = name.split(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    with catalog.create_table_transaction(name, SCHEMA) as transaction:
        if partitioned:
            with transaction.update_spec() as spec:
                spec.add_identity("category")
    table = catalog.load_table(name)
    for number in range(appends):
        table.append(batch(number * rows, rows))
    return table


def rows(table: Any, snapshot_id: int | None = None, row_filter: str | None = None) -> Counter[tuple[Any, ...]]:
    """The multiset of rows ``table`` reads (at ``snapshot_id``, matching ``row_filter``)."""
    return counted(table.scan(row_filter=row_filter or "true", snapshot_id=snapshot_id).to_arrow())


def counted(data: pa.Table) -> Counter[tuple[Any, ...]]:
    """The multiset of rows of ``data``."""
    return Counter(zip(*(data.column(name).to_pylist() for name in data.column_names), strict=True))


def live_data_files(table: Any) -> list[DataFile]:
    """The data files of the current snapshot."""
    return [task.file for task in table.scan().plan_files()]


def files_on_disk(root: Path) -> set[str]:
    """Every file under ``root``."""
    return {os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names}


class _AddDeleteFiles(_FastAppendFiles):
    """A row-delta snapshot that adds delete files, as Spark's merge-on-read writes them."""

    def __init__(self, transaction: Any, io: Any, delete_files: list[DataFile]) -> None:
        super().__init__(Operation.DELETE, transaction, io)
        self._delete_files = delete_files
        self._added_data_files = list(delete_files)  # only for the summary counts

    def _manifests(self) -> list[Any]:
        by_spec: dict[int, list[DataFile]] = {}
        for delete_file in self._delete_files:
            by_spec.setdefault(delete_file.spec_id, []).append(delete_file)
        written = []
        for spec_id, files in by_spec.items():
            with delete_manifest_writer(self, spec_id) as writer:
                for delete_file in files:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self.snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=delete_file,
                        )
                    )
            written.append(writer.to_manifest_file())
        return written + self._existing_manifests()


def commit_delete_files(table: Any, delete_files: list[DataFile]) -> None:
    """Commit ``delete_files`` in one snapshot."""
    transaction = table.transaction()
    producer = _AddDeleteFiles(transaction, table.io, delete_files)
    producer.commit()
    transaction.commit_transaction()


def _write(table: Any, data: pa.Table) -> tuple[str, int]:
    path = table.location_provider().new_data_location(f"deletes-{uuid.uuid4()}.parquet")
    with table.io.new_output(path).create(overwrite=True) as stream:
        pq.write_table(data, stream)
    return path, len(table.io.new_input(path))


def position_delete_file(
    table: Any, targets: Mapping[str, Iterable[int]], *, with_bounds: bool = True, of: DataFile | None = None
) -> DataFile:
    """A position delete file deleting rows ``targets[path]`` of each data file ``path``.

    Args:
        table: The table.
        targets: Positions to delete, by data file path.
        with_bounds: Record the lower and upper bounds of ``file_path`` (Spark does; without them a
            reader must open the file to know which data files it touches).
        of: A data file whose spec and partition the delete file takes (default: the first target's).
    """
    pairs = sorted((path, position) for path, positions in targets.items() for position in positions)
    schema = pa.schema(
        [
            pa.field(
                "file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}
            ),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
        ]
    )
    data = pa.table({"file_path": [p for p, _ in pairs], "pos": [q for _, q in pairs]}, schema=schema)
    path, size = _write(table, data)
    reference = of or next(task.file for task in table.scan().plan_files() if task.file.file_path == pairs[0][0])
    bounds: dict[str, Any] = {}
    if with_bounds:
        bounds = {
            "lower_bounds": {PATH_FIELD_ID: pairs[0][0].encode()},
            "upper_bounds": {PATH_FIELD_ID: pairs[-1][0].encode()},
        }
    delete_file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=reference.partition,
        record_count=len(pairs),
        file_size_in_bytes=size,
        spec_id=reference.spec_id,
        **bounds,
    )
    delete_file.spec_id = reference.spec_id
    return delete_file


def equality_delete_file(table: Any, ids: list[int]) -> DataFile:
    """An equality delete file on column ``id`` (as Flink upserts write them)."""
    id_field = table.schema().find_field("id")
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(id_field.field_id).encode()})]
    )
    path, size = _write(table, pa.table({"id": ids}, schema=schema))
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=live_data_files(table)[0].partition,
        record_count=len(ids),
        file_size_in_bytes=size,
        equality_ids=[id_field.field_id],
        spec_id=table.metadata.default_spec_id,
    )
    delete_file.spec_id = table.metadata.default_spec_id
    return delete_file


def recomputed(table: Any, data_file: DataFile) -> DataFile:
    """What PyIceberg itself derives from the file's Parquet footer (stats, partition from the footer)."""
    return parquet_file_to_data_file(table.io, table.metadata, data_file.file_path)
