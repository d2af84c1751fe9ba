"""A column added and then renamed, retyped, given a doc, made optional or dropped in the same migration
is added once in its final shape: every migration makes at most one new schema per table."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.types import IntegerType, LongType, StringType

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration import MigrationContext

ORDERS = pa.schema([pa.field("id", pa.int64()), pa.field("address", pa.struct([pa.field("city", pa.string())]))])


@pytest.fixture
def orders(catalog):
    ctx = MigrationContext(catalog, "sales")
    ctx.create_table("orders", ORDERS)
    ctx.commit()
    return catalog.load_table("sales.orders")


def _schemas(catalog) -> int:
    return len(catalog.load_table("sales.orders").schemas())


def test_add_then_rename_retype_and_doc_is_one_add(catalog, orders):
    before = _schemas(catalog)
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "email", "int", after="id")
    ctx.rename_column("orders", "email", "contact")
    ctx.alter_column("orders", "contact", type="long", doc="who to call")
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert len(table.schemas()) == before + 1
    field = table.schema().find_field("contact")
    assert (field.field_type, field.doc, field.required) == (LongType(), "who to call", False)
    assert [field.name for field in table.schema().fields] == ["id", "contact", "address"]


def test_add_then_drop_adds_nothing_and_makes_no_schema(catalog, orders):
    before = _schemas(catalog)
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "tmp", "string")
    ctx.add_column("orders", "kept", "string")
    ctx.drop_column("orders", "tmp")
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert len(table.schemas()) == before + 1 and "tmp" not in table.schema().column_names
    assert table.schema().find_field("kept").field_type == StringType()


def test_a_nested_added_column_is_folded_too(catalog, orders):
    before = _schemas(catalog)
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "address.zip", "int")
    ctx.rename_column("orders", "address.zip", "postcode")
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert len(table.schemas()) == before + 1
    assert table.schema().find_field("address.postcode").field_type == IntegerType()


def test_a_rename_onto_an_existing_name_is_still_refused(catalog, orders):
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "email", "string")
    with pytest.raises(InvalidOperationError, match="id"):
        ctx.rename_column("orders", "email", "id")
    ctx.discard()


def test_a_forbidden_type_change_of_an_added_column_is_refused(catalog, orders):
    from iceberg_ops_provider.errors import ForbiddenPromotionError

    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "email", "string")
    with pytest.raises(ForbiddenPromotionError):
        ctx.alter_column("orders", "email", type="int")
    ctx.discard()


def test_a_later_step_naming_the_old_name_still_makes_one_schema(catalog, orders):
    before = _schemas(catalog)
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "a", "string")
    ctx.add_column("orders", "b", "string", after="a")  # names "a": the rename cannot fold into the add
    ctx.rename_column("orders", "a", "first")
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert table.schema().column_names[-2:] == ["first", "b"]
    assert len(table.schemas()) == before + 1
