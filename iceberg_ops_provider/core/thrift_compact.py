"""Thrift's compact protocol, read into plain values and written back byte for byte.

A struct is decoded without its schema into :class:`Struct`, so a caller changes the fields it knows
and writes the rest back: ``encode_struct(decode_struct(data)[0]) == data``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BINARY",
    "BOOL_FALSE",
    "BOOL_TRUE",
    "BYTE",
    "DOUBLE",
    "I16",
    "I32",
    "I64",
    "LIST",
    "MAP",
    "SET",
    "STRUCT",
    "MAX_DEPTH",
    "Field",
    "ThriftList",
    "ThriftMap",
    "Struct",
    "decode_struct",
    "encode_struct",
]

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
MAX_DEPTH = 64
"""Structs and collections nested deeper than this are refused (Parquet footers nest about six deep)."""


@dataclass
class Field:
    """One field of a struct: its id, compact wire type (a boolean's carries its value) and value."""

    id: int
    kind: int
    value: Any


@dataclass
class ThriftList:
    """A list or set: the wire type of its elements, and the elements."""

    element_kind: int
    items: list[Any]
    kind: int = LIST


@dataclass
class ThriftMap:
    """A map: the wire types of its keys and values, and its entries in the order written."""

    key_kind: int
    value_kind: int
    entries: list[tuple[Any, Any]]


@dataclass
class Struct:
    """A struct's fields in the order written."""

    fields: list[Field] = field(default_factory=list)

    def get(self, field_id: int) -> Field | None:
        """The field with id ``field_id``, or ``None`` if the struct does not hold it."""
        return next((each for each in self.fields if each.id == field_id), None)

    def value(self, field_id: int, default: Any = None) -> Any:
        """The value of field ``field_id``, or ``default`` if the struct does not hold it."""
        return default if (found := self.get(field_id)) is None else found.value

    def set(self, field_id: int, kind: int, value: Any) -> None:
        """Give field ``field_id`` a value, adding it in field-id order if the struct does not hold it."""
        if (found := self.get(field_id)) is not None:
            found.kind, found.value = kind, value
            return
        position = next((index for index, each in enumerate(self.fields) if each.id > field_id), len(self.fields))
        self.fields.insert(position, Field(field_id, kind, value))


class _Reader:
    def __init__(self, data: bytes | memoryview, position: int) -> None:
        self.data = memoryview(data).cast("B")  # bytes as unsigned, whatever the exporter says
        self.position = position
        self.depth = 0

    def byte(self) -> int:
        value = self.data[self.position]
        self.position += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            current = self.byte()
            result |= (current & 0x7F) << shift
            if not current & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ValueError(f"a varint at byte {self.position} is longer than 10 bytes")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def take(self, count: int) -> bytes:
        end = self.position + count
        if end > len(self.data):
            raise ValueError(f"{count} bytes asked at byte {self.position} of {len(self.data)}")
        chunk = bytes(self.data[self.position : end])
        self.position = end
        return chunk

    def value(self, kind: int) -> Any:
        if kind in (BOOL_TRUE, BOOL_FALSE):  # an element of a collection: one byte
            return self.byte() == BOOL_TRUE
        if kind == BYTE:
            raw = self.byte()
            return raw - 256 if raw > 127 else raw
        if kind in (I16, I32, I64):
            return self.zigzag()
        if kind == DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if kind == BINARY:
            return self.take(self.varint())
        if kind in (LIST, SET):
            header = self.byte()
            size, element_kind = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return ThriftList(element_kind, [self.value(element_kind) for _ in range(size)], kind)
        if kind == MAP:
            size = self.varint()
            if not size:
                return ThriftMap(0, 0, [])
            kinds = self.byte()
            key_kind, value_kind = kinds >> 4, kinds & 0x0F
            return ThriftMap(
                key_kind, value_kind, [(self.value(key_kind), self.value(value_kind)) for _ in range(size)]
            )
        if kind == STRUCT:
            return self.struct()
        raise ValueError(f"unknown compact type {kind} at byte {self.position}")

    def struct(self) -> Struct:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError(f"structs and collections nest deeper than {MAX_DEPTH} at byte {self.position}")
        result = Struct()
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                self.depth -= 1
                return result
            kind, delta = header & 0x0F, header >> 4
            field_id = last + delta if delta else self.zigzag()
            value = kind == BOOL_TRUE if kind in (BOOL_TRUE, BOOL_FALSE) else self.value(kind)
            result.fields.append(Field(field_id, kind, value))
            last = field_id


def decode_struct(data: bytes | memoryview, position: int = 0) -> tuple[Struct, int]:
    """The struct encoded at ``position`` of ``data``, and the position just after it.

    Raises:
        ValueError: ``data`` does not hold a well-formed compact struct there (or nests deeper than
            :data:`MAX_DEPTH`).
    """
    reader = _Reader(data, position)
    try:
        decoded = reader.struct()
    except IndexError:
        raise ValueError(f"the struct at byte {position} ends past the data's {len(data)} bytes") from None
    return decoded, reader.position


def _varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _zigzag(out: bytearray, value: int) -> None:
    _varint(out, (value << 1) ^ (value >> 63) if value < 0 else value << 1)


def _write_value(out: bytearray, kind: int, value: Any) -> None:
    if kind in (BOOL_TRUE, BOOL_FALSE):
        out.append(BOOL_TRUE if value else BOOL_FALSE)
    elif kind == BYTE:
        out.append(value & 0xFF)
    elif kind in (I16, I32, I64):
        _zigzag(out, value)
    elif kind == DOUBLE:
        out += struct.pack("<d", value)
    elif kind == BINARY:
        _varint(out, len(value))
        out += value
    elif kind in (LIST, SET):
        size = len(value.items)
        out.append(min(size, 15) << 4 | value.element_kind)
        if size >= 15:  # 15 in the header: the size follows
            _varint(out, size)
        for item in value.items:
            _write_value(out, value.element_kind, item)
    elif kind == MAP:
        _varint(out, len(value.entries))
        if value.entries:
            out.append(value.key_kind << 4 | value.value_kind)
            for key, item in value.entries:
                _write_value(out, value.key_kind, key)
                _write_value(out, value.value_kind, item)
    else:  # STRUCT: the kinds were read by the reader, which refuses unknown ones
        _write_struct(out, value)


def _write_struct(out: bytearray, value: Struct) -> None:
    last = 0
    for each in value.fields:
        kind = each.kind
        if kind in (BOOL_TRUE, BOOL_FALSE):
            kind = BOOL_TRUE if each.value else BOOL_FALSE
        delta = each.id - last
        if 0 < delta <= 15:
            out.append(delta << 4 | kind)
        else:
            out.append(kind)
            _zigzag(out, each.id)
        if kind not in (BOOL_TRUE, BOOL_FALSE):
            _write_value(out, kind, each.value)
        last = each.id
    out.append(0)


def encode_struct(value: Struct) -> bytes:
    """``value`` in the compact protocol."""
    out = bytearray()
    _write_struct(out, value)
    return bytes(out)
