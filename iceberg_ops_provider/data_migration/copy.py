"""Copies the rows of source data files into new Parquet data files of a target table, one stream per core.

Lanes take pieces of whole row groups from one shared queue and read them a row group at a time. Nothing is
committed here: the caller commits the returned ``DataFile``s, or deletes the files listed in ``written``.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import ArrowScan, _get_parquet_writer_kwargs, _read_all_delete_files
from pyiceberg.manifest import FileFormat
from pyiceberg.partitioning import PartitionKey
from pyiceberg.schema import sanitize_column_names
from pyiceberg.table import TableProperties
from pyiceberg.table.locations import load_location_provider
from pyiceberg.typedef import Record
from pyiceberg.utils.properties import property_as_int

from iceberg_ops_provider.core.parquet_output import (
    OutputFile,
    StatisticsPlan,
    data_file_from_footer,
    split_by_partition,
)
from iceberg_ops_provider.data_migration.null_residuals import negated_field_ids, residual_holds
from iceberg_ops_provider.data_migration.pipeline import CopyOutcome, CopyPipeline, Stopped, UnitCopy
from iceberg_ops_provider.data_migration.source_pieces import (
    PIECE_BYTES,
    SourcePiece,
    group_range,
    projected_row_groups,
    split_into_pieces,
)
from iceberg_ops_provider.data_migration.verbatim import PartitionPath, copy_stream, partition_as_is
from iceberg_ops_provider.errors import DataMoveError
from iceberg_ops_provider.maintenance.streaming import (
    MAX_OPEN_FILES,
    READ_BATCH_ROWS,
    ROW_GROUP_BYTES,
    BatchSizer,
    PlainSchemas,
)
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.metadata import TableMetadata

__all__ = ["CopyOutcome", "FileCopier", "LANE_BUFFER_BYTES", "MAX_OPEN_FILES", "ROW_GROUP_BYTES", "READ_BATCH_ROWS"]

log = logging.getLogger(__name__)

LANE_BUFFER_BYTES = ROW_GROUP_BYTES
"""Unwritten Arrow bytes one lane holds across its open partitions before it writes the largest.

Rows of several target partitions then share one row group's worth of memory (their row groups get
smaller), so a partitioned target costs no more memory than an unpartitioned one."""

_ALWAYS_TRUE = AlwaysTrue()


@dataclass(eq=False)
class _Output:
    """Rows waiting for one target partition of one lane, and the file they go to."""

    key: PartitionKey | None
    record: Record
    schema: pa.Schema | None = None
    pending: list[pa.RecordBatch] = field(default_factory=list)
    pending_bytes: int = 0
    pending_rows: int = 0
    file: OutputFile | None = None

    @property
    def size(self) -> int:
        """Bytes on storage plus bytes waiting in memory (what makes an output the largest)."""
        return (self.file.bytes_written if self.file is not None else 0) + self.pending_bytes


class FileCopier:
    """Copies the rows of source scan tasks into new, uncommitted Parquet data files of a target table.

    ``convert`` turns a batch of source rows into the batch to write (the target's file column names
    and field ids); it runs on the lane threads, as does ``on_progress(rows, source_bytes)``, called
    without a lock held, and ``changed_rows()``, called right after each ``convert`` on the same lane:
    the rows that conversion changed (a data step's count), summed per unit in
    :attr:`.UnitCopy.rows_changed`. ``verbatim``: copy the bytes of source files that need no change
    (:mod:`.verbatim`); the caller has checked that the two schemas allow it. ``parallelism`` defaults
    to the number of CPUs, ``target_file_size_bytes`` to the target's ``write.target-file-size-bytes``.

    Raises:
        ValueError: The target's ``write.target-file-size-bytes`` is not positive, or ``row_filter`` does
            not bind to the source's schema.
    """

    def __init__(
        self,
        *,
        source_metadata: TableMetadata,
        source_io: FileIO,
        target_metadata: TableMetadata,
        target_io: FileIO,
        convert: Callable[[pa.RecordBatch], pa.RecordBatch],
        source_columns: Sequence[str] | None = None,
        row_filter: BooleanExpression = _ALWAYS_TRUE,
        case_sensitive: bool = True,
        parallelism: int | None = None,
        target_file_size_bytes: int | None = None,
        file_name_prefix: str = "",
        on_progress: Callable[[int, int], None] | None = None,
        changed_rows: Callable[[], int] | None = None,
        piece_bytes: int = PIECE_BYTES,
        verbatim: bool = False,
    ) -> None:
        self.source_metadata = source_metadata
        self.source_io = source_io
        self.target_metadata = target_metadata
        self.target_io = target_io
        self.convert = convert
        self.row_filter = row_filter
        self.case_sensitive = case_sensitive
        self.on_progress = on_progress
        self.changed_rows = changed_rows
        self.file_name_prefix = file_name_prefix
        self.parallelism = parallelism or os.cpu_count() or 1
        self.piece_bytes = piece_bytes
        properties = target_metadata.properties
        if target_file_size_bytes is None:
            target_file_size_bytes = property_as_int(
                properties,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
            )
        if target_file_size_bytes is None or target_file_size_bytes < 1:
            raise ValueError(
                f"The target's table property {TableProperties.WRITE_TARGET_FILE_SIZE_BYTES} is "
                f"{target_file_size_bytes}: set it to a positive number of bytes (a table property update)."
            )
        self.target_file_size_bytes = target_file_size_bytes
        self.row_group_rows: int = property_as_int(  # type: ignore[assignment]
            properties, TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT
        )
        self.source_schema = source_metadata.schema()
        self.read_schema = (
            self.source_schema
            if source_columns is None
            else self.source_schema.select(*source_columns, case_sensitive=case_sensitive)
        )
        self.read_columns = [column.name for column in self.read_schema.columns]
        # The read path reads source names as they are; a schema whose names Parquet stores sanitized
        # is read through ArrowScan, which maps them back.
        self._names_plain = sanitize_column_names(self.source_schema) == self.source_schema
        ArrowScan(source_metadata, source_io, self.read_schema, row_filter, case_sensitive)  # binds the filter
        # Columns of negated predicates: a file that may hold nulls in them needs the filter row by row.
        self._negated_ids = negated_field_ids(bind(self.source_schema, row_filter, case_sensitive))

        self.spec = target_metadata.spec()
        self.file_schema = sanitize_column_names(target_metadata.schema())
        self.statistics = StatisticsPlan.for_table(target_metadata)
        self.writer_kwargs = _get_parquet_writer_kwargs(properties)
        self.locations = load_location_provider(table_location=target_metadata.location, table_properties=properties)
        # Whether a file of an Arrow schema holds exactly the source's current schema (ids, names, types).
        self.plain = PlainSchemas(self.source_schema, source_metadata.format_version)
        self.verbatim = verbatim and self.read_schema == self.source_schema
        # Statistics of a copied file: its columns carry the source's names, the target's metrics settings.
        self.verbatim_statistics = StatisticsPlan.for_table(target_metadata, self.source_schema)

    def fast_path(self, task: FileScanTask) -> bool:
        """Whether ``task`` may be read with PyArrow alone, as far as the scan task tells (schema aside)."""
        return (
            self._names_plain
            and not task.delete_files
            and task.file.file_format == FileFormat.PARQUET
            and task.residual == _ALWAYS_TRUE
            and residual_holds(task.file, self._negated_ids)
        )

    def partition_as_is(self, task: FileScanTask) -> Record | None:
        """The target partition of ``task``'s file if its bytes can be copied as they are, else ``None``."""
        if not self.verbatim or not self.fast_path(task):
            return None
        file_spec = self.source_metadata.specs().get(task.file.spec_id)
        return partition_as_is(task.file.partition, file_spec, self.spec)

    def pieces(self, tasks: Sequence[FileScanTask]) -> list[SourcePiece]:
        """The pieces the lanes of a copy of ``tasks`` take in turn; a file copied as it is stays one piece."""
        pieces: list[SourcePiece] = []
        for task in tasks:
            if self.partition_as_is(task) is not None:
                pieces.append(SourcePiece(task, 0, None, task.file.file_size_in_bytes))
            else:
                pieces.extend(split_into_pieces([task], self.piece_bytes))
        return pieces

    def copy(self, tasks: Sequence[FileScanTask], written: list[str]) -> CopyOutcome:
        """Read ``tasks`` and write their rows as new data files of the target; nothing is committed.

        ``written`` receives the location of every file the moment it is created (kept when the copy
        fails), so the caller can delete what it does not commit.
        """
        pipeline = self.pipeline([tasks], lookahead=0)
        pipeline.units[0].written = written  # before the lanes start: they list every file they create here
        with pipeline:
            copied = pipeline.next_unit()
        return CopyOutcome(copied.data_files, copied.rows, copied.bytes_read, copied.bytes_written, copied.rows_changed)

    def pipeline(self, units: Sequence[Sequence[FileScanTask]], lookahead: int = 1) -> CopyPipeline:
        """A :class:`.CopyPipeline` that copies ``units`` (each a list of scan tasks) in order with this copier's lanes.

        Use it as a context manager; leaving it stops the lanes and closes or aborts their files.
        Each returned :class:`.UnitCopy` lists its files and counts like :meth:`copy`'s outcome.
        """
        pieces = [self.pieces(tasks) for tasks in units]
        write_id = uuid.uuid4()
        lanes = min(self.parallelism, max(1, sum(map(len, pieces))))
        return CopyPipeline(pieces, [_Lane(self, number, write_id).run for number in range(lanes)], lookahead)


class _Lane:
    """One thread of a copy: copies the pieces it takes from the pipeline, into its own files."""

    def __init__(self, copier: FileCopier, number: int, write_id: uuid.UUID) -> None:
        self.copier = copier
        self.number = number
        self.write_id = write_id
        self.sizer = BatchSizer()
        self.unit: UnitCopy | None = None
        self.share = CopyOutcome()
        self.outputs: dict[Record, _Output] = {}
        self.pending_bytes = 0
        self.counter = 0
        # Output bytes per Arrow byte: measured once something was written, else guessed from the source.
        self.arrow_read = 0
        self.source_read = 0
        self.arrow_written = 0
        self.output_written = 0

    def run(self, pipeline: CopyPipeline) -> None:
        """Copy pieces until none is left, closing the lane's files of each unit when it moves past it.

        On failure (or when the pipeline stops) every open file is aborted and the error re-raised.
        """
        copier = self.copier
        try:
            scan = ArrowScan(
                copier.source_metadata, copier.source_io, copier.read_schema, copier.row_filter, copier.case_sensitive
            )
            while True:
                taken = pipeline.take(self.unit, wait=self.unit is None)
                if taken is None:
                    if self.unit is None:
                        return  # every piece was taken
                    self._leave(pipeline)  # nothing more of this unit now: close its files, then wait
                    continue
                unit, piece = taken
                if unit is not self.unit:
                    self._leave(pipeline)
                    self.unit = unit
                if piece.whole_file and self._copy_as_is(piece, pipeline):
                    continue
                for batch, source_bytes in self._read(scan, piece):
                    if pipeline.stop.is_set():
                        raise Stopped()
                    self.share.bytes_read += source_bytes
                    self.source_read += source_bytes
                    if batch is not None:
                        self._write(copier.convert(batch))
                        if copier.changed_rows is not None:
                            self.share.rows_changed += copier.changed_rows()
                    if copier.on_progress is not None and (source_bytes or batch is not None):
                        copier.on_progress(batch.num_rows if batch is not None else 0, source_bytes)
        except BaseException:
            for output in self.outputs.values():
                if output.file is not None:
                    output.file.abort()
                    output.file = None
            self.outputs.clear()
            raise

    def _leave(self, pipeline: CopyPipeline) -> None:
        """Close the lane's files of its current unit and hand what it wrote to the unit."""
        if self.unit is None:
            return
        for output in list(self.outputs.values()):
            self._roll(output)
        unit, share = self.unit, self.share
        self.unit, self.share = None, CopyOutcome()
        pipeline.leave(unit, share)

    def _copy_as_is(self, piece: SourcePiece, pipeline: CopyPipeline) -> bool:
        """Copy the piece's file byte for byte if it qualifies (:mod:`.verbatim`); whether it did."""
        copier, file = self.copier, piece.task.file
        partition = copier.partition_as_is(piece.task)
        if partition is None:
            return False
        with copier.source_io.new_input(file.file_path).open() as stream:
            parquet = pq.ParquetFile(stream)
            if not copier.plain(parquet.schema_arrow):
                return False  # an older schema, or no field ids: re-encoded
            footer, rows = parquet.metadata, parquet.metadata.num_rows
            stream.seek(0)
            key = PartitionPath(copier.spec, copier.target_metadata.schema(), partition) if partition else None
            path = self._new_path(key)  # type: ignore[arg-type]
            copied = {"bytes": 0, "rows": 0}

            def progress(chunk: int) -> None:
                copied["bytes"] += chunk
                rows_now = rows * copied["bytes"] // max(1, file.file_size_in_bytes)
                if copier.on_progress is not None:
                    copier.on_progress(rows_now - copied["rows"], chunk)
                copied["rows"] = rows_now

            try:
                output = copier.target_io.new_output(path)
                size = copy_stream(stream, output, on_bytes=progress, stop=pipeline.stop.is_set)
            except InterruptedError as exc:
                raise Stopped() from exc
        if size != file.file_size_in_bytes:
            raise DataMoveError(
                f"Source file {file.file_path} holds {size} bytes but the source's metadata says "
                f"{file.file_size_in_bytes}: the file changed after it was committed. Check the source table."
            )
        if copier.on_progress is not None and rows > copied["rows"]:
            copier.on_progress(rows - copied["rows"], 0)
        self._add_file(path, footer, size, copier.verbatim_statistics, partition)
        self.share.rows += rows
        self.share.bytes_read += size
        self.source_read += size
        log.debug("copied %s as it is to %s (%s, %d rows)", file.file_path, path, size_text(size), rows)
        return True

    def _read(self, scan: ArrowScan, piece: SourcePiece) -> Iterator[tuple[pa.RecordBatch | None, int]]:
        """The rows of ``piece`` (source names, chosen columns) with their shares of its bytes, summing to its size."""
        size, records, read, used = piece.size, piece.estimated_rows, 0, 0
        for batch in self._batches(scan, piece):
            read += batch.num_rows
            share = min(size, size * read // records) - used
            used += share
            self.arrow_read += batch.nbytes
            yield batch, share
        if used < size:
            yield None, size - used

    def _batches(self, scan: ArrowScan, piece: SourcePiece) -> Iterator[pa.RecordBatch]:
        copier, task = self.copier, piece.task
        if task.file.file_format != FileFormat.PARQUET:
            assert piece.whole_file
            deletes = _read_all_delete_files(copier.source_io, [task])
            yield from scan._record_batches_from_scan_tasks_and_deletes([task], deletes)
            return
        with copier.source_io.new_input(task.file.file_path).open() as stream:
            if copier.fast_path(task):
                parquet = pq.ParquetFile(stream, pre_buffer=True)
                if copier.plain(parquet.schema_arrow):
                    # One row group per call: pre-buffering a whole file's row groups holds the file in memory.
                    for group in group_range(piece, parquet.num_row_groups):
                        batches = parquet.iter_batches(
                            self.sizer.rows(), [group], columns=copier.read_columns, use_threads=False
                        )
                        yield from map(self.sizer.saw, batches)
                    return
            deletes = _read_all_delete_files(copier.source_io, [task]) if task.delete_files else {}
            yield from projected_row_groups(
                scan, task, stream, deletes.get(task.file.file_path), piece, sizer=self.sizer
            )

    def _write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        for key, part in split_by_partition(batch, self.copier.spec, self.copier.file_schema):
            output = self._output(key)
            if output.schema is None:
                output.schema = part.schema
            elif not part.schema.equals(output.schema):
                part = part.cast(output.schema)
            output.pending.append(part)
            output.pending_bytes += part.nbytes
            output.pending_rows += part.num_rows
            self.pending_bytes += part.nbytes
            self.share.rows += part.num_rows
            on_storage = output.file.bytes_written if output.file is not None else 0
            if on_storage + output.pending_bytes * self._ratio() >= self.copier.target_file_size_bytes:
                self._roll(output)
            elif output.pending_rows >= self.copier.row_group_rows or output.pending_bytes >= ROW_GROUP_BYTES:
                self._flush(output)
        while self.pending_bytes > LANE_BUFFER_BYTES:
            self._flush(max(self.outputs.values(), key=lambda each: each.pending_bytes))

    def _output(self, key: PartitionKey | None) -> _Output:
        record = key.partition if key is not None else Record()
        output = self.outputs.get(record)
        if output is None:
            if len(self.outputs) >= MAX_OPEN_FILES:
                self._roll(max(self.outputs.values(), key=lambda each: each.size))
            output = self.outputs[record] = _Output(key, record)
        return output

    def _ratio(self) -> float:
        """Bytes on storage per Arrow byte: measured on this lane's writes, else the source files' own ratio."""
        if self.arrow_written and self.output_written:
            return self.output_written / self.arrow_written
        if self.arrow_read and self.source_read:
            return self.source_read / self.arrow_read
        return 1.0

    def _flush(self, output: _Output) -> None:
        """Write the output's pending rows as row groups (opening its file first if needed)."""
        if not output.pending:
            return
        copier = self.copier
        table = pa.Table.from_batches(output.pending, schema=output.schema)
        if output.file is None:
            output.file = OutputFile(self._new_path(output.key), copier.target_io, table.schema, copier.writer_kwargs)
        before = output.file.bytes_written
        output.file.write(table, min(table.num_rows, copier.row_group_rows))
        self.output_written += output.file.bytes_written - before
        self.arrow_written += output.pending_bytes
        self.pending_bytes -= output.pending_bytes
        output.pending, output.pending_bytes, output.pending_rows = [], 0, 0

    def _new_path(self, key: PartitionKey | None) -> str:
        """A new data file location of the target, listed in the unit's files the moment it is chosen."""
        name = f"{self.copier.file_name_prefix}{self.write_id}-{self.number}-{self.counter}.parquet"
        self.counter += 1
        path = self.copier.locations.new_data_location(data_file_name=name, partition_key=key)
        assert self.unit is not None
        self.unit.written.append(path)
        return path

    def _add_file(self, path: str, footer: pq.FileMetaData, size: int, plan: StatisticsPlan, partition: Record) -> None:
        spec_id = self.copier.target_metadata.default_spec_id
        self.share.data_files.append(
            data_file_from_footer(path, footer, size, plan=plan, partition=partition, spec_id=spec_id)
        )

    def _roll(self, output: _Output) -> None:
        """Write the output's pending rows, close its file and forget the output."""
        self._flush(output)
        del self.outputs[output.record]
        if output.file is None:
            return
        file, output.file = output.file, None
        try:
            footer, size = file.close()
        except BaseException:
            file.abort()
            raise
        self._add_file(file.path, footer, size, self.copier.statistics, output.record)
        log.debug("wrote %s (%s, %d rows)", file.path, size_text(size), file.rows)
