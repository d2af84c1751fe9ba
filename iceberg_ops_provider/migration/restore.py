"""Bringing a dropped column back with its data: ``ctx.restore_column``.

A new schema holds the old field again (same id, type and doc, at its old position), so files written before the
drop read its values again (docs/migrations.md, "Reversible column drops").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFileContent
from pyiceberg.schema import Schema, index_by_id, index_by_name
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.update import AssertRefSnapshotId, TableRequirement
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from iceberg_ops_provider.core.schema_diff import child_fields
from iceberg_ops_provider.errors import InvalidOperationError

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "DroppedColumn",
    "RowsHolding",
    "dropped_column",
    "main_unchanged",
    "nested_ids",
    "restorable_columns",
    "restoring",
    "rows_holding",
    "total_records",
]


@dataclass(frozen=True)
class DroppedColumn:
    """A column of an earlier schema (the last that had it) that the current schema no longer has."""

    path: str
    field: NestedField
    schema: Schema


@dataclass(frozen=True)
class RowsHolding:
    """How many live rows hold a restored column's data, from the data files' column statistics.

    ``unknown`` counts rows of files without statistics; ``nulls``, of ``with_data``, the null values
    (``None`` for a struct, list or map column, whose statistics are kept per leaf).
    """

    with_data: int
    without_data: int
    unknown: int = 0
    nulls: int | None = None

    def describe(self) -> str:
        """``1,200 live rows hold its data (40 of them null), 300 do not`` (and the unknown ones, if any)."""
        held = f" ({self.nulls:,} of them null)" if self.nulls else ""
        text = f"{self.with_data:,} live rows hold its data{held}, {self.without_data:,} do not"
        if self.unknown:
            text += f", {self.unknown:,} unknown (files without column statistics)"
        return text


def dropped_column(metadata: TableMetadata, name: str, table: str, current: Schema | None = None) -> DroppedColumn:
    """The most recent column named ``name`` (dotted for nested) that an earlier schema had and ``current`` lacks.

    Raises:
        InvalidOperationError: A live column has that name, the column was renamed rather than
            dropped, or no schema of the table ever had it (the message lists what can be restored).
    """
    current = current if current is not None else metadata.schema()
    live = index_by_id(current)
    if (existing := index_by_name(current).get(name)) is not None:
        raise InvalidOperationError(
            f"Cannot restore column {name!r} of {table}: a live column has that name (field id {existing}). "
            f"Rename or drop it first (ctx.rename_column({table!r}, {name!r}, ...)), then restore."
        )
    candidates: list[DroppedColumn] = []
    renamed: NestedField | None = None
    for schema in sorted(metadata.schemas, key=lambda each: each.schema_id):
        field = _field_named(schema, name, current, live)
        if field is None:
            continue
        if field.field_id in live:
            renamed = field
        else:
            candidates.append(DroppedColumn(schema.find_column_name(field.field_id) or name, field, schema))
    if candidates:
        return candidates[-1]
    if renamed is not None:
        raise InvalidOperationError(
            f"Cannot restore column {name!r} of {table}: it was renamed, not dropped; field id {renamed.field_id} is "
            f"live as {current.find_column_name(renamed.field_id)!r}."
        )
    named_live = set(index_by_name(current))  # a name a live column has now cannot be restored
    restorable = sorted(
        {
            _current_path(schema, field_id, current) or path
            for schema in metadata.schemas
            for path, field_id in index_by_name(schema).items()
            if field_id not in live
        }
        - named_live
    )
    hint = f" Dropped columns it can restore: {', '.join(restorable)}." if restorable else ""
    raise InvalidOperationError(f"Cannot restore column {name!r} of {table}: no schema of the table ever had it.{hint}")


def _current_path(schema: Schema, field_id: int, current: Schema) -> str | None:
    """The dotted name an earlier schema's field has under its parents' current names (``None``: parent gone)."""
    leaf = schema.find_field(field_id).name
    parent_id = schema._lazy_id_to_parent.get(field_id)
    if parent_id is None:
        return leaf
    parent = current.find_column_name(parent_id)
    return None if parent is None else f"{parent}.{leaf}"


def _field_named(schema: Schema, name: str, current: Schema, live: dict[int, NestedField]) -> NestedField | None:
    """The field of ``schema`` called ``name`` there, or (when dropped) by the current names of its parents."""
    if name in index_by_name(schema):
        return schema.find_field(name)
    for field_id in index_by_id(schema):
        if field_id not in live and _current_path(schema, field_id, current) == name:
            return schema.find_field(field_id)
    return None


def nested_ids(field_type: IcebergType) -> set[int]:
    """Every field id inside ``field_type`` (struct fields, list elements, map keys and values)."""
    return set(index_by_id(field_type))


def _parent_ids(schema: Schema, path: str) -> list[int]:
    """The ids of the fields leading to the struct holding the column at ``path`` (``tags.element.x``)."""
    parts = path.split(".")
    ids = [schema.find_field(".".join(parts[:depth])).field_id for depth in range(1, len(parts))]
    if ids and not isinstance(schema.find_field(ids[-1]).field_type, StructType):
        raise InvalidOperationError(f"Cannot restore {path!r}: it is not a field of a struct.")
    return ids


def _struct_at(struct: IcebergType, parent_ids: list[int]) -> StructType | None:
    """The struct reached from ``struct`` through the fields ``parent_ids``; ``None`` when one of them is gone."""
    for field_id in parent_ids:
        struct = next((child.field_type for child in child_fields(struct) if child.field_id == field_id), None)  # type: ignore[assignment]
        if struct is None:
            return None
    return struct if isinstance(struct, StructType) else None


def _with_field(field_type: IcebergType, parent_ids: list[int], field: NestedField, after: int | None) -> IcebergType:
    """``field_type`` with ``field`` put after field ``after`` (first when ``None``) of the struct at ``parent_ids``."""
    if not parent_ids:
        fields = list(field_type.fields)  # type: ignore[attr-defined]
        position = 0 if after is None else next(i for i, f in enumerate(fields) if f.field_id == after) + 1
        fields.insert(position, field)
        return StructType(*fields)
    head, rest = parent_ids[0], parent_ids[1:]

    def rebuilt(child: NestedField) -> NestedField:
        if child.field_id != head:
            return child
        return NestedField(
            child.field_id, child.name, _with_field(child.field_type, rest, field, after), child.required, child.doc
        )

    if isinstance(field_type, StructType):
        return StructType(*(rebuilt(child) for child in field_type.fields))
    if isinstance(field_type, ListType):
        element = rebuilt(field_type.element_field)
        return ListType(element.field_id, element.field_type, element_required=element.required)
    if isinstance(field_type, MapType):
        key, value = rebuilt(field_type.key_field), rebuilt(field_type.value_field)
        return MapType(key.field_id, key.field_type, value.field_id, value.field_type, value_required=value.required)
    raise InvalidOperationError(f"Cannot restore into a {field_type} column.")


def restoring(
    metadata: TableMetadata, dropped: DroppedColumn, holding: RowsHolding, current: Schema | None = None
) -> tuple[Schema, tuple[TableRequirement, ...]]:
    """``current`` (default: the table's schema) with ``dropped`` back after its nearest earlier live sibling.

    Also what the commit must require: a required column stays required when ``holding`` says every
    live row holds it, and then the commit asserts the main branch is still where it was.
    """
    current = current if current is not None else metadata.schema()
    keep_required = dropped.field.required and not holding.without_data and not holding.unknown
    parent_ids = _parent_ids(dropped.schema, dropped.path)
    live_parent = _struct_at(current.as_struct(), parent_ids)
    old_parent = _struct_at(dropped.schema.as_struct(), parent_ids)
    if live_parent is None or old_parent is None:
        raise InvalidOperationError(
            f"Cannot restore column {dropped.path!r}: the struct that held it was dropped too; restore that first."
        )
    old_siblings = [f.field_id for f in old_parent.fields]
    before = old_siblings[: old_siblings.index(dropped.field.field_id)]
    live_ids = {f.field_id for f in live_parent.fields}
    after = next((field_id for field_id in reversed(before) if field_id in live_ids), None)
    old = dropped.field
    field = NestedField(old.field_id, old.name, old.field_type, required=keep_required, doc=old.doc)
    struct = _with_field(current.as_struct(), parent_ids, field, after)
    schema = Schema(
        *struct.fields,  # type: ignore[attr-defined]
        schema_id=1 + max(schema.schema_id for schema in metadata.schemas),
        identifier_field_ids=current.identifier_field_ids,
    )
    return schema, (main_unchanged(metadata.current_snapshot()),) if keep_required else ()


def main_unchanged(snapshot: Snapshot | None) -> TableRequirement:
    """The commit requirement that the main branch is still at ``snapshot`` (no rows written meanwhile)."""
    return AssertRefSnapshotId(ref=MAIN_BRANCH, snapshot_id=snapshot.snapshot_id if snapshot else None)


def total_records(snapshot: Snapshot | None) -> int:
    """The rows a snapshot holds, from its summary (0 without one)."""
    return int(snapshot.summary.get("total-records", "0")) if snapshot and snapshot.summary else 0


def rows_holding(metadata: TableMetadata, io: FileIO, field: NestedField) -> RowsHolding:
    """How many rows of the current snapshot's data files hold values of ``field`` (from column statistics).

    Statistics are kept per leaf column, so a struct column counts as held where any of its fields is.
    """
    field_ids = {field.field_id, *nested_ids(field.field_type)}
    snapshot = metadata.current_snapshot()
    with_data = without = unknown = 0
    nulls: int | None = 0 if field.field_type.is_primitive else None
    for manifest in snapshot.manifests(io) if snapshot is not None else ():
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            data_file = entry.data_file
            if data_file.content != DataFileContent.DATA:
                continue
            stats = [data_file.value_counts, data_file.column_sizes, data_file.null_value_counts]
            if not any(stats):
                unknown += data_file.record_count
            elif any(field_ids & set(each or {}) for each in stats):
                with_data += data_file.record_count
                if nulls is not None:
                    counted = (data_file.null_value_counts or {}).get(field.field_id)
                    nulls = None if counted is None else nulls + counted
            else:
                without += data_file.record_count
    return RowsHolding(with_data, without, unknown, nulls)


def restorable_columns(metadata: TableMetadata, io: FileIO) -> list[str]:
    """The dropped columns whose values live data files still hold, named as in the last schema that had each."""
    current = index_by_id(metadata.schema())
    dropped: dict[int, tuple[str, NestedField]] = {}
    for schema in metadata.schemas:
        for field_id, field in index_by_id(schema).items():
            if field_id not in current:
                dropped[field_id] = (schema.find_column_name(field_id) or field.name, field)
    inside = {child for _, field in dropped.values() for child in nested_ids(field.field_type)}
    return sorted(
        name
        for field_id, (name, field) in dropped.items()
        if field_id not in inside and rows_holding(metadata, io, field).with_data
    )
