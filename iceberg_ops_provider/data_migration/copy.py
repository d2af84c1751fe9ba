"""Copies the rows of source data files into new Parquet data files of a target table, one stream per core.

The tasks are split into lanes of about equal bytes, one thread each. A lane reads its files one
after the other and writes its own output files, so decoding one file and encoding another run at
once on different cores (PyArrow releases the GIL in both). A source file that holds exactly the
source's current schema, has no delete files and needs no filtering (the usual case) is read with
PyArrow alone; any other goes through PyIceberg's ``ArrowScan`` projection, which reads old schemas
and applies position deletes and the row filter. Both read a file one row group at a time (PyArrow's
and PyIceberg's own whole-file reads pre-buffer the whole file: +1.2 to 1.6 GB for a 1.1 GiB file).

Rows keep the Arrow types they were read with: casting every batch to the target's types (string to
large_string, say) costs about a tenth of the throughput. Only batches bound for the same output
file are cast to that file's schema when they differ.

Memory stays near one output row group and one source row group per lane, whatever the size of the
table or of its files: rows are buffered up to one row group (the target's row-group row limit and
:data:`ROW_GROUP_BYTES`), a lane holds at most :data:`LANE_BUFFER_BYTES` of unwritten rows across its
outputs (rows of several target partitions share it, in smaller row groups) and at most
:data:`MAX_OPEN_FILES` open files (one per target partition).

Nothing is committed here: the caller commits the returned ``DataFile``s, and deletes the files
listed in ``written`` if that commit does not happen.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import bind, translate_column_names
from pyiceberg.io.pyarrow import (
    ArrowScan,
    _combine_positional_deletes,
    _get_column_projection_values,
    _get_parquet_writer_kwargs,
    _read_all_delete_files,
    _to_requested_schema,
    expression_to_pyarrow,
    pyarrow_to_schema,
)
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.partitioning import PartitionKey
from pyiceberg.schema import prune_columns, sanitize_column_names
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
from iceberg_ops_provider.errors import ReconciliationError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.schema import Schema
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.metadata import TableMetadata

__all__ = [
    "CopyOutcome",
    "FileCopier",
    "LANE_BUFFER_BYTES",
    "MAX_OPEN_FILES",
    "ROW_GROUP_BYTES",
    "READ_BATCH_ROWS",
]

log = logging.getLogger(__name__)

ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes buffered per output row group; the target's ``write.parquet.row-group-limit`` rows also apply."""

LANE_BUFFER_BYTES = ROW_GROUP_BYTES
"""Unwritten Arrow bytes one lane holds across its open partitions before it writes the largest.

Rows of several target partitions then share one row group's worth of memory (their row groups get
smaller), so a partitioned target costs no more memory than an unpartitioned one."""

MAX_OPEN_FILES = 8
"""Output files one lane keeps open at once (one per target partition); a ninth rolls the largest."""

READ_BATCH_ROWS = 128 * 1024
"""Rows per batch read from a source file on the PyArrow-only path."""

READ_BUFFER_BYTES = 8 * 1024 * 1024
"""Read buffer of the projecting read path (PyIceberg's own setting)."""

_ALWAYS_TRUE = AlwaysTrue()


@dataclass
class CopyOutcome:
    """What one :meth:`FileCopier.copy` call wrote.

    Attributes:
        data_files: The new target data files (not committed), each with its partition, spec id and statistics.
        rows: Rows written.
        bytes_read: Source data file bytes read (the tasks' file sizes).
        bytes_written: Bytes of the new data files.
    """

    data_files: list[DataFile] = field(default_factory=list)
    rows: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


class _Stopped(Exception):
    """Another lane failed: this one stops at the next batch."""


class _Output:
    """Rows waiting for one target partition of one lane, and the file they go to."""

    def __init__(self, key: PartitionKey | None, record: Record) -> None:
        self.key = key
        self.record = record
        self.schema: pa.Schema | None = None
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.pending_rows = 0
        self.file: OutputFile | None = None

    @property
    def size(self) -> int:
        """Bytes on storage plus bytes waiting in memory (what makes an output the largest)."""
        return (self.file.bytes_written if self.file is not None else 0) + self.pending_bytes


class FileCopier:
    """Copies the rows of source scan tasks into new, uncommitted Parquet data files of a target table.

    Args:
        source_metadata: The source table's metadata (its current schema is the one rows are read in).
        source_io: The source table's FileIO.
        target_metadata: The target table's metadata: its location, default partition spec, current
            schema (for statistics) and write properties.
        target_io: The target table's FileIO.
        convert: Turns a batch of source rows (source column names) into the batch to write: the
            target's file column names with the target's field ids in the field metadata. Called from
            the lane threads; it must not keep state between calls that is not thread-safe.
        source_columns: Top-level source columns to read (``None``: all of them).
        row_filter: The filter the tasks were planned with; applied to files whose residual is not
            always true.
        case_sensitive: Whether ``source_columns`` and ``row_filter`` match names case-sensitively.
        parallelism: Lanes (threads) writing at once; default: the number of CPUs.
        target_file_size_bytes: Output files roll near this size; default: the target's
            ``write.target-file-size-bytes``.
        file_name_prefix: Prepended to every output file name.
        on_progress: Called with ``(rows, source_bytes)`` as rows are read, from any lane thread,
            without a lock held; the source bytes of a copy sum to its files' sizes.

    Raises:
        ReconciliationError: ``source_columns`` names a column the source lacks, or none at all.
        ValueError: ``parallelism`` or ``target_file_size_bytes`` is not positive, or ``row_filter``
            does not bind to the source's schema.
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
    ) -> None:
        self.source_metadata = source_metadata
        self.source_io = source_io
        self.target_metadata = target_metadata
        self.target_io = target_io
        self.convert = convert
        self.row_filter = row_filter
        self.case_sensitive = case_sensitive
        self.on_progress = on_progress
        self.file_name_prefix = file_name_prefix
        if parallelism is None:
            parallelism = os.cpu_count() or 1
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}.")
        self.parallelism = parallelism
        properties = target_metadata.properties
        if target_file_size_bytes is None:
            target_file_size_bytes = property_as_int(
                properties,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
            )
        if target_file_size_bytes is None or target_file_size_bytes < 1:
            raise ValueError(
                f"target_file_size_bytes must be a positive number of bytes, got {target_file_size_bytes}; "
                "pass one or fix the target's write.target-file-size-bytes property."
            )
        self.target_file_size_bytes = target_file_size_bytes
        self.row_group_rows: int = property_as_int(  # type: ignore[assignment]
            properties, TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT
        )
        self.source_schema = source_metadata.schema()
        self.read_schema = self._select(self.source_schema, source_columns, case_sensitive)
        self.read_columns = [column.name for column in self.read_schema.columns]
        # The read path reads source names as they are; a schema whose names Parquet stores sanitized
        # is read through ArrowScan, which maps them back.
        self._names_plain = sanitize_column_names(self.source_schema) == self.source_schema
        ArrowScan(source_metadata, source_io, self.read_schema, row_filter, case_sensitive)  # binds the filter

        self.spec = target_metadata.spec()
        self.file_schema = sanitize_column_names(target_metadata.schema())
        self.statistics = StatisticsPlan.for_table(target_metadata)
        self.writer_kwargs = _get_parquet_writer_kwargs(properties)
        self.locations = load_location_provider(table_location=target_metadata.location, table_properties=properties)
        self._plain_schemas: dict[str, bool] = {}

    @staticmethod
    def _select(schema: Schema, columns: Sequence[str] | None, case_sensitive: bool) -> Schema:
        if columns is None:
            return schema
        if not columns:
            raise ReconciliationError("source_columns is empty: name at least one source column, or pass None for all.")
        top_level = {(f.name if case_sensitive else f.name.lower()): f.name for f in schema.fields}
        missing = [name for name in columns if (name if case_sensitive else name.lower()) not in top_level]
        if missing:
            raise ReconciliationError(
                f"The source has no top-level column {', '.join(map(repr, missing))}; "
                f"its columns are {', '.join(map(repr, top_level.values()))}. Fix source_columns."
            )
        return schema.select(*(top_level[name if case_sensitive else name.lower()] for name in columns))

    def plain(self, arrow_schema: pa.Schema) -> bool:
        """Whether a file with this Arrow schema holds exactly the source's current schema (ids, names, types)."""
        key = arrow_schema.to_string(show_field_metadata=True, show_schema_metadata=False)
        if key not in self._plain_schemas:
            try:
                # No name mapping: a file without field ids goes through ArrowScan, which applies it.
                file_schema = pyarrow_to_schema(arrow_schema, None, format_version=self.source_metadata.format_version)
                self._plain_schemas[key] = file_schema.as_struct() == self.source_schema.as_struct()
            except Exception:
                self._plain_schemas[key] = False
        return self._plain_schemas[key]

    def fast_path(self, task: FileScanTask) -> bool:
        """Whether ``task`` may be read with PyArrow alone, as far as the scan task tells (schema aside)."""
        return (
            self._names_plain
            and not task.delete_files
            and task.file.file_format == FileFormat.PARQUET
            and task.residual == _ALWAYS_TRUE
        )

    def lanes(self, tasks: Sequence[FileScanTask]) -> list[list[FileScanTask]]:
        """``tasks`` split into at most ``parallelism`` lanes of about equal bytes, each in the tasks' order."""
        count = min(self.parallelism, len(tasks))
        loads = [0] * count
        assigned: list[list[int]] = [[] for _ in range(count)]
        by_size = sorted(range(len(tasks)), key=lambda i: tasks[i].file.file_size_in_bytes, reverse=True)
        for index in by_size:
            lane = min(range(count), key=loads.__getitem__)
            assigned[lane].append(index)
            loads[lane] += tasks[index].file.file_size_in_bytes
        return [[tasks[i] for i in sorted(indexes)] for indexes in assigned]

    def copy(self, tasks: Sequence[FileScanTask], written: list[str]) -> CopyOutcome:
        """Read ``tasks`` and write their rows as new data files of the target; nothing is committed.

        Args:
            tasks: Source scan tasks (``source.scan(...).plan_files()``), with their delete files and residuals.
            written: Receives the location of every file the moment it is created, so the caller can
                delete them if it does not commit them. Files stay listed when the copy fails.

        Returns:
            The new files' ``DataFile``s (target spec, partition values, statistics from their footers) and counts.
        """
        write_id = uuid.uuid4()
        stop = threading.Event()
        lanes = [
            _Lane(self, number, lane_tasks, write_id, written, stop)
            for number, lane_tasks in enumerate(self.lanes(tasks))
        ]
        threads = [
            threading.Thread(target=lane.run_catching, name=f"iceberg-ops-copy-{lane.number}", daemon=True)
            for lane in lanes[1:]
        ]
        interrupted: BaseException | None = None
        try:
            for thread in threads:
                thread.start()
            if lanes:
                lanes[0].run_catching()
        except BaseException as exc:  # e.g. KeyboardInterrupt while starting the threads
            interrupted = exc
            stop.set()
        for thread in threads:
            # Every lane closes its files before this returns, even when interrupted while waiting.
            while thread.is_alive():
                try:
                    thread.join()
                except BaseException as exc:
                    interrupted = interrupted or exc
                    stop.set()
        pa.default_memory_pool().release_unused()
        if interrupted is not None:
            raise interrupted
        errors = [lane.error for lane in lanes if lane.error is not None and not isinstance(lane.error, _Stopped)]
        if errors:
            raise errors[0]
        outcome = CopyOutcome()
        for lane in lanes:
            outcome.data_files.extend(lane.data_files)
            outcome.rows += lane.rows
            outcome.bytes_read += lane.bytes_read
        outcome.bytes_written = sum(data_file.file_size_in_bytes for data_file in outcome.data_files)
        return outcome


class _Lane:
    """One thread's share of a copy: reads its tasks in order, writes its own files."""

    def __init__(
        self,
        copier: FileCopier,
        number: int,
        tasks: list[FileScanTask],
        write_id: uuid.UUID,
        written: list[str],
        stop: threading.Event,
    ) -> None:
        self.copier = copier
        self.number = number
        self.tasks = tasks
        self.write_id = write_id
        self.written = written
        self.stop = stop
        self.error: BaseException | None = None
        self.data_files: list[DataFile] = []
        self.rows = 0
        self.bytes_read = 0
        self.outputs: dict[Record, _Output] = {}
        self.pending_bytes = 0
        self.counter = 0
        # Output bytes per Arrow byte: measured once something was written, else guessed from the source.
        self.arrow_read = 0
        self.arrow_written = 0
        self.output_written = 0

    def run_catching(self) -> None:
        """Run the lane; a failure is kept in ``error`` and stops the other lanes."""
        try:
            self.run()
        except BaseException as exc:
            self.error = exc
            self.stop.set()

    def run(self) -> None:
        """Copy every task of the lane, then close its files; on failure abort them and re-raise."""
        copier = self.copier
        try:
            scan = ArrowScan(
                copier.source_metadata, copier.source_io, copier.read_schema, copier.row_filter, copier.case_sensitive
            )
            for task in self.tasks:
                for batch, source_bytes in self._read(scan, task):
                    if self.stop.is_set():
                        raise _Stopped()
                    self.bytes_read += source_bytes
                    if batch is not None:
                        self._write(copier.convert(batch))
                    if copier.on_progress is not None and (source_bytes or batch is not None):
                        copier.on_progress(batch.num_rows if batch is not None else 0, source_bytes)
            for output in list(self.outputs.values()):
                self._roll(output)
        except BaseException:
            for output in self.outputs.values():
                if output.file is not None:
                    output.file.abort()
                    output.file = None
            self.outputs.clear()
            raise

    # Reading.

    def _read(self, scan: ArrowScan, task: FileScanTask) -> Iterator[tuple[pa.RecordBatch | None, int]]:
        """The rows of ``task`` (source names, selected columns), each batch with its share of the file's bytes.

        The shares are prorated by rows read and sum to the file's size (a last ``(None, rest)`` if needed).
        """
        size, records, read, used = task.file.file_size_in_bytes, max(1, task.file.record_count), 0, 0
        for batch in self._batches(scan, task):
            read += batch.num_rows
            share = min(size, size * read // records) - used
            used += share
            self.arrow_read += batch.nbytes
            yield batch, share
        if used < size:
            yield None, size - used

    def _batches(self, scan: ArrowScan, task: FileScanTask) -> Iterator[pa.RecordBatch]:
        copier = self.copier
        if task.file.file_format != FileFormat.PARQUET:
            deletes = _read_all_delete_files(copier.source_io, [task])
            yield from scan._record_batches_from_scan_tasks_and_deletes([task], deletes)
            return
        with copier.source_io.new_input(task.file.file_path).open() as stream:
            if copier.fast_path(task):
                parquet = pq.ParquetFile(stream, pre_buffer=True)
                if copier.plain(parquet.schema_arrow):
                    # One row group per call: pre-buffering a whole file's row groups holds the file in memory.
                    for group in range(parquet.num_row_groups):
                        yield from parquet.iter_batches(
                            batch_size=READ_BATCH_ROWS,
                            row_groups=[group],
                            columns=copier.read_columns,
                            use_threads=False,
                        )
                    return
            deletes = _read_all_delete_files(copier.source_io, [task]) if task.delete_files else {}
            yield from _projected_row_groups(scan, task, stream, deletes.get(task.file.file_path))

    # Writing.

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
            self.rows += part.num_rows
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
        if self.arrow_read and self.bytes_read:
            return self.bytes_read / self.arrow_read
        return 1.0

    def _flush(self, output: _Output) -> None:
        """Write the output's pending rows as row groups (opening its file first if needed)."""
        if not output.pending:
            return
        copier = self.copier
        table = pa.Table.from_batches(output.pending, schema=output.schema)
        if output.file is None:
            output.file = self._open(output)
        before = output.file.bytes_written
        output.file.write(table, min(table.num_rows, copier.row_group_rows))
        self.output_written += output.file.bytes_written - before
        self.arrow_written += output.pending_bytes
        self.pending_bytes -= output.pending_bytes
        output.pending, output.pending_bytes, output.pending_rows = [], 0, 0

    def _open(self, output: _Output) -> OutputFile:
        copier = self.copier
        name = f"{copier.file_name_prefix}{self.write_id}-{self.number}-{self.counter}.parquet"
        self.counter += 1
        path = copier.locations.new_data_location(data_file_name=name, partition_key=output.key)
        self.written.append(path)
        assert output.schema is not None
        return OutputFile(path, copier.target_io, output.schema, copier.writer_kwargs)

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
        self.data_files.append(
            data_file_from_footer(
                file.path,
                footer,
                size,
                plan=self.copier.statistics,
                partition=output.record,
                spec_id=self.copier.target_metadata.default_spec_id,
            )
        )
        log.debug("wrote %s (%.1f MiB, %d rows)", file.path, size / 2**20, file.rows)


def _projected_row_groups(
    scan: ArrowScan, task: FileScanTask, stream: Any, positional_deletes: list[pa.ChunkedArray] | None
) -> Iterator[pa.RecordBatch]:
    """The rows of a Parquet data file as ``scan`` reads them, one row group at a time.

    What PyIceberg's ``_task_to_record_batches`` does (schema projection, identity partition values
    for columns the file lacks, position deletes, the row filter), except that it scans the file's
    row groups one after the other: PyIceberg scans the whole file at once with pre-buffering,
    which holds all of it in memory.
    """
    metadata = scan._table_metadata
    downcast = scan._downcast_ns_timestamp_to_us
    if downcast is None:
        downcast = metadata.format_version <= 2
    fragment = ds.ParquetFileFormat(pre_buffer=True, buffer_size=READ_BUFFER_BYTES).make_fragment(stream)
    physical_schema = fragment.physical_schema
    file_schema = pyarrow_to_schema(
        physical_schema,
        metadata.name_mapping(),
        downcast_ns_timestamp_to_us=downcast,
        format_version=metadata.format_version,
    )
    projected_schema = scan._projected_schema
    missing_values = _get_column_projection_values(
        task.file, projected_schema, metadata.schema(), metadata.specs().get(task.file.spec_id), file_schema.field_ids
    )
    row_filter = None
    if scan._bound_row_filter != _ALWAYS_TRUE:
        translated = translate_column_names(
            scan._bound_row_filter,
            file_schema,
            case_sensitive=scan._case_sensitive,
            projected_field_values=missing_values,
        )
        row_filter = expression_to_pyarrow(
            bind(file_schema, translated, case_sensitive=scan._case_sensitive), file_schema
        )
    file_project_schema = prune_columns(file_schema, scan._projected_field_ids, select_full_types=False)
    columns = [column.name for column in file_project_schema.columns]
    fragment.ensure_complete_metadata()
    group_start = 0  # position in the file of the row group's first row, for the position deletes
    for group in fragment.row_groups:
        position, group_start = group_start, group_start + group.num_rows
        scanner = ds.Scanner.from_fragment(
            fragment.subset(row_group_ids=[group.id]),
            schema=physical_schema,
            # With position deletes, rows are filtered after the deleted positions are dropped.
            filter=row_filter if not positional_deletes else None,
            columns=columns,
            use_threads=False,
        )
        for batch in scanner.to_batches():
            start, position = position, position + batch.num_rows
            if positional_deletes:
                batch = batch.take(_combine_positional_deletes(positional_deletes, start, position))
                if row_filter is not None:
                    filtered = pa.Table.from_batches([batch]).filter(row_filter)
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
