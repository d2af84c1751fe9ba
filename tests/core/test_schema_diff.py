"""Schema diffs by id and by name."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

from iceberg_ops_provider.core.schema_diff import diff_schemas
from iceberg_ops_provider.core.types import iceberg_to_arrow_schema


def _schema(*fields: NestedField) -> Schema:
    return Schema(*fields)


BASE = _schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "email", StringType(), required=False),
    NestedField(3, "qty", IntegerType(), required=False),
    NestedField(4, "addr", StructType(NestedField(5, "city", StringType(), required=False)), required=False),
)


def test_identical_schemas_have_no_changes():
    diff = diff_schemas(BASE, BASE)
    assert not diff
    assert str(diff) == "no changes"


def test_by_id_tells_a_rename_from_drop_and_add():
    renamed = _schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "customer_email", StringType(), required=False),
        NestedField(3, "qty", IntegerType(), required=False),
        NestedField(4, "addr", StructType(NestedField(5, "town", StringType(), required=False)), required=False),
    )
    diff = diff_schemas(BASE, renamed)
    assert diff.matched_by == "id"
    assert [(c.kind, c.path) for c in diff.changes] == [
        ("renamed", ("customer_email",)),
        ("renamed", ("addr", "town")),
    ]
    assert str(diff.changes[0]) == "column 'email' renamed to 'customer_email'"


def test_by_name_a_rename_is_a_drop_plus_an_add():
    arrow = iceberg_to_arrow_schema(BASE)
    renamed = arrow.set(1, arrow.field("email").with_name("customer_email"))
    diff = diff_schemas(arrow, renamed)
    assert diff.matched_by == "name"
    assert {(c.kind, c.column) for c in diff.changes} == {("added", "customer_email"), ("removed", "email")}


def test_type_required_doc_changes_and_nested_additions():
    changed = _schema(
        NestedField(1, "id", LongType(), required=True, doc="the key"),
        NestedField(2, "email", StringType(), required=True),
        NestedField(3, "qty", LongType(), required=False),
        NestedField(
            4,
            "addr",
            StructType(NestedField(5, "city", StringType(), required=False), NestedField(6, "zip", StringType())),
            required=False,
        ),
    )
    diff = diff_schemas(BASE, changed)
    kinds = {(c.kind, c.column) for c in diff.changes}
    assert kinds == {
        ("doc_changed", "id"),
        ("required_changed", "email"),
        ("type_changed", "qty"),
        ("added", "addr.zip"),
    }
    type_change = diff.of_kind("type_changed")[0]
    assert (type_change.old, type_change.new) == (IntegerType(), LongType())
    assert str(type_change) == "column 'qty' type changed from int to long"


def test_removed_columns_and_moves_report_the_fewest_moves():
    reordered = _schema(
        NestedField(3, "qty", IntegerType(), required=False),
        NestedField(1, "id", LongType(), required=True),
        NestedField(4, "addr", StructType(NestedField(5, "city", StringType(), required=False)), required=False),
    )
    diff = diff_schemas(BASE, reordered)
    assert [c.column for c in diff.of_kind("removed")] == ["email"]
    # id, addr keep their relative order; only qty moved in front.
    assert [c.column for c in diff.of_kind("moved")] == ["qty"]


def test_arrow_with_field_ids_is_compared_by_id(catalog, namespace):
    table = catalog.create_table(f"{namespace}.t", pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())]))
    with table.update_schema() as update:
        update.rename_column("b", "c")
    read_back = table.scan().to_arrow_batch_reader().schema  # carries PARQUET:field_id metadata
    diff = diff_schemas(iceberg_to_arrow_schema(table.schema(), include_field_ids=True), table.schema())
    assert not diff
    before = table.schemas()[0]
    diff = diff_schemas(before, read_back)
    assert diff.matched_by == "id"
    assert [(c.kind, c.old, c.new) for c in diff.changes] == [("renamed", "b", "c")]
