"""Column reconciliation by name on real schemas, real Arrow batches, real Parquet files and real tables.

The tables of a move number their columns differently on purpose (the target lists them in another
order), so a conversion that kept the source's field ids would put values in the wrong columns.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import (
    And,
    EqualTo,
    GreaterThan,
    In,
    IsNull,
    LessThan,
    Not,
    NotNull,
    Or,
    Reference,
)
from pyiceberg.expressions.parser import parse
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
    UUIDType,
)

from iceberg_ops_provider.data_migration.batch_convert import BatchPlan, FieldNode
from iceberg_ops_provider.data_migration.reconcile import (
    ColumnMapping,
    target_schema_for,
    target_sort_order_for,
    target_spec_for,
)
from iceberg_ops_provider.errors import ReconciliationError

FIELD_ID = b"PARQUET:field_id"


def field_ids(arrow_field: pa.Field) -> dict[str, int]:
    """Every field's id by dotted path, nested fields included."""
    out: dict[str, int] = {}

    def walk(f: pa.Field, prefix: str) -> None:
        path = f"{prefix}{f.name}"
        assert f.metadata and FIELD_ID in f.metadata, f"{path} has no field id"
        out[path] = int(f.metadata[FIELD_ID])
        t = f.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i), path + ".")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field, path + ".")
        elif pa.types.is_map(t):
            walk(t.key_field, path + ".")
            walk(t.item_field, path + ".")

    walk(arrow_field, "")
    return out


def all_ids(schema: pa.Schema) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in schema:
        out.update(field_ids(f))
    return out


def register(table: Any, batch: pa.RecordBatch) -> None:
    """Write ``batch`` as a Parquet data file of ``table`` with PyArrow and commit it (no name mapping involved)."""
    location = f"{table.location()}/data/{uuid.uuid4().hex}.parquet"
    local = Path(location.removeprefix("file://"))
    local.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_batches([batch]), local)
    data_file = parquet_file_to_data_file(table.io, table.metadata, location)
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)


def raw_batches(table: Any, columns: list[str] | None = None) -> list[pa.RecordBatch]:
    """The table's rows as read straight from its Parquet files: the source's field ids on every field."""
    batches = []
    for task in table.scan().plan_files():
        pf = pq.ParquetFile(task.file.file_path.removeprefix("file://"))
        batches.extend(pf.iter_batches(columns=columns, use_threads=False))
    return batches


def sorted_rows(rows: list[dict[str, Any]], key: str = "id") -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r[key])


# A source with nested columns, and a target listing everything in another order: no field id matches.
SOURCE = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "qty", IntegerType()),
    NestedField(
        4,
        "address",
        StructType(NestedField(5, "city", StringType()), NestedField(6, "zip", IntegerType())),
    ),
    NestedField(7, "scores", ListType(8, FloatType(), element_required=False)),
    NestedField(9, "tags", MapType(10, StringType(), 11, IntegerType(), value_required=False)),
    NestedField(12, "price", DecimalType(10, 2)),
)

TARGET = Schema(
    NestedField(1, "price", DecimalType(12, 2)),
    NestedField(
        2,
        "tags",
        MapType(3, StringType(), 4, LongType(), value_required=False),
    ),
    NestedField(5, "scores", ListType(6, DoubleType(), element_required=False)),
    NestedField(
        7,
        "address",
        StructType(
            NestedField(8, "country", StringType()),
            NestedField(9, "zip", LongType()),
            NestedField(10, "city", StringType()),
        ),
    ),
    NestedField(11, "quantity", LongType()),
    NestedField(12, "full_name", StringType()),
    NestedField(13, "id", LongType(), required=True),
    NestedField(14, "note", StringType()),
)

ROWS = [
    {
        "id": 1,
        "name": "ann",
        "qty": 3,
        "address": {"city": "Oslo", "zip": 150},
        "scores": [1.5, None],
        "tags": [("a", 1), ("b", None)],
        "price": Decimal("12.50"),
    },
    {"id": 2, "name": None, "qty": None, "address": None, "scores": None, "tags": None, "price": None},
    {
        "id": 3,
        "name": "cy",
        "qty": -7,
        "address": {"city": None, "zip": 9},
        "scores": [],
        "tags": [],
        "price": Decimal("-1.00"),
    },
]

EXPECTED = [
    {
        "price": Decimal("12.50"),
        "tags": [("a", 1), ("b", None)],
        "scores": [1.5, None],
        "address": {"country": None, "zip": 150, "city": "Oslo"},
        "quantity": 3,
        "full_name": "ann",
        "id": 1,
        "note": None,
    },
    {
        "price": None,
        "tags": None,
        "scores": None,
        "address": None,
        "quantity": None,
        "full_name": None,
        "id": 2,
        "note": None,
    },
    {
        "price": Decimal("-1.00"),
        "tags": [],
        "scores": [],
        "address": {"country": None, "zip": 9, "city": None},
        "quantity": -7,
        "full_name": "cy",
        "id": 3,
        "note": None,
    },
]

RENAME = {"qty": "quantity", "name": "full_name"}


def nested_tables(catalog: Any) -> tuple[Any, Any]:
    catalog.create_namespace("ns")
    source = catalog.create_table("ns.src", schema=SOURCE)
    source.append(pa.Table.from_pylist(ROWS, schema=source.schema().as_arrow()))
    target = catalog.create_table("ns.dst", schema=TARGET)
    return source, target


# Values land by name, with the target's field ids, through a real table.


def test_raw_source_rows_land_in_the_right_target_columns(catalog: Any) -> None:
    source, target = nested_tables(catalog)
    mapping = ColumnMapping.build(source.schema(), target.schema(), rename=RENAME)
    (batch,) = raw_batches(source)
    assert all_ids(batch.schema)["id"] == 1  # the source's ids, which the target gives to `price`

    converted = mapping.convert(batch)

    assert converted.schema.names == [f.name for f in target.schema().fields]
    schema = target.schema()
    paths = ["price", "tags", "tags.key", "tags.value", "scores", "scores.element", "address", "address.country"]
    paths += ["address.zip", "address.city", "quantity", "full_name", "id", "note"]
    expected_ids = {path: schema.find_field(path).field_id for path in paths}
    assert expected_ids["price"] == 1 and expected_ids["id"] != 1  # no column keeps its source id
    assert all_ids(converted.schema) == expected_ids
    register(target, converted)
    assert sorted_rows(target.scan().to_arrow().to_pylist()) == EXPECTED
    # The field ids survive the Parquet round trip, nested ones included.
    (task,) = target.scan().plan_files()
    assert all_ids(pq.read_schema(task.file.file_path.removeprefix("file://"))) == expected_ids


def test_batches_read_through_pyiceberg_and_in_another_column_order_convert_the_same(catalog: Any) -> None:
    source, target = nested_tables(catalog)
    mapping = ColumnMapping.build(source.schema(), target.schema(), rename=RENAME)
    table = source.scan().to_arrow()
    shuffled = table.select(list(reversed(table.column_names))).to_batches()[0]

    converted = mapping.convert(shuffled)

    register(target, converted)
    assert sorted_rows(target.scan().to_arrow().to_pylist()) == EXPECTED


def test_sliced_batches_with_nulls_convert_row_for_row(catalog: Any) -> None:
    source, target = nested_tables(catalog)
    mapping = ColumnMapping.build(source.schema(), target.schema(), rename=RENAME)
    (batch,) = raw_batches(source)
    by_id = {row["id"]: row for row in EXPECTED}
    for offset in range(3):
        for length in range(0, 4 - offset):
            piece = batch.slice(offset, length)
            converted = mapping.convert(piece)
            assert converted.num_rows == length
            assert converted.to_pylist() == [by_id[i] for i in piece.column("id").to_pylist()]


def test_mapping_attributes_and_notes(catalog: Any) -> None:
    mapping = ColumnMapping.build(SOURCE, TARGET, rename=RENAME)

    assert mapping.source_columns == ["id", "name", "qty", "address", "scores", "tags", "price"]
    assert mapping.compared_columns == ["id", "full_name", "quantity", "address", "scores", "tags", "price"]
    assert mapping.file_names["full_name"] == "full_name"
    notes = "\n".join(mapping.notes())
    assert "`qty` is written to `quantity` (renamed)" in notes
    assert "`note` has no source column: filled with nulls" in notes
    assert "`address.country` has no source column: filled with nulls" in notes
    assert "`qty` is promoted from int to long" in notes
    assert "`scores.element` is promoted from float to double" in notes
    assert "`tags.value` is promoted from int to long" in notes
    assert "`price` is promoted from decimal(10, 2) to decimal(12, 2)" in notes


# Types: equal ones kept as they came, promotions cast.


def test_equal_types_keep_the_source_arrow_types() -> None:
    source = Schema(
        NestedField(1, "s", StringType()), NestedField(2, "b", BinaryType()), NestedField(3, "n", LongType())
    )
    target = Schema(
        NestedField(3, "n", LongType()), NestedField(1, "b", BinaryType()), NestedField(2, "s", StringType())
    )
    mapping = ColumnMapping.build(source, target)
    for string_type, binary_type in [(pa.string(), pa.binary()), (pa.large_string(), pa.large_binary())]:
        batch = pa.RecordBatch.from_arrays(
            [pa.array(["x", None], string_type), pa.array([b"y", b""], binary_type), pa.array([1, 2], pa.int64())],
            names=["s", "b", "n"],
        )
        converted = mapping.convert(batch)
        assert [f.type for f in converted.schema] == [pa.int64(), binary_type, string_type]
        assert converted.column(2) is not None and converted.column(2).equals(batch.column(0))
        assert all_ids(converted.schema) == {"n": 3, "b": 1, "s": 2}


def test_dictionary_columns_are_kept() -> None:
    schema = Schema(NestedField(1, "s", StringType()))
    mapping = ColumnMapping.build(schema, Schema(NestedField(7, "s", StringType())))
    batch = pa.RecordBatch.from_arrays([pa.array(["a", "b", "a"]).dictionary_encode()], names=["s"])

    converted = mapping.convert(batch)

    assert pa.types.is_dictionary(converted.schema.field("s").type)
    assert converted.column(0).to_pylist() == ["a", "b", "a"]


def test_promotions_are_cast_to_the_target_arrow_types() -> None:
    source = Schema(
        NestedField(1, "i", IntegerType()), NestedField(2, "f", FloatType()), NestedField(3, "d", DecimalType(9, 3))
    )
    target = Schema(
        NestedField(1, "d", DecimalType(20, 3)), NestedField(2, "f", DoubleType()), NestedField(3, "i", LongType())
    )
    batch = pa.RecordBatch.from_pydict(
        {
            "i": pa.array([2**31 - 1, None, -(2**31)], pa.int32()),
            "f": pa.array([0.5, float("inf"), None], pa.float32()),
            "d": pa.array([Decimal("123456.789"), None, Decimal("-0.001")], pa.decimal128(9, 3)),
        }
    )

    converted = ColumnMapping.build(source, target).convert(batch)

    assert [f.type for f in converted.schema] == [pa.decimal128(20, 3), pa.float64(), pa.int64()]
    assert converted.to_pydict() == {
        "d": [Decimal("123456.789"), None, Decimal("-0.001")],
        "f": [0.5, float("inf"), None],
        "i": [2**31 - 1, None, -(2**31)],
    }


def test_int8_is_cast_to_int_and_any_spelling_of_utc_is_kept() -> None:
    source = Schema(NestedField(1, "i", IntegerType()), NestedField(2, "ts", TimestamptzType()))
    mapping = ColumnMapping.build(source, source)
    batch = pa.RecordBatch.from_pydict(
        {"i": pa.array([1, None], pa.int8()), "ts": pa.array([0, 1], pa.timestamp("us", tz="Etc/UTC"))}
    )

    converted = mapping.convert(batch)

    # int8 becomes the int32 an Iceberg int is; a UTC timestamp under another spelling of UTC is kept.
    assert [f.type for f in converted.schema] == [pa.int32(), pa.timestamp("us", tz="Etc/UTC")]


# Renames, names Avro cannot hold.


def test_dotted_rename_of_a_struct_field() -> None:
    source = Schema(NestedField(1, "a", StructType(NestedField(2, "zip", IntegerType()))))
    target = Schema(NestedField(5, "b", StructType(NestedField(6, "postcode", IntegerType()))))
    mapping = ColumnMapping.build(source, target, rename={"a": "b", "a.zip": "postcode"})
    batch = pa.RecordBatch.from_pydict({"a": pa.array([{"zip": 1}, None], pa.struct([("zip", pa.int32())]))})

    converted = mapping.convert(batch)

    assert converted.to_pylist() == [{"b": {"postcode": 1}}, {"b": None}]
    assert all_ids(converted.schema) == {"b": 5, "b.postcode": 6}
    assert "`a.zip` is written to `b.postcode` (renamed)" in mapping.notes()
    assert mapping.target_expression(parse("a.zip > 1")) == GreaterThan("b.postcode", 1)


def test_names_avro_cannot_hold_are_written_under_the_target_file_names(catalog: Any) -> None:
    catalog.create_namespace("ns")
    source = catalog.create_table(
        "ns.src", schema=Schema(NestedField(1, "order id", LongType()), NestedField(2, "x", StringType()))
    )
    target = catalog.create_table(
        "ns.dst", schema=Schema(NestedField(1, "x", StringType()), NestedField(2, "order-id", LongType()))
    )
    source.append(pa.Table.from_pylist([{"order id": 7, "x": "a"}], schema=source.schema().as_arrow()))
    mapping = ColumnMapping.build(source.schema(), target.schema(), rename={"order id": "order-id"})
    # Read straight from the file: the column is stored under its sanitized name.
    (batch,) = raw_batches(source)
    assert batch.schema.names == ["order_x20id", "x"]

    converted = mapping.convert(batch)

    assert converted.schema.names == ["x", "order_x2Did"]
    assert mapping.file_names == {"x": "x", "order-id": "order_x2Did"}
    assert converted.to_pylist() == [{"x": "a", "order_x2Did": 7}]


# Filling target-only columns.


def test_target_only_optional_struct_with_a_required_child_is_null_filled_and_writable(catalog: Any) -> None:
    catalog.create_namespace("ns")
    target_schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "extra", StructType(NestedField(3, "must", StringType(), required=True))),
    )
    target = catalog.create_table("ns.dst", schema=target_schema)
    mapping = ColumnMapping.build(Schema(NestedField(9, "id", LongType(), required=True)), target.schema())

    converted = mapping.convert(pa.RecordBatch.from_pydict({"id": pa.array([1, 2], pa.int64())}))

    register(target, converted)
    assert sorted_rows(target.scan().to_arrow().to_pylist()) == [{"id": 1, "extra": None}, {"id": 2, "extra": None}]


# Bad input to build: every problem named, with its fix.


def test_unknown_columns_are_refused_with_the_available_ones() -> None:
    with pytest.raises(ReconciliationError, match=r"columns= names `nope`.*Available columns: `id`, `name`"):
        ColumnMapping.build(SOURCE, TARGET, columns=["id", "nope"])
    with pytest.raises(ReconciliationError, match=r"nested fields move with their column"):
        ColumnMapping.build(SOURCE, TARGET, columns=["address.city"])
    with pytest.raises(ReconciliationError, match="columns= is empty"):
        ColumnMapping.build(SOURCE, TARGET, columns=[])


def test_bad_renames_are_refused() -> None:
    with pytest.raises(ReconciliationError, match=r"rename= names `nope`, which the source does not have.*`qty`"):
        ColumnMapping.build(SOURCE, TARGET, rename={"nope": "x"})
    with pytest.raises(ReconciliationError, match=r"columns= leaves out `qty`"):
        ColumnMapping.build(SOURCE, TARGET, columns=["id"], rename={"qty": "quantity"})
    with pytest.raises(ReconciliationError, match=r"`name` and `qty` would both become `quantity`"):
        ColumnMapping.build(SOURCE, TARGET, rename={"name": "quantity", "qty": "quantity"})
    with pytest.raises(ReconciliationError, match=r"`id` and `name` would both become `id`"):
        ColumnMapping.build(SOURCE, TARGET, rename={"name": "id"})
    with pytest.raises(ReconciliationError, match=r"list element or map key/value"):
        ColumnMapping.build(SOURCE, TARGET, rename={"scores.element": "x"})


def test_a_source_column_the_target_lacks_is_an_error_not_a_silent_drop() -> None:
    with pytest.raises(ReconciliationError) as info:
        ColumnMapping.build(SOURCE, TARGET, rename={"name": "full_name"})
    message = str(info.value)
    assert "Source column `qty` has no column `qty` in the target" in message
    assert "rename={'qty': '<target column>'}" in message and "columns=" in message
    assert "add column `qty` to the target's schema" in message
    # Leaving it out is one of the fixes, and works.
    assert ColumnMapping.build(SOURCE, TARGET, columns=["id", "price"]).source_columns == ["id", "price"]


def test_a_nested_source_field_the_target_struct_lacks_is_an_error() -> None:
    target = Schema(NestedField(1, "a", StructType(NestedField(2, "x", IntegerType()))))
    source = Schema(
        NestedField(1, "a", StructType(NestedField(2, "x", IntegerType()), NestedField(3, "y", StringType())))
    )
    with pytest.raises(ReconciliationError, match=r"Source column `a.y` has no column `a.y` in struct `a`"):
        ColumnMapping.build(source, target)


def test_required_target_column_without_source_is_an_error_optional_is_null_filled() -> None:
    source = Schema(NestedField(1, "id", LongType()), NestedField(2, "must", StringType()))
    target = Schema(NestedField(1, "id", LongType()), NestedField(2, "must", StringType(), required=True))
    with pytest.raises(ReconciliationError, match=r"Target column `must` is required.*columns= leaves it out"):
        ColumnMapping.build(source, target, columns=["id"])
    nested_target = Schema(NestedField(1, "s", StructType(NestedField(2, "must", StringType(), required=True))))
    nested_source = Schema(NestedField(1, "s", StructType(NestedField(2, "other", StringType()))))
    with pytest.raises(ReconciliationError, match=r"Target column `s.must` is required"):
        ColumnMapping.build(nested_source, nested_target, rename={"s.other": "must2"})


@pytest.mark.parametrize(
    ("source_type", "target_type", "words"),
    [
        (StringType(), IntegerType(), "Iceberg cannot convert string to int"),
        (StructType(NestedField(5, "a", IntegerType())), StringType(), "cannot convert struct<5: a: optional int>"),
        (LongType(), DoubleType(), "cannot convert long to double"),
        (DecimalType(12, 2), DecimalType(14, 4), "a decimal's scale cannot change"),
        (StringType(), BinaryType(), "cannot convert string to binary"),
        (ListType(6, IntegerType()), MapType(7, IntegerType(), 8, IntegerType()), "cannot convert list<int>"),
    ],
)
def test_incompatible_types_name_both_types(source_type: Any, target_type: Any, words: str) -> None:
    source = Schema(NestedField(1, "c", source_type))
    target = Schema(NestedField(1, "c", target_type))
    with pytest.raises(
        ReconciliationError, match=r"Column `c` is .* in the source but `c` is .* in the target"
    ) as info:
        ColumnMapping.build(source, target)
    assert words in str(info.value)
    assert "evolve the target column" in str(info.value)


def test_every_problem_is_listed_at_once() -> None:
    source = Schema(NestedField(1, "a", StringType()), NestedField(2, "b", IntegerType()))
    target = Schema(NestedField(1, "a", IntegerType()), NestedField(3, "c", LongType(), required=True))
    with pytest.raises(ReconciliationError) as info:
        ColumnMapping.build(source, target)
    lines = str(info.value).splitlines()
    assert lines[0] == "The source's columns cannot be written to the target:"
    assert len(lines) == 4  # a: string -> int; b: no target; c: required without source


def test_optional_struct_into_required_struct_cannot_be_checked_and_is_refused() -> None:
    inner = StructType(NestedField(2, "x", IntegerType()))
    source = Schema(NestedField(1, "s", inner))
    target = Schema(NestedField(1, "s", inner, required=True))
    with pytest.raises(ReconciliationError, match=r"no null counts for struct.*make `s` optional"):
        ColumnMapping.build(source, target)


# Narrowing: allowed when every source file's bounds fit, checked again per batch.


def narrowing_source(catalog: Any, properties: dict[str, str] | None = None) -> Any:
    catalog.create_namespace("ns")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "n", LongType()),
        NestedField(3, "x", DoubleType()),
        NestedField(4, "d", DecimalType(12, 2)),
    )
    return catalog.create_table("ns.src", schema=schema, properties=properties or {})


NARROW_TARGET = Schema(
    NestedField(1, "d", DecimalType(6, 2)),
    NestedField(2, "x", FloatType()),
    NestedField(3, "n", IntegerType()),
    NestedField(4, "id", LongType(), required=True),
)


def append(table: Any, rows: list[dict[str, Any]]) -> None:
    table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))


def data_files(table: Any) -> list[Any]:
    return [task.file for task in table.scan().plan_files()]


def test_narrowing_passes_when_every_file_fits(catalog: Any) -> None:
    source = narrowing_source(catalog)
    append(source, [{"id": 1, "n": 2**31 - 1, "x": 1.5, "d": Decimal("9999.99")}])
    append(source, [{"id": 2, "n": -(2**31), "x": -3.4e38, "d": Decimal("-9999.99")}])
    append(source, [{"id": 3, "n": None, "x": None, "d": None}])  # only nulls: no bounds needed
    mapping = ColumnMapping.build(source.schema(), NARROW_TARGET)
    assert any("narrowed from long to int" in note for note in mapping.notes())

    mapping.check_files(data_files(source))

    converted = [mapping.convert(b) for b in raw_batches(source)]
    assert {b.schema.field("n").type for b in converted} == {pa.int32()}
    rows = sorted_rows([r for b in converted for r in b.to_pylist()])
    assert [r["n"] for r in rows] == [2**31 - 1, -(2**31), None]
    assert [r["d"] for r in rows] == [Decimal("9999.99"), Decimal("-9999.99"), None]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"n": 3_000_000_000}, "value 3000000000 in column `n` does not fit the target's int"),
        ({"n": -(2**31) - 1}, "value -2147483649 in column `n` does not fit the target's int"),
        ({"x": 1e300}, "in column `x` does not fit the target's float"),
        ({"d": Decimal("10000.00")}, "value 10000.00 in column `d` does not fit the target's decimal(6, 2)"),
    ],
)
def test_a_file_whose_bounds_do_not_fit_is_refused_naming_value_column_and_file(
    catalog: Any, row: dict[str, Any], message: str
) -> None:
    source = narrowing_source(catalog)
    append(source, [{"id": 1, "n": 1, "x": 1.0, "d": Decimal("1.00")}])
    good = {f.file_path for f in data_files(source)}
    append(source, [{"id": 2, "n": 1, "x": 1.0, "d": Decimal("1.00"), **row}])
    (bad,) = {f.file_path for f in data_files(source)} - good
    mapping = ColumnMapping.build(source.schema(), NARROW_TARGET)

    with pytest.raises(ReconciliationError) as info:
        mapping.check_files(data_files(source))

    text = str(info.value)
    assert message.lower() in text.lower()
    assert "widen the target column" in text
    assert bad in text and not any(path in text for path in good)
    # The second guard: converting the batch itself fails the same way, never writes a wrong value.
    with pytest.raises(ReconciliationError, match=r"column `[nxd]`"):
        for batch in raw_batches(source):
            mapping.convert(batch)


def test_missing_bounds_are_an_error_saying_how_to_fix(catalog: Any) -> None:
    source = narrowing_source(catalog, {"write.metadata.metrics.default": "counts"})
    append(source, [{"id": 1, "n": 1, "x": 1.0, "d": Decimal("1.00")}])
    mapping = ColumnMapping.build(source.schema(), NARROW_TARGET)

    with pytest.raises(ReconciliationError) as info:
        mapping.check_files(data_files(source))

    text = str(info.value)
    assert "has no lower/upper bounds for column `n`" in text
    assert "statistics are missing" in text and "widen the target column `n` to long" in text
    # Files with no rows are not checked; nothing to check means nothing to refuse.
    mapping.check_files([])


def test_convert_guards_narrowing_even_without_file_checks() -> None:
    mapping = ColumnMapping.build(
        Schema(NestedField(1, "n", LongType()), NestedField(2, "x", DoubleType())),
        Schema(NestedField(1, "x", FloatType()), NestedField(2, "n", IntegerType())),
    )
    fine = pa.RecordBatch.from_pydict({"n": pa.array([1, None], pa.int64()), "x": pa.array([float("inf"), None])})
    assert mapping.convert(fine).to_pydict() == {"x": [float("inf"), None], "n": [1, None]}
    too_big = pa.RecordBatch.from_pydict({"n": pa.array([2**40], pa.int64()), "x": pa.array([1.0])})
    with pytest.raises(ReconciliationError, match=r"A value of column `n` does not fit the target column `n`"):
        mapping.convert(too_big)
    beyond_float = pa.RecordBatch.from_pydict({"n": pa.array([1], pa.int64()), "x": pa.array([-1e39])})
    with pytest.raises(ReconciliationError, match=r"beyond the range of the target column `x` of type float"):
        mapping.convert(beyond_float)


def test_narrowing_inside_a_list_is_checked_per_batch() -> None:
    source = Schema(NestedField(1, "l", ListType(2, LongType(), element_required=False)))
    target = Schema(NestedField(1, "l", ListType(2, IntegerType(), element_required=False)))
    mapping = ColumnMapping.build(source, target)
    ok = pa.RecordBatch.from_pydict({"l": pa.array([[1, None], None], pa.list_(pa.int64()))})
    assert mapping.convert(ok).column(0).to_pylist() == [[1, None], None]
    with pytest.raises(ReconciliationError, match=r"`l.element`"):
        mapping.convert(pa.RecordBatch.from_pydict({"l": pa.array([[2**33]], pa.list_(pa.int64()))}))


# Optional source column into a required target column.


def required_target(catalog: Any, properties: dict[str, str] | None = None) -> tuple[Any, ColumnMapping]:
    catalog.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "v", StringType()))
    source = catalog.create_table("ns.src", schema=schema, properties=properties or {})
    target = Schema(NestedField(1, "v", StringType(), required=True), NestedField(2, "id", LongType(), required=True))
    return source, ColumnMapping.build(source.schema(), target)


def test_optional_into_required_passes_when_no_file_has_nulls(catalog: Any) -> None:
    source, mapping = required_target(catalog)
    append(source, [{"id": 1, "v": "a"}])
    assert any("optional in the source and `v` required" in note for note in mapping.notes())

    mapping.check_files(data_files(source))

    (batch,) = raw_batches(source)
    converted = mapping.convert(batch)
    assert converted.schema.field("v").nullable is False
    assert converted.to_pylist() == [{"v": "a", "id": 1}]


def test_optional_into_required_with_nulls_is_refused_by_files_and_by_batches(catalog: Any) -> None:
    source, mapping = required_target(catalog)
    append(source, [{"id": 1, "v": "a"}, {"id": 2, "v": None}])

    with pytest.raises(ReconciliationError, match=r"Column `v` has 1 null\(s\) in file .*`v` is required"):
        mapping.check_files(data_files(source))
    (batch,) = raw_batches(source)
    with pytest.raises(ReconciliationError, match=r"Column `v` holds 1 null\(s\) in this batch"):
        mapping.convert(batch)


def test_optional_into_required_without_null_counts_is_refused(catalog: Any) -> None:
    source, mapping = required_target(catalog, {"write.metadata.metrics.default": "none"})
    append(source, [{"id": 1, "v": "a"}])
    with pytest.raises(ReconciliationError, match=r"has no null count for column `v`.*make `v` optional"):
        mapping.check_files(data_files(source))


def test_required_struct_child_from_optional_checks_rows_where_the_struct_is_present() -> None:
    source = Schema(NestedField(1, "s", StructType(NestedField(2, "x", IntegerType()))))
    target = Schema(NestedField(1, "s", StructType(NestedField(2, "x", IntegerType(), required=True))))
    mapping = ColumnMapping.build(source, target)
    arrow = pa.struct([("x", pa.int32())])
    # A null struct is fine: its child is not there.
    ok = pa.RecordBatch.from_pydict({"s": pa.array([{"x": 1}, None], arrow)})
    assert mapping.convert(ok).column(0).to_pylist() == [{"x": 1}, None]
    bad = pa.RecordBatch.from_pydict({"s": pa.array([{"x": None}], arrow)})
    with pytest.raises(ReconciliationError, match=r"Column `s.x` holds 1 null"):
        mapping.convert(bad)


# Batches that do not match the mapping.


def test_a_batch_without_a_moved_column_or_with_a_wrong_shape_is_refused() -> None:
    mapping = ColumnMapping.build(SOURCE, TARGET, rename=RENAME)
    with pytest.raises(ReconciliationError, match=r"The batch has no column `price` \(it has: `id`\).*source_columns"):
        mapping.convert(pa.RecordBatch.from_pydict({"id": pa.array([1], pa.int64())}))
    source = Schema(NestedField(1, "s", StructType(NestedField(2, "x", IntegerType()))))
    struct_mapping = ColumnMapping.build(source, source)
    with pytest.raises(ReconciliationError, match=r"column `s` has Arrow type string"):
        struct_mapping.convert(pa.RecordBatch.from_pydict({"s": pa.array(["x"])}))
    with pytest.raises(ReconciliationError, match=r"The batch's struct `s` has no column `x`"):
        struct_mapping.convert(pa.RecordBatch.from_pydict({"s": pa.array([{"y": 1}])}))


def test_an_incompatible_arrow_type_in_a_batch_fails_on_the_cast() -> None:
    schema = Schema(NestedField(1, "n", LongType()))
    mapping = ColumnMapping.build(schema, schema)
    with pytest.raises(ReconciliationError, match=r"column `n` does not fit"):
        mapping.convert(pa.RecordBatch.from_pydict({"n": pa.array(["not a number"])}))


# The batch conversion on its own, and the split between the two modules.


def test_batch_plan_converts_from_field_nodes_alone() -> None:
    nodes = (
        FieldNode("qty", 7, True, "qty", LongType(), pa.int64(), ("amount",), "amount", check_nulls=True),
        FieldNode("note", 8, False, "note", StringType(), pa.large_string()),
    )
    plan = BatchPlan.compile(nodes, pa.schema([("other", pa.string()), ("amount", pa.int32())]))
    out = plan.apply(pa.RecordBatch.from_pydict({"other": ["x", "y"], "amount": pa.array([1, 2], pa.int32())}))
    assert out.schema.names == ["qty", "note"]
    assert out.column("qty").type == pa.int64()
    assert out.column("qty").to_pylist() == [1, 2]
    assert out.column("note").to_pylist() == [None, None]
    assert all_ids(out.schema) == {"qty": 7, "note": 8}
    assert not out.schema.field("qty").nullable
    with pytest.raises(ReconciliationError, match=r"`amount` holds 1 null\(s\).*`qty` is required"):
        plan.apply(pa.RecordBatch.from_pydict({"other": ["x"], "amount": pa.array([None], pa.int32())}))
    with pytest.raises(ReconciliationError, match=r"The batch has no column `amount` \(it has: `other`\)"):
        BatchPlan.compile(nodes, pa.schema([("other", pa.string())]))


def test_reconcile_keeps_its_public_names() -> None:
    from iceberg_ops_provider.data_migration import batch_convert, reconcile, target_schema

    assert set(reconcile.__all__) == {"ColumnMapping", "target_schema_for", "target_spec_for", "target_sort_order_for"}
    assert reconcile.ColumnMapping is ColumnMapping
    for name in ("target_schema_for", "target_spec_for", "target_sort_order_for"):
        assert getattr(reconcile, name) is getattr(target_schema, name)
    assert set(batch_convert.__all__) == {"BatchPlan", "Converter", "FieldNode"}
    assert all(hasattr(batch_convert, name) for name in batch_convert.__all__)


# The `where` filter, from source names to target names.


def test_target_expression_renames_references() -> None:
    mapping = ColumnMapping.build(SOURCE, TARGET, rename=RENAME)

    rewritten = mapping.target_expression(parse("qty > 3 and (name = 'x' or name is null) and not id in (1, 2)"))

    expected = And(
        GreaterThan("quantity", 3),
        Or(EqualTo("full_name", "x"), IsNull("full_name")),
        Not(In("id", {1, 2})),
    )
    assert rewritten == expected
    assert mapping.target_expression(parse("address.city = 'Oslo'")) == EqualTo(Reference("address.city"), "Oslo")
    assert mapping.target_expression(NotNull("qty")) == NotNull("quantity")
    # A filter bound to the source schema works too.
    bound = LessThan("qty", 10).bind(SOURCE)
    assert mapping.target_expression(bound) == LessThan("quantity", 10)


def test_target_expression_refuses_columns_not_moved_or_unknown() -> None:
    mapping = ColumnMapping.build(SOURCE, TARGET, columns=["id", "price"])
    with pytest.raises(ReconciliationError, match=r"column `qty`, which the move does not write.*`id`, `price`"):
        mapping.target_expression(parse("id > 1 and qty > 3"))
    with pytest.raises(ReconciliationError, match=r"column `nope`, which the source does not have"):
        mapping.target_expression(parse("nope = 1"))


# Creating the target from the source: schema, partition spec, sort order.


def test_create_target_from_the_source_keeps_spec_and_sort_order_on_renamed_columns(catalog: Any) -> None:
    catalog.create_namespace("ns")
    source_schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "region", StringType()),
        NestedField(3, "ts", TimestamptzType()),
        NestedField(4, "name", StringType()),
        NestedField(5, "secret", StringType()),
        identifier_field_ids=[1],
    )
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"),
        PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=1, field_id=1002, transform=BucketTransform(8), name="id_bucket"),
    )
    order = SortOrder(
        SortField(
            source_id=4, transform=IdentityTransform(), direction=SortDirection.DESC, null_order=NullOrder.NULLS_LAST
        ),
        SortField(source_id=5, transform=IdentityTransform()),
        SortField(source_id=2, transform=IdentityTransform()),
    )
    source = catalog.create_table("ns.src", schema=source_schema, partition_spec=spec, sort_order=order)
    columns = ["id", "region", "ts", "name"]
    rename = {"region": "area", "ts": "event_ts"}
    notes: list[str] = []

    schema = target_schema_for(source.schema(), columns=columns, rename=rename)
    target_spec = target_spec_for(source.spec(), source.schema(), schema, rename=rename, notes=notes)
    target_order = target_sort_order_for(source.sort_order(), source.schema(), schema, rename=rename, notes=notes)
    target = catalog.create_table("ns.dst", schema=schema, partition_spec=target_spec, sort_order=target_order)

    created = target.schema()
    assert [f.name for f in created.fields] == ["id", "area", "event_ts", "name"]
    assert created.identifier_field_names() == {"id"}
    partition = [(created.find_column_name(f.source_id), str(f.transform), f.name) for f in target.spec().fields]
    assert partition == [
        ("area", "identity", "area"),
        ("event_ts", "day", "event_ts_day"),
        ("id", "bucket[8]", "id_bucket"),
    ]
    sort = [(created.find_column_name(f.source_id), f.direction) for f in target.sort_order().fields]
    assert sort == [("name", SortDirection.DESC), ("area", SortDirection.ASC)]
    assert any("`secret` is not moved" in n for n in notes)
    assert "partition field `ts_day` is called `event_ts_day` in the target" in notes
    # The created target accepts the source's rows through the mapping, in the renamed columns.
    mapping = ColumnMapping.build(source.schema(), created, columns=columns, rename=rename)
    assert mapping.compared_columns == ["id", "area", "event_ts", "name"]


def test_target_schema_for_keeps_source_ids_renames_nested_and_drops_unmoved_identifiers() -> None:
    source = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "k", StringType(), required=True),
        NestedField(3, "s", StructType(NestedField(4, "zip", IntegerType()))),
        NestedField(5, "l", ListType(6, StructType(NestedField(7, "x", IntegerType())))),
        identifier_field_ids=[1, 2],
    )
    notes: list[str] = []
    schema = target_schema_for(
        source, columns=["id", "s", "l"], rename={"s.zip": "postcode", "l.element.x": "y"}, notes=notes
    )

    assert schema.find_field("s.postcode").field_id == 4
    assert schema.find_field("l.element.y").field_id == 7
    assert schema.identifier_field_ids == [1]
    assert notes == ["identifier fields `k` are not moved: the target will not have them"]


def test_target_spec_for_refuses_a_partition_column_not_moved() -> None:
    source = Schema(NestedField(1, "id", LongType()), NestedField(2, "day", StringType()))
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="day"))
    schema = target_schema_for(source, columns=["id"])
    with pytest.raises(ReconciliationError, match=r"partitioned by identity\(`day`\).*add `day` to columns="):
        target_spec_for(spec, source, schema)


def test_target_sort_order_for_drops_everything_to_unsorted() -> None:
    source = Schema(NestedField(1, "id", LongType()), NestedField(2, "n", StringType()))
    order = SortOrder(SortField(source_id=2, transform=IdentityTransform()))
    schema = target_schema_for(source, columns=["id"])
    assert target_sort_order_for(order, source, schema).is_unsorted


# Nested fields: bounds inside lists, required children, map values, list layouts, uuid and fixed.


def test_narrowing_inside_a_list_needs_bounds_iceberg_does_not_keep(catalog: Any) -> None:
    catalog.create_namespace("ns")
    schema = Schema(NestedField(1, "l", ListType(2, LongType(), element_required=False)))
    source = catalog.create_table("ns.src", schema=schema)
    append(source, [{"l": [1, 2**33]}])
    target = Schema(NestedField(1, "l", ListType(2, IntegerType(), element_required=False)))
    mapping = ColumnMapping.build(source.schema(), target)
    with pytest.raises(ReconciliationError, match=r"no bounds for `l.element` \(Iceberg keeps none for values inside"):
        mapping.check_files(data_files(source))


def test_required_struct_child_filled_under_null_structs_is_written_and_read_back(catalog: Any) -> None:
    catalog.create_namespace("ns")
    source = Schema(
        NestedField(1, "id", LongType()), NestedField(2, "s", StructType(NestedField(3, "x", StringType())))
    )
    target_schema = Schema(
        NestedField(1, "s", StructType(NestedField(2, "x", StringType(), required=True))),
        NestedField(3, "id", LongType()),
    )
    target = catalog.create_table("ns.dst", schema=target_schema)
    mapping = ColumnMapping.build(source, target.schema())
    batch = pa.RecordBatch.from_pydict(
        {"id": pa.array([1, 2], pa.int64()), "s": pa.array([{"x": "a"}, None], pa.struct([("x", pa.string())]))}
    )
    converted = mapping.convert(batch)
    register(target, converted)
    assert sorted_rows(target.scan().to_arrow().to_pylist()) == [{"s": {"x": "a"}, "id": 1}, {"s": None, "id": 2}]


def test_map_values_required_in_the_target_are_checked_per_batch() -> None:
    source = Schema(NestedField(1, "m", MapType(2, StringType(), 3, IntegerType(), value_required=False)))
    target = Schema(NestedField(1, "m", MapType(2, StringType(), 3, IntegerType(), value_required=True)))
    mapping = ColumnMapping.build(source, target)
    arrow = pa.map_(pa.string(), pa.int32())
    converted = mapping.convert(pa.RecordBatch.from_pydict({"m": pa.array([[("a", 1)], None], arrow)}))
    assert converted.column(0).to_pylist() == [[("a", 1)], None]
    assert converted.schema.field("m").type.item_field.nullable is False
    with pytest.raises(ReconciliationError, match=r"Column `m.value` holds 1 null"):
        mapping.convert(pa.RecordBatch.from_pydict({"m": pa.array([[("a", None)]], arrow)}))


def test_list_layouts_are_kept_and_relabelled() -> None:
    schema = Schema(NestedField(1, "l", ListType(2, StringType(), element_required=False)))
    target = Schema(NestedField(5, "l", ListType(6, StringType(), element_required=False)))
    mapping = ColumnMapping.build(schema, target)
    for arrow in [pa.list_(pa.string()), pa.large_list(pa.large_string()), pa.list_(pa.string(), 2)]:
        batch = pa.RecordBatch.from_pydict({"l": pa.array([["a", None], None], arrow)})
        converted = mapping.convert(batch)
        out = converted.schema.field("l").type
        assert out.value_field.name == "element"
        assert all_ids(converted.schema) == {"l": 5, "l.element": 6}
        assert converted.column(0).to_pylist() == [["a", None], None]
        if not pa.types.is_fixed_size_list(arrow):
            assert out.value_type == arrow.value_type and type(out) is type(arrow)  # no copy, no cast


def test_uuid_and_fixed_columns() -> None:
    schema = Schema(NestedField(1, "u", UUIDType()), NestedField(2, "f", FixedType(3)))
    mapping = ColumnMapping.build(schema, schema)
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    batch = pa.RecordBatch.from_pydict(
        {"u": pa.array([value.bytes, None], pa.binary(16)), "f": pa.array([b"abc", None], pa.binary(3))}
    )
    converted = mapping.convert(batch)
    assert converted.schema.field("u").type == pa.uuid()
    assert converted.column("u").to_pylist() == [value, None]
    assert converted.column("f").to_pylist() == [b"abc", None]


def test_required_child_of_an_optional_struct_is_refused_when_stats_count_nulls(catalog: Any) -> None:
    catalog.create_namespace("ns")
    inner = StructType(NestedField(2, "x", IntegerType()))
    source = catalog.create_table("ns.src", schema=Schema(NestedField(1, "s", inner)))
    append(source, [{"s": None}, {"s": {"x": 1}}])
    target = Schema(NestedField(1, "s", StructType(NestedField(2, "x", IntegerType(), required=True))))
    mapping = ColumnMapping.build(source.schema(), target)
    with pytest.raises(ReconciliationError, match=r"`s.x` has 1 null\(s\) \(counting the rows where an enclosing"):
        mapping.check_files(data_files(source))


# Cost: the per-batch path relabels, it does not copy.

EIGHT = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "qty", IntegerType()),
    NestedField(4, "price", DoubleType()),
    NestedField(5, "amount", DecimalType(12, 2)),
    NestedField(6, "ts", TimestamptzType()),
    NestedField(7, "tags", ListType(8, StringType(), element_required=False)),
    NestedField(9, "blob", BinaryType()),
)
# Same names, ids in the opposite order, two promotions.
EIGHT_TARGET = Schema(
    *[
        NestedField(20 - f.field_id, f.name, f.field_type, required=f.required)
        for f in reversed(EIGHT.fields)
        if f.name != "tags"
    ],
    NestedField(30, "tags", ListType(31, StringType(), element_required=False)),
)
EIGHT_PROMOTED = Schema(
    *[
        NestedField(f.field_id, f.name, {"qty": LongType(), "amount": DecimalType(14, 2)}.get(f.name, f.field_type))
        for f in EIGHT_TARGET.fields
    ]
)


def eight_columns(rows: int) -> pa.RecordBatch:
    ids = pa.array(range(rows), pa.int64())
    text = ids.cast(pa.string())
    offsets = pa.array(range(0, 2 * rows + 1, 2), pa.int32())
    return pa.RecordBatch.from_arrays(
        [
            ids,
            text,
            ids.cast(pa.int32()),
            ids.cast(pa.float64()),
            ids.cast(pa.int32()).cast(pa.decimal128(10, 0)).cast(pa.decimal128(12, 2)),
            ids.cast(pa.timestamp("us", tz="UTC")),
            pa.ListArray.from_arrays(offsets, pa.concat_arrays([text, text])),
            text.cast(pa.large_binary()),
        ],
        names=[f.name for f in EIGHT.fields],
    )


def data_addresses(array: pa.Array) -> list[int]:
    return [b.address for b in array.buffers() if b is not None]


def test_columns_whose_types_hold_are_not_copied() -> None:
    batch = eight_columns(1000)
    converted = ColumnMapping.build(EIGHT, EIGHT_TARGET).convert(batch)
    for name in batch.schema.names:
        assert data_addresses(converted.column(name)) == data_addresses(batch.column(name)), name
    assert all_ids(converted.schema)["tags.element"] == 31


@pytest.mark.slow
def test_convert_costs_about_what_a_rename_costs() -> None:
    """The measurement of the per-batch cost on 1M rows and 8 columns (run with -s to see the numbers)."""
    import statistics
    import time

    batch = eight_columns(1_048_576)
    names = batch.schema.names
    same = ColumnMapping.build(EIGHT, EIGHT_TARGET)
    promoted = ColumnMapping.build(EIGHT, EIGHT_PROMOTED)

    def median_us(call: Any, rounds: int = 30) -> float:
        call()
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e6

    rename = median_us(lambda: batch.rename_columns(names))
    convert = median_us(lambda: same.convert(batch))
    casts = median_us(lambda: [batch.column("qty").cast(pa.int64()), batch.column("amount").cast(pa.decimal128(14, 2))])
    convert_promoted = median_us(lambda: promoted.convert(batch))
    print(
        f"\n{batch.num_rows} rows, {batch.num_columns} columns, {batch.nbytes / 2**20:.0f} MiB: "
        f"rename_columns {rename:.1f} us, convert {convert:.1f} us ({convert / rename:.1f}x); "
        f"with 2 promotions {convert_promoted:.0f} us (the 2 casts alone {casts:.0f} us)"
    )
    # Copying even one of the columns would take milliseconds.
    assert convert < 1000
