"""Thrift's compact protocol: footers PyArrow writes decode and encode back byte for byte, every wire
type round-trips, and malformed input is refused with the position it breaks at."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iceberg_ops_provider.core.thrift_compact import (
    BINARY,
    BOOL_FALSE,
    BOOL_TRUE,
    BYTE,
    DOUBLE,
    I16,
    I32,
    I64,
    LIST,
    MAP,
    SET,
    STRUCT,
    Field,
    Struct,
    ThriftList,
    ThriftMap,
    decode_struct,
    encode_struct,
)
from tests.core.parquet_samples import every_type_table


def _footer(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    return data[len(data) - 8 - length : -8]


@pytest.mark.parametrize("compression", ["zstd", "snappy", "none"])
def test_footers_of_pyarrow_decode_and_encode_back_unchanged(compression: str) -> None:
    table = every_type_table(3000)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression, row_group_size=700, store_decimal_as_integer=True)
    footer = _footer(sink.getvalue())

    decoded, end = decode_struct(footer)

    assert end == len(footer)
    assert encode_struct(decoded) == footer
    assert decoded.value(3) == 3000  # num_rows
    assert len(decoded.value(4).items) == 5  # row groups


def test_every_wire_type_round_trips() -> None:
    nested = Struct([Field(1, I32, -7), Field(2, BOOL_FALSE, False)])
    value = Struct(
        [
            Field(1, BOOL_TRUE, True),
            Field(2, BOOL_FALSE, False),
            Field(3, BYTE, -128),
            Field(4, I16, -32768),
            Field(5, I32, 2**31 - 1),
            Field(6, I64, -(2**63)),
            Field(7, DOUBLE, -1.5e300),
            Field(8, BINARY, b"\x00\xffPAR1"),
            Field(9, LIST, ThriftList(I64, list(range(-20, 20)))),  # 40 elements: the long list header
            Field(10, SET, ThriftList(BINARY, [b"a", b""], kind=SET)),
            Field(11, MAP, ThriftMap(BINARY, STRUCT, [(b"k", nested), (b"j", Struct())])),
            Field(12, MAP, ThriftMap(0, 0, [])),
            Field(13, LIST, ThriftList(BOOL_TRUE, [True, False, True])),
            Field(40, STRUCT, nested),  # a jump of more than 15 ids: the long field header
            Field(41, LIST, ThriftList(STRUCT, [nested, Struct()])),
        ]
    )

    encoded = encode_struct(value)
    decoded, end = decode_struct(encoded)

    assert end == len(encoded)
    assert decoded == value
    assert encode_struct(decoded) == encoded


def test_set_adds_a_missing_field_in_id_order_and_replaces_a_present_one() -> None:
    value = Struct([Field(1, I32, 1), Field(5, I32, 5)])
    value.set(3, I64, 3)
    value.set(5, I64, 50)
    assert [(each.id, each.kind, each.value) for each in value.fields] == [(1, I32, 1), (3, I64, 3), (5, I64, 50)]
    assert value.value(9, "absent") == "absent"


def test_a_struct_read_from_a_signed_buffer_reads_bytes_as_unsigned() -> None:
    encoded = encode_struct(Struct([Field(1, I64, 10**12), Field(2, BINARY, bytes(range(200, 256)))]))
    buffer = pa.py_buffer(encoded)  # exported with a signed format
    decoded, _ = decode_struct(buffer)
    assert decoded.value(1) == 10**12 and decoded.value(2) == bytes(range(200, 256))


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (encode_struct(Struct([Field(1, BINARY, b"abcdef")]))[:-3], "bytes asked"),
        (encode_struct(Struct([Field(1, I64, 5)]))[:-1], "ends past the data"),
        (bytes([0x1D, 0x00]), "unknown compact type 13"),
        (bytes([0x16]) + b"\xff" * 11, "longer than 10 bytes"),
        (b"\x1c" * 2000, "nest deeper than 64"),
        (b"\x19\x1c" * 2000, "nest deeper than 64"),
    ],
    ids=["short-binary", "no-stop", "unknown-type", "endless-varint", "deep-structs", "deep-lists"],
)
def test_malformed_data_is_refused_saying_where(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        decode_struct(data)
