"""Arrow tables of every type Iceberg stores in Parquet, with nulls, NaNs and field ids."""

from __future__ import annotations

import datetime
import decimal
import uuid

import pyarrow as pa

from iceberg_ops_provider.core.parquet_parts import MAGIC
from iceberg_ops_provider.core.thrift_compact import I32, decode_struct, encode_struct


def _field(name: str, kind: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, kind, metadata={b"PARQUET:field_id": str(field_id).encode()})


def every_type_table(rows: int) -> pa.Table:
    """``rows`` rows over every Iceberg type's Arrow form, nested ones included; some values null, some NaN."""
    point = pa.struct([_field("x", pa.float64(), 101), _field("y", pa.float64(), 102)])
    tags = pa.list_(_field("element", pa.string(), 103))
    scores = pa.map_(_field("key", pa.string(), 104).with_nullable(False), _field("value", pa.int32(), 105))
    schema = pa.schema(
        [
            _field("id", pa.int64(), 1).with_nullable(False),
            _field("flag", pa.bool_(), 2),
            _field("small", pa.int32(), 3),
            _field("ratio", pa.float32(), 4),
            _field("amount", pa.float64(), 5),
            _field("price", pa.decimal128(10, 2), 6),
            _field("big", pa.decimal128(38, 10), 7),
            _field("day", pa.date32(), 8),
            _field("time", pa.time64("us"), 9),
            _field("ts", pa.timestamp("us"), 10),
            _field("tstz", pa.timestamp("us", tz="UTC"), 11),
            _field("name", pa.large_string(), 12),
            _field("blob", pa.large_binary(), 13),
            _field("key", pa.binary(16), 14),
            _field("point", point, 15),
            _field("tags", tags, 16),
            _field("scores", scores, 17),
        ]
    )
    epoch = datetime.datetime(2026, 1, 1)
    columns = {
        "id": list(range(rows)),
        "flag": [None if i % 7 == 0 else i % 2 == 0 for i in range(rows)],
        "small": [None if i % 5 == 0 else (i * 37) % 1000 - 500 for i in range(rows)],
        "ratio": [float("nan") if i % 11 == 0 else i / 3 for i in range(rows)],
        "amount": [None if i % 13 == 0 else (i * 7919) % 10007 / 7.0 for i in range(rows)],
        "price": [decimal.Decimal(f"{i % 9999}.{i % 100:02d}") for i in range(rows)],
        "big": [
            None if i % 3 == 0 else (decimal.Decimal(i) / 7).quantize(decimal.Decimal("1e-10")) for i in range(rows)
        ],
        "day": [datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 400) for i in range(rows)],
        "time": [datetime.time(i % 24, i % 60, i % 60) for i in range(rows)],
        "ts": [epoch + datetime.timedelta(seconds=i) for i in range(rows)],
        "tstz": [None if i % 17 == 0 else epoch + datetime.timedelta(minutes=i) for i in range(rows)],
        "name": [f"name-{i % 250:04d}" for i in range(rows)],
        "blob": [bytes([i % 256]) * (i % 9) for i in range(rows)],
        "key": [uuid.UUID(int=i).bytes for i in range(rows)],
        "point": [None if i % 19 == 0 else {"x": i * 0.5, "y": None if i % 4 == 0 else -i} for i in range(rows)],
        "tags": [None if i % 23 == 0 else [f"t{j}" for j in range(i % 4)] for i in range(rows)],
        "scores": [[("a", i), ("b", None)] if i % 2 else [] for i in range(rows)],
    }
    return pa.table(columns, schema=schema)


def with_unknown_field(part: bytes, path: tuple[int, ...], field_id: int) -> bytes:
    """``part`` with an i32 field ``field_id`` added to the footer struct reached by ``path``
    (field ids, with the first element taken of a list)."""
    footer_length = int.from_bytes(part[-8:-4], "little")
    footer, _ = decode_struct(part, len(part) - 8 - footer_length)
    struct = footer
    for field_id_on_path in path:
        struct = struct.value(field_id_on_path)
        struct = struct.items[0] if hasattr(struct, "items") else struct
    struct.set(field_id, I32, 1)
    encoded = encode_struct(footer)
    return part[: len(part) - 8 - footer_length] + encoded + len(encoded).to_bytes(4, "little") + MAGIC
