"""The column operations: add, drop, restore, rename, alter and move columns, set the row key.

Each class is one operation (see :mod:`~iceberg_ops_provider.migration.operation`), staged as a schema
change through :class:`~iceberg_ops_provider.migration.staging.TableStaging`, with the checks it needs
first. Nested columns are given as dotted paths (``"address.city"``) or tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pyiceberg.schema import index_by_name
from pyiceberg.types import IcebergType, NestedField

from iceberg_ops_provider.core.evolution import check_promotion
from iceberg_ops_provider.core.type_strings import format_type, to_iceberg_type
from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration import restore
from iceberg_ops_provider.migration.operation import Irreversible, Operation
from iceberg_ops_provider.migration.risks import highest_risk
from iceberg_ops_provider.migration.schema_changes import AddedColumn, ColumnPath, as_path, place
from iceberg_ops_provider.migration.schema_changes import dotted as _text

if TYPE_CHECKING:
    from pyiceberg.table import Transaction
    from pyiceberg.table.update.schema import UpdateSchema

    from iceberg_ops_provider.migration.risks import Risk
    from iceberg_ops_provider.migration.staging import TableStaging

__all__ = [
    "AddColumn",
    "AlterColumn",
    "AlterColumnType",
    "DropColumn",
    "MakeColumnOptional",
    "MoveColumn",
    "RenameColumn",
    "RestoreColumn",
    "SetColumnDoc",
    "SetIdentifierFields",
    "TypeLike",
]

TypeLike = str | pa.DataType | IcebergType
"""A column type: text (``"decimal(12,2)"``), an Arrow type or a PyIceberg type."""


def _path(column: ColumnPath) -> str | tuple[str, ...]:
    if not isinstance(column, tuple) and (not isinstance(column, str) or not column):
        raise InvalidOperationError(f"A column must be a non-empty name or tuple path, got {column!r}.")
    return as_path(column)


def _has_column(staging: TableStaging, table: str, name: ColumnPath) -> bool:
    return _text(name) in index_by_name(staging.schemas.schema(*staging.transaction(table)))


def _field(staging: TableStaging, table: str, transaction: Transaction, name: ColumnPath) -> NestedField:
    dotted = _text(name)
    schema = staging.schemas.schema(staging.identifier(table), transaction)
    try:
        return schema.find_field(dotted)
    except ValueError as exc:
        columns = ", ".join(schema.column_names)
        raise InvalidOperationError(f"Table {table!r} has no column {dotted!r}; its columns are {columns}.") from exc


def _reshape_added(
    staging: TableStaging, table: str, name: ColumnPath, reshape: Callable[[AddedColumn], AddedColumn | None]
) -> bool:
    """Fold a change of a column this migration adds into its add (``None``: drop it); False when it cannot."""
    identifier, transaction = staging.transaction(table)
    added = staging.schemas.pending_add(identifier, name)
    return added is not None and staging.schemas.reshape_add(identifier, transaction, added, reshape(added))


def _require_empty(staging: TableStaging, table: str, what: str) -> None:
    """Refuse ``what`` unless the table has no rows, and make the commit require that it still has none.

    The commit asserts the main branch is still at the snapshot checked here, so rows another writer
    appends meanwhile make the catalog refuse the commit instead of leaving a required column empty.
    """
    identifier, transaction = staging.transaction(table)
    snapshot = transaction.table_metadata.current_snapshot()
    records = restore.total_records(snapshot)
    if records:
        raise InvalidOperationError(
            f"Cannot {what} to table {staging.label(identifier)}: it has {records} row(s), which would have "
            "no value. Add the column as optional, backfill it, and keep it optional (Iceberg cannot make "
            "an optional column required)."
        )
    if identifier in staging.commits.created:
        return  # created by this migration: nobody else can have written to it
    transaction._stage((), (restore.main_unchanged(snapshot),))


@dataclass(frozen=True)
class AddColumn(Operation):
    """Add a column, placed first, or before/after another one (nested: full paths, ``items.element.sku``)."""

    # Adding a required column is refused on tables with rows: a kind of its own, to review.
    risks: ClassVar[Mapping[str, Risk]] = {"add_column": "safe", "add_required_column": "review"}
    rule: ClassVar[str | None] = "add-required-column"
    rule_when: ClassVar[tuple[str, int] | None] = ("required", 3)

    name: ColumnPath = ""
    type: TypeLike | None = None
    required: bool = False
    doc: str | None = None
    after: ColumnPath | None = None
    first: bool = False
    before: ColumnPath | None = None
    if_not_exists: bool = False

    @property
    def kind(self) -> str:  # noqa: D102
        return "add_required_column" if self.required else "add_column"

    def note(self) -> str:  # noqa: D102
        return f"add column {self.table}.{_text(self.name)}"

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        table, name, after, before = self.table, self.name, self.after, self.before
        if sum([self.first, after is not None, before is not None]) > 1:
            raise InvalidOperationError("Give at most one of first=True, after= and before= for add_column.")
        if self.if_not_exists and _has_column(staging, table, name):
            return
        field_type = to_iceberg_type(self.type, _text(name))  # type: ignore[arg-type]
        if self.required:
            _require_empty(staging, table, f"add required column {_text(name)!r}")
        path = _path(name)
        parts = path if isinstance(path, tuple) else (path,)
        change = AddedColumn(parts, field_type, self.doc, self.required, self.first, after, before)
        parents = [_text(name).rsplit(".", 1)[0]] if "." in _text(name) else []
        staging.schema_change(
            table,
            f"add column {_text(name)!r}",
            change,
            allow_incompatible=self.required,
            refs=parents,
            anchors=[ref for ref in (after, before) if ref is not None],
        )

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        given = {"required": self.required or None, "doc": self.doc or None, "first": self.first or None}
        if not self.first:
            given |= {"after": self.after} if self.after is not None else {"before": self.before}
        return (self.table, self.name, self.type), {key: value for key, value in given.items() if value is not None}

    def describe(self) -> str:  # noqa: D102
        kind = "required " if self.required else ""
        return f"add {kind}column {self.table}.{_text(self.name)} {format_type(self.type)}"  # type: ignore[arg-type]

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropColumn(self.table, _text(self.name))]


@dataclass(frozen=True)
class DropColumn(Operation):
    """Drop a column (its data stays in old files and snapshots; it is no longer read)."""

    risks: ClassVar[Mapping[str, Risk]] = {"drop_column": "destructive"}
    rule: ClassVar[str | None] = "drop-column"
    arguments: ClassVar[tuple[str, ...]] = ("table", "name")

    name: ColumnPath = ""
    if_exists: bool = False

    def planned_risk(self, staging: TableStaging) -> Risk:  # noqa: D102
        return staging.drop_risk(self.kind, self.table, _text(self.name))

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        table, name = self.table, self.name
        if self.if_exists and not _has_column(staging, table, name):
            return
        _check_droppable(staging, table, name)
        if _reshape_added(staging, table, name, lambda added: None):
            return
        path = _path(name)
        staging.schema_change(
            table, f"drop column {_text(name)!r}", lambda update: update.delete_column(path), refs=[name]
        )

    def describe(self) -> str:  # noqa: D102
        return f"drop column {self.table}.{_text(self.name)}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [RestoreColumn(self.table, _text(self.name))]


def _check_droppable(staging: TableStaging, table: str, name: ColumnPath) -> None:
    """Refuse, naming the fix, to drop a column the partition spec, sort order or row key still uses."""
    identifier, transaction = staging.transaction(table)
    schema = staging.schemas.schema(identifier, transaction)
    if (field_id := index_by_name(schema).get(_text(name))) is None:
        return  # the schema update names the missing column itself
    ids = {field_id, *restore.nested_ids(schema.find_field(field_id).field_type)}
    label, column = staging.label(identifier), _text(name)
    metadata = staging.schemas.metadata(identifier, transaction)  # partitions staged on new columns too
    if (partition := next((p for p in metadata.spec().fields if p.source_id in ids), None)) is not None:
        raise InvalidOperationError(
            f"Cannot drop column {column!r} of table {label}: partition field {partition.name!r} "
            f"({partition.transform}) uses it. Drop the partition field first, in the same migration: "
            f"ctx.drop_partition_field({table!r}, {partition.name!r})."
        )
    if any(sort.source_id in ids for sort in metadata.sort_order().fields):
        raise InvalidOperationError(
            f"Cannot drop column {column!r} of table {label}: the table's sort order uses it. Set a sort "
            f"order without it first, in the same migration: ctx.set_sort_order({table!r}, [...])."
        )
    if ids & set(schema.identifier_field_ids):
        kept = [n for n in schema.identifier_field_names() if schema.find_field(n).field_id not in ids]
        raise InvalidOperationError(
            f"Cannot drop column {column!r} of table {label}: it is one of the table's identifier fields (its "
            f"row key). Set the identifier fields without it first, in the same migration: "
            f"ctx.set_identifier_fields({', '.join(repr(x) for x in [table, *sorted(kept)])})."
        )


@dataclass(frozen=True)
class RestoreColumn(Operation):
    """Bring a dropped column back with its data (the downgrade of a drop)."""

    # the column's old values reappear where data files still hold them
    risks: ClassVar[Mapping[str, Risk]] = {"restore_column": "review"}
    rule: ClassVar[str | None] = "restore-column"
    arguments: ClassVar[tuple[str, ...]] = ("table", "name")

    name: ColumnPath = ""

    def stage(self, staging: TableStaging) -> None:
        """Find the dropped column, record the step with the rows that hold its data, then stage it."""
        identifier, transaction = staging.transaction(self.table)
        column = _text(self.name)
        metadata = transaction.table_metadata
        pending = staging.schemas.schema(identifier, transaction)  # this migration's earlier column changes
        dropped = restore.dropped_column(metadata, column, staging.label(identifier), current=pending)
        holding = restore.rows_holding(metadata, transaction._table.io, dropped.field)
        staging.note(
            f"restore column {self.table}.{column} (field id {dropped.field.field_id}): {holding.describe()}", self.risk
        )
        schema, requirements = restore.restoring(metadata, dropped, holding, current=pending)
        if requirements:
            transaction._apply((), requirements)
        # Later column changes apply on top of the restored schema: still one new schema in all.
        staging.schemas.restart_from(identifier, transaction, schema)

    def describe(self) -> str:  # noqa: D102
        return f"restore column {self.table}.{_text(self.name)}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropColumn(self.table, self.name)]


@dataclass(frozen=True)
class RenameColumn(Operation):
    """Rename a column; ``new`` is its new last name (autogenerate gives its path: the last part counts)."""

    risks: ClassVar[Mapping[str, Risk]] = {"rename_column": "review"}
    rule: ClassVar[str | None] = "rename-column"
    lint_arguments: ClassVar[tuple[str, str | None]] = ("table", "old")

    old: ColumnPath = ""
    new: str = ""

    def note(self) -> str:  # noqa: D102
        return f"rename column {self.table}.{_text(self.old)} to {self.new}"

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        table, old, new = self.table, self.old, self.new
        if _reshape_added(staging, table, old, lambda added: replace(added, path=(*added.path[:-1], new))):
            return
        path = _path(old)
        staging.schema_change(
            table, f"rename column {_text(old)!r}", lambda update: update.rename_column(path, new), refs=[old]
        )

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return (self.table, self.old, self.new.split(".")[-1]), {}

    def describe(self) -> str:  # noqa: D102
        return f"rename column {self.table}.{_text(self.old)} to {self.new.split('.')[-1]}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [RenameColumn(self.table, self.new, _text(self.old))]


@dataclass(frozen=True)
class AlterColumn(Operation):
    """Change a column's type, doc, or make it optional: the context's ``alter_column``.

    Not registered: autogenerate writes each of its kinds as an operation of its own, below.
    """

    method: ClassVar[str] = "alter_column"

    name: ColumnPath = ""
    type: TypeLike | None = None
    doc: str | None = None
    required: bool | None = None

    def note(self) -> str:  # noqa: D102
        return f"alter column {self.table}.{_text(self.name)}"

    def planned_risk(self, staging: TableStaging) -> Risk:  # noqa: D102
        given = (("promote_column", self.type), ("make_column_optional", self.required), ("set_column_doc", self.doc))
        return highest_risk([kind for kind, value in given if value is not None], "review")

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        table, name, type, doc, required = self.table, self.name, self.type, self.doc, self.required
        if type is None and doc is None and required is None:
            raise InvalidOperationError(f"alter_column({table!r}, {_text(name)!r}) needs type=, doc= or required=.")
        path = _path(name)
        _, transaction = staging.transaction(table)
        current = _field(staging, table, transaction, name)
        new_type = to_iceberg_type(type, _text(name)) if type is not None else None
        if new_type is not None:
            check_promotion(_text(name), current.field_type, new_type)
        if required and not current.required:
            raise InvalidOperationError(
                f"Cannot make column {_text(name)!r} of {table!r} required: existing rows may hold nulls and the "
                "Iceberg specification does not allow optional -> required."
            )

        given: dict[str, Any] = {"field_type": new_type, "doc": doc, "required": required}  # True: already required
        given = {key: value for key, value in given.items() if value is not None}
        if _reshape_added(staging, table, name, lambda added: replace(added, **given)):
            return

        def change(update: UpdateSchema) -> None:
            if new_type is not None and new_type != current.field_type:
                update.update_column(path, field_type=new_type)
            if doc is not None:
                update.update_column(path, doc=doc)
            if required is False and current.required:
                update.make_column_optional(path)

        staging.schema_change(table, f"alter column {_text(name)!r}", change, refs=[name])

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        given = {"type": self.type, "doc": self.doc, "required": self.required}
        return (self.table, self.name), {key: value for key, value in given.items() if value is not None}

    describe = note

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(f"column {self.table}.{_text(self.name)} was altered without saying what it was before")


@dataclass(frozen=True)
class _Alteration(Operation):
    """One kind of :class:`AlterColumn`, as autogenerate writes it: staged and noted as that call."""

    method: ClassVar[str] = "alter_column"
    noted: ClassVar[str] = "alter column {table}.{name}"

    name: str = ""

    def build(self, staging: TableStaging) -> None:
        AlterColumn(self.table, self.name, **self.call()[1]).build(staging)


@dataclass(frozen=True)
class AlterColumnType(_Alteration):
    """Promote a column's type (only the promotions Iceberg allows)."""

    risks: ClassVar[Mapping[str, Risk]] = {"promote_column": "review"}

    old: IcebergType | None = None
    new: IcebergType | None = None

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return (self.table, self.name), {"type": self.new}

    def describe(self) -> str:  # noqa: D102
        return f"promote column {self.table}.{self.name} from {format_type(self.old)} to {format_type(self.new)}"  # type: ignore[arg-type]

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(
            f"column {self.table}.{self.name} was promoted from {format_type(self.old)} to "  # type: ignore[arg-type]
            f"{format_type(self.new)}; Iceberg cannot narrow a type back"  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class MakeColumnOptional(_Alteration):
    """Make a required column optional."""

    risks: ClassVar[Mapping[str, Risk]] = {"make_column_optional": "review"}
    described: ClassVar[str] = "make column {table}.{name} optional"

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return (self.table, self.name), {"required": False}

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(
            f"column {self.table}.{self.name} became optional; Iceberg cannot make an optional column required"
        )


@dataclass(frozen=True)
class SetColumnDoc(_Alteration):
    """Change a column's doc."""

    risks: ClassVar[Mapping[str, Risk]] = {"set_column_doc": "safe"}

    old: str | None = None
    new: str | None = None

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return (self.table, self.name), {"doc": self.new or ""}

    def describe(self) -> str:  # noqa: D102
        return f"set doc of {self.table}.{self.name} to {self.new or ''!r}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetColumnDoc(self.table, self.name, self.new, self.old)]


@dataclass(frozen=True)
class MoveColumn(Operation):
    """Move a column first, or before/after another column (autogenerate gives ``after``, ``None``: first)."""

    risks: ClassVar[Mapping[str, Risk]] = {"move_column": "safe"}

    name: ColumnPath = ""
    after: ColumnPath | None = None
    old_after: ColumnPath | None = None
    """Where it was (``None``: first), for the reverse."""
    first: bool = False
    before: ColumnPath | None = None

    def note(self) -> str:  # noqa: D102
        return f"move column {self.table}.{_text(self.name)}"

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        first, after, before = self.first, self.after, self.before
        if sum([first, after is not None, before is not None]) != 1:
            raise InvalidOperationError("move_column needs exactly one of first=True, after= or before=.")
        path = _path(self.name)
        anchors = [ref for ref in (self.name, after, before) if ref is not None]
        after, before = (None if ref is None else _path(ref) for ref in (after, before))
        staging.schema_change(
            self.table,
            f"move column {_text(self.name)!r}",
            lambda u: place(u, path, first, after, before),
            anchors=anchors,
        )

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        if self.before is not None:
            return (self.table, self.name), {"before": self.before}
        if self.after is None:
            return (self.table, self.name), {"first": True}
        return (self.table, self.name), {"after": self.after}

    def describe(self) -> str:  # noqa: D102
        where = f"after {self.after}" if self.after else "first"
        return f"move column {self.table}.{_text(self.name)} {where}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        if self.before is not None:
            raise Irreversible(f"column {self.table}.{_text(self.name)} was moved without saying where it was")
        return [MoveColumn(self.table, self.name, self.old_after, self.after)]


@dataclass(frozen=True)
class SetIdentifierFields(Operation):
    """Replace the table's identifier fields (the row key; the columns must be required)."""

    risks: ClassVar[Mapping[str, Risk]] = {"set_identifier_fields": "review"}
    arguments: ClassVar[tuple[str, ...]] = ("table", "*names")
    noted: ClassVar[str] = "set identifier fields of {table}"

    names: tuple[str, ...] = ()
    old: tuple[str, ...] = ()

    def build(self, staging: TableStaging) -> None:  # noqa: D102
        identifier, transaction = staging.transaction(self.table)
        schema = staging.schemas.schema(identifier, transaction)
        named = index_by_name(schema)
        for name in [name for name in self.names if name in named]:  # PyIceberg names a missing column itself
            field = schema.find_field(named[name])
            if not field.required or not field.field_type.is_primitive:
                why = "optional" if not field.required else f"a {field.field_type} column"
                raise InvalidOperationError(
                    f"Cannot set identifier fields of {staging.label(identifier)}: {name!r} is {why}. "
                    "Identifier fields (the row key) must be required columns of a primitive type; Iceberg cannot "
                    "make an optional column required, so add a required one to an empty table instead."
                )
        staging.schema_change(
            self.table, "set identifier fields", lambda u: u.set_identifier_fields(*self.names), refs=list(self.names)
        )

    def describe(self) -> str:  # noqa: D102
        return f"set identifier fields of {self.table} to {', '.join(self.names) or 'none'}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetIdentifierFields(self.table, self.old, self.names)]
