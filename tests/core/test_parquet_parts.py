"""Parquet parts encoded apart and joined: the file is the one ParquetWriter writes alone with the same
row groups, byte for byte, and parts that cannot be joined are refused saying why."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iceberg_ops_provider.core.parquet_parts import (
    PartJoiner,
    UnjoinablePart,
    encode_part,
    joinable,
    metadata_of_footer,
)
from iceberg_ops_provider.core.thrift_compact import decode_struct, encode_struct
from tests.core.parquet_samples import every_type_table, with_unknown_field


def _written_alone(table: pa.Table, row_group_rows: int, **options) -> bytes:
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, schema=table.schema, store_decimal_as_integer=True, **options) as writer:
        for start in range(0, table.num_rows, row_group_rows):
            writer.write_table(table.slice(start, row_group_rows), row_group_size=row_group_rows)
    return sink.getvalue()


def _joined(table: pa.Table, parts: list[tuple[int, int]], row_group_rows: int, **options) -> tuple[bytes, bytes]:
    sink = io.BytesIO()
    joiner = PartJoiner(sink)
    for start, length in parts:
        joiner.append(encode_part(table.slice(start, length), table.schema, options, row_group_rows))
    footer = joiner.finish()
    assert joiner.bytes_written == len(sink.getvalue())
    return sink.getvalue(), footer


@pytest.mark.parametrize(
    "options",
    [
        {"compression": "zstd"},
        {"compression": "snappy", "use_dictionary": False},
        {"compression": "none", "data_page_size": 512},
        {"compression": "gzip", "write_page_checksum": True, "data_page_version": "2.0"},
    ],
    ids=["zstd", "snappy-plain", "small-pages", "gzip-checksums-v2"],
)
def test_joined_parts_are_the_file_a_writer_writes_alone(options) -> None:
    table = every_type_table(5000)
    # Parts of one row group each, and parts of several (the joiner renumbers and moves them alike).
    one_each = [(start, 1000) for start in range(0, 5000, 1000)]
    uneven = [(0, 3000), (3000, 1000), (4000, 1000)]

    alone = _written_alone(table, 1000, **options)
    for parts in (one_each, uneven):
        joined, footer = _joined(table, parts, 1000, **options)
        assert joined == alone
        assert metadata_of_footer(footer).to_dict() == pq.read_metadata(pa.BufferReader(alone)).to_dict()
    read_back = pq.read_table(pa.BufferReader(joined))
    assert read_back.schema.equals(table.schema, check_metadata=False)
    assert read_back.drop_columns(["ratio"]).equals(table.drop_columns(["ratio"]))  # NaN is not equal to itself
    assert read_back["ratio"].to_pylist()[1:11] == table["ratio"].to_pylist()[1:11]


def test_a_file_of_one_part_and_a_file_of_no_rows_are_the_writers_too() -> None:
    table = every_type_table(300)
    assert _joined(table, [(0, 300)], 1000)[0] == _written_alone(table, 1000)
    empty = table.slice(0, 0)
    joined, footer = _joined(empty, [(0, 0)], 1000)
    assert joined == _written_alone(empty, 1000)
    assert metadata_of_footer(footer).num_row_groups == 0


def test_parts_of_another_schema_are_refused() -> None:
    table = every_type_table(100)
    joiner = PartJoiner(io.BytesIO())
    joiner.append(encode_part(table, table.schema, {}, 100))
    other = table.drop_columns(["name"])
    with pytest.raises(ValueError, match="schema differs from the first part's"):
        joiner.append(encode_part(other, other.schema, {}, 100))


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"write_page_index": True}, r"column chunk holds fields \[4, 5, 6, 7\]"),
        ({"bloom_filter_options": {"name": {"ndv": 100}}}, r"column metadata holds fields \[14, 15\]"),
    ],
    ids=["page-index", "bloom-filter"],
)
def test_parts_pointing_at_structures_in_their_body_are_refused_and_nothing_is_written(options, says: str) -> None:
    table = every_type_table(100)
    sink = io.BytesIO()
    with pytest.raises(UnjoinablePart, match=says):
        PartJoiner(sink).append(encode_part(table, table.schema, options, 100))
    assert sink.getvalue() == b""


@pytest.mark.parametrize(
    ("path", "field_id", "where"),
    [
        ((), 10, "file metadata"),
        ((4,), 8, "row group"),
        ((4, 1), 10, "column chunk"),
        ((4, 1, 3), 18, "column metadata"),
    ],
)
def test_a_field_the_joiner_does_not_know_is_refused_wherever_it_is(path, field_id: int, where: str) -> None:
    table = every_type_table(100)
    part = bytes(encode_part(table, table.schema, {}, 100))
    pq.read_metadata(pa.BufferReader(with_unknown_field(part, path, field_id)))  # still a Parquet file
    joiner = PartJoiner(io.BytesIO())
    with pytest.raises(UnjoinablePart, match=rf"{where} holds fields \[{field_id}\]"):
        joiner.append(with_unknown_field(part, path, field_id))
    joiner.append(part)  # the refused part left nothing behind
    assert joiner.finish() == encode_struct(
        decode_struct(part, len(part) - 8 - int.from_bytes(part[-8:-4], "little"))[0]
    )


def test_what_is_not_a_parquet_file_is_refused() -> None:
    joiner = PartJoiner(io.BytesIO())
    with pytest.raises(ValueError, match="not a Parquet file"):
        joiner.append(b"PAR1 just some bytes")
    with pytest.raises(ValueError, match="claims"):
        joiner.append(b"PAR1" + (10**6).to_bytes(4, "little") + b"PAR1")
    with pytest.raises(ValueError, match="no part was appended"):
        joiner.finish()


def test_joinable_options() -> None:
    assert joinable({}) and joinable({"compression": "zstd", "write_page_index": True})  # the footer decides
    assert not joinable({"encryption_properties": object()})
    assert not joinable({"use_content_defined_chunking": True})


def test_content_defined_chunking_is_not_joinable_because_its_pages_depend_on_earlier_row_groups() -> None:
    table = every_type_table(4000)
    options = {"use_content_defined_chunking": {"min_chunk_size": 256, "max_chunk_size": 1024}}
    assert _joined(table, [(start, 1000) for start in range(0, 4000, 1000)], 1000, **options)[0] != _written_alone(
        table, 1000, **options
    )
