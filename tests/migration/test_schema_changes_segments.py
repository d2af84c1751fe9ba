"""Changes PyIceberg cannot make in one schema update (a later step naming a column by a name an earlier
step gave or took away, a field added inside a struct the same migration adds, a move of a new column)
still make one new schema per migration: each such step starts a new segment on top of the previous
one's result, and only the last is committed. Field ids never repeat one the table ever used, and the
table's name mapping learns every added column."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyiceberg.types import IntegerType, StringType, StructType

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration import MigrationContext
from tests.support.migrations import migrate

ORDERS = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])


@pytest.fixture
def orders(catalog):
    migrate(catalog, lambda ctx: ctx.create_table("orders", ORDERS))
    return catalog.load_table("sales.orders")


def _table(catalog):
    return catalog.load_table("sales.orders")


def _new_schemas(catalog, orders) -> int:
    return len(_table(catalog).schemas()) - len(orders.schemas())


def test_a_step_naming_an_added_columns_old_name_makes_no_second_schema(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "a", "string"),
        lambda ctx: ctx.add_column("orders", "b", "string", after="a"),  # names "a" as the add left it
        lambda ctx: ctx.rename_column("orders", "a", "first"),
    )
    assert _new_schemas(catalog, orders) == 1
    assert _table(catalog).schema().column_names == ["id", "region", "first", "b"]


def test_a_field_added_inside_a_struct_added_in_the_same_migration(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "address", "struct<city: string>"),
        lambda ctx: ctx.add_column("orders", "address.zip", "int"),
        lambda ctx: ctx.move_column("orders", "address", after="id"),
    )
    assert _new_schemas(catalog, orders) == 1
    schema = _table(catalog).schema()
    assert [field.name for field in schema.fields] == ["id", "address", "region"]
    assert [f.name for f in schema.find_field("address").field_type.fields] == ["city", "zip"]
    assert schema.find_field("address.zip").field_type == IntegerType()


def test_a_struct_added_filled_and_dropped_again_leaves_the_schema_as_it_was(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "scratch", "struct<a: int>"),
        lambda ctx: ctx.add_column("orders", "scratch.b", "string"),
        lambda ctx: ctx.drop_column("orders", "scratch"),
    )
    table = _table(catalog)
    assert table.schema() == orders.schema() and table.schema().schema_id == orders.schema().schema_id


def test_a_moved_new_column_with_other_changes_around_it(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "note", "string"),
        lambda ctx: ctx.move_column("orders", "note", first=True),
        lambda ctx: ctx.rename_column("orders", "region", "area"),
        lambda ctx: ctx.set_properties("orders", owner="sales"),
        lambda ctx: ctx.alter_column("orders", "note", doc="free text"),
    )
    table = _table(catalog)
    assert _new_schemas(catalog, orders) == 1
    assert table.schema().column_names == ["note", "id", "area"]
    assert table.schema().find_field("note").doc == "free text" and table.properties["owner"] == "sales"


def test_a_partition_or_sort_order_on_an_existing_column_does_not_split_the_schema(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "email", "string"),
        lambda ctx: ctx.add_partition_field("orders", "bucket(4, id)"),
        lambda ctx: ctx.set_sort_order("orders", ["region"]),
        lambda ctx: ctx.rename_column("orders", "email", "contact"),
    )
    table = _table(catalog)
    assert _new_schemas(catalog, orders) == 1
    assert table.schema().column_names == ["id", "region", "contact"]
    assert [f.name for f in table.spec().fields] == ["id_bucket_4"] and len(table.sort_order().fields) == 1


def test_a_partition_on_a_column_the_migration_adds_sees_it(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "day", "date"),
        lambda ctx: ctx.add_partition_field("orders", "day"),
    )
    table = _table(catalog)
    assert table.spec().fields[0].source_id == table.schema().find_field("day").field_id


def test_new_field_ids_never_repeat_a_dropped_columns_id(catalog, orders):
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "region"))  # the highest id now belongs to no column
    used = _table(catalog).metadata.last_column_id
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "s", "struct<a: int>"),
        lambda ctx: ctx.add_column("orders", "s.b", "string"),  # a second segment
        lambda ctx: ctx.add_column("orders", "c", "string", after="s"),
    )
    table = _table(catalog)
    ids = [table.schema().find_field(name).field_id for name in ("s", "s.a", "s.b", "c")]
    assert len(set(ids)) == 4 and min(ids) > used and table.metadata.last_column_id == max(ids)
    assert table.schema().find_field("s").field_type == StructType(
        table.schema().find_field("s.a"), table.schema().find_field("s.b")
    )


def test_the_name_mapping_learns_columns_of_every_segment(catalog, orders):
    mapping = json.dumps([{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["region"]}])
    migrate(catalog, lambda ctx: ctx.set_properties("orders", **{"schema.name-mapping.default": mapping}))
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "a", "string"),
        lambda ctx: ctx.add_column("orders", "b", "string", after="a"),
        lambda ctx: ctx.rename_column("orders", "a", "first"),
    )
    table = _table(catalog)
    mapped = {field.field_id: field.names for field in table.metadata.name_mapping()}
    schema = table.schema()
    assert schema.find_field("first").field_type == StringType()
    assert "first" in mapped[schema.find_field("first").field_id]
    assert mapped[schema.find_field("b").field_id] == ["b"]


def test_a_refused_step_after_a_segment_keeps_the_earlier_ones_staged(catalog, orders):
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "a", "string")
    ctx.add_column("orders", "b", "string", after="a")
    ctx.rename_column("orders", "a", "first")
    with pytest.raises(InvalidOperationError, match="nowhere"):
        ctx.move_column("orders", "b", after="nowhere")
    ctx.commit()
    assert _table(catalog).schema().column_names == ["id", "region", "first", "b"]
    assert _new_schemas(catalog, orders) == 1


def test_a_restore_among_other_column_changes_is_part_of_the_one_schema(catalog, orders):
    table = _table(catalog)
    table.append(pa.table({"id": [1, 2], "region": ["eu", "us"]}, schema=table.schema().as_arrow()))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "region"))
    dropped = _table(catalog)

    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "note", "string"),
        lambda ctx: ctx.restore_column("orders", "region"),
        lambda ctx: ctx.rename_column("orders", "note", "remark"),
        lambda ctx: ctx.alter_column("orders", "region", doc="where it was sold"),
    )
    table = _table(catalog)
    assert len(table.schemas()) == len(dropped.schemas()) + 1
    assert [field.name for field in table.schema().fields] == ["id", "region", "remark"]
    region = table.schema().find_field("region")
    assert (region.field_id, region.doc) == (orders.schema().find_field("region").field_id, "where it was sold")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"])
    assert [(row["id"], row["region"]) for row in rows] == [(1, "eu"), (2, "us")]


def test_a_drop_and_a_restore_in_one_migration_change_nothing(catalog, orders):
    migrate(
        catalog,
        lambda ctx: ctx.drop_column("orders", "region"),
        lambda ctx: ctx.restore_column("orders", "region"),
    )
    table = _table(catalog)
    assert len(table.schemas()) == len(orders.schemas()) and table.schema() == orders.schema()


def test_a_partition_and_sort_order_on_a_new_column_then_a_rename_make_one_schema(catalog, orders):
    table = _table(catalog)
    table.append(pa.table({"id": [1], "region": ["eu"]}, schema=table.schema().as_arrow()))
    migrate(
        catalog,
        lambda ctx: ctx.add_column("orders", "sold", "date"),
        lambda ctx: ctx.add_partition_field("orders", "month(sold)"),
        lambda ctx: ctx.set_sort_order("orders", ["sold desc", "id"]),
        lambda ctx: ctx.rename_column("orders", "sold", "sold_on"),
        lambda ctx: ctx.add_partition_field("orders", "bucket(4, id)"),  # after a waiting one: waits too
        lambda ctx: ctx.alter_column("orders", "sold_on", doc="the day it was sold"),
    )
    table = _table(catalog)
    assert _new_schemas(catalog, orders) == 1
    sold = table.schema().find_field("sold_on")
    assert sold.doc == "the day it was sold"
    assert [(f.name, f.source_id) for f in table.spec().fields] == [
        ("sold_month", sold.field_id),  # named when it was added, as a partition field keeps its name
        ("id_bucket_4", table.schema().find_field("id").field_id),
    ]
    assert [f.source_id for f in table.sort_order().fields] == [sold.field_id, table.schema().find_field("id").field_id]
    table.append(pa.table({"id": [2], "region": ["us"], "sold_on": [None]}, schema=table.schema().as_arrow()))
    assert sorted(row["id"] for row in _table(catalog).scan().to_arrow().to_pylist()) == [1, 2]


def test_dropping_a_new_column_a_waiting_partition_uses_is_refused_naming_it(catalog, orders):
    ctx = MigrationContext(catalog, "sales")
    ctx.add_column("orders", "sold", "date")
    ctx.add_partition_field("orders", "day(sold)")
    with pytest.raises(InvalidOperationError, match=r"partition field 'sold_day'.*ctx\.drop_partition_field"):
        ctx.drop_column("orders", "sold")
    ctx.discard()
    assert _table(catalog).schema() == orders.schema()


def test_the_plan_shows_the_one_schema_before_the_spec_that_needs_it(catalog, orders, tmp_path):
    from iceberg_ops_provider.runner import MigrationRunner
    from iceberg_ops_provider.runner.plan_document import plan_document
    from tests.support.migrations import write_migration

    folder = tmp_path / "migrations"
    write_migration(
        folder,
        "0001_sold.py",
        'ctx.add_column("orders", "sold", "date")\n'
        'ctx.add_partition_field("orders", "day(sold)")\n'
        'ctx.rename_column("orders", "sold", "sold_on")',
    )
    runner = MigrationRunner(catalog, "sales", folder)
    (step,) = plan_document(runner, runner.plan("head", inspect=True), "head")["steps"]
    (change,) = [c for c in step["changes"] if c["operation"] == "update-table"]
    actions = [update["action"] for update in change["updates"]]
    assert actions[:4] == ["add-schema", "set-current-schema", "add-spec", "set-default-spec"]
    assert actions.count("add-schema") == 1
    runner.upgrade()
    assert _new_schemas(catalog, orders) == 1 and _table(catalog).spec().fields[0].name == "sold_day"
