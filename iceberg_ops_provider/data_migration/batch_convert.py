"""Convert Arrow batches read from a source table into batches for a target table's data files.

A :class:`BatchPlan` is compiled once per input batch schema, so a batch costs only the casts and
rebuilds it needs: data already of the target's type is at most relabelled with a zero-copy ``view``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import FloatType, IcebergType, ListType, MapType, StructType

from iceberg_ops_provider.core.types import FIELD_ID_KEY, UTC_ZONES
from iceberg_ops_provider.errors import ReconciliationError
from iceberg_ops_provider.messages import Arg, message

__all__ = ["BatchPlan", "Converter", "FieldNode"]

Converter = Callable[[pa.Array], pa.Array]
"""Turns one Arrow array into another (a column, a struct field, or a list's, map's values)."""


@dataclass(frozen=True)
class FieldNode:
    """How one target field gets its values: from which source field, as which type, with which checks.

    ``name`` is the field's name in converted batches (the target's file name), ``column`` and
    ``source_column`` the dotted names for messages, ``arrow_type`` the target type in Arrow with field
    ids (for null filling and casts). ``source_names``: the names a batch may use for the source field
    (plain, then sanitized); ``()`` fills nulls. ``check_nulls``: every batch is checked for nulls
    (optional source into required target). ``children``: a struct's fields, a list's element, or a
    map's key and value.
    """

    name: str
    field_id: int
    required: bool
    column: str
    target_type: IcebergType
    arrow_type: pa.DataType
    source_names: tuple[str, ...] = ()
    source_column: str = ""
    check_nulls: bool = False
    children: tuple[FieldNode, ...] = ()

    @property
    def metadata(self) -> dict[bytes, bytes]:
        """The Arrow field metadata that carries the target's field id into Parquet."""
        return {FIELD_ID_KEY: str(self.field_id).encode()}


@dataclass(frozen=True)
class BatchPlan:
    """The conversion of batches of one input schema, compiled once so a batch costs only the casts it needs.

    ``steps`` holds per output column: the input column (``None``: nulls), its node, its conversion
    (``None``: as is).
    """

    schema: pa.Schema
    steps: tuple[tuple[int | None, FieldNode, Converter | None], ...]

    @classmethod
    def compile(cls, nodes: Sequence[FieldNode], schema: pa.Schema) -> BatchPlan:
        """Plan the conversion of batches of ``schema`` into the target's top-level fields ``nodes`` (in target order).

        Raises:
            ReconciliationError: ``schema`` lacks a source column, or a column's Arrow type cannot hold its
                source's Iceberg type.
        """
        index = {name: i for i, name in enumerate(schema.names)}
        steps: list[tuple[int | None, FieldNode, Converter | None]] = []
        fields = []
        for node in nodes:
            if not node.source_names:
                steps.append((None, node, None))
                fields.append(_out_field(node, node.arrow_type))
                continue
            i = _find(index, node, "The batch")
            out, convert = _compile(node, schema.field(i).type)
            steps.append((i, node, convert))
            fields.append(_out_field(node, out))
        return cls(pa.schema(fields), tuple(steps))

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Convert ``batch`` (of the schema the plan was compiled for) into a batch of :attr:`schema`.

        Raises:
            ReconciliationError: A value does not fit a narrowed column, or a required column holds a null.
        """
        arrays = [
            _nulls(node.arrow_type, batch.num_rows) if i is None else _converted(batch.column(i), node, convert)
            for i, node, convert in self.steps
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _converted(values: pa.Array, node: FieldNode, convert: Converter | None, valid: pa.Array | None = None) -> pa.Array:
    """``values`` converted, and checked for nulls (where the parent, ``valid`` when given, is not null) if asked."""
    if convert is not None:
        values = convert(values)
    if node.check_nulls:
        _check_no_nulls(values, node, valid)
    return values


def _holds(arrow_type: pa.DataType, target: pa.DataType) -> bool:
    """Whether Arrow data of ``arrow_type`` can be written as is where the target's Arrow type is ``target``."""
    t = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    if t == target or t in _SAME_ICEBERG_TYPE.get(target, ()):
        return True
    # Any spelling of UTC is a timestamptz.
    return (
        pa.types.is_timestamp(t)
        and pa.types.is_timestamp(target)
        and t.unit == target.unit
        and (t.tz in UTC_ZONES if target.tz else t.tz is None)
    )


_SAME_ICEBERG_TYPE = {
    pa.large_string(): (pa.string(), pa.string_view()),
    pa.large_binary(): (pa.binary(), pa.binary_view()),
}


def _out_field(node: FieldNode, arrow_type: pa.DataType) -> pa.Field:
    return pa.field(node.name, arrow_type, nullable=not node.required, metadata=node.metadata)


def _find(index: Mapping[str, int], node: FieldNode, container: str) -> int:
    for name in node.source_names:
        if name in index:
            return index[name]
    raise ReconciliationError(
        f"{container} has no column `{node.source_names[0]}` (it has: {', '.join(f'`{n}`' for n in index)}): "
        "read the source's columns listed in the mapping's source_columns."
    )


def _unexpected(node: FieldNode, arrow_type: pa.DataType) -> ReconciliationError:
    return ReconciliationError(
        f"The batch's column `{node.source_column}` has Arrow type {arrow_type}, which cannot be written to the "
        f"target column `{node.column}` of type {node.target_type}: read the batch from the source table the "
        "mapping was built for."
    )


def _compile(node: FieldNode, arrow_type: pa.DataType) -> tuple[pa.DataType, Converter | None]:
    """The output type of ``node`` for input of ``arrow_type``, and the conversion (``None``: as it is)."""
    t = node.target_type
    if isinstance(t, StructType):
        if not pa.types.is_struct(arrow_type):
            raise _unexpected(node, arrow_type)
        return _compile_struct(node, arrow_type)
    if isinstance(t, ListType):
        return _compile_list(node, arrow_type)
    if isinstance(t, MapType):
        if not pa.types.is_map(arrow_type):
            raise _unexpected(node, arrow_type)
        return _compile_map(node, arrow_type)
    if pa.types.is_nested(arrow_type):
        raise _unexpected(node, arrow_type)
    if _holds(arrow_type, node.arrow_type):
        return arrow_type, None
    value_type = arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type
    narrow_float = isinstance(t, FloatType) and pa.types.is_floating(value_type) and value_type.bit_width > 32
    return node.arrow_type, partial(_cast, node=node, narrow_float=narrow_float)


def _view(arrow_type: pa.DataType, out: pa.DataType) -> Converter | None:
    """Relabel names, field ids and nullability without touching the data (``None`` when nothing differs)."""
    return None if arrow_type == out else partial(pa.Array.view, target_type=out)


def _chain(first: Converter | None, second: Converter | None) -> Converter | None:
    if first is None or second is None:
        return first or second
    return lambda array: second(first(array))


_Part = tuple[
    int | None, FieldNode, pa.DataType, Converter | None
]  # input child (None: nulls), node, output, conversion


def _compile_struct(node: FieldNode, arrow_type: pa.StructType) -> tuple[pa.DataType, Converter | None]:
    index = {arrow_type.field(i).name: i for i in range(arrow_type.num_fields)}
    parts: list[_Part] = []
    unchanged = arrow_type.num_fields == len(node.children)
    for position, child in enumerate(node.children):
        if not child.source_names:
            parts.append((None, child, child.arrow_type, None))
            unchanged = False
            continue
        i = _find(index, child, f"The batch's struct `{node.source_column}`")
        out, convert = _compile(child, arrow_type.field(i).type)
        unchanged = unchanged and i == position and convert is None and not child.check_nulls
        parts.append((i, child, out, convert))
    out_type = pa.struct([_out_field(child, out) for _, child, out, _ in parts])
    if unchanged:
        return out_type, _view(arrow_type, out_type)
    return out_type, partial(_rebuild_struct, parts=tuple(parts), out_type=out_type)


def _rebuild_struct(array: pa.StructArray, parts: tuple[_Part, ...], out_type: pa.DataType) -> pa.Array:
    valid = array.is_valid() if array.null_count else None
    children = []
    for i, child, out, convert in parts:
        if i is None:
            children.append(_nulls(out, len(array)))
            continue
        values = _converted(array.field(i), child, convert, valid)
        if child.required and values.null_count:
            # Nulls under null structs only (checked): Parquet refuses any null in a required column.
            values = pc.coalesce(values, pa.scalar(_zero(out), out))
        children.append(values)
    fields = [out_type.field(i) for i in range(out_type.num_fields)]
    return pa.StructArray.from_arrays(children, fields=fields, mask=None if valid is None else pc.invert(valid))


def _nulls(arrow_type: pa.DataType, length: int) -> pa.Array:
    """``length`` nulls; the required fields of a struct get placeholder values, as Parquet needs."""
    if not pa.types.is_struct(arrow_type) or all(f.nullable for f in arrow_type):
        return pa.nulls(length, arrow_type)
    children = [
        _nulls(f.type, length) if f.nullable else pa.repeat(pa.scalar(_zero(f.type), f.type), length)
        for f in arrow_type
    ]
    mask = pa.repeat(pa.scalar(True), length)
    return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask)


def _zero(t: pa.DataType) -> object:
    """A placeholder value of type ``t`` (for required fields inside null structs)."""
    if pa.types.is_struct(t):
        return {f.name: None if f.nullable else _zero(f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        return []
    if isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.uuid":
        return uuid.UUID(int=0)
    if pa.types.is_boolean(t):
        return False
    if pa.types.is_floating(t):
        return 0.0
    if pa.types.is_decimal(t):
        return Decimal(0)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return ""
    if pa.types.is_fixed_size_binary(t):
        return bytes(t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return b""
    return 0  # integers, dates, times, timestamps


def _compile_list(node: FieldNode, arrow_type: pa.DataType) -> tuple[pa.DataType, Converter | None]:
    first: Converter | None = None
    large_view = pa.types.is_large_list_view(arrow_type)
    if large_view or pa.types.is_fixed_size_list(arrow_type) or pa.types.is_list_view(arrow_type):
        arrow_type = (pa.large_list if large_view else pa.list_)(arrow_type.value_field)
        first = partial(pa.Array.cast, target_type=arrow_type)
    elif not (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
        raise _unexpected(node, arrow_type)
    (element,) = node.children
    element_type, convert = _compile(element, arrow_type.value_type)
    large = pa.types.is_large_list(arrow_type)
    out_type = (pa.large_list if large else pa.list_)(_out_field(element, element_type))
    if convert is None and not element.check_nulls:
        return out_type, _chain(first, _view(arrow_type, out_type))
    rebuild = partial(_rebuild_list, convert=convert, element=element, out_type=out_type, large=large)
    return out_type, _chain(first, rebuild)


def _window(array: pa.Array) -> tuple[pa.Array, int, int]:
    """The offsets of a list or map array rebased to 0, and the range of its values they cover."""
    offsets = array.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    if start or offsets.offset:
        # A sliced array: from_arrays cannot take both a null mask and offsets that do not start at 0.
        offsets = pc.subtract(offsets, pa.scalar(start, offsets.type))
    return offsets, start, end


def _rebuild_list(
    array: pa.Array, convert: Converter | None, element: FieldNode, out_type: pa.DataType, large: bool
) -> pa.Array:
    if len(array) == 0:
        return pa.array([], type=out_type)
    offsets, start, end = _window(array)
    values = _converted(array.values.slice(start, end - start), element, convert)
    factory = pa.LargeListArray if large else pa.ListArray
    return factory.from_arrays(offsets, values, type=out_type, mask=array.is_null() if array.null_count else None)


def _compile_map(node: FieldNode, arrow_type: pa.MapType) -> tuple[pa.DataType, Converter | None]:
    key, value = node.children
    key_type, convert_key = _compile(key, arrow_type.key_type)
    value_type, convert_value = _compile(value, arrow_type.item_type)
    out_type = pa.map_(_out_field(key, key_type), _out_field(value, value_type), keys_sorted=arrow_type.keys_sorted)
    if convert_key is None and convert_value is None and not value.check_nulls:
        return out_type, _view(arrow_type, out_type)
    return out_type, partial(
        _rebuild_map, convert_key=convert_key, convert_value=convert_value, value=value, out_type=out_type
    )


def _rebuild_map(
    array: pa.MapArray,
    convert_key: Converter | None,
    convert_value: Converter | None,
    value: FieldNode,
    out_type: pa.DataType,
) -> pa.Array:
    if len(array) == 0:
        return pa.array([], type=out_type)
    offsets, start, end = _window(array)
    keys, items = array.keys.slice(start, end - start), array.items.slice(start, end - start)
    if convert_key is not None:
        keys = convert_key(keys)
    items = _converted(items, value, convert_value)
    return pa.MapArray.from_arrays(
        offsets, keys, items, type=out_type, mask=array.is_null() if array.null_count else None
    )


def _cast(array: pa.Array, node: FieldNode, narrow_float: bool) -> pa.Array:
    try:
        out = pc.cast(array, node.arrow_type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ReconciliationError(
            message(
                f"A value of column `{node.source_column}` does not fit the target column `{node.column}` of type "
                f"{node.target_type} ({exc}). Fix: widen the target column, or leave the rows out with {{where}}.",
                where=Arg("where", keyword=True),
            )
        ) from exc
    if narrow_float:
        # A safe cast turns a double beyond float's range into infinity without complaint.
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        overflow = (pc.sum(pc.is_inf(out)).as_py() or 0) - (pc.sum(pc.is_inf(array)).as_py() or 0)
        if overflow:
            raise ReconciliationError(
                f"{overflow} value(s) of column `{node.source_column}` are beyond the range of the target column "
                f"`{node.column}` of type {node.target_type}. Fix: widen the target column to double."
            )
    return out


def _check_no_nulls(values: pa.Array, node: FieldNode, valid: pa.Array | None) -> None:
    """Raise when ``values`` holds a null where its parent (when ``valid`` is given) is not null."""
    if values.null_count == 0:
        return
    count = values.null_count if valid is None else pc.sum(pc.and_(values.is_null(), valid)).as_py() or 0
    if count:
        raise ReconciliationError(
            message(
                f"Column `{node.source_column}` holds {count} null(s) in this batch, but the target column "
                f"`{node.column}` is required. Fix: make `{node.column}` optional in the target's schema, or leave "
                "the null rows out with {where}.",
                where=Arg("where", keyword=True),
            )
        )
