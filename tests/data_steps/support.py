"""A partitioned table of several files for the data step tests, and its rows read back."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "k", LongType(), required=False),
    NestedField(4, "v", DoubleType(), required=False),
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("k", pa.int64()),
        pa.field("v", pa.float64()),
    ]
)
REGIONS = ("eu", "us")


def rows_of(start: int, count: int, region: str) -> pa.Table:
    """``count`` rows with ids from ``start``: k = id % 10 (null every 7th id), v = id (null every 11th)."""
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": ids,
            "region": [region] * count,
            "k": [None if i % 7 == 0 else i % 10 for i in ids],
            "v": [None if i % 11 == 0 else float(i) for i in ids],
        },
        schema=ARROW,
    )


def make_table(catalog: Any, name: str = "sales.orders", *, files_per_region: int = 3, rows: int = 200) -> Any:
    """A table partitioned by region holding ``files_per_region`` appended files per region."""
    namespace = name.split(".")[0]
    if (namespace,) not in catalog.list_namespaces():
        catalog.create_namespace(namespace)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table(name, SCHEMA, partition_spec=spec)
    start = 0
    for _ in range(files_per_region):
        for region in REGIONS:
            table.append(rows_of(start, rows, region))
            start += rows
    return table


def read_rows(table: Any) -> dict[int, dict[str, Any]]:
    """The table's rows by id (ids are unique)."""
    table.refresh()
    read = table.scan().to_arrow().to_pylist()
    by_id = {row["id"]: row for row in read}
    assert len(by_id) == len(read), "duplicate ids"
    return by_id


def all_rows(files_per_region: int = 3, rows: int = 200) -> dict[int, dict[str, Any]]:
    """The rows :func:`make_table` writes, by id."""
    start, found = 0, {}
    for _ in range(files_per_region):
        for region in REGIONS:
            for row in rows_of(start, rows, region).to_pylist():
                found[row["id"]] = row
            start += rows
    return found
