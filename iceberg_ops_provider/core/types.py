"""Translate types and schemas between Apache Arrow and Apache Iceberg, both directions.

Arrow types an Iceberg table cannot hold raise :class:`~iceberg_ops_provider.errors.UnsupportedTypeError`
up front, naming the column and the cast; :func:`iceberg_to_arrow_schema` writes no field ids unless asked.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from iceberg_ops_provider.errors import UnsupportedTypeError

__all__ = [
    "FIELD_ID_KEY",
    "UTC_ZONES",
    "arrow_to_iceberg_schema",
    "as_iceberg_schema",
    "has_field_ids",
    "arrow_to_iceberg_type",
    "iceberg_to_arrow_schema",
    "iceberg_to_arrow_type",
    "strip_field_ids",
]

FIELD_ID_KEY = b"PARQUET:field_id"
"""The Arrow field-metadata key that carries an Iceberg field id (as Parquet and PyIceberg write it)."""

_DOC_KEY = b"doc"

UTC_ZONES = frozenset({"UTC", "utc", "Etc/UTC", "Etc/Universal", "Universal", "Zulu", "Z", "+00:00", "-00:00", "GMT"})
"""Arrow time-zone strings that mean UTC, the only zone an Iceberg ``timestamptz`` stores."""

_PLAIN_LIST = "Cast it to a plain list type (pa.list_(value_type))."
# What to cast the other Arrow types Iceberg cannot store to, by pa.types.is_<kind> (decimals here: wider ones).
_HINTS = {
    "uint8": "Cast it to int16 or int32 (pc.cast(column, pa.int32())).",
    "uint16": "Cast it to int32 (pc.cast(column, pa.int32())).",
    "uint32": "Cast it to int64 (pc.cast(column, pa.int64())); values of 2**31 and above do not fit an int.",
    "uint64": "Cast it to int64 if every value is below 2**63, otherwise to decimal128(20, 0).",
    "float16": "Iceberg has no half floats; cast it to float32.",
    "decimal": "Iceberg decimals have at most 38 digits; cast it to decimal128(38, scale) if the values fit.",
    "date64": "Cast it to date32, which Iceberg stores as date.",
    "time": "Iceberg stores time in microseconds; cast it to time64('us').",
    "duration": "Store durations as int64 microseconds (pc.cast(column, pa.int64()) after casting to duration('us')).",
    "interval": "Store intervals as a struct of months, days and nanoseconds, or as int64 microseconds.",
    "null": "A column of only nulls has no type; cast it to the type it will hold (for example pa.string()).",
    "list_view": _PLAIN_LIST,
    "large_list_view": _PLAIN_LIST,
    "union": "Iceberg has no union type; split the variants into separate nullable columns.",
    "run_end_encoded": "Decode it to its value type first (pc.run_end_decode).",
}


def arrow_to_iceberg_type(arrow_type: pa.DataType, column: str = "") -> IcebergType:
    """The Iceberg type that stores ``arrow_type`` (nested fields numbered from 1); ``column`` names it in errors.

    Raises:
        UnsupportedTypeError: Iceberg cannot store ``arrow_type``; the message says what to cast to.
    """
    return _to_iceberg(arrow_type, column, itertools.count(1), keep_ids=False)


def _to_iceberg(t: pa.DataType, column: str, ids: Iterator[int], keep_ids: bool) -> IcebergType:
    if pa.types.is_dictionary(t):
        return _to_iceberg(t.value_type, column, ids, keep_ids)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        (element,) = _fields_to_iceberg([t.value_field], column, ids, keep_ids)
        return ListType(element.field_id, element.field_type, element_required=element.required)
    if pa.types.is_map(t):
        key, value = _fields_to_iceberg([t.key_field, t.item_field], column, ids, keep_ids)
        return MapType(key.field_id, key.field_type, value.field_id, value.field_type, value_required=value.required)
    if pa.types.is_struct(t):
        return StructType(*_fields_to_iceberg([t.field(i) for i in range(t.num_fields)], column, ids, keep_ids))
    if t in _FROM_ARROW:
        return _FROM_ARROW[t]
    if pa.types.is_decimal(t) and t.bit_width <= 128:
        return DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return _timestamp_type(t, column)
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    hint = next((hint for kind, hint in _HINTS.items() if getattr(pa.types, f"is_{kind}")(t)), None)
    hint = hint or "Cast it to one of the types listed in the iceberg-ops documentation (docs/core.md)."
    unsigned = "Iceberg has no unsigned integers. " if pa.types.is_unsigned_integer(t) else ""
    raise UnsupportedTypeError(column, str(t), unsigned + hint)


def _timestamp_type(t: pa.TimestampType, column: str) -> PrimitiveType:
    if t.unit == "ns":
        raise UnsupportedTypeError(
            column,
            str(t),
            "Format-version 2 tables store microseconds; cast it to timestamp('us'"
            + (", tz='UTC')" if t.tz else ")")
            + " or set PyIceberg's downcast-ns-timestamp-to-us-on-write=true.",
        )
    if t.tz is None:
        return TimestampType()
    if t.tz in UTC_ZONES:
        return TimestamptzType()
    raise UnsupportedTypeError(
        column,
        str(t),
        f"Iceberg's timestamptz stores UTC only; convert the column from time zone {t.tz!r} to 'UTC' "
        "(pc.cast(column, pa.timestamp('us', tz='UTC'))): the instants stay the same.",
    )


def _fields_to_iceberg(fields: list[pa.Field], prefix: str, ids: Iterator[int], keep_ids: bool) -> list[NestedField]:
    result = []
    for field in fields:
        path = f"{prefix}.{field.name}" if prefix else field.name
        metadata = field.metadata or {}
        field_id = (int(metadata[FIELD_ID_KEY]) if FIELD_ID_KEY in metadata else None) if keep_ids else next(ids)
        if field_id is None:
            hint = "keep_field_ids=True needs PARQUET:field_id metadata on every field, nested ones included."
            raise UnsupportedTypeError(path, str(field.type), hint)
        doc = metadata[_DOC_KEY].decode() if _DOC_KEY in metadata else None
        field_type = _to_iceberg(field.type, path, ids, keep_ids)
        result.append(NestedField(field_id, field.name, field_type, required=not field.nullable, doc=doc))
    return result


def arrow_to_iceberg_schema(schema: pa.Schema, *, keep_field_ids: bool = False) -> Schema:
    """Translate an Arrow schema to an Iceberg schema (non-nullable fields required, ``doc`` metadata as docs).

    ``keep_field_ids`` uses every field's ``PARQUET:field_id`` (as in data read from a table) instead of
    numbering fields afresh as PyIceberg's ``create_table`` does.

    Raises:
        UnsupportedTypeError: A column's type cannot be stored in Iceberg; names the column.
    """
    fields = _fields_to_iceberg(list(schema), "", itertools.count(1), keep_field_ids)
    # Number fresh ids the way PyIceberg does when it creates a table (top-level fields first).
    return Schema(*fields) if keep_field_ids else assign_fresh_schema_ids(Schema(*fields))


def has_field_ids(schema: Schema | pa.Schema) -> bool:
    """Whether ``schema`` numbers its fields: Iceberg schemas do, Arrow ones when each field has a field id."""
    return isinstance(schema, Schema) or all(f.metadata and FIELD_ID_KEY in f.metadata for f in schema)


def as_iceberg_schema(schema: Schema | pa.Schema) -> Schema:
    """``schema`` as an Iceberg schema; Arrow schemas keep their field ids when they all have one."""
    return (
        schema if isinstance(schema, Schema) else arrow_to_iceberg_schema(schema, keep_field_ids=has_field_ids(schema))
    )


def iceberg_to_arrow_type(iceberg_type: IcebergType, *, include_field_ids: bool = False) -> pa.DataType:
    """The Arrow type PyIceberg reads ``iceberg_type`` as (``string``, not ``large_string``; ``timestamptz`` in UTC).

    ``include_field_ids`` puts ``PARQUET:field_id`` metadata on nested fields.
    """
    t = iceberg_type
    if (simple := _ICEBERG_TO_ARROW.get(str(t))) is not None:
        return simple
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(len(t))
    if isinstance(t, StructType):
        return pa.struct([_iceberg_field_to_arrow(f, include_field_ids) for f in t.fields])
    if isinstance(t, ListType):
        return pa.list_(_iceberg_field_to_arrow(t.element_field, include_field_ids))
    if isinstance(t, MapType):
        return pa.map_(*(_iceberg_field_to_arrow(f, include_field_ids) for f in (t.key_field, t.value_field)))
    raise UnsupportedTypeError("", str(t), "iceberg-ops has no Arrow translation for this Iceberg type yet.")


# PyIceberg's primitive types by name, and the Arrow type PyIceberg reads each as.
_ICEBERG_TO_ARROW: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz_ns": pa.timestamp("ns", tz="UTC"),
    "string": pa.string(),
    "binary": pa.binary(),
    "uuid": pa.uuid(),
}

# Arrow types with one Iceberg type (timestamps in other units or zones, decimals and fixed are judged apart).
_FROM_ARROW: dict[pa.DataType, PrimitiveType] = {
    **{arrow: PrimitiveType.model_validate(name) for name, arrow in _ICEBERG_TO_ARROW.items() if "_ns" not in name},
    pa.int8(): IntegerType(),
    pa.int16(): IntegerType(),
    pa.large_string(): StringType(),
    pa.string_view(): StringType(),
    pa.large_binary(): BinaryType(),
    pa.binary_view(): BinaryType(),
}


def _iceberg_field_to_arrow(field: NestedField, include_field_ids: bool) -> pa.Field:
    metadata: dict[bytes, bytes] = {}
    if include_field_ids:
        metadata[FIELD_ID_KEY] = str(field.field_id).encode()
    if field.doc:
        metadata[_DOC_KEY] = field.doc.encode()
    arrow_type = iceberg_to_arrow_type(field.field_type, include_field_ids=include_field_ids)
    return pa.field(field.name, arrow_type, nullable=field.optional, metadata=metadata or None)


def iceberg_to_arrow_schema(schema: Schema, *, include_field_ids: bool = False) -> pa.Schema:
    """Translate an Iceberg schema to an Arrow schema: required fields non-nullable, docs as ``doc`` metadata.

    ``include_field_ids`` puts ``PARQUET:field_id`` metadata on every field: leave it off for data
    written to another table, whose writers would match it by id, not by name.
    """
    return pa.schema([_iceberg_field_to_arrow(f, include_field_ids) for f in schema.fields])


def strip_field_ids(schema: pa.Schema) -> pa.Schema:
    """Remove ``PARQUET:field_id`` metadata from every field, nested ones included.

    PyIceberg matches data read from one table to another table's columns by id, silently putting
    values in the wrong columns: ``batch.cast(strip_field_ids(batch.schema))`` before writing it elsewhere.
    """
    return pa.schema([_strip_field(f) for f in schema])


def _strip_field(field: pa.Field) -> pa.Field:
    metadata = {k: v for k, v in (field.metadata or {}).items() if k != FIELD_ID_KEY}
    return pa.field(field.name, _strip_type(field.type), nullable=field.nullable, metadata=metadata or None)


def _strip_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_strip_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_large_list(t):
        return pa.large_list(_strip_field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_strip_field(t.value_field), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(_strip_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(_strip_field(t.key_field), _strip_field(t.item_field))
    return t
