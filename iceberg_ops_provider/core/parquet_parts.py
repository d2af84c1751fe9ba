"""One Parquet file from parts encoded side by side (docs/core.md, ``core.parquet_parts``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from iceberg_ops_provider.core.thrift_compact import (
    I16,
    I64,
    LIST,
    STRUCT,
    Struct,
    ThriftList,
    decode_struct,
    encode_struct,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MAGIC", "PartJoiner", "UnjoinablePart", "encode_part", "joinable", "metadata_of_footer"]

MAGIC = b"PAR1"

# Field ids of parquet.thrift.
_FILE_SCHEMA, _FILE_NUM_ROWS, _FILE_ROW_GROUPS = 2, 3, 4
_GROUP_COLUMNS, _GROUP_FILE_OFFSET, _GROUP_ORDINAL = 1, 5, 7
_CHUNK_FILE_OFFSET, _CHUNK_METADATA = 2, 3
_METADATA_OFFSETS = (9, 10, 11)  # data, index and dictionary page offsets
# Every field the joiner knows, by struct; any other is refused.
_KNOWN_FILE = {1, 2, 3, 4, 5, 6, 7}  # version .. column_orders
_KNOWN_GROUP = {1, 2, 3, 4, 5, 6, 7}  # columns .. ordinal
_KNOWN_CHUNK = {2, 3}  # file_offset, meta_data
_KNOWN_METADATA = {*range(1, 14), 16, 17}  # type .. encoding_stats, size and geospatial statistics


class UnjoinablePart(ValueError):
    """A part's footer holds a field the joiner does not know: the file must be written by one writer."""


class _Writable(Protocol):
    def write(self, data: bytes | memoryview, /) -> Any: ...


def joinable(writer_kwargs: Mapping[str, Any]) -> bool:
    """Whether files written with these ``ParquetWriter`` options may be joined from parts.

    Not encrypted ones (their footers cannot be read here), nor content-defined chunking, whose page
    boundaries depend on the row groups written before; other options are judged by the first footer.
    """
    return writer_kwargs.get("encryption_properties") is None and not writer_kwargs.get("use_content_defined_chunking")


def encode_part(table: pa.Table, schema: pa.Schema, writer_kwargs: Mapping[str, Any], row_group_rows: int) -> pa.Buffer:
    """``table`` as a complete Parquet file in memory, in row groups of at most ``row_group_rows`` rows.

    Safe to call from any thread: Arrow releases the GIL while it encodes and compresses.
    """
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema=schema, store_decimal_as_integer=True, **writer_kwargs) as writer:
        if table.num_rows:  # none: the schema alone, as a writer closed before any row writes it
            writer.write_table(table, row_group_size=max(1, row_group_rows))
    return sink.getvalue()


class PartJoiner:
    """Appends encoded parts to ``stream`` (only ``write`` is called) as one Parquet file; then :meth:`finish`."""

    def __init__(self, stream: _Writable) -> None:
        self._stream = stream
        self._position = 0
        self._head: Struct | None = None
        self._row_groups: list[Struct] = []
        self._rows = 0

    @property
    def bytes_written(self) -> int:
        """Bytes handed to the stream so far."""
        return self._position

    def append(self, part: bytes | pa.Buffer) -> None:
        """Append the row groups of ``part``, a Parquet file :func:`encode_part` returns (nothing written if it raises).

        Raises:
            UnjoinablePart: Its footer holds a field the joiner does not know.
            ValueError: ``part`` is not a Parquet file, or its schema differs from the first part's.
        """
        data = memoryview(part).cast("B")
        body_end, metadata = _read_part(data)
        groups = metadata.value(_FILE_ROW_GROUPS, ThriftList(0, [])).items
        _refuse_unknown(metadata, groups)
        if self._head is None:
            self._head = metadata
            self._write(MAGIC)
        elif metadata.get(_FILE_SCHEMA) != self._head.get(_FILE_SCHEMA):
            raise ValueError(
                "a part's Parquet schema differs from the first part's; every part must be written with one schema"
            )
        shift = self._position - len(MAGIC)
        for group in groups:
            self._row_groups.append(_moved(group, shift, ordinal=len(self._row_groups)))
        self._rows += metadata.value(_FILE_NUM_ROWS, 0)
        self._write(data[len(MAGIC) : body_end])

    def finish(self) -> bytes:
        """Write the footer of every part appended; returns the footer (its Thrift bytes).

        Raises:
            ValueError: No part was appended.
        """
        if self._head is None:
            raise ValueError("no part was appended: a Parquet file needs at least its schema")
        footer = Struct(list(self._head.fields))
        footer.set(_FILE_NUM_ROWS, I64, self._rows)
        footer.set(_FILE_ROW_GROUPS, LIST, ThriftList(STRUCT, self._row_groups))
        encoded = encode_struct(footer)
        self._write(encoded)
        self._write(len(encoded).to_bytes(4, "little") + MAGIC)
        return encoded

    def _write(self, data: bytes | memoryview) -> None:
        self._stream.write(data)
        self._position += len(data)


def metadata_of_footer(footer: bytes) -> pq.FileMetaData:
    """PyArrow's view of a footer :meth:`PartJoiner.finish` returned."""
    framed = MAGIC + footer + len(footer).to_bytes(4, "little") + MAGIC
    return pq.read_metadata(pa.BufferReader(framed))


def _read_part(data: memoryview) -> tuple[int, Struct]:
    """Where ``data``'s row groups end, and its footer."""
    if len(data) < 12 or bytes(data[:4]) != MAGIC or bytes(data[-4:]) != MAGIC:
        raise ValueError(f"a part of {len(data)} bytes is not a Parquet file (no PAR1 at both ends)")
    footer_length = int.from_bytes(data[-8:-4], "little")
    body_end = len(data) - 8 - footer_length
    if body_end < len(MAGIC):
        raise ValueError(f"a part's footer claims {footer_length} bytes, more than the part's {len(data)}")
    metadata, end = decode_struct(data, body_end)
    if end != len(data) - 8:
        raise ValueError(f"a part's footer ends at byte {end}, not where its length says ({len(data) - 8})")
    return body_end, metadata


def _refuse_unknown(metadata: Struct, groups: list[Struct]) -> None:
    """Raise :class:`UnjoinablePart` if any struct that holds positions has a field not known here."""
    checks: list[tuple[str, Struct, set[int]]] = [("file metadata", metadata, _KNOWN_FILE)]
    for group in groups:
        checks.append(("row group", group, _KNOWN_GROUP))
        for chunk in group.value(_GROUP_COLUMNS, ThriftList(0, [])).items:
            checks.append(("column chunk", chunk, _KNOWN_CHUNK))
            if chunk.get(_CHUNK_METADATA) is not None:
                checks.append(("column metadata", chunk.value(_CHUNK_METADATA), _KNOWN_METADATA))
    for what, struct, known in checks:
        unknown = sorted(each.id for each in struct.fields if each.id not in known)
        if unknown:
            raise UnjoinablePart(f"a part's {what} holds fields {unknown} the joiner does not know")


def _moved(group: Struct, shift: int, *, ordinal: int) -> Struct:
    """``group`` with every offset moved by ``shift`` bytes and its ordinal set."""
    if group.get(_GROUP_FILE_OFFSET) is not None:
        group.set(_GROUP_FILE_OFFSET, I64, group.value(_GROUP_FILE_OFFSET) + shift)
    if group.get(_GROUP_ORDINAL) is not None:
        group.set(_GROUP_ORDINAL, I16, ordinal)
    for chunk in group.value(_GROUP_COLUMNS, ThriftList(0, [])).items:
        if chunk.value(_CHUNK_FILE_OFFSET):
            chunk.set(_CHUNK_FILE_OFFSET, I64, chunk.value(_CHUNK_FILE_OFFSET) + shift)
        metadata = chunk.value(_CHUNK_METADATA)
        for field_id in _METADATA_OFFSETS if metadata is not None else ():
            if metadata.get(field_id) is not None:
                metadata.set(field_id, I64, metadata.value(field_id) + shift)
    return group
