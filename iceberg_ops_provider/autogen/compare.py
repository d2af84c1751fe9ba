"""Compare a table model with the live table and list the operations that close the gap (docs/autogenerate.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from pyiceberg.transforms import VoidTransform
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from iceberg_ops_provider.autogen.models import ColumnModel, TableModel
from iceberg_ops_provider.autogen.operations import (
    AddColumn,
    AddPartitionField,
    AlterColumnType,
    CreateTable,
    DropColumn,
    DropPartitionField,
    DropTable,
    MakeColumnOptional,
    MoveColumn,
    Operation,
    RemoveProperties,
    RenameColumn,
    SetColumnDoc,
    SetIdentifierFields,
    SetProperties,
    SetSortOrder,
)
from iceberg_ops_provider.autogen.render import schema_literal
from iceberg_ops_provider.core.evolution import check_promotion
from iceberg_ops_provider.core.schema_diff import unmoved
from iceberg_ops_provider.core.type_strings import format_type
from iceberg_ops_provider.errors import ModelError, SchemaEvolutionError
from iceberg_ops_provider.migration.transforms import (
    PartitionExpr,
    SortExpr,
    format_partition_expr,
    parse_partition_expr,
    parse_sort_field,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["compare_table", "default_partition_name", "live_partition_exprs", "live_sort_fields"]


def default_partition_name(expr: PartitionExpr) -> str:
    """The partition field name PyIceberg would choose (``id_bucket_16``, ``ts_day``...)."""
    column = expr.column.replace(".", "_")
    transform = str(expr.transform)
    if transform == "identity":
        return expr.column
    if transform.startswith("bucket"):
        return f"{column}_bucket_{expr.transform.num_buckets}"  # type: ignore[attr-defined]
    if transform.startswith("truncate"):
        return f"{column}_trunc_{expr.transform.width}"  # type: ignore[attr-defined]
    return f"{column}_{transform}"


def live_partition_exprs(table: Table) -> dict[str, str]:
    """The current spec as ``{canonical expression: partition field name}`` (void fields left out)."""
    schema = table.schema()
    return {
        format_partition_expr(schema.find_column_name(each.source_id), each.transform): each.name  # type: ignore[arg-type]
        for each in table.spec().fields
        if not isinstance(each.transform, VoidTransform)
    }


def live_sort_fields(table: Table) -> tuple[str, ...]:
    """The current sort order as canonical sort-field strings."""
    schema = table.schema()
    return tuple(
        str(SortExpr(schema.find_column_name(each.source_id), each.transform, each.direction, each.null_order))  # type: ignore[arg-type]
        for each in table.sort_order().fields
    )


def _canonical_sort(fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(str(parse_sort_field(f)) for f in fields)


def _referenced_columns(expressions: tuple[str, ...] | list[str], parse: object) -> set[str]:
    return {parse(expression).column.split(".")[0] for expression in expressions}  # type: ignore[operator]


def compare_table(model: TableModel, table: Table | None) -> list[Operation]:
    """The operations that make ``table`` (``None``: it does not exist) match ``model``.

    Raises:
        ForbiddenPromotionError: The model changes a type in a way Iceberg forbids.
        SchemaEvolutionError: The model makes an optional column required.
        ModelError: The model asks for something autogenerate cannot express.
    """
    if model.dropped:
        return [DropTable(model.name)] if table is not None else []
    if table is None:
        return _create(model)
    return _Differ(model, table).run()


def _create(model: TableModel) -> list[Operation]:
    create = CreateTable(
        model.name,
        schema=schema_literal(model.schema()),
        partition_by=tuple(str(parse_partition_expr(e)) for e in model.partition_by),
        sort_by=_canonical_sort(model.sort_by),
        properties={key: value for key, value in model.properties.items() if value is not None},
    )
    keys = model.identifier_fields
    return [create, SetIdentifierFields(model.name, keys, ())] if keys else [create]


class _Differ:
    """Walks one model against one live table, keeping the simulated column order up to date."""

    def __init__(self, model: TableModel, table: Table) -> None:
        self.model = model
        self.table = table
        self.name = model.name
        schema = table.schema()
        self.live: dict[str, NestedField] = {f.name: f for f in schema.fields}
        self.order: list[str] = [f.name for f in schema.fields]
        self.identifiers = tuple(sorted(schema.identifier_field_names()))
        self.ops: list[Operation] = []

    def run(self) -> list[Operation]:
        model_names = [c.name for c in self.model.columns]
        renames = self._rename_map()
        # Specs and sort orders follow field ids, so a renamed column keeps its partition and sort fields.
        live_parts = {
            _renamed(e, renames, parse_partition_expr): (n, e) for e, n in live_partition_exprs(self.table).items()
        }
        wanted_parts = {str(parse_partition_expr(e)): e for e in self.model.partition_by}
        live_sort = tuple(_renamed(f, renames, parse_sort_field) for f in live_sort_fields(self.table))
        wanted_sort = _canonical_sort(self.model.sort_by)
        wanted_ids = tuple(sorted(self.model.identifier_fields))

        self.ops += [DropPartitionField(self.name, n, e) for x, (n, e) in live_parts.items() if x not in wanted_parts]
        self._renames(renames)
        dropped = [name for name in self.order if name not in model_names]
        # A sort order or identifier set that uses a column about to be dropped must change first.
        sort_early = wanted_sort != live_sort and (
            _referenced_columns(live_sort, parse_sort_field) & set(dropped) or not wanted_sort
        )
        if sort_early:
            early_sort = (
                wanted_sort if not (_referenced_columns(wanted_sort, parse_sort_field) - set(self.order)) else ()
            )
            self.ops.append(SetSortOrder(self.name, early_sort, live_sort))
            live_sort = early_sort
        # Identifier fields must stay required and present: drop the ones that go away first.
        staying = tuple(
            i
            for i in self.identifiers
            if i in wanted_ids and i not in dropped and self._model_column(i).required  # type: ignore[union-attr]
        )
        if staying != self.identifiers:
            self.ops.append(SetIdentifierFields(self.name, staying, self.identifiers))
            self.identifiers = staying
        for name in dropped:
            self.ops.append(DropColumn(self.name, name))
            self.order.remove(name)
        for column in self.model.columns:
            if column.name in self.live:
                self._changes(column.name, self.live[column.name], _as_field(column))
        self._additions()
        self._moves(model_names)
        self.ops += [
            AddPartitionField(self.name, expr, default_partition_name(parse_partition_expr(original)))
            for expr, original in wanted_parts.items()
            if expr not in live_parts
        ]
        if wanted_sort != live_sort:
            self.ops.append(SetSortOrder(self.name, wanted_sort, live_sort))
        if wanted_ids != self.identifiers:
            self.ops.append(SetIdentifierFields(self.name, wanted_ids, self.identifiers))
        self._properties()
        return self.ops

    def _model_column(self, name: str) -> ColumnModel | None:
        return next((column for column in self.model.columns if column.name == name), None)

    def _rename_map(self) -> dict[str, str]:
        renames = {}
        for column in self.model.columns:
            source = column.renamed_from
            if not source or column.name in self.live:
                continue  # no rename, or already renamed
            if source not in self.live:
                raise ModelError(
                    f"{self.model.source}: column {column.name!r} is renamed_from {source!r}, but table "
                    f"{self.name} has neither column; remove renamed_from or fix the name."
                )
            renames[source] = column.name
        return renames

    def _renames(self, renames: dict[str, str]) -> None:
        for source, new in renames.items():
            self.ops.append(RenameColumn(self.name, source, new))
            self.live[new] = self.live.pop(source)
            self.order[self.order.index(source)] = new
            self.identifiers = tuple(sorted(new if i == source else i for i in self.identifiers))

    def _changes(self, path: str, live: NestedField, wanted: NestedField, *, has_doc: bool = True) -> None:
        """The steps that turn the live field at ``path`` into the wanted one: type, required, doc (if ``has_doc``)."""
        self._type_changes(path, live.field_type, wanted.field_type)
        if live.required and not wanted.required:
            self.ops.append(MakeColumnOptional(self.name, path))
        elif wanted.required and not live.required:
            raise SchemaEvolutionError(
                f"{self.model.source}: column {path!r} is optional in table {self.name} and required in the model; "
                "Iceberg cannot make an optional column required. Keep it optional in the model."
            )
        if has_doc and (live.doc or None) != (wanted.doc or None):
            self.ops.append(SetColumnDoc(self.name, path, live.doc or None, wanted.doc or None))

    def _type_changes(self, path: str, live: IcebergType, wanted: IcebergType) -> None:
        if isinstance(live, StructType) and isinstance(wanted, StructType):
            self._struct_changes(path, live, wanted)
        elif isinstance(live, ListType) and isinstance(wanted, ListType):
            self._changes(f"{path}.element", live.element_field, wanted.element_field, has_doc=False)
        elif isinstance(live, MapType) and isinstance(wanted, MapType):
            self._map_changes(path, live, wanted)
        elif isinstance(live, ListType | MapType) or isinstance(wanted, ListType | MapType):
            raise ModelError(
                f"{self.model.source}: column {path!r} changes from {format_type(live)} to {format_type(wanted)}; "
                "a list or map cannot change kind. Write this migration by hand (a new column, backfilled)."
            )
        elif live != wanted:
            check_promotion(path, live, wanted)
            self.ops.append(AlterColumnType(self.name, path, live, wanted))

    def _map_changes(self, path: str, live: MapType, wanted: MapType) -> None:
        if format_type(live.key_type) != format_type(wanted.key_type):
            raise ModelError(
                f"{self.model.source}: the keys of map column {path!r} change from {format_type(live.key_type)} to "
                f"{format_type(wanted.key_type)}; Iceberg cannot change map keys. Write this migration by hand "
                "(a new column, backfilled)."
            )
        self._changes(f"{path}.value", live.value_field, wanted.value_field, has_doc=False)

    def _struct_changes(self, path: str, live: StructType, wanted: StructType) -> None:
        live_fields = {f.name: f for f in live.fields}
        wanted_names = {f.name for f in wanted.fields}
        common_live = [f.name for f in live.fields if f.name in wanted_names]
        common_wanted = [f.name for f in wanted.fields if f.name in live_fields]
        if common_live != common_wanted:
            raise ModelError(
                f"{self.model.source}: the fields of struct column {path!r} are reordered "
                f"({', '.join(common_live)} -> {', '.join(common_wanted)}); autogenerate does not move nested "
                "fields. Keep their order in the model, or write the migration by hand (ctx.move_column)."
            )
        previous: str | None = None
        for nested in wanted.fields:
            nested_path = f"{path}.{nested.name}"
            if nested.name in live_fields:
                self._changes(nested_path, live_fields[nested.name], nested)
            else:
                self.ops.append(_add_nested(self.name, nested_path, nested, previous))
            previous = nested_path
        # Drops come last, so a struct never goes through having no fields (PyIceberg 0.12 cannot
        # rebuild a list or map around an empty struct).
        self.ops += [DropColumn(self.name, f"{path}.{f.name}") for f in live.fields if f.name not in wanted_names]

    def _additions(self) -> None:
        previous: str | None = None
        for column in self.model.columns:
            if column.name not in self.live:
                self.ops.append(_add_nested(self.name, column.name, _as_field(column), previous))
                position = self.order.index(previous) + 1 if previous is not None else 0
                self.order.insert(position, column.name)
            previous = column.name

    def _moves(self, desired: list[str]) -> None:
        keep = unmoved(self.order, desired)
        for index, name in enumerate(desired):
            after = desired[index - 1] if index else None
            old_position = self.order.index(name)
            old_after = self.order[old_position - 1] if old_position else None
            if name in keep or after == old_after:
                continue
            self.ops.append(MoveColumn(self.name, name, after, old_after))
            self.order.remove(name)
            self.order.insert(self.order.index(after) + 1 if after is not None else 0, name)

    def _properties(self) -> None:
        live = dict(self.table.properties)
        to_set = {k: v for k, v in self.model.properties.items() if v is not None and live.get(k) != v}
        to_remove = tuple(k for k, v in self.model.properties.items() if v is None and k in live)
        if to_set:
            self.ops.append(SetProperties(self.name, to_set, {k: live.get(k) for k in to_set}))
        if to_remove:
            self.ops.append(RemoveProperties(self.name, to_remove, {k: live[k] for k in to_remove}))


def _as_field(column: ColumnModel) -> NestedField:
    """A model column as a field, to compare it like nested ones (its id is never used)."""
    return NestedField(0, column.name, column.type, required=column.required, doc=column.doc)


def _add_nested(table: str, path: str, nested: NestedField, previous: str | None) -> AddColumn:
    """Add a field right after ``previous`` (its predecessor in the model), or first: PyIceberg would append it."""
    return AddColumn(
        table, path, nested.field_type, nested.required, nested.doc, after=previous, first=previous is None
    )


def _renamed(text: str, renames: dict[str, str], parse: Callable[[str], PartitionExpr | SortExpr]) -> str:
    """A partition expression or sort field (as ``parse`` reads it) naming its column as ``renames`` leave it."""
    parsed = parse(text)
    head, dot, rest = parsed.column.partition(".")
    return str(replace(parsed, column=renames.get(head, head) + dot + rest))
