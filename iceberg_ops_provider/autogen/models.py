"""Table models: the desired state of a table, declared in ``models/<table>.yaml`` (docs/autogenerate.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.types import DoubleType, FloatType, IcebergType, NestedField, PrimitiveType

from iceberg_ops_provider.config import yaml_document
from iceberg_ops_provider.core.name_hints import closest
from iceberg_ops_provider.core.type_strings import format_type, parse_type
from iceberg_ops_provider.errors import IcebergOpsError, ModelError
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

__all__ = ["ColumnModel", "TableModel", "load_model", "load_models"]

_TABLE_KEYS = {"name", "columns", "partition_by", "sort_by", "properties", "identifier_fields", "dropped"}
_COLUMN_KEYS = {"name", "type", "required", "doc", "renamed_from"}


@dataclass(frozen=True)
class ColumnModel:
    """One declared column; ``renamed_from`` is its previous name, when it is being renamed."""

    name: str
    type: IcebergType
    required: bool = False
    doc: str | None = None
    renamed_from: str | None = None


@dataclass(frozen=True)
class TableModel:
    """The desired state of one table (bare name) as a model file (``source``) declares it.

    A ``None`` property value means "remove this key"; ``dropped``: the table should not exist.
    """

    name: str
    columns: tuple[ColumnModel, ...] = ()
    partition_by: tuple[str, ...] = ()
    sort_by: tuple[str, ...] = ()
    properties: Mapping[str, str | None] = field(default_factory=dict)
    identifier_fields: tuple[str, ...] = ()
    dropped: bool = False
    source: Path | None = None

    def schema(self) -> Schema:
        """The declared columns as an Iceberg schema (ids numbered from 1)."""
        fields = [
            NestedField(index, column.name, column.type, required=column.required, doc=column.doc)
            for index, column in enumerate(self.columns, start=1)
        ]
        return assign_fresh_schema_ids(Schema(*fields))


def _fail(source: object, problem: str) -> ModelError:
    return ModelError(f"{source}: {problem}")


def _string_list(source: object, key: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _fail(source, f"'{key}' must be a list of strings, got {value!r}.")
    return tuple(value)


def _unknown_keys(unknown: set[str], valid: Collection[str]) -> str:
    """``has an unknown key 'partiton_by' (did you mean 'partition_by'?); valid keys: ...``."""
    keys = [
        f"{key!r}" + (f" (did you mean {guess!r}?)" if (guess := closest(key, valid)) else "")
        for key in sorted(unknown)
    ]
    plural = "s" if len(keys) > 1 else ""
    return f"has an unknown key{plural} {', '.join(keys)}; valid keys: {', '.join(sorted(valid))}."


def _column(source: object, index: int, raw: Any) -> ColumnModel:
    where = f"columns[{index}]"
    if not isinstance(raw, dict):
        raise _fail(source, f"{where} must be a mapping such as {{name: id, type: long}}, got {raw!r}.")
    if unknown := set(raw) - _COLUMN_KEYS:
        raise _fail(source, f"{where} {_unknown_keys(unknown, _COLUMN_KEYS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(source, f"{where} needs a 'name'.")
    if "type" not in raw or not isinstance(raw["type"], str):
        raise _fail(source, f"column {name!r} needs a 'type' written as text, such as long or decimal(12,2).")
    try:
        column_type = parse_type(raw["type"])
    except IcebergOpsError as exc:
        raise _fail(source, f"column {name!r}: {exc}") from exc
    if "timestamp_ns" in format_type(column_type) or "timestamptz_ns" in format_type(column_type):
        raise _fail(
            source,
            f"column {name!r}: nanosecond timestamps need Iceberg format version 3, which PyIceberg 0.12 cannot "
            "write; use timestamp or timestamptz (microseconds).",
        )
    required = raw.get("required", False)
    if not isinstance(required, bool):
        raise _fail(source, f"column {name!r}: 'required' must be true or false, got {required!r}.")
    for key in ("doc", "renamed_from"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise _fail(source, f"column {name!r}: '{key}' must be text, got {raw[key]!r}.")
    return ColumnModel(name, column_type, required, raw.get("doc"), raw.get("renamed_from"))


def model_from_dict(raw: Any, source: object = "<model>") -> TableModel:
    """Validate a parsed model document.

    Raises:
        ModelError: Names the file and the key that is wrong.
    """
    if not isinstance(raw, dict):
        raise _fail(source, "a model must be a mapping with at least 'name' and 'columns'.")
    if unknown := set(raw) - _TABLE_KEYS:
        raise _fail(source, "the model " + _unknown_keys(unknown, _TABLE_KEYS))
    name = raw.get("name")
    if not isinstance(name, str) or not name or "." in name:
        raise _fail(source, f"'name' must be a bare table name such as orders, got {name!r}.")
    dropped = raw.get("dropped", False)
    if not isinstance(dropped, bool):
        raise _fail(source, f"'dropped' must be true or false, got {dropped!r}.")
    raw_columns = raw.get("columns") or []
    if not isinstance(raw_columns, list) or (not raw_columns and not dropped):
        raise _fail(source, "'columns' must be a non-empty list of columns.")
    columns = tuple(_column(source, index, item) for index, item in enumerate(raw_columns))
    names = [column.name for column in columns]
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise _fail(source, f"column(s) {duplicates} are declared more than once.")
    partition_by = _string_list(source, "partition_by", raw.get("partition_by"))
    sort_by = _string_list(source, "sort_by", raw.get("sort_by"))
    by_column: dict[str, list[str]] = {}
    for expression in partition_by:
        column_name = _check_expression(source, "partition_by", expression, names, parse_partition_expr)
        by_column.setdefault(column_name, []).append(expression)
    for column_name, expressions in by_column.items():
        if len(expressions) > 1:
            raise _fail(
                source,
                f"partition_by: {', '.join(map(repr, expressions))} partition column {column_name!r} twice; PyIceberg "
                "cannot write rows into such a table (every append, compaction and data move would fail). Keep one.",
            )
    for expression in sort_by:
        _check_expression(source, "sort_by", expression, names, parse_sort_field)
    properties = raw.get("properties") or {}
    if not isinstance(properties, dict):
        raise _fail(source, f"'properties' must be a mapping, got {properties!r}.")
    clean: dict[str, str | None] = {}
    for key, value in properties.items():
        if isinstance(value, dict | list):
            raise _fail(source, f"property {key!r} must be a single value (or null to remove it).")
        clean[str(key)] = None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    identifier_fields = _string_list(source, "identifier_fields", raw.get("identifier_fields"))
    for column_name in identifier_fields:
        column = next((c for c in columns if c.name == column_name), None)
        if column is None or not column.required:
            raise _fail(source, f"identifier field {column_name!r} must be a declared column with required: true.")
        if not isinstance(column.type, PrimitiveType) or isinstance(column.type, FloatType | DoubleType):
            raise _fail(source, f"identifier field {column_name!r} must not be a float, double or nested column.")
    return TableModel(name, columns, partition_by, sort_by, clean, identifier_fields, dropped, Path(str(source)))


def _check_expression(source: object, key: str, expression: str, names: list[str], parse: Any) -> str:
    """The column ``expression`` names, once it is known to parse and to name a declared column."""
    try:
        parsed = parse(expression)
    except IcebergOpsError as exc:
        raise _fail(source, f"{key}: {exc}") from exc
    if parsed.column.split(".")[0] not in names:
        raise _fail(source, f"{key}: {expression!r} uses column {parsed.column!r}, which is not declared.")
    return str(parsed.column)


def load_model(path: str | Path) -> TableModel:
    """Read and validate one model file (``ModelError``: missing, not UTF-8 or YAML, or declaring something invalid)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise _fail(path, "model file not found.") from exc
    return model_from_dict(yaml_document(data, path, ModelError), path)


def load_models(models_dir: str | Path) -> list[TableModel]:
    """Every ``*.yaml``/``*.yml`` model in a folder by table name (not ``_`` files; one table twice: ModelError)."""
    folder = Path(models_dir)
    if not folder.is_dir():
        raise _fail(folder, "models folder not found; create it (iceberg-ops init) or set models_dir.")
    paths = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
    models = [load_model(path) for path in paths if not path.name.startswith("_")]  # `_` files are examples
    seen: dict[str, TableModel] = {}
    for model in models:
        if model.name in seen:
            raise _fail(model.source, f"declares table {model.name!r}, as does {seen[model.name].source}.")
        seen[model.name] = model
    return sorted(models, key=lambda model: model.name)
