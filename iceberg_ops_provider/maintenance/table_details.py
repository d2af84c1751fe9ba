"""What a table's metadata file says of its shape: schema, partition specs, sort orders, properties and refs.

Read from the loaded metadata alone: no manifest list, manifest or data file is opened. A property holding a
credential (by its name, or a URI's password, query or path parameters) is given as ``***``
(:func:`~iceberg_ops_provider.catalogs.redact.split_secrets`): what is read here is shown to whoever may read the table.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.types import ListType, MapType, NestedField, StructType

from iceberg_ops_provider.catalogs.redact import split_secrets

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["RefRow", "SchemaField", "SortOrderRow", "SpecFieldRow", "SpecRow", "TableDetails", "table_details"]


@dataclass(frozen=True)
class SchemaField:
    """One field of the current schema; ``name`` is its dotted path (``address.city``, ``tags.element``)."""

    field_id: int
    name: str
    type: str
    required: bool
    doc: str | None
    depth: int


@dataclass(frozen=True)
class SpecFieldRow:
    """One field of a partition spec; ``source`` is the source column's name, ``None`` once it was dropped."""

    field_id: int
    name: str
    transform: str
    source_id: int
    source: str | None


@dataclass(frozen=True)
class SpecRow:
    """A partition spec the table has had (``current``: the one new files are written under)."""

    spec_id: int
    current: bool
    fields: tuple[SpecFieldRow, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**asdict(self), "fields": [asdict(f) for f in self.fields]}


@dataclass(frozen=True)
class SortOrderRow:
    """A sort order of the table; each field as ``(source, transform, direction, null order)``."""

    order_id: int
    current: bool
    fields: tuple[tuple[str | None, str, str, str], ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form: each field as an object."""
        keys = ("source", "transform", "direction", "null_order")
        return {**asdict(self), "fields": [dict(zip(keys, f, strict=True)) for f in self.fields]}


@dataclass(frozen=True)
class RefRow:
    """A branch or tag, with its retention fields (``None`` where the ref leaves them to the table)."""

    name: str
    kind: str
    snapshot_id: int
    max_ref_age_ms: int | None
    max_snapshot_age_ms: int | None
    min_snapshots_to_keep: int | None


@dataclass(frozen=True)
class TableDetails:
    """A table's shape as its metadata file states it (``schemas`` counts every schema it has had)."""

    table: str
    table_uuid: str
    metadata_location: str
    format_version: int
    schema_id: int
    schemas: int
    fields: tuple[SchemaField, ...]
    identifier_field_ids: tuple[int, ...]
    specs: tuple[SpecRow, ...]
    sort_orders: tuple[SortOrderRow, ...]
    properties: tuple[tuple[str, str], ...]
    refs: tuple[RefRow, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (``properties`` as an object, in key order)."""
        return {
            **asdict(self),
            "fields": [asdict(f) for f in self.fields],
            "identifier_field_ids": list(self.identifier_field_ids),
            "specs": [spec.to_json() for spec in self.specs],
            "sort_orders": [order.to_json() for order in self.sort_orders],
            "properties": dict(self.properties),
            "refs": [asdict(ref) for ref in self.refs],
        }


def _fields(struct: StructType, prefix: str = "", depth: int = 0) -> list[SchemaField]:
    rows: list[SchemaField] = []
    for field in struct.fields:
        rows.extend(_field(field, prefix, depth))
    return rows


def _field(field: NestedField, prefix: str, depth: int) -> list[SchemaField]:
    name = f"{prefix}{field.name}"
    kind = field.field_type
    described = str(kind) if kind.is_primitive else type(kind).__name__.removesuffix("Type").lower()
    rows = [SchemaField(field.field_id, name, described, field.required, field.doc, depth)]
    if isinstance(kind, StructType):
        rows += _fields(kind, f"{name}.", depth + 1)
    elif isinstance(kind, ListType):
        rows += _field(kind.element_field, f"{name}.", depth + 1)
    elif isinstance(kind, MapType):
        rows += _field(kind.key_field, f"{name}.", depth + 1) + _field(kind.value_field, f"{name}.", depth + 1)
    return rows


def _column(table: Table, source_id: int) -> str | None:
    for schema in reversed(table.metadata.schemas):  # the newest name first; a dropped column by its last one
        try:
            return schema.find_column_name(source_id)
        except ValueError:
            continue
    return None


def table_details(table: Table) -> TableDetails:
    """The schema, partition spec history, sort orders, properties and refs of a loaded table (metadata only)."""
    metadata = table.metadata
    schema = table.schema()
    specs = tuple(
        SpecRow(
            spec.spec_id,
            spec.spec_id == metadata.default_spec_id,
            tuple(
                SpecFieldRow(f.field_id, f.name, str(f.transform), f.source_id, _column(table, f.source_id))
                for f in spec.fields
            ),
        )
        for spec in sorted(metadata.partition_specs, key=lambda spec: spec.spec_id)
    )
    orders = tuple(
        SortOrderRow(
            order.order_id,
            order.order_id == metadata.default_sort_order_id,
            tuple(
                (_column(table, f.source_id), str(f.transform), f.direction.value, f.null_order.value)
                for f in order.fields
            ),
        )
        for order in sorted(metadata.sort_orders, key=lambda order: order.order_id)
    )
    refs = tuple(
        RefRow(
            name,
            ref.snapshot_ref_type.value,
            ref.snapshot_id,
            ref.max_ref_age_ms,
            ref.max_snapshot_age_ms,
            ref.min_snapshots_to_keep,
        )
        for name, ref in sorted(metadata.refs.items(), key=lambda item: (item[0] != "main", item[0]))
    )
    return TableDetails(
        table=".".join(table.name()),
        table_uuid=str(metadata.table_uuid),
        metadata_location=table.metadata_location,
        format_version=metadata.format_version,
        schema_id=schema.schema_id,
        schemas=len(metadata.schemas),
        fields=tuple(_fields(schema.as_struct())),
        identifier_field_ids=tuple(schema.identifier_field_ids),
        specs=specs,
        sort_orders=orders,
        properties=tuple(sorted(split_secrets(metadata.properties)[0].items())),
        refs=refs,
    )
