"""Tables to move and ways to compare their rows, shared by the data mover's tests."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import DateType, DecimalType, LongType, NestedField, StringType, TimestamptzType

ORDERS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
    ]
)

ORDERS_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "customer", StringType(), required=False),
    NestedField(3, "amount", DecimalType(12, 2), required=False),
    NestedField(4, "ts", TimestamptzType(), required=False),
    NestedField(5, "day", DateType(), required=False),
)
"""``ORDERS`` as an Iceberg schema (field ids 1-5), for partition specs and sort orders that refer to them."""

START = datetime(2026, 11, 1, tzinfo=UTC)


def orders(first: int, count: int) -> pa.Table:
    """``count`` orders with ids from ``first``, spread over four days."""
    ids = range(first, first + count)
    return pa.table(
        {
            "id": list(ids),
            "customer": [f"customer-{i % 97}" if i % 11 else None for i in ids],
            "amount": [Decimal(i % 10_000) / 100 for i in ids],
            "ts": [START + timedelta(minutes=i) for i in ids],
            "day": [(START + timedelta(days=i % 4)).date() for i in ids],
        },
        schema=ORDERS,
    )


def source_table(catalog: Any, name: str = "sales.orders", files: int = 6, rows_per_file: int = 500, **kwargs: Any):
    """A table of ``files`` appends (one data file each) of consecutive orders."""
    namespace = name.rsplit(".", 1)[0]
    if (namespace,) not in catalog.list_namespaces():
        catalog.create_namespace(namespace)
    table = catalog.create_table(name, schema=ORDERS_SCHEMA, **kwargs)
    for number in range(files):
        table.append(orders(number * rows_per_file, rows_per_file))
    return table


def row_multiset(table: Any, columns: list[str] | None = None, snapshot_id: int | None = None) -> Counter:
    """The rows ``table`` reads (as tuples of ``columns``), counted."""
    table.refresh()
    data = table.scan(snapshot_id=snapshot_id, selected_fields=tuple(columns or ("*",))).to_arrow()
    names = columns or data.column_names
    return Counter(zip(*(data.column(name).to_pylist() for name in names), strict=True))
