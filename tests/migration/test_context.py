"""Every MigrationContext operation against a real SQLite catalog."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import DecimalType, IntegerType, LongType, NestedField, StringType

from iceberg_ops_provider.core.contract import conform_to_table
from iceberg_ops_provider.errors import ForbiddenPromotionError, InvalidOperationError, UnsupportedTypeError
from iceberg_ops_provider.migration import MigrationContext

ORDERS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("qty", pa.int32()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("address", pa.struct([pa.field("city", pa.string())])),
    ]
)


@pytest.fixture
def ctx(catalog) -> MigrationContext:
    return MigrationContext(catalog, "sales")


@pytest.fixture
def orders(catalog, ctx):
    ctx.create_table("orders", ORDERS, partition_by=["day(ts)"], sort_by=["ts desc"], properties={"owner": "sales"})
    ctx.commit()
    return catalog.load_table("sales.orders")


def _metadata_versions(catalog, name: str) -> int:
    return len(catalog.load_table(name).metadata.metadata_log)


def test_create_table_with_spec_sort_order_properties_and_namespace(catalog, orders):
    assert ("sales",) in catalog.list_namespaces()
    assert orders.schema().find_field("id").required
    (field,) = orders.spec().fields
    assert field.name == "ts_day" and isinstance(field.transform, DayTransform)
    (sort,) = orders.sort_order().fields
    assert sort.direction == SortDirection.DESC and sort.null_order == NullOrder.NULLS_LAST
    assert orders.properties["owner"] == "sales"
    # One atomic commit: the table's first metadata has everything.
    assert orders.metadata.metadata_log == []


def test_create_table_from_an_iceberg_schema_in_another_namespace(catalog, ctx):
    ctx.create_table("finance.ledger", Schema(NestedField(1, "n", LongType(), required=True)))
    assert not catalog.table_exists("finance.ledger")  # staged until commit
    ctx.commit()
    assert catalog.load_table("finance.ledger").schema().find_field("n").required


def test_create_table_errors(catalog, ctx, orders):
    with pytest.raises(InvalidOperationError, match=r"Cannot create table sales\.orders: it already exists"):
        ctx.create_table("orders", ORDERS)
    with pytest.raises(UnsupportedTypeError, match="'bad'"):
        ctx.create_table("other", pa.schema([pa.field("bad", pa.uint32())]))
    with pytest.raises(InvalidOperationError, match=r"must be a pyarrow\.Schema"):
        ctx.create_table("other", {"id": "long"})  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="unknown transform 'weekly'"):
        ctx.create_table("other", ORDERS, partition_by=["weekly(ts)"])
    with pytest.raises(InvalidOperationError, match="Table name"):
        ctx.create_table("bad.", ORDERS)
    ctx.commit()
    assert not catalog.table_exists("sales.other")


def test_many_changes_to_one_table_are_one_commit(catalog, ctx, orders):
    before = _metadata_versions(catalog, "sales.orders")
    ctx.add_column("orders", "email", "string", doc="contact", after="id")
    ctx.rename_column("orders", "qty", "quantity")
    ctx.alter_column("orders", "quantity", type="long")
    ctx.add_partition_field("orders", "bucket(16, id)")
    ctx.set_sort_order("orders", ["id", "day(ts) asc nulls last"])
    ctx.set_properties("orders", {"write.target-file-size-bytes": 1024}, team="core")
    ctx.set_identifier_fields("orders", "id")
    assert _metadata_versions(catalog, "sales.orders") == before  # nothing committed yet
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert _metadata_versions(catalog, "sales.orders") == before + 1
    schema = table.schema()
    assert schema.column_names[:2] == ["id", "email"]
    assert schema.find_field("email").doc == "contact"
    assert schema.find_field("quantity").field_type == LongType()
    assert schema.identifier_field_names() == {"id"}
    assert [f.name for f in table.spec().fields] == ["ts_day", "id_bucket_16"]
    assert isinstance(table.spec().fields[1].transform, BucketTransform)
    first, second = table.sort_order().fields
    assert first.direction == SortDirection.ASC and first.null_order == NullOrder.NULLS_FIRST
    assert second.null_order == NullOrder.NULLS_LAST and isinstance(second.transform, DayTransform)
    assert table.properties["write.target-file-size-bytes"] == "1024" and table.properties["team"] == "core"


def test_discard_leaves_the_table_untouched(catalog, ctx, orders):
    ctx.add_column("orders", "email", "string")
    ctx.discard()
    ctx.commit()
    assert "email" not in catalog.load_table("sales.orders").schema().column_names


def test_add_column_positions_nested_and_required(catalog, ctx, orders):
    ctx.add_column("orders", "first_col", pa.string(), first=True)
    ctx.add_column("orders", "before_ts", StringType(), before="ts")
    ctx.add_column("orders", "address.zip", "string")
    ctx.add_column("orders", ("address", "country"), "string", required=True)  # table has no rows yet
    ctx.commit()
    schema = catalog.load_table("sales.orders").schema()
    assert schema.column_names[0] == "first_col"
    names = [f.name for f in schema.fields]
    assert names.index("before_ts") == names.index("ts") - 1
    assert schema.find_field("address.zip").field_type == StringType()
    assert schema.find_field("address.country").required
    with pytest.raises(InvalidOperationError, match="at most one of"):
        ctx.add_column("orders", "x", "int", first=True, after="id")


def test_required_column_on_a_table_with_rows_is_refused(catalog, ctx, orders):
    orders.append(conform_to_table(pa.table({"id": [1], "ts": pa.array([None], pa.timestamp("us", tz="UTC"))}), orders))
    with pytest.raises(InvalidOperationError, match=r"it has 1 row\(s\)"):
        ctx.add_column("orders", "region", "string", required=True)


def test_add_existing_column_names_the_table(ctx, orders):
    with pytest.raises(InvalidOperationError, match=r"Cannot add column 'qty' on table sales\.orders"):
        ctx.add_column("orders", "qty", "int")


def test_drop_and_move_columns(catalog, ctx, orders):
    ctx.drop_column("orders", "amount")
    ctx.move_column("orders", "ts", first=True)
    ctx.move_column("orders", "qty", after="id")
    ctx.commit()
    assert catalog.load_table("sales.orders").schema().column_names[:3] == ["ts", "id", "qty"]
    with pytest.raises(InvalidOperationError, match="exactly one of"):
        ctx.move_column("orders", "ts")
    with pytest.raises(InvalidOperationError, match="drop column 'nope'"):
        ctx.drop_column("orders", "nope")


def test_alter_column_promotions_docs_and_required(catalog, ctx, orders):
    ctx.alter_column("orders", "qty", type=pa.int64(), doc="how many")
    ctx.alter_column("orders", "amount", type="decimal(18,2)")
    ctx.alter_column("orders", "id", required=False)
    ctx.commit()
    schema = catalog.load_table("sales.orders").schema()
    assert schema.find_field("qty").field_type == LongType() and schema.find_field("qty").doc == "how many"
    assert schema.find_field("amount").field_type == DecimalType(18, 2)
    assert not schema.find_field("id").required


@pytest.mark.parametrize(
    ("column", "kwargs", "error", "message"),
    [
        ("amount", {"type": "decimal(12,4)"}, ForbiddenPromotionError, "scale cannot change"),
        ("qty", {"type": "string"}, ForbiddenPromotionError, "from int to string"),
        ("qty", {"required": True}, InvalidOperationError, "Cannot make column 'qty'"),
        ("qty", {}, InvalidOperationError, "needs type=, doc= or required="),
        ("nope", {"doc": "x"}, InvalidOperationError, "has no column 'nope'"),
        ("qty", {"type": "intt"}, ValueError, "unknown type name 'intt'"),
    ],
)
def test_alter_column_refusals(catalog, ctx, orders, column, kwargs, error, message):
    with pytest.raises(error, match=message):
        ctx.alter_column("orders", column, **kwargs)
    ctx.commit()
    assert catalog.load_table("sales.orders").schema().find_field("qty").field_type == IntegerType()


def test_partition_fields_rename_drop_and_errors(catalog, ctx, orders):
    ctx.add_partition_field("orders", "truncate(4, address.city)", name="city_prefix")
    ctx.add_partition_field("orders", "id")
    ctx.rename_partition_field("orders", "ts_day", "day")
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert [f.name for f in table.spec().fields] == ["day", "city_prefix", "id"]
    assert isinstance(table.spec().fields[2].transform, IdentityTransform)
    ctx.drop_partition_field("orders", "city_prefix")
    ctx.commit()
    assert [f.name for f in catalog.load_table("sales.orders").spec().fields] == ["day", "id"]
    with pytest.raises(InvalidOperationError, match="drop partition field 'nope'"):
        ctx.drop_partition_field("orders", "nope")
    with pytest.raises(InvalidOperationError, match="bucket\\(\\) takes a positive whole number"):
        ctx.add_partition_field("orders", "bucket(id)")


def test_sort_order_can_be_cleared(catalog, ctx, orders):
    ctx.set_sort_order("orders", [])
    ctx.commit()
    assert catalog.load_table("sales.orders").sort_order().is_unsorted


def test_properties_set_and_remove(catalog, ctx, orders):
    ctx.set_properties("orders", a="1", b=2)
    ctx.remove_properties("orders", "owner", "a")
    ctx.commit()
    properties = catalog.load_table("sales.orders").properties
    assert properties.get("b") == "2" and "owner" not in properties and "a" not in properties
    with pytest.raises(InvalidOperationError, match=r"Cannot remove properties \['zzz'\]"):
        ctx.remove_properties("orders", "zzz")
    with pytest.raises(InvalidOperationError, match="at least one property"):
        ctx.set_properties("orders")


def test_identifier_fields_must_be_required(ctx, orders):
    with pytest.raises(InvalidOperationError, match="set identifier fields"):
        ctx.set_identifier_fields("orders", "qty")


def test_rename_and_drop_tables(catalog, ctx, orders):
    ctx.add_column("orders", "email", "string")
    ctx.rename_table("orders", "orders_v2")  # staged, in order after the column
    assert catalog.table_exists("sales.orders")  # nothing reached the catalog yet
    ctx.add_column("orders_v2", "note", "string")  # the new name is needed now: what is staged commits first
    assert "email" in catalog.load_table("sales.orders_v2").schema().column_names
    with pytest.raises(InvalidOperationError, match="does not exist"):
        ctx.drop_table("orders")
    ctx.rename_table("orders_v2", "archive.orders")
    ctx.drop_table("archive.orders", purge=True)
    with pytest.raises(InvalidOperationError, match="dropped or renamed earlier in this migration"):
        ctx.add_column("archive.orders", "x", "int")
    ctx.commit()
    assert not catalog.table_exists("archive.orders") and not catalog.table_exists("sales.orders_v2")
    assert catalog.namespace_exists("archive")
    with pytest.raises(InvalidOperationError, match="does not exist"):
        ctx.rename_table("orders", "x")
    with pytest.raises(InvalidOperationError, match="does not exist; create it first"):
        ctx.add_column("missing", "x", "int")


def test_a_table_can_be_dropped_and_created_again_in_one_migration(catalog, ctx, orders):
    ctx.drop_table("orders")
    ctx.create_table("orders", pa.schema([("fresh", pa.int64())]))
    ctx.commit()
    assert catalog.load_table("sales.orders").schema().column_names == ["fresh"]


def test_the_meta_namespace_is_out_of_bounds(catalog):
    ctx = MigrationContext(catalog, "sales", meta_namespace="_iceberg_ops")
    for name in ("_iceberg_ops.migration_history", "_iceberg_ops.inner.t"):
        with pytest.raises(InvalidOperationError, match="meta-namespace '_iceberg_ops'"):
            ctx.drop_table(name)


def test_create_then_drop_in_one_migration_touches_nothing(catalog, ctx):
    ctx.create_table("scratch", ORDERS)
    ctx.drop_table("scratch")
    ctx.commit()
    assert not catalog.table_exists("sales.scratch")


def test_load_table_commits_pending_changes_for_custom_work(catalog, ctx):
    ctx.create_table("orders", ORDERS)
    table = ctx.load_table("orders")  # commits the creation, then hands over the table
    table.append(conform_to_table(pa.table({"id": [1, 2]}), table))
    assert catalog.load_table("sales.orders").scan().to_arrow().num_rows == 2
    assert ctx.namespace == "sales" and ctx.catalog is catalog
    assert ctx.identifier("x.y.z") == ("x", "y", "z")


def test_single_string_partition_and_sort_and_property_values(catalog, ctx):
    ctx.create_table("single", ORDERS, partition_by="id", sort_by="ts desc", properties={"flag": True, "n": 3})
    ctx.commit()
    table = catalog.load_table("sales.single")
    assert [f.name for f in table.spec().fields] == ["id"] and len(table.sort_order().fields) == 1
    assert table.properties["flag"] == "true" and table.properties["n"] == "3"
    with pytest.raises(ValueError, match="Property 'x' of table 'single' is None"):
        ctx.set_properties("single", x=None)
    for bad in ("a..b", " x", "x.", ""):
        with pytest.raises(InvalidOperationError, match="is not valid"):
            ctx.identifier(bad)


def test_committed_tables_are_tracked(catalog, orders):
    ctx = MigrationContext(catalog, "sales")
    ctx.set_properties("orders", a="1")
    ctx.create_table("second", ORDERS)
    assert ctx.committed == []
    ctx.commit()
    assert ctx.committed == ["sales.orders", "sales.second"]


def test_a_new_table_gets_its_spec_and_sort_order_at_creation(catalog, orders):
    table = catalog.load_table("sales.orders")
    assert len(table.specs()) == 1 and len(table.sort_orders()) == 1  # no unpartitioned spec 0, no unsorted order
    assert len(table.schemas()) == 1


def test_changes_staged_on_a_new_table_are_part_of_its_creation(catalog, ctx):
    ctx.create_table("events", pa.schema([("id", pa.int64())]), partition_by=["id"])
    ctx.add_column("events", "kind", "string")
    ctx.rename_column("events", "kind", "event_kind")
    ctx.set_sort_order("events", ["id desc"])
    ctx.commit()
    table = catalog.load_table("sales.events")
    assert table.schema().column_names == ["id", "event_kind"]
    assert (len(table.schemas()), len(table.specs()), len(table.sort_orders())) == (1, 1, 1)


def test_column_changes_to_one_table_make_one_schema(catalog, ctx, orders):
    before = len(catalog.load_table("sales.orders").schemas())
    ctx.add_column("orders", "a", "string", doc="first")
    ctx.add_column("orders", "b", "string", after="a")
    ctx.drop_column("orders", "qty")
    ctx.alter_column("orders", "amount", doc="money")
    ctx.move_column("orders", "a", first=True)
    ctx.commit()
    table = catalog.load_table("sales.orders")
    assert len(table.schemas()) == before + 1
    assert table.schema().column_names[0] == "a" and table.schema().column_names[-1] == "b"
    assert table.schema().find_field("a").doc == "first" and table.schema().find_field("amount").doc == "money"


def test_re_runnable_operations(catalog, ctx, orders):
    ctx.create_table("orders", pa.schema([("x", pa.int64())]), if_not_exists=True)  # exists: nothing happens
    ctx.add_column("orders", "qty", "string", if_not_exists=True)  # exists (an int): left as it is
    ctx.drop_column("orders", "nope", if_exists=True)
    ctx.drop_table("missing", if_exists=True)
    ctx.add_column("orders", "note", "string", if_not_exists=True)
    ctx.add_column("orders", "note", "string", if_not_exists=True)  # staged already: once
    ctx.commit()
    schema = catalog.load_table("sales.orders").schema()
    assert schema.find_field("qty").field_type == IntegerType() and schema.column_names.count("note") == 1
    assert not catalog.table_exists("sales.missing")
    with pytest.raises(InvalidOperationError, match="it does not exist"):
        ctx.drop_table("missing")


def test_changes_that_do_not_combine_in_one_schema_update_still_apply(catalog, ctx, orders):
    # Moving a column next to one dropped later in the same migration cannot be one schema update in PyIceberg.
    ctx.add_column("orders", "extra", "string")
    ctx.commit()
    ctx.move_column("orders", "qty", after="extra")
    ctx.drop_column("orders", "extra")
    ctx.rename_column("orders", "qty", "quantity")
    ctx.commit()
    names = catalog.load_table("sales.orders").schema().column_names
    assert "extra" not in names and names[-1] == "quantity"


def test_a_refused_column_change_leaves_nothing_staged(catalog, ctx, orders):
    with pytest.raises(InvalidOperationError):
        ctx.drop_column("orders", "nope")
    ctx.commit()
    assert len(catalog.load_table("sales.orders").schemas()) == 1


def test_dropping_a_column_the_spec_sort_order_or_row_key_uses_names_the_fix(catalog, ctx):
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us", tz="UTC")), ("k", pa.int64())]
    )
    ctx.create_table("events", schema, partition_by=["day(ts)"], sort_by=["k"])
    ctx.set_identifier_fields("events", "id")
    ctx.commit()
    with pytest.raises(
        InvalidOperationError, match=r"partition field 'ts_day'.*ctx.drop_partition_field\('events', 'ts_day'\)"
    ):
        ctx.drop_column("events", "ts")
    with pytest.raises(InvalidOperationError, match=r"sort order uses it.*ctx.set_sort_order\('events'"):
        ctx.drop_column("events", "k")
    with pytest.raises(InvalidOperationError, match=r"identifier fields.*ctx.set_identifier_fields\('events'\)"):
        ctx.drop_column("events", "id")
    ctx.discard()
    ctx.drop_partition_field("events", "ts_day")
    ctx.drop_column("events", "ts")  # in the right order it works
    ctx.commit()
    assert catalog.load_table("sales.events").schema().column_names == ["id", "k"]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda ctx: ctx.update_rows("orders", "qty"), "set must be a mapping keyed by column names"),
        (lambda ctx: ctx.update_rows("orders", {1: 2}), "set names column 1 (int)"),
        (lambda ctx: ctx.copy_rows("orders", "archive", rename="qty"), "rename must be a mapping"),
    ],
)
def test_a_data_operation_refuses_columns_given_as_something_else_than_a_mapping_of_names(ctx, orders, call, named):
    with pytest.raises(InvalidOperationError, match=re.escape(named)):
        call(ctx)
