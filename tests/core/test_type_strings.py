"""Types written as text."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestamptzType,
)

from iceberg_ops_provider.core.type_strings import format_type, parse_type, to_iceberg_type
from iceberg_ops_provider.errors import TypeParseError, UnsupportedTypeError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("long", LongType()),
        ("BIGINT", LongType()),
        ("int", IntegerType()),
        ("bool", BooleanType()),
        ("varchar", StringType()),
        ("timestamptz", TimestamptzType()),
        ("decimal(12,2)", DecimalType(12, 2)),
        (" decimal( 12 , 2 ) ", DecimalType(12, 2)),
        ("decimal(10)", DecimalType(10, 0)),
        ("fixed[16]", FixedType(16)),
        ("fixed(4)", FixedType(4)),
    ],
)
def test_primitives(text, expected):
    assert parse_type(text) == expected


def test_nested():
    parsed = parse_type("struct<id: long not null, tags: list<string>, attrs: map<string, decimal(9,3) not null>>")
    assert isinstance(parsed, StructType)
    id_field, tags, attrs = parsed.fields
    assert id_field.name == "id" and id_field.required and id_field.field_type == LongType()
    assert isinstance(tags.field_type, ListType) and not tags.field_type.element_required
    assert isinstance(attrs.field_type, MapType)
    assert attrs.field_type.value_type == DecimalType(9, 3) and attrs.field_type.value_required
    assert format_type(parsed) == "struct<id:long not null,tags:list<string>,attrs:map<string,decimal(9,3) not null>>"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "non-empty"),
        ("longg", "unknown type name 'longg'"),
        ("decimal(12,", "ends too early"),
        ("decimal(40,2)", "precision <= 38"),
        ("decimal(4,6)", "scale <= precision"),
        ("list<string", "ends too early"),
        ("list<string>>", "unexpected '>' after the type"),
        ("map<string>", "expected ','"),
        ("fixed", "fixed needs a length"),
        ("struct<a long>", "expected ':'"),
        ("long;", "unexpected character ';'"),
    ],
)
def test_bad_text_says_what_is_wrong(text, problem):
    with pytest.raises(TypeParseError, match="Cannot parse type") as info:
        parse_type(text)
    assert problem in str(info.value)
    assert "decimal(12,2)" in str(info.value) or text == ""


def test_to_iceberg_type_accepts_every_form():
    assert to_iceberg_type("long") == LongType()
    assert to_iceberg_type(pa.int64()) == LongType()
    assert to_iceberg_type(LongType()) == LongType()
    with pytest.raises(UnsupportedTypeError, match="'qty'"):
        to_iceberg_type(pa.uint32(), "qty")
    with pytest.raises(TypeParseError, match="for column 'qty'"):
        to_iceberg_type(42, "qty")  # type: ignore[arg-type]


_primitive_text = st.sampled_from(
    [
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "date",
        "time",
        "timestamp",
        "timestamptz",
        "string",
        "uuid",
        "binary",
        "decimal(12,2)",
        "fixed[3]",
    ]
)
_type_text = st.recursive(
    _primitive_text,
    lambda inner: st.one_of(
        st.tuples(inner, st.booleans()).map(lambda p: f"list<{p[0]}{' not null' if p[1] else ''}>"),
        st.tuples(inner, st.booleans()).map(lambda p: f"map<string,{p[0]}{' not null' if p[1] else ''}>"),
        st.lists(st.tuples(st.sampled_from("abcdef"), inner), min_size=1, max_size=3, unique_by=lambda x: x[0]).map(
            lambda fields: "struct<" + ",".join(f"{name}:{t}" for name, t in fields) + ">"
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(_type_text)
def test_format_is_the_inverse_of_parse(text):
    assert format_type(parse_type(text)) == text
