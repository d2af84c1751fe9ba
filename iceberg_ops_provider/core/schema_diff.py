"""Compare two schemas and list what changed, by field id or by name.

By id renames show as renames; by name (Arrow, a model file) as a removal and an addition. Nested
fields are compared too, their paths tuples of names as PyIceberg addresses them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from iceberg_ops_provider.core.types import as_iceberg_schema, has_field_ids

__all__ = ["ChangeKind", "SchemaChange", "SchemaDiff", "child_fields", "diff_schemas", "field_paths", "unmoved"]

ChangeKind = Literal["added", "removed", "renamed", "type_changed", "required_changed", "doc_changed", "moved"]

Path = tuple[str, ...]


@dataclass(frozen=True)
class SchemaChange:
    """One difference between two schemas (``path`` in the old one for ``removed``; ``field_id`` by id only)."""

    kind: ChangeKind
    path: Path
    old: object = None
    new: object = None
    field_id: int | None = None

    @property
    def column(self) -> str:
        """The column as a dotted name."""
        return ".".join(self.path)

    def __str__(self) -> str:
        """A readable one-line description."""
        column, old, new = self.column, self.old, self.new
        state = {True: "required", False: "optional"}
        return {
            "added": f"column {column!r} added ({new})",
            "removed": f"column {column!r} removed (was {old})",
            "renamed": f"column {old!r} renamed to {new!r}",
            "type_changed": f"column {column!r} type changed from {old} to {new}",
            "required_changed": f"column {column!r} changed from {state[bool(old)]} to {state[bool(new)]}",
            "doc_changed": f"column {column!r} doc changed from {old!r} to {new!r}",
            "moved": f"column {column!r} moved from position {old} to {new}",
        }[self.kind]


@dataclass(frozen=True)
class SchemaDiff:
    """Every difference between an old and a new schema, parents before children.

    A diff is falsy when the schemas are the same.
    """

    changes: tuple[SchemaChange, ...] = field(default_factory=tuple)
    matched_by: Literal["id", "name"] = "id"

    def __bool__(self) -> bool:
        """True when anything differs."""
        return bool(self.changes)

    def of_kind(self, *kinds: ChangeKind) -> list[SchemaChange]:
        """The changes of the given kinds, in order."""
        return [change for change in self.changes if change.kind in kinds]

    def __str__(self) -> str:
        """One line per change, or ``no changes``."""
        return "\n".join(str(change) for change in self.changes) or "no changes"


@dataclass(frozen=True)
class _Entry:
    field: NestedField
    path: Path
    parent: object  # parent field id (by id) or parent path (by name); the schema root is None
    position: int
    field_id: int | None  # by id only


def child_fields(field_type: IcebergType) -> list[NestedField]:
    """The fields nested directly in ``field_type``: a struct's fields, a list's element, a map's key and value."""
    if isinstance(field_type, StructType):
        return list(field_type.fields)
    if isinstance(field_type, ListType):
        return [field_type.element_field]
    if isinstance(field_type, MapType):
        return [field_type.key_field, field_type.value_field]
    return []


def _walk(fields: list[NestedField], prefix: Path, parent_key: object, by: str) -> Iterator[_Entry]:
    for position, nested in enumerate(fields):
        path = (*prefix, nested.name)
        key = nested.field_id if by == "id" else path
        yield _Entry(nested, path, parent_key, position, nested.field_id if by == "id" else None)
        yield from _walk(child_fields(nested.field_type), path, key, by)


def field_paths(schema: Schema) -> dict[Path, NestedField]:
    """Every field of ``schema``, nested ones included, keyed by its path of names."""
    return {entry.path: entry.field for entry in _walk(list(schema.fields), (), None, "name")}


def _shape(field_type: IcebergType) -> object:
    """Nested types compare by kind here; their children are compared field by field."""
    return str(field_type) if field_type.is_primitive else type(field_type)


def unmoved(current: list[Any], desired: list[Any]) -> set[Any]:
    """Keys on a longest run of ``desired`` whose relative order ``current`` already has.

    Both lists hold the same keys. Moving every other key (in ``desired`` order, after its
    predecessor there) turns ``current`` into ``desired`` with the fewest moves.
    """
    position = {key: index for index, key in enumerate(current)}
    sequence = [position[key] for key in desired]
    tails: list[int] = []
    tail_at: list[int] = []
    previous = [-1] * len(sequence)
    for index, value in enumerate(sequence):
        slot = bisect.bisect_left(tails, value)
        if slot == len(tails):
            tails.append(value)
            tail_at.append(index)
        else:
            tails[slot] = value
            tail_at[slot] = index
        previous[index] = tail_at[slot - 1] if slot else -1
    keep = set()
    cursor = tail_at[-1] if tail_at else -1
    while cursor != -1:
        keep.add(desired[cursor])
        cursor = previous[cursor]
    return keep


def diff_schemas(
    old: Schema | pa.Schema, new: Schema | pa.Schema, *, by: Literal["auto", "id", "name"] = "auto"
) -> SchemaDiff:
    """List what changed from ``old`` to ``new``.

    Iceberg or Arrow schemas; fields are matched ``by`` ``"id"`` or ``"name"`` (``"auto"``: by id when
    both carry ids). Renames are seen by id only; moves among siblings are listed too.
    """
    if by == "auto":
        by = "id" if has_field_ids(old) and has_field_ids(new) else "name"
    old_entries, new_entries = (
        {(e.field.field_id if by == "id" else e.path): e for e in _walk(list(schema.fields), (), None, by)}
        for schema in (as_iceberg_schema(old), as_iceberg_schema(new))
    )
    changes: list[SchemaChange] = []
    for key, entry in new_entries.items():
        before = old_entries.get(key)
        if before is None:
            changes.append(SchemaChange("added", entry.path, new=entry.field.field_type, field_id=entry.field_id))
            continue
        changes.extend(_field_changes(before, entry))
    for key, entry in old_entries.items():
        if key not in new_entries:
            changes.append(SchemaChange("removed", entry.path, old=entry.field.field_type, field_id=entry.field_id))
    changes.extend(_order_changes(old_entries, new_entries))
    return SchemaDiff(tuple(changes), matched_by=by)


def _field_changes(before: _Entry, after: _Entry) -> Iterator[SchemaChange]:
    old_field, new_field, path, field_id = before.field, after.field, after.path, after.field_id
    if old_field.name != new_field.name:
        yield SchemaChange("renamed", path, old=".".join(before.path), new=".".join(path), field_id=field_id)
    if _shape(old_field.field_type) != _shape(new_field.field_type):
        yield SchemaChange("type_changed", path, old=old_field.field_type, new=new_field.field_type, field_id=field_id)
    if old_field.required != new_field.required:
        yield SchemaChange("required_changed", path, old=old_field.required, new=new_field.required, field_id=field_id)
    if (old_field.doc or None) != (new_field.doc or None):
        yield SchemaChange("doc_changed", path, old=old_field.doc, new=new_field.doc, field_id=field_id)


def _order_changes(old_entries: dict[object, _Entry], new_entries: dict[object, _Entry]) -> Iterator[SchemaChange]:
    stayed: dict[object, list[object]] = {}  # the fields under the same parent in both, by parent
    for key, entry in new_entries.items():
        if key in old_entries and old_entries[key].parent == entry.parent:
            stayed.setdefault(entry.parent, []).append(key)
    for keys in stayed.values():
        old_order = sorted(keys, key=lambda k: old_entries[k].position)
        new_order = sorted(keys, key=lambda k: new_entries[k].position)
        for key in set(new_order) - unmoved(old_order, new_order):
            entry = new_entries[key]
            yield SchemaChange(
                "moved", entry.path, old=old_entries[key].position, new=entry.position, field_id=entry.field_id
            )
