"""Streams the rows of one compaction group into new Parquet data files near the target size.

A reader thread fills a queue bounded in bytes, the writer encodes row groups and rolls to a new file near
the target; output files carry the current schema's field ids and PyIceberg's own statistics.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import (
    ArrowScan,
    ParquetFormatModel,
    _determine_partitions,
    _get_field_from_arrow_table,
    _get_parquet_writer_kwargs,
    _read_all_delete_files,
    _to_requested_schema,
    pyarrow_to_schema,
)
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.schema import Schema, sanitize_column_names
from pyiceberg.table import TableProperties
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.sorting import NullOrder, SortDirection, SortOrder
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.utils.properties import property_as_int

from iceberg_ops_provider.core.parquet_output import OutputFile, StatisticsPlan, data_file_from_footer
from iceberg_ops_provider.maintenance.binpack import expected_output_files
from iceberg_ops_provider.progress import size_text

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table import FileScanTask
    from pyiceberg.table.metadata import TableMetadata

__all__ = [
    "MAX_FILE_SIZE_RATIO",
    "PIPELINE_BYTES",
    "QUEUE_BYTES",
    "READ_BATCH_BYTES",
    "ROW_GROUP_BYTES",
    "BatchSizer",
    "GroupRewriter",
    "PlainSchemas",
]

log = logging.getLogger(__name__)

QUEUE_BYTES = 16 * 1024 * 1024
"""Arrow bytes the reader may always run ahead of the writer (more while encoders hold less: ``PIPELINE_BYTES``)."""

ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes buffered per output row group (``binpack``, a move); the table's row-group row limit also applies."""

MAX_FILE_SIZE_RATIO = 1.8
"""An output file is closed once it reaches this multiple of the target (Spark's ``max-file-size-bytes``)."""

READ_BATCH_ROWS = 128 * 1024
"""Rows of a reader's first batch, before it knows the Arrow bytes of a row (then: ``READ_BATCH_BYTES``)."""

READ_BATCH_BYTES = 32 * 1024 * 1024
"""Arrow bytes a read batch aims at once a reader measured its rows (see :class:`BatchSizer`)."""

MAX_READ_BATCH_ROWS = 1024 * 1024
"""Rows a read batch holds at most, however narrow its rows."""

MAX_OPEN_FILES = 8
"""Output files one writer (a group, a move's lane) keeps open, one per partition; one more rolls the largest."""

ENCODE_THREADS = min(2, os.cpu_count() or 1)
"""Row groups of one output file encoded side by side (see ``OutputFile``): two cores keep up with one reader."""

PIPELINE_BYTES = ENCODE_THREADS * ROW_GROUP_BYTES + QUEUE_BYTES
"""Arrow bytes a group's rows may take between the reader and the files: queued, gathered, being encoded.

The reader runs ahead into what the writer does not hold: a row group while the first one of a file is
encoded, only ``QUEUE_BYTES`` while two are (rows read then would wait, and their memory adds to the peak)."""


class BatchSizer:
    """Rows per read batch for one reader: :data:`READ_BATCH_ROWS` at first, then about :data:`READ_BATCH_BYTES`.

    Each batch costs the same fixed work (Arrow's column readers, the caller's per-batch Python, fresh
    buffers), so narrow rows are read in larger batches; the size follows the Arrow bytes per row of
    the batches :meth:`saw` so far, not the footer's sizes (a dictionary-encoded column takes far more
    memory decoded than on storage). Used by one thread.
    """

    def __init__(self) -> None:
        self._bytes = 0
        self._rows = 0

    def rows(self) -> int:
        """Rows the next batch should hold."""
        if not self._rows:
            return READ_BATCH_ROWS
        per_row = max(1.0, self._bytes / self._rows)
        return max(1, min(MAX_READ_BATCH_ROWS, int(READ_BATCH_BYTES / per_row)))

    def saw(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Count ``batch`` into the estimate; returns it."""
        self._bytes += batch.nbytes
        self._rows += batch.num_rows
        return batch


class PlainSchemas:
    """Whether a file of an Arrow schema holds exactly ``schema`` (ids, names, types): read with PyArrow alone.

    Answers are kept per Arrow schema. No name mapping is applied: a file without field ids everywhere
    goes through PyIceberg's projection, which gives its rows the ids the new file must carry.
    """

    def __init__(self, schema: Schema, format_version: int) -> None:
        self.schema = schema
        self.format_version = format_version
        self._answers: dict[str, bool] = {}

    def __call__(self, arrow_schema: pa.Schema) -> bool:
        """Whether a file of ``arrow_schema`` holds exactly ``schema``."""
        key = arrow_schema.to_string(show_field_metadata=True, show_schema_metadata=False)
        if key not in self._answers:
            try:
                file_schema = pyarrow_to_schema(arrow_schema, None, format_version=self.format_version)
                self._answers[key] = file_schema.as_struct() == self.schema.as_struct()
            except Exception:
                self._answers[key] = False
        return self._answers[key]


@dataclass
class _Piece:
    """What the reader hands the writer: rows for one output partition and the input bytes they stand for."""

    batch: pa.RecordBatch | None
    partition: PartitionKey | None
    consumed: int


_DONE = object()


class _ByteQueue:
    """A FIFO bounded by Arrow bytes (one item always fits); ``close()`` releases a blocked producer.

    It holds at most ``capacity`` bytes less what the consumer says it holds (:meth:`consumer_holds`),
    and at least ``minimum``.
    """

    def __init__(self, capacity: int, minimum: int | None = None) -> None:
        self._items: deque[tuple[Any, int]] = deque()
        self._bytes = 0
        self._capacity = capacity
        self._minimum = capacity if minimum is None else minimum
        self._held = 0
        self._closed = False
        self._changed = threading.Condition()

    def consumer_holds(self, nbytes: int) -> None:
        """The bytes the consumer holds now, of items it took (the queue makes room for the rest)."""
        with self._changed:
            if nbytes < self._held:
                self._changed.notify_all()
            self._held = nbytes

    def put(self, item: Any, nbytes: int) -> bool:
        """Add ``item``; returns False, without adding it, once the queue is closed."""
        with self._changed:
            while (
                self._items
                and self._bytes + nbytes > max(self._minimum, self._capacity - self._held)
                and not self._closed
            ):
                self._changed.wait()
            if self._closed:
                return False
            self._items.append((item, nbytes))
            self._bytes += nbytes
            self._changed.notify_all()
            return True

    def get(self) -> Any:
        """Take the oldest item, waiting for one."""
        with self._changed:
            while not self._items:
                self._changed.wait()
            item, nbytes = self._items.popleft()
            self._bytes -= nbytes
            self._changed.notify_all()
            return item

    def close(self) -> None:
        """Refuse further items and drop those waiting."""
        with self._changed:
            self._closed = True
            self._items.clear()
            self._bytes = 0
            self._changed.notify_all()


class _PartitionOutput:
    """Rows waiting for one output partition, and the file they go to."""

    def __init__(self, rewriter: GroupRewriter, key: PartitionKey | None, record: Record) -> None:
        self.rewriter = rewriter
        self.key = key
        self.record = record
        self.pending: list[pa.RecordBatch] = []
        self.pending_bytes = 0
        self.pending_rows = 0
        self.pending_input = 0
        self.file: OutputFile | None = None

    @property
    def bytes_written(self) -> int:
        return self.file.bytes_written if self.file is not None else 0

    def add(self, batch: pa.RecordBatch | None, consumed: int) -> None:
        if batch is not None:
            self.pending.append(batch)
            self.pending_bytes += batch.nbytes
            self.pending_rows += batch.num_rows
        self.pending_input += consumed

    @property
    def row_group_full(self) -> bool:
        rewriter = self.rewriter
        return rewriter.sort_order is None and (
            self.pending_bytes >= ROW_GROUP_BYTES or self.pending_rows >= rewriter.row_group_rows
        )

    def expected_size(self) -> float:
        """The size the file would have if the pending rows were written now."""
        return self.bytes_written + self.rewriter.estimate_output(self.pending_input, self.pending_bytes)

    def flush(self) -> None:
        """Write the pending rows as (at least) one row group."""
        rewriter = self.rewriter
        if not self.pending:
            rewriter.input_written += self.pending_input
            self.pending_input = 0
            return
        table = pa.Table.from_batches(self.pending, schema=rewriter.arrow_schema)
        if rewriter.sort_order is not None:
            table = rewriter.sort(table)
        if self.file is None:
            self.file = rewriter.open_file(self.key)
        before = self.file.bytes_written
        self.file.write(table, min(table.num_rows, rewriter.row_group_rows))
        rewriter.output_written += self.file.bytes_written - before
        rewriter.arrow_written += self.pending_bytes
        rewriter.input_written += self.pending_input
        self.pending, self.pending_bytes, self.pending_rows, self.pending_input = [], 0, 0, 0

    def roll(self) -> None:
        """Write what is pending and close the file (the next rows start a new one)."""
        self.flush()
        if self.file is not None:
            file, self.file = self.file, None
            self.rewriter.close_file(file, self.record)


class GroupRewriter:
    """Rewrites the data files of one group into new data files of the table's current spec.

    ``partition`` is the one all rows belong to under the current spec, or ``None`` to split rows by it
    (files of an older spec). ``ratio_hint`` is the output bytes per input byte of earlier groups, until
    this group writes. ``written`` receives each file's location as it is created, for the caller to
    delete if the group does not commit.
    """

    def __init__(
        self,
        metadata: TableMetadata,
        io: FileIO,
        tasks: Sequence[FileScanTask],
        *,
        partition: Record | None,
        target_file_size_bytes: int,
        sort_order: SortOrder | None,
        written: list[str],
        label: str = "",
        ratio_hint: float | None = None,
    ) -> None:
        self.metadata = metadata
        self.io = io
        self.tasks = list(tasks)
        self.schema = metadata.schema()
        self.spec = metadata.spec()
        self.file_schema = sanitize_column_names(self.schema)
        self._names_plain = self.file_schema == self.schema
        self.partition = partition
        self.total_bytes = sum(task.file.file_size_in_bytes for task in self.tasks)
        self.ratio_hint = ratio_hint
        self.target = target_file_size_bytes
        self.sort_order = sort_order if sort_order is not None and not sort_order.is_unsorted else None
        self.written = written
        self.label = label
        properties = metadata.properties
        self.row_group_rows: int = property_as_int(  # type: ignore[assignment]
            properties, TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT
        )
        self._writer_kwargs = _get_parquet_writer_kwargs(properties)
        self._statistics = StatisticsPlan.for_table(metadata)
        self._locations = load_location_provider(table_location=metadata.location, table_properties=properties)
        self._format = ParquetFormatModel()
        self._write_uuid = uuid.uuid4()
        self._file_counter = 0
        self._queue = _ByteQueue(PIPELINE_BYTES, QUEUE_BYTES)
        self._stop = threading.Event()
        self.arrow_schema: pa.Schema | None = None
        self.data_files: list[DataFile] = []
        self.consumed = 0
        self.arrow_bytes = 0
        self._batches_seen = 0
        self.input_written = 0
        self.output_written = 0
        self.arrow_written = 0
        self._outputs: dict[Record, _PartitionOutput] = {}
        self._plain = PlainSchemas(self.schema, metadata.format_version)
        self._sizer = BatchSizer()

    # Reader side (its own thread).

    def _pieces(self, batch: pa.RecordBatch, consumed: int) -> Iterator[_Piece]:
        if self.partition is not None or self.spec.is_unpartitioned():
            yield _Piece(batch, None, consumed)
            return
        # Batches carry the file schema's (sanitized) names, which the partition transforms look up.
        for part in _determine_partitions(self.spec, self.file_schema, pa.Table.from_batches([batch])):
            for chunk in part.arrow_table_partition.to_batches():
                yield _Piece(chunk, part.partition_key, consumed)
                consumed = 0

    def _batches(self, scan: ArrowScan, task: FileScanTask, deletes: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        """The rows of ``task``'s file as the table reads them, in the file's order, in the writer's schema."""
        if self._names_plain and not task.delete_files and task.file.file_format == FileFormat.PARQUET:
            with self.io.new_input(task.file.file_path).open() as stream:
                parquet = pq.ParquetFile(stream, pre_buffer=True)
                if self._plain(parquet.schema_arrow):
                    # One row group per call: pre-buffering reads every row group asked for at once.
                    for group in range(parquet.num_row_groups):
                        batches = parquet.iter_batches(self._sizer.rows(), [group], use_threads=False)
                        yield from map(self._sizer.saw, batches)
                    return
        for batch in scan._record_batches_from_scan_tasks_and_deletes([task], deletes):
            yield _to_requested_schema(
                self.file_schema, self.schema, batch, include_field_ids=True, format_model=self._format
            )

    def _read(self) -> None:
        try:
            deletes = _read_all_delete_files(self.io, self.tasks)
            scan = ArrowScan(self.metadata, self.io, self.schema, AlwaysTrue())
            for task in self.tasks:
                size, rows, used = task.file.file_size_in_bytes, max(1, task.file.record_count), 0
                for batch in self._batches(scan, task, deletes):
                    share = min(size - used, size * batch.num_rows // rows)
                    used += share
                    for piece in self._pieces(batch, share):
                        if not self._queue.put(piece, piece.batch.nbytes if piece.batch is not None else 0):
                            return
                if self._stop.is_set() or not self._queue.put(_Piece(None, None, size - used), 0):
                    return
            self._queue.put(_DONE, 0)
        except BaseException as exc:  # handed to the writer, which raises it
            self._queue.put(exc, 0)

    # Writer side.

    def open_file(self, key: PartitionKey | None) -> OutputFile:
        """Create the next output file under the table's data location."""
        name = f"00000-{self._file_counter}-{self._write_uuid}.parquet"
        self._file_counter += 1
        path = self._locations.new_data_location(data_file_name=name, partition_key=key)
        self.written.append(path)
        assert self.arrow_schema is not None
        return OutputFile(path, self.io, self.arrow_schema, self._writer_kwargs, encode_threads=ENCODE_THREADS)

    def close_file(self, file: OutputFile, record: Record) -> None:
        """Finish ``file`` and describe it as a ``DataFile`` of the current spec."""
        footer, size = file.close()
        self.data_files.append(
            data_file_from_footer(
                file.path,
                footer,
                size,
                plan=self._statistics,
                partition=record,
                spec_id=self.metadata.default_spec_id,
                sort_order_id=self.sort_order.order_id if self.sort_order is not None else None,
            )
        )
        log.info(
            "%swrote %s (%s, %d rows; %s of %s read)",
            self.label,
            file.path,
            size_text(size),
            file.rows,
            size_text(self.consumed),
            size_text(self.total_bytes),
        )

    def sort(self, table: pa.Table) -> pa.Table:
        """``table`` ordered by the sort order (transforms, directions and null order included)."""
        assert self.sort_order is not None
        keyed = table
        keys: list[tuple[str, str, str]] = []
        for position, field in enumerate(self.sort_order.fields):
            name = self.file_schema.find_column_name(field.source_id)
            if name is None:
                raise ValueError(f"The sort order refers to column id {field.source_id}, which the schema lacks.")
            column = _get_field_from_arrow_table(table, name)
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            if not isinstance(field.transform, IdentityTransform):
                column = field.transform.pyarrow_transform(self.schema.find_type(field.source_id))(column)
            key = f"__sort_key_{position}"
            keyed = keyed.append_column(key, column)
            keys.append(
                (
                    key,
                    "ascending" if field.direction == SortDirection.ASC else "descending",
                    "at_start" if field.null_order == NullOrder.NULLS_FIRST else "at_end",
                )
            )
        return table.take(pc.sort_indices(keyed, sort_keys=keys))

    def _output(self, key: PartitionKey | None) -> _PartitionOutput:
        if key is None:
            record = self.partition if self.partition is not None else Record()
            if record not in self._outputs:
                self._outputs[record] = _PartitionOutput(self, self._key_for(record), record)
            return self._outputs[record]
        record = key.partition
        if record not in self._outputs:
            open_files = [output for output in self._outputs.values() if output.file is not None or output.pending]
            if len(open_files) >= MAX_OPEN_FILES:
                max(open_files, key=lambda output: output.bytes_written + output.pending_bytes).roll()
            self._outputs[record] = _PartitionOutput(self, key, record)
        return self._outputs[record]

    def _key_for(self, record: Record) -> PartitionKey | None:
        if self.spec.is_unpartitioned():
            return None
        key = PartitionKey(
            field_values=[PartitionFieldValue(field, record[pos]) for pos, field in enumerate(self.spec.fields)],
            partition_spec=self.spec,
            schema=self.schema,
        )
        key.__dict__["partition"] = record  # already in Iceberg's internal form: keep it exact
        return key

    def ratio(self) -> float | None:
        """Output bytes per input byte: measured once something was written, else the hint."""
        if self.input_written and self.output_written:
            return self.output_written / self.input_written
        return self.ratio_hint

    def estimate_output(self, input_bytes: float, arrow_bytes: float) -> float:
        """Bytes that rows standing for ``input_bytes`` (``arrow_bytes`` in memory) take once written."""
        if self.arrow_written and self.output_written:
            return arrow_bytes * self.output_written / self.arrow_written
        return input_bytes * (self.ratio() or 1.0)

    def _expansion(self) -> float:
        """Arrow bytes per input byte so far (how much memory a file's worth of input takes)."""
        return self.arrow_bytes / self.consumed if self.consumed else 4.0

    def _take(self, piece: _Piece) -> None:
        single = self.partition is not None or self.spec.is_unpartitioned()
        self.consumed += piece.consumed
        if piece.batch is None and not single:
            return
        output = self._output(piece.partition)
        batch = piece.batch
        if batch is not None:
            if self.arrow_schema is None:
                self.arrow_schema = batch.schema
            elif not batch.schema.equals(self.arrow_schema):
                batch = batch.cast(self.arrow_schema)
            self.arrow_bytes += batch.nbytes
            self._batches_seen += 1
        output.add(batch, piece.consumed)
        if single:
            self._roll_single(output)
        elif output.bytes_written >= MAX_FILE_SIZE_RATIO * self.target or output.expected_size() >= self.target:
            output.roll()
        else:
            pending = sum(each.pending_bytes for each in self._outputs.values())
            budget = ROW_GROUP_BYTES if self.sort_order is None else self.target * self._expansion()
            if pending > budget:
                largest = max(self._outputs.values(), key=lambda each: each.pending_bytes)
                if self.sort_order is not None:
                    largest.roll()
                else:
                    largest.flush()
        if output.row_group_full:
            output.flush()

    def _held(self) -> int:
        """Arrow bytes of rows taken from the queue and not yet in a file: gathered, or being encoded."""
        return sum(
            output.pending_bytes + (output.file.arrow_bytes_encoding if output.file is not None else 0)
            for output in self._outputs.values()
        )

    def _roll_single(self, output: _PartitionOutput) -> None:
        """Roll so the group ends in files of about equal size (Spark's rule on the expected output size)."""
        ratio = self.ratio()
        if ratio is None and self.sort_order is None:
            # Learn the ratio with a first row group before the first roll can be due.
            first_split = self.total_bytes / expected_output_files(self.total_bytes, self.target)
            if output.pending_input >= first_split / 2:
                output.flush()
                ratio = self.ratio()
        expected_total = self.total_bytes * (ratio or 1.0)
        files = expected_output_files(int(expected_total), self.target)
        # Re-balanced after each file, and rounded to the nearest batch, so errors do not pile up on the last.
        remaining_files = files - len(self.data_files)
        share = (expected_total - sum(f.file_size_in_bytes for f in self.data_files)) / max(1, remaining_files)
        half_batch = self.estimate_output(self.consumed, self.arrow_bytes) / max(1, self._batches_seen) / 2
        due = remaining_files > 1 and output.expected_size() + half_batch >= share
        too_big = output.bytes_written >= MAX_FILE_SIZE_RATIO * self.target
        memory = output.pending_bytes >= self.target * self._expansion() * MAX_FILE_SIZE_RATIO
        if due or too_big or memory:
            output.roll()

    def run(self, on_progress: Callable[[int], None] | None = None) -> list[DataFile]:
        """Read every file of the group and write the new files (listed in ``written`` as they start)."""
        reader = threading.Thread(target=self._read, name="iceberg-ops-compaction-reader", daemon=True)
        reader.start()
        try:
            while True:
                item = self._queue.get()
                if item is _DONE:
                    break
                if isinstance(item, BaseException):
                    raise item
                self._take(item)
                self._queue.consumer_holds(self._held())
                if on_progress is not None and item.consumed:
                    on_progress(item.consumed)
            for output in self._outputs.values():
                output.roll()
            return self.data_files
        except BaseException:
            self._stop.set()
            self._queue.close()
            for output in self._outputs.values():
                if output.file is not None:
                    output.file.abort()
            raise
        finally:
            reader.join()
            # Hand the buffers back to the system before the commit reads manifests (Arrow's allocator
            # keeps freed memory for reuse, which the commit's Python objects cannot use).
            pa.default_memory_pool().release_unused()
