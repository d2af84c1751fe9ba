"""Source data files cut into pieces of whole row groups, and the reads of one piece.

Pieces are cut from the row-group offsets Iceberg keeps for every data file (``split_offsets``),
without opening the file; a file without them, with delete files or not Parquet is one piece.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.expressions.visitors import bind, extract_field_ids, translate_column_names
from pyiceberg.io.pyarrow import (
    ArrowScan,
    _combine_positional_deletes,
    _get_column_projection_values,
    _to_requested_schema,
    expression_to_pyarrow,
    pyarrow_to_schema,
)
from pyiceberg.manifest import FileFormat
from pyiceberg.schema import prune_columns

from iceberg_ops_provider.maintenance.streaming import BatchSizer

if TYPE_CHECKING:
    from pyiceberg.table import FileScanTask

__all__ = ["PIECE_BYTES", "SourcePiece", "projected_row_groups", "split_into_pieces"]

PIECE_BYTES = 16 * 1024 * 1024
"""A file is cut into pieces of whole row groups of at least this many bytes on storage."""

READ_BUFFER_BYTES = 8 * 1024 * 1024
"""Read buffer of the projecting read path (PyIceberg's own setting)."""


@dataclass(frozen=True)
class SourcePiece:
    """Row groups ``[first_group, stop_group)`` of one source scan task (``stop_group`` ``None``: to the end).

    ``size`` is the bytes of the file this piece accounts for; the pieces of a file sum to its size.
    """

    task: FileScanTask
    first_group: int
    stop_group: int | None
    size: int

    @property
    def whole_file(self) -> bool:
        """Whether the piece is the whole file."""
        return self.first_group == 0 and self.stop_group is None

    @property
    def estimated_rows(self) -> int:
        """The file's rows prorated by the piece's share of its bytes (at least 1), for progress."""
        file = self.task.file
        return max(1, round(file.record_count * self.size / max(1, file.file_size_in_bytes)))


def _cuttable(task: FileScanTask, piece_bytes: int) -> bool:
    file = task.file
    offsets = file.split_offsets or []
    return (
        file.file_format == FileFormat.PARQUET
        and not task.delete_files
        and len(offsets) > 1
        and file.file_size_in_bytes >= 2 * piece_bytes
        and offsets == sorted(offsets)
        and offsets[0] >= 0
        and offsets[-1] < file.file_size_in_bytes
    )


def split_into_pieces(tasks: Sequence[FileScanTask], piece_bytes: int = PIECE_BYTES) -> list[SourcePiece]:
    """The pieces of ``tasks``, in the tasks' order and each file's row-group order.

    Consecutive row groups are joined until a piece holds at least ``piece_bytes``; a last piece
    smaller than that joins the one before it. The first piece of a file also accounts for the
    bytes before its first row group, the last one for the footer.
    """
    pieces: list[SourcePiece] = []
    for task in tasks:
        size = task.file.file_size_in_bytes
        if not _cuttable(task, piece_bytes):
            pieces.append(SourcePiece(task, 0, None, size))
            continue
        offsets = list(task.file.split_offsets or [])
        # Piece boundaries as (row group index, byte offset); the file's start and end close them.
        bounds: list[tuple[int, int]] = [(0, 0)]
        for group, offset in enumerate(offsets[1:], start=1):
            if offset - bounds[-1][1] >= piece_bytes and size - offset >= piece_bytes:
                bounds.append((group, offset))
        for (first, start), (stop, end) in zip(bounds, [*bounds[1:], (-1, size)], strict=True):
            pieces.append(SourcePiece(task, first, None if stop == -1 else stop, end - start))
    return pieces


def group_range(piece: SourcePiece, groups: int) -> range:
    """The row-group indexes of ``piece`` in a file that has ``groups`` row groups."""
    stop = groups if piece.stop_group is None else min(piece.stop_group, groups)
    return range(min(piece.first_group, stop), stop)


def projected_row_groups(
    scan: ArrowScan,
    task: FileScanTask,
    stream: Any,
    positional_deletes: list[pa.ChunkedArray] | None,
    piece: SourcePiece | None = None,
    batch_rows: int | None = None,
    sizer: BatchSizer | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of a Parquet data file (or of one piece of it) as ``scan`` reads them, a batch at a time.

    What PyIceberg's ``_task_to_record_batches`` does (schema projection, identity partition values
    for columns the file lacks, position deletes, the row filter), except that it decodes one batch at a
    time, of ``batch_rows`` rows or, by default, as many as ``sizer`` (a new
    :class:`~iceberg_ops_provider.maintenance.streaming.BatchSizer` if none) says for each row group:
    PyIceberg scans the whole file at once with pre-buffering, which holds all of it in memory, and
    Arrow's dataset scanner decodes whole row groups ahead (about 80 MiB more per reader on row groups
    of 1 Mi rows). The row filter applies to each batch, after the deleted positions are dropped.
    """
    metadata = scan._table_metadata
    sizer = sizer or BatchSizer()
    downcast = scan._downcast_ns_timestamp_to_us
    if downcast is None:
        downcast = metadata.format_version <= 2
    parquet = pq.ParquetFile(stream, buffer_size=READ_BUFFER_BYTES)
    file_schema = pyarrow_to_schema(
        parquet.schema_arrow,
        metadata.name_mapping(),
        downcast_ns_timestamp_to_us=downcast,
        format_version=metadata.format_version,
    )
    projected_schema = scan._projected_schema
    missing_values = _get_column_projection_values(
        task.file, projected_schema, metadata.schema(), metadata.specs().get(task.file.spec_id), file_schema.field_ids
    )
    file_project_schema = prune_columns(file_schema, scan._projected_field_ids, select_full_types=False)
    columns = [column.name for column in file_project_schema.columns]
    read, row_filter = columns, None
    if scan._bound_row_filter != AlwaysTrue():
        translated = translate_column_names(
            scan._bound_row_filter,
            file_schema,
            case_sensitive=scan._case_sensitive,
            projected_field_values=missing_values,
        )
        bound = bind(file_schema, translated, case_sensitive=scan._case_sensitive)
        row_filter = expression_to_pyarrow(bound, file_schema)
        # The filter may name columns the projection leaves out: read them too, and drop them after filtering.
        named = {file_schema.find_column_name(field_id).split(".")[0] for field_id in extract_field_ids(bound)}
        read = columns + sorted(named - set(columns))
    wanted = group_range(piece, parquet.num_row_groups) if piece is not None else range(parquet.num_row_groups)
    position = sum(parquet.metadata.row_group(group).num_rows for group in range(wanted.start))
    for group in wanted:
        batches = parquet.iter_batches(batch_rows or sizer.rows(), [group], read, use_threads=False)
        for batch in map(sizer.saw, batches):
            start, position = position, position + batch.num_rows
            if positional_deletes:
                batch = batch.take(_combine_positional_deletes(positional_deletes, start, position))
            if row_filter is not None:
                filtered = pa.Table.from_batches([batch]).filter(row_filter).select(columns)
                batch = filtered.combine_chunks().to_batches()[0] if filtered.num_rows else batch.slice(0, 0)
            if batch.num_rows:
                yield _to_requested_schema(
                    projected_schema,
                    file_project_schema,
                    batch,
                    downcast_ns_timestamp_to_us=downcast,
                    projected_missing_fields=missing_values,
                    allow_timestamp_tz_mismatch=True,
                )
