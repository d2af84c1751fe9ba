"""Vectorised 64-bit row hashes and comparable Python values, blind to how equal values are represented.

Every value is brought to a canonical form per kind (``int32`` or ``int64``, ``string`` or ``large_string``,
timestamp units...), then hashed; a row chains its columns' hashes in order (``docs/data_mover.md``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg_core import transform as _core_transform

__all__ = ["NAN", "NULL_HASH", "canonical_values", "column_arrays", "hash_columns", "row_hashes", "value_hashes"]

NULL_HASH = 1 << 63
"""The hash of a null value (value hashes keep 63 bits, so none equals it)."""

_U64 = pa.uint64()
_MASK63 = pa.scalar((1 << 63) - 1, _U64)
_NULL = pa.scalar(NULL_HASH, _U64)
_MIX1 = pa.scalar(0xBF58476D1CE4E5B9, _U64)
_MIX2 = pa.scalar(0x94D049BB133111EB, _U64)
_SHIFTS = tuple(pa.scalar(bits, _U64) for bits in (30, 27, 31))
_CHAIN = pa.scalar(0x9E3779B97F4A7C15, _U64)  # odd: multiplying by it is a bijection
_CHAIN_START = pa.scalar(0x243F6A8885A308D3, _U64)
_CHAIN_SHIFT = pa.scalar(29, _U64)
_NS_REMAINDER = pa.scalar(0xC2B2AE3D27D4EB4F, _U64)
_HIGH_WORD = pa.scalar(0x165667B19E3779F9, _U64)
_SHIFT32 = pa.scalar(32, _U64)
_SIGN_SHIFT = pa.scalar(62, pa.int64())
_ONE = pa.scalar(1, pa.int64())
_MURMUR_BUCKETS = 2**31  # bucket() is (murmur3 & 0x7FFFFFFF) % N: with this N, all 31 bits it keeps
_THOUSAND = pa.scalar(1000, pa.int64())
_BYTES_TYPES = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())


class _NaN:
    """The one NaN of the canonical Python values (``float('nan')`` is not equal to itself)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()
"""What :func:`canonical_values` gives for every NaN."""


def column_arrays(batch: pa.RecordBatch, columns: Sequence[str], *, side: str = "rows") -> list[pa.Array]:
    """The arrays of ``columns`` in ``batch``, in that order; ``side`` names the rows in the error.

    Raises:
        ValueError: A column is missing from the batch (or its name appears twice there).
    """
    arrays = []
    for name in columns:
        index = batch.schema.get_field_index(name)
        if index < 0:
            have = ", ".join(batch.schema.names) or "none"
            problem = "appears more than once in" if name in batch.schema.names else "is missing from"
            raise ValueError(
                f"Column {name!r} {problem} the {side} (their columns: {have}). Compare only columns that both "
                "sides have, once each: pass columns=[...] naming them."
            )
        arrays.append(batch.column(index))
    return arrays


def row_hashes(batch: pa.RecordBatch | pa.Table, columns: Sequence[str]) -> pa.UInt64Array:
    """One 64-bit hash per row over ``columns`` (in a fixed order), equal for rows with equal values however typed.

    Raises:
        ValueError: The rows lack a column.
    """
    if isinstance(batch, pa.Table):
        parts = [hash_columns(column_arrays(part, columns)) for part in batch.to_batches()]
        return pa.concat_arrays(parts) if parts else pa.array([], _U64)
    return hash_columns(column_arrays(batch, columns))


def hash_columns(arrays: Sequence[pa.Array]) -> pa.UInt64Array:
    """The row hashes of :func:`row_hashes` over arrays of equal length, in column order."""
    return _mix(_chain(arrays))


def _chain(arrays: Sequence[pa.Array]) -> pa.UInt64Array:
    """``h = g(h) + v`` over the columns' value hashes, with ``g(z) = (z ^ z >> 29) * K`` (a non-linear bijection)."""
    acc = pc.add(value_hashes(arrays[0]), _CHAIN_START)
    for array in arrays[1:]:
        acc = pc.add(pc.multiply(pc.bit_wise_xor(acc, pc.shift_right(acc, _CHAIN_SHIFT)), _CHAIN), value_hashes(array))
    return acc


def _mix(z: pa.Array) -> pa.Array:
    """SplitMix64's finalizer: a bijection on 64 bits whose every output bit depends on every input bit."""
    z = pc.bit_wise_xor(z, pc.shift_right(z, _SHIFTS[0]))
    z = pc.multiply(z, _MIX1)
    z = pc.bit_wise_xor(z, pc.shift_right(z, _SHIFTS[1]))
    z = pc.multiply(z, _MIX2)
    return pc.bit_wise_xor(z, pc.shift_right(z, _SHIFTS[2]))


def _finish(hashes: pa.Array, nulls_from: pa.Array | None = None) -> pa.UInt64Array:
    """Null slots (of ``hashes``, or where ``nulls_from`` is null) become :data:`NULL_HASH`."""
    if nulls_from is not None and nulls_from.null_count:
        return pc.if_else(nulls_from.is_valid(), hashes, _NULL)
    return pc.fill_null(hashes, _NULL) if hashes.null_count else hashes


def value_hashes(array: pa.Array | pa.ChunkedArray) -> pa.UInt64Array:
    """A 64-bit hash of each value of ``array``, normalized by type; nulls hash to :data:`NULL_HASH`.

    Raises:
        ValueError: A ``decimal256`` value does not fit in 38 digits.
    """
    array = _plain(array)
    kind = array.type
    if pa.types.is_null(kind):
        return pa.array([NULL_HASH] * len(array), _U64)
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        words = array.cast(pa.int64(), safe=not pa.types.is_uint64(kind))  # uint64 keeps its bits
        return _finish(pc.bit_wise_and(_mix(words.view(_U64)), _MASK63))
    if pa.types.is_floating(kind):
        values = pc.add(array.cast(pa.float64()), 0.0)  # -0.0 + 0.0 == +0.0 in IEEE arithmetic
        values = pc.if_else(pc.is_nan(values), math.nan, values)
        return _finish(pc.bit_wise_and(_mix(values.view(pa.int64()).view(_U64)), _MASK63))
    if pa.types.is_decimal(kind):
        return _finish(_decimal_hashes(array), array)
    if _is_temporal(kind):
        micros, remainder = _temporal_micros(array)
        words = micros.view(_U64)
        if remainder is not None:  # zero for whole microseconds, so those hash as microseconds do
            words = pc.add(words, pc.multiply(remainder.view(_U64), _NS_REMAINDER))
        return _finish(pc.bit_wise_and(_mix(words), _MASK63))
    if kind in _BYTES_TYPES:
        murmur = _core_transform.bucket(array, _MURMUR_BUCKETS).cast(_U64)
        length = pc.binary_length(array).cast(_U64)
        return _finish(pc.bit_wise_or(pc.shift_left(murmur, _SHIFT32), length))
    if pa.types.is_struct(kind):
        if kind.num_fields == 0:
            return _finish(pa.array([0] * len(array), _U64), array)
        children = [array.field(i) for i in range(kind.num_fields)]
        return _finish(pc.bit_wise_and(_mix(_chain(children)), _MASK63), array)
    return _python_hashes(array)


def _plain(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The array in one chunk without extension, dictionary or run-end encoding, view layouts as plain ones."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_run_end_encoded(array.type):
        array = pc.run_end_decode(array)
    if pa.types.is_string_view(array.type):
        array = array.cast(pa.large_string())
    elif pa.types.is_binary_view(array.type):
        array = array.cast(pa.large_binary())
    elif pa.types.is_fixed_size_binary(array.type):
        array = array.cast(pa.binary())
    return array


def _is_temporal(kind: pa.DataType) -> bool:
    return pa.types.is_date(kind) or pa.types.is_time(kind) or pa.types.is_timestamp(kind) or pa.types.is_duration(kind)


def _decimal_hashes(array: pa.Array) -> pa.Array:
    """Hash of the 128-bit unscaled integer, read as two 64-bit words (low first: Arrow is little-endian)."""
    kind = array.type
    if not pa.types.is_decimal128(kind):
        array = array.cast(pa.decimal128(38, kind.scale))
    words = pa.Array.from_buffers(_U64, 2 * len(array), [None, array.buffers()[1]], offset=2 * array.offset)
    pairs = pa.FixedSizeListArray.from_arrays(words, 2)
    low = pc.list_element(pairs, 0)
    if kind.precision > 18:
        # The high word beyond the low word's sign extension: zero for every value under 10**18, so
        # such values hash alike at any precision, and the precision-18 path need not read it.
        # Arrow refuses to shift an int64 by 63: two arithmetic shifts give 0 or -1 all the same.
        sign = pc.shift_right(pc.shift_right(low.view(pa.int64()), _SIGN_SHIFT), _ONE).view(_U64)
        excess = pc.subtract(pc.list_element(pairs, 1), sign)
        low = pc.add(low, pc.multiply(_mix(excess), _HIGH_WORD))
    return pc.bit_wise_and(_mix(low), _MASK63)


def _temporal_micros(array: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """Whole microseconds (days for dates) as int64, and the nanoseconds left over (``None`` when none can be)."""
    kind = array.type
    if pa.types.is_date64(kind):
        array, kind = array.cast(pa.date32(), safe=False), pa.date32()
    if pa.types.is_date32(kind):
        return array.cast(pa.int32()).cast(pa.int64()), None
    if pa.types.is_time32(kind):
        array, kind = array.cast(pa.time64("us")), pa.time64("us")
    if kind.unit in ("s", "ms"):
        if pa.types.is_timestamp(kind):
            kind = pa.timestamp("us", kind.tz)
        elif pa.types.is_duration(kind):
            kind = pa.duration("us")
        array = array.cast(kind)
    values = array.view(pa.int64())
    if kind.unit != "ns":
        return values, None
    micros = pc.divide(values, _THOUSAND)  # truncates; exact for whole microseconds, the only ones that matter
    return micros, pc.subtract(values, pc.multiply(micros, _THOUSAND))


def _python_hashes(array: pa.Array) -> pa.UInt64Array:
    hashes = []
    for value in canonical_values(array):
        if value is None:
            hashes.append(NULL_HASH)
        else:
            digest = hashlib.blake2b(repr(value).encode(), digest_size=8).digest()
            hashes.append(int.from_bytes(digest, "little") & ((1 << 63) - 1))
    return pa.array(hashes, _U64)


def canonical_values(array: pa.Array | pa.ChunkedArray) -> list[Hashable]:
    """The values of ``array`` as hashable Python values that are equal exactly when the values are.

    Normalized like :func:`value_hashes`: integers for integers, booleans, dates (days), times and
    timestamps (microseconds; ``("ns", n)`` for a nanosecond value with a sub-microsecond part);
    ``0.0`` for ``-0.0`` and :data:`NAN` for every NaN; ``Decimal``, ``str``, ``bytes``; tuples for
    structs and lists; a tuple of ``(key, value)`` pairs in key order for maps; ``None`` for null.
    """
    array = _plain(array)
    kind = array.type
    if pa.types.is_floating(kind):
        return [_canonical_float(value) for value in array.cast(pa.float64()).to_pylist()]
    if pa.types.is_decimal(kind) and not pa.types.is_decimal128(kind):
        return array.cast(pa.decimal128(38, kind.scale)).to_pylist()
    if _is_temporal(kind):
        micros, remainder = _temporal_micros(array)
        if remainder is None:
            return micros.to_pylist()
        return [
            us if rem == 0 or us is None else ("ns", us * 1000 + rem)
            for us, rem in zip(micros.to_pylist(), remainder.to_pylist(), strict=True)
        ]
    if pa.types.is_struct(kind):
        children = [canonical_values(array.field(i)) for i in range(kind.num_fields)]
        rows = list(zip(*children, strict=True)) if children else [()] * len(array)
        if not array.null_count:
            return rows
        return [row if valid else None for row, valid in zip(rows, array.is_valid().to_pylist(), strict=True)]
    if pa.types.is_map(kind):
        entry = pa.field("entries", pa.struct([kind.key_field, kind.item_field]), nullable=False)
        array = array.cast(pa.large_list(entry))  # map arrays have no flatten or list_value_length kernels
        entries = array.flatten()
        pairs = list(zip(canonical_values(entries.field(0)), canonical_values(entries.field(1)), strict=True))
        return _split(array, pairs, lambda items: tuple(sorted(items, key=repr)))
    if isinstance(kind, pa.ListType | pa.LargeListType | pa.FixedSizeListType | pa.ListViewType | pa.LargeListViewType):
        array = array.cast(pa.large_list(kind.value_field))
        return _split(array, canonical_values(array.flatten()), tuple)
    return [_freeze(value) for value in array.to_pylist()]


def _canonical_float(value: float | None) -> Hashable:
    if value is None:
        return None
    if value != value:
        return NAN
    return value + 0.0  # -0.0 -> 0.0


def _split(array: pa.Array, items: list[Any], build: Callable[[list[Any]], Any]) -> list[Any]:
    """Cut the flattened ``items`` of a list-like ``array`` back into one value per row."""
    rows: list[Any] = []
    start = 0
    for length in pc.list_value_length(array).to_pylist():
        if length is None:
            rows.append(None)
        else:
            rows.append(build(items[start : start + length]))
            start += length
    return rows


def _freeze(value: Any) -> Hashable:
    if isinstance(value, float):
        return _canonical_float(value)
    if isinstance(value, dict):
        return tuple((key, _freeze(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value
