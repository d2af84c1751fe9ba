"""Parquet data files written with PyArrow, described as Iceberg ``DataFile``s from their own footers.

:func:`data_file_from_footer` runs PyIceberg's own statistics code, so its result equals
``parquet_file_to_data_file``'s without reading the file back (docs/core.md).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import (
    StatisticsCollector,
    _get_field_from_arrow_table,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.schema import sanitize_column_names

from iceberg_ops_provider.core.parquet_parts import (
    PartJoiner,
    UnjoinablePart,
    encode_part,
    joinable,
    metadata_of_footer,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO, OutputStream
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import Record

__all__ = ["MIN_BYTES_PER_COLUMN", "OutputFile", "StatisticsPlan", "data_file_from_footer", "split_by_partition"]

log = logging.getLogger(__name__)


MIN_BYTES_PER_COLUMN = 128 * 1024
"""Arrow bytes per leaf column a file's first row group needs for its row groups to be encoded on threads.

Each part's footer is read back in Python, about 75 µs per column chunk: for narrow row groups of
wide tables that costs more than the second thread gains, so such files are written by one writer."""


class OutputFile:
    """One Parquet data file being written: a FileIO output stream and the PyArrow writer on it.

    With ``encode_threads`` above 1, row groups after the first are encoded on that many threads and
    joined in order (:mod:`~iceberg_ops_provider.core.parquet_parts`) when the writer options are
    :func:`~iceberg_ops_provider.core.parquet_parts.joinable`, the first row group holds at least
    :data:`MIN_BYTES_PER_COLUMN` per leaf column and its footer only fields the joiner knows; else one
    ``ParquetWriter`` writes the file. At most ``encode_threads - 1`` row groups are still being encoded
    when :meth:`write` returns, which bounds memory. ``path`` is created or replaced; ``schema`` carries
    the table's field ids; ``writer_kwargs`` are PyIceberg's ``_get_parquet_writer_kwargs`` of the table.
    """

    def __init__(
        self, path: str, io: FileIO, schema: pa.Schema, writer_kwargs: dict[str, Any], *, encode_threads: int = 1
    ) -> None:
        self.path = path
        self.schema = schema
        self._writer_kwargs = writer_kwargs
        self._threads = encode_threads if joinable(writer_kwargs) else 1
        self._stream: OutputStream = io.new_output(path).create(overwrite=True)
        self._writer: pq.ParquetWriter | None = None
        self._joiner: PartJoiner | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._encoding: deque[tuple[Future[pa.Buffer], int]] = deque()
        self._arrow_joined = 0
        self._closed = False
        if self._threads == 1:  # otherwise the first row group decides (see MIN_BYTES_PER_COLUMN)
            self._open_writer()
        self.rows = 0

    def _open_writer(self) -> None:
        try:
            self._writer = pq.ParquetWriter(
                self._stream, schema=self.schema, store_decimal_as_integer=True, **self._writer_kwargs
            )
        except BaseException:
            self._stream.close()
            raise

    def write(self, table: pa.Table, row_group_rows: int) -> None:
        """Write ``table`` in row groups of at most ``row_group_rows`` rows (no rows: no empty row group, no bounds).

        Raises:
            ValueError: The file was closed or aborted.
        """
        if self._closed:
            raise ValueError(f"{self.path} is closed: rows can no longer be written to it")
        if not table.num_rows:
            return
        row_group_rows = max(1, row_group_rows)
        start = 0
        if self._writer is None and self._joiner is None:
            start = self._start(table.slice(0, row_group_rows), row_group_rows)
        if self._writer is not None:
            if start < table.num_rows:
                self._writer.write_table(table.slice(start), row_group_size=row_group_rows)
        else:
            for offset in range(start, table.num_rows, row_group_rows):
                self._encode(table.slice(offset, row_group_rows), row_group_rows)
        self.rows += table.num_rows

    def _start(self, first: pa.Table, row_group_rows: int) -> int:
        """Join the file's first row group if it can be (its footer tells); returns its rows, or 0 for a writer."""
        if first.nbytes >= MIN_BYTES_PER_COLUMN * sum(_leaf_columns(field.type) for field in self.schema):
            joiner = PartJoiner(self._stream)
            try:
                joiner.append(encode_part(first, self.schema, self._writer_kwargs, row_group_rows))
            except UnjoinablePart as refused:
                log.debug("%s is written by one writer: %s", self.path, refused)
            else:
                self._joiner, self._arrow_joined = joiner, first.nbytes
                return first.num_rows
        self._open_writer()
        return 0

    def _encode(self, row_group: pa.Table, row_group_rows: int) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="iceberg-ops-parquet-encoder")
        encoding = self._pool.submit(encode_part, row_group, self.schema, self._writer_kwargs, row_group_rows)
        self._encoding.append((encoding, row_group.nbytes))
        self._join_encoded(keep=self._threads - 1)

    def _join_encoded(self, keep: int) -> None:
        """Append encoded row groups in order until at most ``keep`` are still being encoded."""
        assert self._joiner is not None
        while len(self._encoding) > keep or (self._encoding and self._encoding[0][0].done()):
            encoding, arrow_bytes = self._encoding.popleft()
            self._joiner.append(encoding.result())
            self._arrow_joined += arrow_bytes

    @property
    def arrow_bytes_encoding(self) -> int:
        """Arrow bytes of the row groups handed to encoder threads and not yet joined into the file."""
        return sum(arrow_bytes for _, arrow_bytes in self._encoding)

    @property
    def bytes_written(self) -> int:
        """Bytes written so far, plus those being encoded estimated at the compression ratio so far."""
        if self._joiner is None:
            return self._stream.tell()
        joined = self._joiner.bytes_written
        encoding = self.arrow_bytes_encoding
        return joined + (int(encoding * joined / self._arrow_joined) if self._arrow_joined else 0)

    def close(self) -> tuple[pq.FileMetaData, int]:
        """Finish the file; returns its footer and its size.

        On failure the file is aborted (see :meth:`abort`) before the error is raised.

        Raises:
            ValueError: The file was already closed or aborted.
        """
        if self._closed:
            raise ValueError(f"{self.path} is already closed")
        try:
            if self._joiner is None:
                if self._writer is None:  # no row was written: a file of the schema alone
                    self._open_writer()
                assert self._writer is not None
                self._writer.close()
                metadata = self._writer.writer.metadata
            else:
                self._join_encoded(keep=0)
                self._shut_pool()
                metadata = metadata_of_footer(self._joiner.finish())
            size = self._stream.tell()
            self._stream.close()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return metadata, size

    def abort(self) -> None:
        """Close after a failure, dropping row groups being encoded; the caller deletes the file.

        The writer is closed first, so that it does not try again on a closed stream when collected.
        """
        self._closed = True
        for encoding, _ in self._encoding:
            encoding.cancel()
        self._encoding.clear()
        writer = [self._writer.close] if self._writer is not None else []
        for closing in (*writer, self._shut_pool, self._stream.close):
            try:
                closing()
            except Exception:  # the caller deletes the file anyway
                log.debug("closing %s after a failure failed", self.path, exc_info=True)

    def _shut_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _leaf_columns(arrow_type: pa.DataType) -> int:
    """The number of Parquet columns (leaves) ``arrow_type`` is stored in."""
    return sum(_leaf_columns(arrow_type.field(index).type) for index in range(arrow_type.num_fields)) or 1


@dataclass(frozen=True)
class StatisticsPlan:
    """How a table reads its data files' footers: each field id's metrics mode, each column path's field id."""

    stats_columns: dict[int, StatisticsCollector]
    column_ids: dict[str, int]

    @classmethod
    def for_table(cls, metadata: TableMetadata, schema: Schema | None = None) -> StatisticsPlan:
        """The plan for data files of ``metadata``'s table written with ``schema`` (default: its current schema)."""
        file_schema = sanitize_column_names(schema if schema is not None else metadata.schema())
        return cls(
            stats_columns=compute_statistics_plan(file_schema, metadata.properties),
            column_ids=parquet_path_to_id_mapping(file_schema),
        )


def data_file_from_footer(
    path: str,
    footer: pq.FileMetaData,
    size: int,
    *,
    plan: StatisticsPlan,
    partition: Record,
    spec_id: int,
    sort_order_id: int | None = None,
) -> DataFile:
    """The ``DataFile`` of a Parquet data file at ``path`` that was written and closed.

    ``footer`` and ``size`` are what :meth:`OutputFile.close` returns; ``partition`` is the file's
    partition value under ``spec_id`` in Iceberg's internal form (``Record()`` if unpartitioned).
    """
    statistics = data_file_statistics_from_parquet_metadata(footer, plan.stats_columns, plan.column_ids)
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=size,
        sort_order_id=sort_order_id,
        spec_id=spec_id,
        **statistics.to_serialized_dict(),
    )
    # Not a field of the manifest entry, so from_args drops it; code that groups files by spec reads it.
    data_file.spec_id = spec_id
    return data_file


def split_by_partition(
    batch: pa.RecordBatch, spec: PartitionSpec, file_schema: Schema
) -> list[tuple[PartitionKey | None, pa.RecordBatch]]:
    """``batch``'s rows (named as ``file_schema``'s columns) grouped by partition under ``spec``, with their keys.

    The keys are PyIceberg's ``_determine_partitions``', but the rows are grouped by one stable sort
    rather than one filter pass per partition (0.7 s for a 128 Ki-row batch of 226 partitions); a batch
    of one partition is passed on as it is. Each group has its own buffers, so a written group frees its memory.
    """
    if spec.is_unpartitioned():
        return [(None, batch)]
    table = pa.Table.from_batches([batch])
    keys: list[pa.Array] = []
    for partition_field in spec.fields:
        source = file_schema.find_field(partition_field.source_id)
        name = file_schema.find_column_name(partition_field.source_id)
        assert name is not None  # the spec binds to the schema
        values = partition_field.transform.pyarrow_transform(source.field_type)(
            _get_field_from_arrow_table(table, name)
        )
        keys.append(values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values)
    if all(_single_value(values) for values in keys):
        return [(_partition_key(spec, file_schema, [values[0].as_py() for values in keys]), batch)]
    names = [f"k{position}" for position in range(len(keys))]
    order = pc.sort_indices(
        pa.table(dict(zip(names, keys, strict=True))),
        sort_keys=[(name, "ascending", "at_end") for name in names],
    )
    sorted_keys = [values.take(order) for values in keys]
    rows = batch.num_rows
    changed = None
    for values in sorted_keys:
        before, after = values.slice(0, rows - 1), values.slice(1)
        differs = pc.or_(
            pc.fill_null(pc.not_equal(after, before), False), pc.xor(pc.is_null(after), pc.is_null(before))
        )
        if pa.types.is_floating(values.type):  # NaN differs from NaN, but it is one partition value
            both_nan = pc.fill_null(pc.and_(pc.is_nan(after), pc.is_nan(before)), False)
            differs = pc.and_(differs, pc.invert(both_nan))
        changed = differs if changed is None else pc.or_(changed, differs)
    assert changed is not None
    bounds = [0, *(int(index) + 1 for index in pc.indices_nonzero(changed).to_pylist()), rows]
    return [
        (
            _partition_key(spec, file_schema, [values[start].as_py() for values in sorted_keys]),
            batch.take(order.slice(start, end - start)),
        )
        for start, end in itertools.pairwise(bounds)
    ]


def _partition_key(spec: PartitionSpec, file_schema: Schema, values: list[Any]) -> PartitionKey:
    return PartitionKey(
        field_values=[PartitionFieldValue(field, value) for field, value in zip(spec.fields, values, strict=True)],
        partition_spec=spec,
        schema=file_schema,
    )


def _single_value(values: pa.Array) -> bool:
    """Whether every element of ``values`` is the same (all null counts as one value)."""
    try:
        return bool(pc.count_distinct(values, mode="all").as_py() == 1)
    except pa.ArrowNotImplementedError:
        return False
