"""Iceberg types written as text: ``"long"``, ``"decimal(12,2)"``, ``"list<string>"``, ...

:func:`parse_type` reads them, :func:`format_type` writes the canonical text back, and
:func:`to_iceberg_type` accepts text, an Arrow type or a PyIceberg type (grammar: docs/core.md, Types).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import NoReturn

import pyarrow as pa
from pyiceberg.types import (
    DecimalType,
    FixedType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)

from iceberg_ops_provider.core.types import arrow_to_iceberg_type
from iceberg_ops_provider.errors import TypeParseError

__all__ = ["format_type", "parse_type", "to_iceberg_type"]

# PyIceberg's own names of its primitive types (which PrimitiveType reads), with the other names accepted.
_ALIASES: dict[str, tuple[str, ...]] = {
    "boolean": ("bool",),
    "int": ("integer", "int32"),
    "long": ("bigint", "int64"),
    "float": ("float32", "real"),
    "double": ("float64",),
    "string": ("str", "varchar", "text"),
    "binary": ("bytes",),
    **dict.fromkeys(("date", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns", "uuid"), ()),
}
_PRIMITIVES = {
    alias: PrimitiveType.model_validate(name) for name, aliases in _ALIASES.items() for alias in (name, *aliases)
}

_TOKEN = re.compile(r"\s*(?:(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>\d+)|(?P<punct>[<>()\[\],:]))")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.position = 0
        self.ids: Iterator[int] = itertools.count(1)

    def _tokenize(self, text: str) -> list[str]:
        tokens, index = [], 0
        while text[index:].strip():
            match = _TOKEN.match(text, index) or self._fail(f"unexpected character {text[index:].strip()[0]!r}")
            tokens.append(match.group(match.lastgroup or "word"))
            index = match.end()
        return tokens

    def _fail(self, problem: str) -> NoReturn:
        raise TypeParseError(
            f"Cannot parse type {self.text!r}: {problem}. Use an Iceberg type such as 'long', 'string', "
            "'decimal(12,2)', 'timestamptz', 'list<string>', 'map<string,long>' or 'struct<a: int, b: string>'."
        )

    def _peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._peek()
        if token is None:
            self._fail("it ends too early" + (f", expected {expected!r}" if expected else ""))
        if expected is not None and token.lower() != expected:
            self._fail(f"expected {expected!r} but found {token!r}")
        self.position += 1
        return token

    def _number(self) -> int:
        token = self._take()
        if not token.isdigit():
            self._fail(f"expected a number but found {token!r}")
        return int(token)

    def parse(self) -> IcebergType:
        result = self._type()
        if self._peek() is not None:
            self._fail(f"unexpected {self._peek()!r} after the type")
        return result

    def _type(self) -> IcebergType:
        word = self._take().lower()
        if word == "list":
            self._take("<")
            element_id = next(self.ids)
            element, required = self._inner()
            self._take(">")
            return ListType(element_id, element, element_required=required)
        if word == "map":
            self._take("<")
            key_id, value_id = next(self.ids), next(self.ids)
            key, _ = self._inner()
            self._take(",")
            value, required = self._inner()
            self._take(">")
            return MapType(key_id, key, value_id, value, value_required=required)
        if word == "struct":
            return self._struct()
        if word == "decimal":
            self._take("(")
            precision = self._number()
            scale = 0
            if self._peek() == ",":
                self._take(",")
                scale = self._number()
            self._take(")")
            if not 1 <= precision <= 38 or scale > precision:
                self._fail(f"decimal({precision},{scale}) needs 1 <= precision <= 38 and scale <= precision")
            return DecimalType(precision, scale)
        if word == "fixed":
            closing = {"[": "]", "(": ")"}.get(self._peek() or "")
            if closing is None:
                self._fail("fixed needs a length, as in fixed[16]")
            self._take()
            length = self._number()
            self._take(closing)
            return FixedType(length)
        if word in _PRIMITIVES:
            return _PRIMITIVES[word]
        self._fail(f"unknown type name {word!r}")

    def _inner(self) -> tuple[IcebergType, bool]:
        inner = self._type()
        if (self._peek() or "").lower() == "not":
            self._take()
            self._take("null")
            return inner, True
        return inner, False

    def _struct(self) -> StructType:
        self._take("<")
        fields = []
        while True:
            name = self._take()
            self._take(":")
            field_id = next(self.ids)
            field_type, required = self._inner()
            fields.append(NestedField(field_id, name, field_type, required=required))
            if self._peek() == ",":
                self._take(",")
                continue
            self._take(">")
            return StructType(*fields)


def parse_type(text: str) -> IcebergType:
    """Parse an Iceberg type written as text, such as ``"map<string, long not null>"``; nested fields numbered from 1.

    Raises:
        TypeParseError: The text is not a type; the message says where it went wrong.
    """
    if not isinstance(text, str) or not text.strip():
        raise TypeParseError(f"Cannot parse type {text!r}: give a non-empty type name such as 'long' or 'string'.")
    return _Parser(text).parse()


def format_type(iceberg_type: IcebergType) -> str:
    """Write an Iceberg type as the canonical text :func:`parse_type` reads back."""
    t = iceberg_type
    if isinstance(t, FixedType) or str(t) in _PRIMITIVES:
        return str(t)  # PyIceberg's own names: "long", "timestamptz", "fixed[16]", ...
    if isinstance(t, DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, ListType):
        return f"list<{_inner_text(t.element_field)}>"
    if isinstance(t, MapType):
        return f"map<{format_type(t.key_type)},{_inner_text(t.value_field)}>"
    if isinstance(t, StructType):
        return "struct<" + ",".join(f"{f.name}:{_inner_text(f)}" for f in t.fields) + ">"
    raise TypeParseError(f"iceberg-ops cannot write type {t} as text yet.")


def _inner_text(field: NestedField) -> str:
    return format_type(field.field_type) + (" not null" if field.required else "")


def to_iceberg_type(value: str | pa.DataType | IcebergType, column: str = "") -> IcebergType:
    """The PyIceberg type of ``value``: text, an Arrow type or a PyIceberg type (``column`` names it in errors).

    Raises:
        TypeParseError: ``value`` is text that is not a type, or not a type at all.
        UnsupportedTypeError: ``value`` is an Arrow type Iceberg cannot store.
    """
    if isinstance(value, IcebergType):
        return value
    if isinstance(value, pa.DataType):
        return arrow_to_iceberg_type(value, column)
    if isinstance(value, str):
        return parse_type(value)
    where = f" for column {column!r}" if column else ""
    raise TypeParseError(
        f"Expected a type{where} as text ('long'), an Arrow type (pa.int64()) or a PyIceberg type "
        f"(LongType()), got {value!r} ({type(value).__name__})."
    )
