"""What a refused or planned restore says: the columns it offers are only those that can come back
(not names a live column took since), and the rows holding the column's data say how many are null."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration import MigrationContext
from tests.support.migrations import migrate

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("legacy", pa.string()), pa.field("code", pa.string())]
)


def test_a_dropped_name_a_live_column_took_since_is_not_offered(catalog):
    migrate(catalog, lambda ctx: ctx.create_table("orders", SCHEMA))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"), lambda ctx: ctx.drop_column("orders", "code"))
    migrate(catalog, lambda ctx: ctx.add_column("orders", "code", "int"))  # a new column under an old name
    ctx = MigrationContext(catalog, "sales")
    with pytest.raises(InvalidOperationError, match=r"Dropped columns it can restore: legacy\.$"):
        ctx.restore_column("orders", "nothing")
    ctx.discard()


def test_the_count_of_rows_holding_its_data_says_how_many_are_null(catalog):
    migrate(catalog, lambda ctx: ctx.create_table("orders", SCHEMA))
    table = catalog.load_table("sales.orders")
    values = {"id": [1, 2, 3, 4], "legacy": ["a", None, None, "d"], "code": ["x"] * 4}
    table.append(pa.table(values, schema=table.schema().as_arrow()))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [5], "code": ["y"]}, schema=table.schema().as_arrow()))

    ctx = MigrationContext(catalog, "sales")
    ctx.restore_column("orders", "legacy")
    assert ctx.operations[-1]["operation"] == (
        "restore column orders.legacy (field id 2): 4 live rows hold its data (2 of them null), 1 do not"
    )
    ctx.discard()
