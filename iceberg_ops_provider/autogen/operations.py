"""Operations: one change to one table, as data.

Autogenerate builds a list of these; the renderer turns them into ``MigrationContext`` calls,
``check`` and ``revision`` print them, and each knows how to reverse itself (or why it cannot) and
how risky it is: its :attr:`Operation.kind` is looked up in
:data:`~iceberg_ops_provider.migration.risks.RISKS`, the table ``plan`` labels what a migration's
body asks for from, so a generated step has the same label in its file and in ``plan``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyiceberg.types import IcebergType

from iceberg_ops_provider.core.type_strings import format_type
from iceberg_ops_provider.migration.risks import Risk, risk_of

__all__ = [
    "AddColumn",
    "AddPartitionField",
    "AlterColumnType",
    "CreateTable",
    "DropColumn",
    "DropPartitionField",
    "DropTable",
    "Irreversible",
    "MakeColumnOptional",
    "MoveColumn",
    "Operation",
    "RemoveProperties",
    "RenameColumn",
    "RestoreColumn",
    "Risk",
    "SetColumnDoc",
    "SetIdentifierFields",
    "SetProperties",
    "SetSortOrder",
]


class Irreversible(Exception):
    """Raised by :meth:`Operation.reverse` for a step that cannot be undone; the message is the reason."""


@dataclass(frozen=True)
class Operation:
    """One change to one table."""

    table: str
    kind: ClassVar[str]
    """Its kind in :data:`~iceberg_ops_provider.migration.risks.RISKS` (the ``MigrationContext`` call, more or less)."""

    @property
    def risk(self) -> Risk:
        """How risky the step is (``safe``, ``review``, ``destructive``), from the table ``plan`` reads too."""
        return risk_of(self.kind)

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        """The ``MigrationContext`` method, positional and keyword arguments that perform this step."""
        raise NotImplementedError  # pragma: no cover - every concrete operation overrides it

    def describe(self) -> str:
        """A one-line human description."""
        raise NotImplementedError  # pragma: no cover

    def reverse(self) -> list[Operation]:
        """The steps that undo this one.

        Raises:
            Irreversible: This step cannot be undone; the message says why.
        """
        raise NotImplementedError  # pragma: no cover

    def apply(self, ctx: Any) -> None:
        """Perform the step on a ``MigrationContext``."""
        method, args, kwargs = self.call()
        getattr(ctx, method)(*args, **kwargs)

    def render(self, indent: str = "") -> str:
        """The step as Python source: ``ctx.add_column("orders", "email", "string")``.

        Args:
            indent: The indentation of the line the call starts on; long calls are split one
                argument per line below it.
        """
        method, args, kwargs = self.call()
        parts = [_literal(arg, indent + "    ") for arg in args]
        parts += [f"{key}={_literal(value, indent + '    ')}" for key, value in kwargs.items()]
        one_line = f"ctx.{method}({', '.join(parts)})"
        if len(indent) + len(one_line) <= 110 and "\n" not in one_line:
            return one_line
        inner = "".join(f"{indent}    {part},\n" for part in parts)
        return f"ctx.{method}(\n{inner}{indent})"

    def to_json(self) -> dict[str, str]:
        """JSON-able summary."""
        return {
            "table": self.table,
            "risk": self.risk,
            "operation": type(self).__name__,
            "description": self.describe(),
        }


def _literal(value: Any, indent: str = "") -> str:
    """Python source for a value, with double-quoted strings as the project's formatter writes them."""
    if isinstance(value, IcebergType):
        return json.dumps(format_type(value))
    if isinstance(value, Rendered):
        return value.render(indent)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        inner = ", ".join(_literal(item) for item in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


@dataclass(frozen=True)
class Rendered:
    """A value that renders as source code through a function of the indentation (used for schemas)."""

    renderer: Callable[[str], str] = field(compare=False, repr=False)
    value: Any = field(compare=False, default=None)

    def render(self, indent: str) -> str:
        """The source, for a value whose line starts at ``indent``."""
        return self.renderer(indent)


@dataclass(frozen=True)
class CreateTable(Operation):
    """Create a table with its columns, spec, sort order and properties."""

    kind: ClassVar[str] = "create_table"

    schema: Rendered = field(default_factory=lambda: Rendered(lambda indent: "None"))
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        kwargs: dict[str, Any] = {"schema": self.schema}
        if self.partition_by:
            kwargs["partition_by"] = list(self.partition_by)
        if self.sort_by:
            kwargs["sort_by"] = list(self.sort_by)
        if self.properties:
            kwargs["properties"] = dict(self.properties)
        return "create_table", (self.table,), kwargs

    def apply(self, ctx: Any) -> None:  # noqa: D102
        _, args, kwargs = self.call()
        ctx.create_table(*args, **{**kwargs, "schema": self.schema.value})

    def describe(self) -> str:  # noqa: D102
        return f"create table {self.table}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropTable(self.table)]


@dataclass(frozen=True)
class DropTable(Operation):
    """Drop a table."""

    kind: ClassVar[str] = "drop_table"

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "drop_table", (self.table,), {}

    def describe(self) -> str:  # noqa: D102
        return f"drop table {self.table}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(f"table {self.table} was dropped; its data cannot be brought back by a migration")


@dataclass(frozen=True)
class AddColumn(Operation):
    """Add a column, placed after another one (or first).

    A nested field is a dotted path (``address.zip``, ``items.element.sku``), and ``after`` names its
    sibling by full path too (``address.street``).
    """

    name: str = ""
    type: IcebergType | None = None
    required: bool = False
    doc: str | None = None
    after: str | None = None
    first: bool = False

    @property
    def kind(self) -> str:  # type: ignore[override]
        """Adding a required column is refused on tables with rows: a kind of its own, to review."""
        return "add_required_column" if self.required else "add_column"

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        kwargs: dict[str, Any] = {}
        if self.required:
            kwargs["required"] = True
        if self.doc:
            kwargs["doc"] = self.doc
        if self.first:
            kwargs["first"] = True
        elif self.after is not None:
            kwargs["after"] = self.after
        return "add_column", (self.table, self.name, self.type), kwargs

    def describe(self) -> str:  # noqa: D102
        kind = "required " if self.required else ""
        return f"add {kind}column {self.table}.{self.name} {format_type(self.type)}"  # type: ignore[arg-type]

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropColumn(self.table, self.name)]


@dataclass(frozen=True)
class DropColumn(Operation):
    """Drop a column."""

    kind: ClassVar[str] = "drop_column"

    name: str = ""

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "drop_column", (self.table, self.name), {}

    def describe(self) -> str:  # noqa: D102
        return f"drop column {self.table}.{self.name}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [RestoreColumn(self.table, self.name)]


@dataclass(frozen=True)
class RestoreColumn(Operation):
    """Bring a dropped column back with its data (the downgrade of a drop)."""

    kind: ClassVar[str] = "restore_column"

    name: str = ""

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "restore_column", (self.table, self.name), {}

    def describe(self) -> str:  # noqa: D102
        return f"restore column {self.table}.{self.name}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropColumn(self.table, self.name)]


@dataclass(frozen=True)
class RenameColumn(Operation):
    """Rename a column (``renamed_from`` in the model)."""

    kind: ClassVar[str] = "rename_column"

    old: str = ""
    new: str = ""

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "rename_column", (self.table, self.old, self.new.split(".")[-1]), {}

    def describe(self) -> str:  # noqa: D102
        return f"rename column {self.table}.{self.old} to {self.new.split('.')[-1]}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [RenameColumn(self.table, self.new, self.old)]


@dataclass(frozen=True)
class AlterColumnType(Operation):
    """Promote a column's type (only the promotions Iceberg allows)."""

    kind: ClassVar[str] = "promote_column"

    name: str = ""
    old: IcebergType | None = None
    new: IcebergType | None = None

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "alter_column", (self.table, self.name), {"type": self.new}

    def describe(self) -> str:  # noqa: D102
        return f"promote column {self.table}.{self.name} from {format_type(self.old)} to {format_type(self.new)}"  # type: ignore[arg-type]

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(
            f"column {self.table}.{self.name} was promoted from {format_type(self.old)} to "  # type: ignore[arg-type]
            f"{format_type(self.new)}; Iceberg cannot narrow a type back"  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class MakeColumnOptional(Operation):
    """Make a required column optional."""

    kind: ClassVar[str] = "make_column_optional"

    name: str = ""

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "alter_column", (self.table, self.name), {"required": False}

    def describe(self) -> str:  # noqa: D102
        return f"make column {self.table}.{self.name} optional"

    def reverse(self) -> list[Operation]:  # noqa: D102
        raise Irreversible(
            f"column {self.table}.{self.name} became optional; Iceberg cannot make an optional column required"
        )


@dataclass(frozen=True)
class SetColumnDoc(Operation):
    """Change a column's doc."""

    kind: ClassVar[str] = "set_column_doc"

    name: str = ""
    old: str | None = None
    new: str | None = None

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "alter_column", (self.table, self.name), {"doc": self.new or ""}

    def describe(self) -> str:  # noqa: D102
        return f"set doc of {self.table}.{self.name} to {self.new or ''!r}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetColumnDoc(self.table, self.name, self.new, self.old)]


@dataclass(frozen=True)
class MoveColumn(Operation):
    """Move a column after another one, or first."""

    kind: ClassVar[str] = "move_column"

    name: str = ""
    after: str | None = None
    old_after: str | None = None

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        if self.after is None:
            return "move_column", (self.table, self.name), {"first": True}
        return "move_column", (self.table, self.name), {"after": self.after}

    def describe(self) -> str:  # noqa: D102
        where = f"after {self.after}" if self.after else "first"
        return f"move column {self.table}.{self.name} {where}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [MoveColumn(self.table, self.name, self.old_after, self.after)]


@dataclass(frozen=True)
class SetIdentifierFields(Operation):
    """Replace the table's identifier fields."""

    kind: ClassVar[str] = "set_identifier_fields"

    names: tuple[str, ...] = ()
    old: tuple[str, ...] = ()

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "set_identifier_fields", (self.table, *self.names), {}

    def describe(self) -> str:  # noqa: D102
        return f"set identifier fields of {self.table} to {', '.join(self.names) or 'none'}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetIdentifierFields(self.table, self.old, self.names)]


@dataclass(frozen=True)
class AddPartitionField(Operation):
    """Add a partition field (new data is partitioned by it; existing files keep their spec)."""

    kind: ClassVar[str] = "add_partition_field"

    expr: str = ""
    name: str = ""

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "add_partition_field", (self.table, self.expr), {"name": self.name}

    def describe(self) -> str:  # noqa: D102
        return f"partition {self.table} by {self.expr}" + (f" (field {self.name})" if self.name else "")

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [DropPartitionField(self.table, self.name, self.expr)]


@dataclass(frozen=True)
class DropPartitionField(Operation):
    """Remove a partition field."""

    kind: ClassVar[str] = "drop_partition_field"

    name: str = ""
    expr: str = ""

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "drop_partition_field", (self.table, self.name), {}

    def describe(self) -> str:  # noqa: D102
        return f"stop partitioning {self.table} by {self.expr}" + (f" (field {self.name})" if self.name else "")

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [AddPartitionField(self.table, self.expr, self.name)]


@dataclass(frozen=True)
class SetSortOrder(Operation):
    """Replace the table's sort order."""

    kind: ClassVar[str] = "set_sort_order"

    fields: tuple[str, ...] = ()
    old: tuple[str, ...] = ()

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "set_sort_order", (self.table, list(self.fields)), {}

    def describe(self) -> str:  # noqa: D102
        return f"sort {self.table} by {', '.join(self.fields)}" if self.fields else f"make {self.table} unsorted"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetSortOrder(self.table, self.old, self.fields)]


@dataclass(frozen=True)
class SetProperties(Operation):
    """Set table properties; ``old`` holds the previous values (``None``: was not set)."""

    kind: ClassVar[str] = "set_properties"

    values: Mapping[str, str] = field(default_factory=dict)
    old: Mapping[str, str | None] = field(default_factory=dict)

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "set_properties", (self.table, dict(self.values)), {}

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

    kind: ClassVar[str] = "remove_properties"

    keys: tuple[str, ...] = ()
    old: Mapping[str, str] = field(default_factory=dict)

    def call(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:  # noqa: D102
        return "remove_properties", (self.table, *self.keys), {}

    def describe(self) -> str:  # noqa: D102
        return f"remove properties of {self.table}: {', '.join(self.keys)}"

    def reverse(self) -> list[Operation]:  # noqa: D102
        return [SetProperties(self.table, dict(self.old), dict.fromkeys(self.old))]
