"""The operations on whole tables, their partition spec, sort order and properties.

Each class is one operation (see :mod:`~iceberg_ops_provider.migration.operation`). A new table is
created with its final metadata when the migration commits (see :mod:`.commit_queue`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pyiceberg.schema import Schema, index_by_name
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortDirection
from pyiceberg.table.update import AddSortOrderUpdate, AssertDefaultSortOrderId, SetDefaultSortOrderUpdate

from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.maintenance.policy import check_policy_properties
from iceberg_ops_provider.migration.commit_queue import placeholder_create
from iceberg_ops_provider.migration.operation import Irreversible, Operation, Rendered
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

if TYPE_CHECKING:
    from pyiceberg.table import Transaction
    from pyiceberg.table.update.spec import UpdateSpec

    from iceberg_ops_provider.migration.risks import Risk
    from iceberg_ops_provider.migration.staging import TableStaging

__all__ = [
    "AddPartitionField",
    "CreateTable",
    "DropPartitionField",
    "DropTable",
    "RemoveProperties",
    "RenamePartitionField",
    "RenameTable",
    "SetProperties",
    "SetSortOrder",
    "add_partition_fields",
]


def _property_value(key: str, value: object, where: str) -> str:
    """A table property's value as Iceberg keeps it: text, booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | os.PathLike):
        return os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    raise InvalidOperationError(
        f"Property {key!r} of {where} is {value!r} ({type(value).__name__}); "
        "values must be strings, numbers, booleans or paths."
    )


def _exists(staging: TableStaging, identifier: tuple[str, ...]) -> bool:
    """Whether a table exists once what is staged before it is done (a rename's target does, a drop's not)."""
    commits = staging.commits
    return identifier in commits.rename_targets or (
        identifier not in commits.gone and (identifier in commits.pending or staging.catalog.table_exists(identifier))
    )


@dataclass(frozen=True)
class CreateTable(Operation):
    """Create a table with its columns, spec, sort order and properties."""

    risks: ClassVar[Mapping[str, Risk]] = {"create_table": "safe"}
    described: ClassVar[str] = "create table {table}"

    schema: Any = field(default_factory=lambda: Rendered(lambda indent: "None"))
    """A ``pyarrow.Schema``, a PyIceberg ``Schema``, or (from autogenerate) its :class:`Rendered` source."""
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    properties: Mapping[str, Any] = field(default_factory=dict)
    if_not_exists: bool = False

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        identifier = staging.identifier(self.table)
        commits, label = staging.commits, staging.label(identifier)
        created = identifier in commits.created
        if created or _exists(staging, identifier):
            if self.if_not_exists:
                return
            why = "this migration creates it" if created else "it already exists"
            raise InvalidOperationError(f"Cannot create table {label}: {why}.")
        schema = self.schema.value if isinstance(self.schema, Rendered) else self.schema
        if not isinstance(schema, pa.Schema | Schema):
            raise InvalidOperationError(
                f"The schema of {label} must be a pyarrow.Schema or a pyiceberg Schema, got {type(schema).__name__}."
            )
        iceberg_schema = arrow_to_iceberg_schema(schema) if isinstance(schema, pa.Schema) else schema
        values = {key: _property_value(key, value, f"table {label}") for key, value in self.properties.items()}
        commits.stage_table(
            identifier, placeholder_create(staging.catalog, identifier, iceberg_schema, values), create=True
        )
        try:
            if self.partition_by:
                add_partition_fields(staging, self.table, self.partition_by)
            if self.sort_by:
                SetSortOrder(self.table, tuple(self.sort_by)).build(staging)
        except BaseException:
            staging.forget(identifier)
            raise

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        given = dict(partition_by=list(self.partition_by), sort_by=list(self.sort_by), properties=dict(self.properties))
        return (self.table,), {"schema": self.schema, **{key: value for key, value in given.items() if value}}

    def apply(self, ctx: Any) -> None:  # noqa: D102
        args, kwargs = self.call()
        ctx.create_table(*args, **{**kwargs, "schema": self.schema.value})

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropTable(self.table)]


@dataclass(frozen=True)
class DropTable(Operation):
    """Drop a table; with ``purge`` also its data and metadata files."""

    risks: ClassVar[Mapping[str, Risk]] = {"drop_table": "destructive"}
    described: ClassVar[str] = "drop table {table}"
    rule: ClassVar[str | None] = "drop-table"
    lint_arguments: ClassVar[tuple[str, str | None]] = ("name", "name")

    purge: bool = False
    if_exists: bool = False

    def planned_risk(self, staging: TableStaging) -> Risk:  # noqa: D102
        return staging.drop_risk(self.kind, self.table)

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        identifier = staging.identifier(self.table)
        commits = staging.commits
        if identifier in commits.created:
            # Created earlier in this migration and never committed: nothing reaches the catalog.
            staging.forget(identifier)
            commits.gone.add(identifier)
            return
        if not _exists(staging, identifier):
            if self.if_exists:
                return
            raise InvalidOperationError(f"Cannot drop table {staging.label(identifier)}: it does not exist.")
        staging.schemas.forget(identifier)  # changes staged on a table about to be dropped are moot
        commits.stage_drop(identifier, purge=self.purge)

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(f"table {self.table} was dropped; its data cannot be brought back by a migration")


@dataclass(frozen=True)
class RenameTable(Operation):
    """Rename a table (``table``) to ``new``, or move it to another namespace."""

    risks: ClassVar[Mapping[str, Risk]] = {"rename_table": "review"}
    described: ClassVar[str] = "rename table {table} to {new}"
    rule: ClassVar[str | None] = "rename-table"
    lint_arguments: ClassVar[tuple[str, str | None]] = ("old", "new")
    arguments: ClassVar[tuple[str, ...]] = ("table", "new")

    new: str = ""

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        source, target = staging.identifier(self.table), staging.identifier(self.new)
        commits = staging.commits
        if _exists(staging, target):
            raise InvalidOperationError(f"Cannot rename {staging.label(source)} to {staging.label(target)}: it exists.")
        if source in commits.created:  # not in the catalog yet: it is simply created under the new name
            commits.rename_created(source, target)
            staging.schemas.rename(source, target)
            return
        if not _exists(staging, source):
            raise InvalidOperationError(f"Cannot rename table {staging.label(source)}: it does not exist.")
        commits.stage_rename(source, target)

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [RenameTable(self.new, self.table)]


def add_partition_fields(staging: TableStaging, table: str, exprs: Iterable[str]) -> None:
    """Stage several partition fields in one spec change (a new table's ``partition_by``)."""
    parsed = [parse_partition_expr(expr) for expr in exprs]

    def change(update: UpdateSpec) -> None:
        for item in parsed:
            update.add_field(item.column, item.transform, None)

    staging.spec_change(table, "add partition fields", change)


@dataclass(frozen=True)
class AddPartitionField(Operation):
    """Add a partition field (new data is partitioned by it; existing files keep their spec)."""

    risks: ClassVar[Mapping[str, Risk]] = {"add_partition_field": "review"}
    noted: ClassVar[str] = "partition {table} by {expr}"

    expr: str = ""
    name: str | None = ""

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        parsed = parse_partition_expr(self.expr)
        staging.spec_change(
            self.table,
            f"add partition field {self.expr!r}",
            lambda update: update.add_field(parsed.column, parsed.transform, self.name or None),
        )

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return (self.table, self.expr), {"name": self.name}

    def describe(self) -> str:  # noqa: D102
        return f"partition {self.table} by {self.expr}" + (f" (field {self.name})" if self.name else "")

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropPartitionField(self.table, self.name or "", self.expr)]


@dataclass(frozen=True)
class DropPartitionField(Operation):
    """Remove a partition field by its name."""

    risks: ClassVar[Mapping[str, Risk]] = {"drop_partition_field": "review"}
    rule: ClassVar[str | None] = "drop-partition-field"
    arguments: ClassVar[tuple[str, ...]] = ("table", "name")
    noted: ClassVar[str] = "drop partition field {table}.{name}"

    name: str = ""
    expr: str = ""

    def describe(self) -> str:  # noqa: D102
        return f"stop partitioning {self.table} by {self.expr}" + (f" (field {self.name})" if self.name else "")

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        staging.spec_change(self.table, f"drop partition field {self.name!r}", lambda u: u.remove_field(self.name))

    def reverse(self) -> list[Operation]:  # noqa: D102
        if not self.expr:
            raise Irreversible(f"partition field {self.table}.{self.name} was dropped without saying its transform")
        return [AddPartitionField(self.table, self.expr, self.name)]


@dataclass(frozen=True)
class RenamePartitionField(Operation):
    """Rename a partition field."""

    risks: ClassVar[Mapping[str, Risk]] = {"rename_partition_field": "review"}
    described: ClassVar[str] = "rename partition field {table}.{old} to {new}"
    arguments: ClassVar[tuple[str, ...]] = ("table", "old", "new")
    noted: ClassVar[str] = "rename partition field {table}.{old}"

    old: str = ""
    new: str = ""

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        staging.spec_change(
            self.table, f"rename partition field {self.old!r}", lambda u: u.rename_field(self.old, self.new)
        )

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [RenamePartitionField(self.table, self.new, self.old)]


@dataclass(frozen=True)
class SetSortOrder(Operation):
    """Replace the table's sort order (no fields: unsorted)."""

    risks: ClassVar[Mapping[str, Risk]] = {"set_sort_order": "safe"}
    noted: ClassVar[str] = "set the sort order of {table}"

    fields: tuple[str, ...] = ()
    old: tuple[str, ...] = ()

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        parsed = [parse_sort_field(f) for f in self.fields]

        def build(transaction: Transaction) -> None:
            metadata = transaction.table_metadata
            for item in parsed:
                _check_sortable(metadata.schema(), item.column)
            if not parsed and metadata.sort_order_by_id(UNSORTED_SORT_ORDER.order_id) is None:
                # A table created sorted has no unsorted order yet, and PyIceberg 0.12 cannot add one
                # through update_sort_order(): add it and make it the default explicitly.
                transaction._apply(
                    (
                        AddSortOrderUpdate(sort_order=UNSORTED_SORT_ORDER),
                        SetDefaultSortOrderUpdate(sort_order_id=UNSORTED_SORT_ORDER.order_id),
                    ),
                    (AssertDefaultSortOrderId(default_sort_order_id=metadata.default_sort_order_id),),
                )
                return
            with transaction.update_sort_order() as update:
                for item in parsed:
                    add = update.asc if item.direction == SortDirection.ASC else update.desc
                    add(item.column, item.transform, item.null_order)

        staging.staged(self.table, "set the sort order", build)

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return (self.table, list(self.fields)), {}

    def describe(self) -> str:  # noqa: D102
        return f"sort {self.table} by {', '.join(self.fields)}" if self.fields else f"make {self.table} unsorted"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetSortOrder(self.table, self.old, self.fields)]


def _check_sortable(schema: Schema, column: str) -> None:
    """Refuse, naming the column, a sort on a struct, list or map (Iceberg sorts by primitive columns only)."""
    field_id = index_by_name(schema).get(column)  # None: PyIceberg names the missing column itself
    if field_id is not None and not (field := schema.find_field(field_id)).field_type.is_primitive:
        raise ValueError(
            f"cannot sort by {column!r}: it is a {field.field_type} column, and Iceberg sorts by primitive columns "
            f"only; sort by one of its fields (e.g. '{column}.<field>') instead"
        )


@dataclass(frozen=True)
class SetProperties(Operation):
    """Set table properties; ``old`` holds the previous values (``None``: was not set)."""

    risks: ClassVar[Mapping[str, Risk]] = {"set_properties": "safe"}
    arguments: ClassVar[tuple[str, ...]] = ("table", "values")
    noted: ClassVar[str] = "set properties of {table}"

    values: Mapping[str, Any] = field(default_factory=dict)
    old: Mapping[str, str | None] = field(default_factory=dict)

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        if not self.values:
            raise InvalidOperationError("set_properties needs at least one property.")
        values = {key: _property_value(key, value, f"table {self.table!r}") for key, value in self.values.items()}
        check_policy_properties(values, table=self.table)  # a bad maintenance policy value fails before the commit
        staging.staged(self.table, "set properties", lambda transaction: transaction.set_properties(values))

    def describe(self) -> str:  # noqa: D102
        return f"set properties of {self.table}: {', '.join(f'{k}={v}' for k, v in self.values.items())}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        restore = {key: value for key, value in self.old.items() if value is not None}
        remove = tuple(key for key, value in self.old.items() if value is None)
        steps: list[Operation] = []
        if restore:
            steps.append(SetProperties(self.table, restore, {k: self.values.get(k) for k in restore}))
        if remove:
            steps.append(RemoveProperties(self.table, remove, {k: self.values[k] for k in remove}))
        return steps


@dataclass(frozen=True)
class RemoveProperties(Operation):
    """Remove table properties; ``old`` holds their values."""

    risks: ClassVar[Mapping[str, Risk]] = {"remove_properties": "safe"}
    arguments: ClassVar[tuple[str, ...]] = ("table", "*keys")
    noted: ClassVar[str] = "remove properties of {table}"

    keys: tuple[str, ...] = ()
    old: Mapping[str, str] = field(default_factory=dict)

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        keys = self.keys
        identifier, transaction = staging.transaction(self.table)
        properties = staging.schemas.metadata(identifier, transaction).properties  # with staged ones
        if missing := [key for key in keys if key not in properties]:
            raise InvalidOperationError(
                f"Cannot remove properties {missing} from {staging.label(identifier)}: not set."
            )
        staging.staged(self.table, "remove properties", lambda transaction: transaction.remove_properties(*keys))

    def describe(self) -> str:  # noqa: D102
        return f"remove properties of {self.table}: {', '.join(self.keys)}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetProperties(self.table, dict(self.old), dict.fromkeys(self.old))]
