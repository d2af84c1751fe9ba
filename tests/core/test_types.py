"""Arrow <-> Iceberg type translation, including nested types and the types Iceberg cannot hold."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
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
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from iceberg_ops_provider.core.types import (
    FIELD_ID_KEY,
    arrow_to_iceberg_schema,
    arrow_to_iceberg_type,
    iceberg_to_arrow_schema,
    iceberg_to_arrow_type,
    strip_field_ids,
)
from iceberg_ops_provider.errors import UnsupportedTypeError

PRIMITIVE_PAIRS = [
    (pa.bool_(), BooleanType()),
    (pa.int32(), IntegerType()),
    (pa.int64(), LongType()),
    (pa.float32(), FloatType()),
    (pa.float64(), DoubleType()),
    (pa.decimal128(12, 2), DecimalType(12, 2)),
    (pa.date32(), DateType()),
    (pa.time64("us"), TimeType()),
    (pa.timestamp("us"), TimestampType()),
    (pa.timestamp("us", tz="UTC"), TimestamptzType()),
    (pa.string(), StringType()),
    (pa.binary(), BinaryType()),
    (pa.binary(16), FixedType(16)),
    (pa.uuid(), UUIDType()),
]


@pytest.mark.parametrize(("arrow_type", "iceberg_type"), PRIMITIVE_PAIRS, ids=[str(p[1]) for p in PRIMITIVE_PAIRS])
def test_primitives_translate_both_ways(arrow_type, iceberg_type):
    assert arrow_to_iceberg_type(arrow_type) == iceberg_type
    assert iceberg_to_arrow_type(iceberg_type) == arrow_type


@pytest.mark.parametrize(
    ("arrow_type", "iceberg_type"),
    [
        (pa.int8(), IntegerType()),
        (pa.int16(), IntegerType()),
        (pa.large_string(), StringType()),
        (pa.string_view(), StringType()),
        (pa.large_binary(), BinaryType()),
        (pa.timestamp("ms"), TimestampType()),
        (pa.timestamp("s", tz="Etc/UTC"), TimestamptzType()),
        (pa.timestamp("us", tz="+00:00"), TimestamptzType()),
        (pa.dictionary(pa.int32(), pa.string()), StringType()),
        (pa.decimal128(38, 0), DecimalType(38, 0)),
    ],
)
def test_arrow_variants_map_to_the_iceberg_type_that_holds_them(arrow_type, iceberg_type):
    assert arrow_to_iceberg_type(arrow_type) == iceberg_type


def test_nested_types_round_trip_with_nullability():
    arrow_schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
            pa.field("attrs", pa.map_(pa.string(), pa.field("value", pa.int32(), nullable=False))),
            pa.field(
                "address",
                pa.struct([pa.field("city", pa.string(), nullable=False), pa.field("zip", pa.string())]),
                metadata={b"doc": b"where it ships"},
            ),
        ]
    )
    iceberg = arrow_to_iceberg_schema(arrow_schema)
    id_field = iceberg.find_field("id")
    assert id_field.required and id_field.field_type == LongType()
    tags = iceberg.find_field("tags").field_type
    assert isinstance(tags, ListType) and tags.element_required and tags.element_type == StringType()
    attrs = iceberg.find_field("attrs").field_type
    assert isinstance(attrs, MapType) and attrs.value_required and attrs.value_type == IntegerType()
    address = iceberg.find_field("address")
    assert address.doc == "where it ships"
    assert isinstance(address.field_type, StructType)
    assert iceberg.find_field("address.city").required
    assert not iceberg.find_field("address.zip").required
    # Field ids are numbered as PyIceberg numbers a new table: top-level first.
    assert [f.field_id for f in iceberg.fields] == [1, 2, 3, 4]
    back = iceberg_to_arrow_schema(iceberg)
    assert arrow_to_iceberg_schema(back) == iceberg
    assert back.field("address").metadata[b"doc"] == b"where it ships"


@pytest.mark.parametrize(
    ("arrow_type", "hint"),
    [
        (pa.uint8(), "int16 or int32"),
        (pa.uint16(), "int32"),
        (pa.uint32(), "int64"),
        (pa.uint64(), "decimal128(20, 0)"),
        (pa.float16(), "float32"),
        (pa.decimal256(40, 2), "at most 38 digits"),
        (pa.date64(), "date32"),
        (pa.time32("ms"), "time64('us')"),
        (pa.time64("ns"), "time64('us')"),
        (pa.timestamp("ns"), "timestamp('us')"),
        (pa.timestamp("us", tz="Europe/Paris"), "'Europe/Paris'"),
        (pa.duration("us"), "int64 microseconds"),
        (pa.month_day_nano_interval(), "months, days and nanoseconds"),
        (pa.null(), "cast it to the type"),
        (pa.list_view(pa.int32()), "plain list"),
        (pa.dense_union([pa.field("a", pa.int32())]), "no union"),
    ],
)
def test_types_iceberg_cannot_hold_name_the_column_and_the_fix(arrow_type, hint):
    schema = pa.schema([pa.field("ok", pa.int64()), pa.field("bad_col", arrow_type)])
    with pytest.raises(UnsupportedTypeError) as info:
        arrow_to_iceberg_schema(schema)
    assert "'bad_col'" in str(info.value)
    assert hint in str(info.value)
    assert info.value.column == "bad_col"
    assert isinstance(info.value, TypeError)


def test_unsupported_type_deep_inside_a_struct_names_the_nested_path():
    schema = pa.schema([pa.field("outer", pa.struct([pa.field("items", pa.list_(pa.uint32()))]))])
    with pytest.raises(UnsupportedTypeError, match=r"'outer\.items\.(item|element)'"):
        arrow_to_iceberg_schema(schema)


def test_keep_field_ids_uses_parquet_field_id_metadata():
    schema = pa.schema(
        [
            pa.field("a", pa.int64(), metadata={FIELD_ID_KEY: b"7"}),
            pa.field(
                "s",
                pa.struct([pa.field("x", pa.int32(), metadata={FIELD_ID_KEY: b"9"})]),
                metadata={FIELD_ID_KEY: b"8"},
            ),
        ]
    )
    iceberg = arrow_to_iceberg_schema(schema, keep_field_ids=True)
    assert iceberg.find_field("a").field_id == 7
    assert iceberg.find_field("s.x").field_id == 9
    with pytest.raises(UnsupportedTypeError, match="needs PARQUET:field_id"):
        arrow_to_iceberg_schema(pa.schema([pa.field("a", pa.int64())]), keep_field_ids=True)


def test_include_and_strip_field_ids():
    iceberg = Schema(
        NestedField(3, "a", LongType(), required=True),
        NestedField(4, "l", ListType(5, StringType(), element_required=False), required=False),
    )
    with_ids = iceberg_to_arrow_schema(iceberg, include_field_ids=True)
    assert with_ids.field("a").metadata[FIELD_ID_KEY] == b"3"
    assert with_ids.field("l").type.value_field.metadata[FIELD_ID_KEY] == b"5"
    assert iceberg_to_arrow_schema(iceberg).field("a").metadata is None
    stripped = strip_field_ids(with_ids)
    assert stripped.field("a").metadata is None
    assert stripped.field("l").type.value_field.metadata is None
    assert not stripped.field("a").nullable


def test_arrow_from_a_real_table_round_trips(catalog, namespace):
    arrow_schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("m", pa.map_(pa.string(), pa.float64())),
            pa.field("s", pa.struct([pa.field("d", pa.date32())])),
        ]
    )
    table = catalog.create_table(f"{namespace}.t", arrow_schema)
    assert arrow_to_iceberg_schema(arrow_schema) == table.schema()


# Hypothesis: any Arrow schema built from supported types survives Arrow -> Iceberg -> Arrow -> Iceberg.
_primitive = st.sampled_from([pair[0] for pair in PRIMITIVE_PAIRS])
_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)


def _fields(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[list[pa.Field]]:
    return st.lists(
        st.tuples(_names, children, st.booleans()), min_size=1, max_size=4, unique_by=lambda item: item[0]
    ).map(lambda items: [pa.field(name, t, nullable=nullable) for name, t, nullable in items])


_types = st.recursive(
    _primitive,
    lambda children: st.one_of(
        st.tuples(children, st.booleans()).map(lambda p: pa.list_(pa.field("element", p[0], nullable=p[1]))),
        st.tuples(children, st.booleans()).map(lambda p: pa.map_(pa.string(), pa.field("value", p[0], nullable=p[1]))),
        _fields(children).map(pa.struct),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(_fields(_types))
def test_round_trip_property(fields):
    arrow_schema = pa.schema(fields)
    iceberg = arrow_to_iceberg_schema(arrow_schema)
    again = arrow_to_iceberg_schema(iceberg_to_arrow_schema(iceberg))
    assert again == iceberg
    assert iceberg_to_arrow_schema(again) == iceberg_to_arrow_schema(iceberg)
