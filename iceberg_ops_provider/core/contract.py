"""Schema contracts: does this Arrow data satisfy this table's schema?

Checked before writing, every problem listed at once; columns match by name, and a type fits when it
converts to the column's type or to one the column could have been promoted from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, MapType, NestedField, StructType

from iceberg_ops_provider.core.evolution import is_allowed_promotion
from iceberg_ops_provider.core.types import arrow_to_iceberg_type, iceberg_to_arrow_schema
from iceberg_ops_provider.errors import SchemaContractError, UnsupportedTypeError

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["ContractReport", "ContractViolation", "check_contract", "conform_to_table", "enforce_contract"]

ViolationKind = Literal["missing_required", "type_mismatch", "nulls_in_required", "extra_column", "unsupported_type"]


@dataclass(frozen=True)
class ContractViolation:
    """One way the data breaks the contract: its kind, the dotted column path, and a message readable on its own."""

    kind: ViolationKind
    column: str
    message: str

    def __str__(self) -> str:
        """The message."""
        return self.message


@dataclass(frozen=True)
class ContractReport:
    """The result of :func:`check_contract`; truthy when the data satisfies the schema."""

    violations: tuple[ContractViolation, ...]

    @property
    def ok(self) -> bool:
        """True when there is no violation."""
        return not self.violations

    __bool__ = ok.fget

    def raise_if_violated(self, table_name: str = "the table") -> None:
        """Raise :class:`~iceberg_ops_provider.errors.SchemaContractError` listing every violation."""
        if self.violations:
            raise SchemaContractError(table_name, self.violations)


@dataclass
class _Checker:
    data: pa.Table | pa.RecordBatch | None
    allow_extra_columns: bool
    violations: list[ContractViolation] = field(default_factory=list)

    def add(self, kind: ViolationKind, column: str, message: str) -> None:
        self.violations.append(ContractViolation(kind, column, message))

    def struct(self, arrow_fields: list[pa.Field], table_fields: list[NestedField], prefix: str, top: bool) -> None:
        by_name = {f.name: f for f in arrow_fields}
        for table_field in table_fields:
            path = f"{prefix}{table_field.name}"
            arrow_field = by_name.get(table_field.name)
            if arrow_field is None:
                if table_field.required:
                    self.add("missing_required", path, f"required column {path!r} is missing from the data")
                continue
            self.field(arrow_field, table_field, path, top)
        known = {f.name for f in table_fields}
        for arrow_field in arrow_fields:
            if arrow_field.name not in known and not self.allow_extra_columns:
                path = f"{prefix}{arrow_field.name}"
                self.add(
                    "extra_column",
                    path,
                    f"column {path!r} ({arrow_field.type}) is not in the table's schema; drop it from the data "
                    "or add the column to the table first",
                )

    def field(self, arrow_field: pa.Field, table_field: NestedField, path: str, top: bool) -> None:
        if table_field.required and arrow_field.nullable:
            # Without data (or inside nested values) the schema's word is all there is.
            nulls = self.data.column(arrow_field.name).null_count if self.data is not None and top else None
            if nulls is None:
                message = f"column {path!r} is required in the table but nullable in the data"
                self.add("nulls_in_required", path, f"{message}; declare the Arrow field nullable=False")
            elif nulls:
                self.add("nulls_in_required", path, f"required column {path!r} has {nulls} null value(s) in the data")
        arrow_type, expected = arrow_field.type, table_field.field_type
        if pa.types.is_null(arrow_type):
            return  # all values null: casts to any type; a required column was reported above
        if isinstance(expected, StructType) and pa.types.is_struct(arrow_type):
            fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
            self.struct(fields, list(expected.fields), f"{path}.", top=False)
        elif isinstance(expected, ListType) and (
            pa.types.is_list(arrow_type)
            or pa.types.is_large_list(arrow_type)
            or pa.types.is_fixed_size_list(arrow_type)
        ):
            self.field(arrow_type.value_field, expected.element_field, f"{path}.element", top=False)
        elif isinstance(expected, MapType) and pa.types.is_map(arrow_type):
            self.field(arrow_type.key_field, expected.key_field, f"{path}.key", top=False)
            self.field(arrow_type.item_field, expected.value_field, f"{path}.value", top=False)
        else:
            try:
                actual = arrow_to_iceberg_type(arrow_type, path)
            except UnsupportedTypeError as exc:
                if expected.is_primitive:
                    self.add("unsupported_type", path, str(exc))
                    return
                actual = None
            if actual is None or not is_allowed_promotion(actual, expected):
                message = f"column {path!r} is {arrow_type} in the data but {expected} in the table"
                self.add("type_mismatch", path, message)


def check_contract(
    data: pa.Schema | pa.Table | pa.RecordBatch,
    table_schema: Schema | Table,
    *,
    allow_extra_columns: bool = False,
) -> ContractReport:
    """Check Arrow data (or just its schema) against a table (or its schema), listing every violation.

    With data, a nullable column bound for a required one is a violation only when it holds nulls;
    with a schema alone, it is reported. ``allow_extra_columns`` accepts columns the table does not
    have. ``report.ok`` when the data can be written as it is (after a cast to the table's types).
    """
    schema = table_schema if isinstance(table_schema, Schema) else table_schema.schema()
    arrow_schema = data if isinstance(data, pa.Schema) else data.schema
    rows = None if isinstance(data, pa.Schema) else data
    checker = _Checker(rows, allow_extra_columns)
    checker.struct(list(arrow_schema), list(schema.fields), "", top=True)
    return ContractReport(tuple(checker.violations))


def enforce_contract(
    data: pa.Schema | pa.Table | pa.RecordBatch,
    table: Table,
    *,
    allow_extra_columns: bool = False,
) -> None:
    """Like :func:`check_contract`, but raise when the contract is broken.

    Raises:
        SchemaContractError: Lists every violation and names the table.
    """
    check_contract(data, table, allow_extra_columns=allow_extra_columns).raise_if_violated(".".join(table.name()))


def conform_to_table(data: pa.Table | pa.RecordBatch, table: Table) -> pa.Table | pa.RecordBatch:
    """Check ``data`` against ``table`` and cast it to the table's exact Arrow types, ready to append.

    The result has the table's column order (missing columns left out, for the table to fill with
    nulls), no foreign field ids, and non-nullable fields for required columns, as PyIceberg insists.

    Raises:
        SchemaContractError: The data breaks the contract; every violation is listed.
    """
    enforce_contract(data, table)
    table_schema = iceberg_to_arrow_schema(table.schema())
    present = pa.schema([f for f in table_schema if f.name in data.column_names])
    return data.select(present.names).cast(present)
