"""Autogenerate round trip: for many model pairs A -> B, the generated migration (rendered, imported
and run) makes the live table match B, and its downgrade brings it back to A unless a step was
irreversible, in which case the downgrade refuses and changes nothing.

Columns are primitives, structs (some holding a struct), lists of structs or primitives and maps
with struct or primitive values; B drops, promotes, relaxes and inserts nested fields anywhere in
their struct. About half the tables hold rows written before the migration: every row must still
read back, each surviving value unchanged (looked up by field id) and each new field null."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.schema import Schema, assign_fresh_schema_ids, index_name_by_id
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from iceberg_ops_provider.autogen import autogenerate, render_migration
from iceberg_ops_provider.autogen.compare import live_partition_exprs, live_sort_fields
from iceberg_ops_provider.autogen.models import TableModel, model_from_dict
from iceberg_ops_provider.autogen.operations import Irreversible
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.core.type_strings import format_type, parse_type
from iceberg_ops_provider.errors import IrreversibleMigrationError
from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.migration.discovery import MigrationScript, discover
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

TYPES = ["int", "long", "float", "double", "string", "date", "timestamptz", "decimal(10,2)", "boolean"]
PROMOTIONS = {"int": "long", "float": "double", "decimal(10,2)": "decimal(12,2)"}
NAMES = ["a", "b", "c", "d", "e", "f", "g"]
FIELD_NAMES = ["x", "y", "z", "w", "v"]
PARTITIONABLE = {"int", "long", "string", "date", "decimal(10,2)", "decimal(12,2)"}
ROWS = 3
NESTED_SAMPLES = [
    "struct<x: int not null, y: struct<z: string>>",
    "list<struct<x: decimal(10,2), y: float not null>>",
    "map<string, struct<x: date>>",
    "map<string, int not null>",
    "list<long>",
]

EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
VALUES = {
    "int": lambda i: i,
    "long": lambda i: i * 1_000_000_007,
    "float": lambda i: i + 0.5,
    "double": lambda i: i + 0.25,
    "string": lambda i: f"s{i}",
    "date": lambda i: EPOCH.date() + dt.timedelta(days=i),
    "timestamptz": lambda i: EPOCH + dt.timedelta(hours=i),
    "decimal(10,2)": lambda i: Decimal(i) + Decimal("0.25"),
    "boolean": lambda i: i % 2 == 0,
}


def expected_state(model: TableModel) -> dict[str, Any]:
    return {
        "columns": [(c.name, format_type(c.type), c.required, c.doc or None) for c in model.columns],
        "partition": sorted(str(parse_partition_expr(e)) for e in model.partition_by),
        "sort": [str(parse_sort_field(f)) for f in model.sort_by],
        "identifiers": sorted(model.identifier_fields),
        "properties": {k: v for k, v in model.properties.items() if v is not None},
    }


def live_state(table, model: TableModel) -> dict[str, Any]:
    schema = table.schema()
    return {
        "columns": [(f.name, format_type(f.field_type), f.required, f.doc or None) for f in schema.fields],
        "partition": sorted(live_partition_exprs(table)),
        "sort": list(live_sort_fields(table)),
        "identifiers": sorted(schema.identifier_field_names()),
        "properties": {k: table.properties[k] for k in model.properties if k in table.properties},
    }


# -- models ---------------------------------------------------------------------------------------


def _not_null(required: bool) -> str:
    return " not null" if required else ""


@st.composite
def struct_type(draw, depth: int = 0) -> str:
    names = draw(st.lists(st.sampled_from(FIELD_NAMES[:4]), min_size=1, max_size=3, unique=True))
    fields = []
    for name in names:
        inner = draw(struct_type(depth + 1)) if depth == 0 and draw(st.integers(0, 5)) == 0 else None
        fields.append(f"{name}: {inner or draw(st.sampled_from(TYPES))}{_not_null(draw(st.booleans()))}")
    return f"struct<{', '.join(fields)}>"


@st.composite
def nested_type(draw) -> str:
    kind = draw(st.sampled_from(["struct", "list", "map"]))
    inner = draw(struct_type()) if draw(st.integers(0, 3)) else draw(st.sampled_from(TYPES))
    if kind == "struct":
        return draw(struct_type())
    if kind == "list":
        return f"list<{inner}{_not_null(draw(st.booleans()))}>"
    return f"map<string, {inner}{_not_null(draw(st.booleans()))}>"


@st.composite
def column(draw, name: str, allow_required: bool = True) -> dict[str, Any]:
    nested = draw(st.integers(0, 2)) == 0
    return {
        "name": name,
        "type": draw(nested_type()) if nested else draw(st.sampled_from(TYPES)),
        "required": draw(st.booleans()) if allow_required else False,
        "doc": draw(st.sampled_from([None, "a doc", "another doc"])),
    }


def evolve(draw, field_type: IcebergType, may_add_required: bool) -> str:
    """``field_type`` as B has it: promoted, relaxed, nested fields dropped and inserted anywhere."""
    if isinstance(field_type, StructType):
        return _evolve_struct(draw, field_type, may_add_required)
    if isinstance(field_type, ListType):
        element = evolve(draw, field_type.element_type, may_add_required)
        return f"list<{element}{_not_null(_stays_required(draw, field_type.element_required))}>"
    if isinstance(field_type, MapType):
        value = evolve(draw, field_type.value_type, may_add_required)
        return f"map<string, {value}{_not_null(_stays_required(draw, field_type.value_required))}>"
    text = format_type(field_type)
    return PROMOTIONS[text] if text in PROMOTIONS and draw(st.booleans()) else text


def _evolve_struct(draw, struct: StructType, may_add_required: bool) -> str:
    fields = [
        f"{f.name}: {evolve(draw, f.field_type, may_add_required)}{_not_null(_stays_required(draw, f.required))}"
        for f in struct.fields
        if draw(st.integers(0, 4))  # one in five is dropped
    ]
    unused = [name for name in FIELD_NAMES if name not in {f.name for f in struct.fields}]
    added = draw(st.lists(st.sampled_from(unused), unique=True, min_size=0 if fields else 1, max_size=2))
    for name in added:
        required = may_add_required and draw(st.booleans())
        fields.insert(draw(st.integers(0, len(fields))), f"{name}: {draw(st.sampled_from(TYPES))}{_not_null(required)}")
    return f"struct<{', '.join(fields)}>"


def _stays_required(draw, required: bool) -> bool:
    return required and draw(st.integers(0, 3)) != 0


def _extras(draw, columns: list[dict[str, Any]], for_rows: bool = False) -> dict[str, Any]:
    """Partition, sort, identifier and property settings over the primitive columns.

    ``for_rows``: PyIceberg 0.12 cannot write rows into a spec with two fields on one column.
    """
    primitive = [c for c in columns if c["type"] in TYPES or c["type"] in PROMOTIONS.values()]
    names = [c["name"] for c in primitive]
    partitionable = [c["name"] for c in primitive if c["type"] in PARTITIONABLE]
    candidates = (
        [f"bucket(4, {n})" for n in partitionable]
        + [f"day({c['name']})" for c in primitive if c["type"] in ("date", "timestamptz")]
        + [f"identity({n})" for n in partitionable]
    )
    # One field per column: PyIceberg cannot write a spec with two on one, and models refuse it.
    key = lambda expr: parse_partition_expr(expr).column  # noqa: E731
    partition_by = draw(st.lists(st.sampled_from(candidates), unique_by=key, max_size=2)) if candidates else []
    sort_by = draw(
        st.lists(st.sampled_from(names), unique=True, max_size=2).flatmap(
            lambda chosen: st.tuples(*[st.sampled_from([n, f"{n} desc", f"{n} asc nulls last"]) for n in chosen])
        )
        if names
        else st.just(())
    )
    required = [c["name"] for c in primitive if c["required"] and c["type"] not in ("float", "double")]
    identifier_fields = draw(st.lists(st.sampled_from(required), unique=True, max_size=2)) if required else []
    properties = draw(
        st.dictionaries(st.sampled_from(["owner", "team", "tier"]), st.sampled_from(["x", "y"]), max_size=2)
    )
    return {
        "partition_by": partition_by,
        "sort_by": list(sort_by),
        "identifier_fields": identifier_fields,
        "properties": properties,
    }


@st.composite
def model_pair(draw) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """Models A and B, and whether the table holds rows (then B adds nothing required)."""
    with_rows = draw(st.booleans())
    a_names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    a_columns = [draw(column(name)) for name in a_names]
    model_a = {"name": "t", "columns": a_columns, **_extras(draw, a_columns, for_rows=with_rows)}

    b_columns = []
    for index, col in enumerate(a_columns):
        last_chance = index == len(a_columns) - 1 and not b_columns
        if draw(st.integers(0, 5)) == 0 and not last_chance:
            continue  # dropped
        new = dict(col)
        new["type"] = evolve(draw, parse_type(col["type"]), may_add_required=not with_rows)
        if col["required"] and draw(st.integers(0, 3)) == 0:
            new["required"] = False
        if draw(st.integers(0, 3)) == 0:
            new["doc"] = draw(st.sampled_from([None, "changed doc"]))
        unused = [n for n in ("r1", "r2") if n not in [c["name"] for c in b_columns]]
        if unused and draw(st.integers(0, 4)) == 0:
            new["name"], new["renamed_from"] = unused[0], col["name"]
        b_columns.append(new)
    used = {c["name"] for c in b_columns} | {c.get("renamed_from") for c in b_columns} | set(a_names)
    for name in draw(st.lists(st.sampled_from([n for n in NAMES if n not in used] or ["z"]), unique=True, max_size=2)):
        b_columns.insert(draw(st.integers(0, len(b_columns))), draw(column(name, allow_required=not with_rows)))
    b_columns = draw(st.permutations(b_columns)) if draw(st.integers(0, 3)) == 0 else b_columns
    model_b = {"name": "t", "columns": list(b_columns), **_extras(draw, list(b_columns))}
    removed = [k for k in model_a["properties"] if k not in model_b["properties"]]
    model_b["properties"].update(dict.fromkeys(removed[:1]))  # null: remove the key
    return model_a, model_b, with_rows


# -- rows -----------------------------------------------------------------------------------------


def value(field_type: IcebergType, i: int) -> Any:
    """A value of ``field_type`` for row ``i``: lists and maps hold one to three entries."""
    if isinstance(field_type, StructType):
        return {f.name: field_value(f, i) for f in field_type.fields}
    if isinstance(field_type, ListType):
        return [field_value(field_type.element_field, i + k) for k in range(i % 3 + 1)]
    if isinstance(field_type, MapType):
        return [(f"k{k}", field_value(field_type.value_field, i + k)) for k in range(i % 3 + 1)]
    return VALUES[format_type(field_type)](i)


def field_value(field: NestedField, i: int) -> Any:
    return None if not field.required and i % 3 == 1 else value(field.field_type, i)


def project(data: Any, old: IcebergType, new: IcebergType) -> Any:
    """What ``data`` written under ``old`` reads as under ``new``: matched by field id, new fields null."""
    if data is None:
        return None
    if isinstance(old, StructType) and isinstance(new, StructType):
        by_id = {f.field_id: f for f in old.fields}
        return {
            f.name: project(data[by_id[f.field_id].name], by_id[f.field_id].field_type, f.field_type)
            if f.field_id in by_id
            else None
            for f in new.fields
        }
    if isinstance(old, ListType) and isinstance(new, ListType):
        return [project(item, old.element_type, new.element_type) for item in data]
    if isinstance(old, MapType) and isinstance(new, MapType):
        return [(key, project(item, old.value_type, new.value_type)) for key, item in data]
    return data


def append_rows(table) -> None:
    schema = table.schema()
    rows = [{f.name: field_value(f, i) for f in schema.fields} for i in range(ROWS)]
    table.append(pa.Table.from_pylist(rows, schema=schema.as_arrow()))


def read_rows(table) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=repr)


def projected(rows: list[dict[str, Any]], old_table, new_table) -> list[dict[str, Any]]:
    old, new = old_table.schema().as_struct(), new_table.schema().as_struct()
    return sorted((project(row, old, new) for row in rows), key=repr)


# -- the property ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_catalog(tmp_path_factory):
    """One catalog for every example (opening one costs more than an example's table): each example
    works in a namespace of its own, with its own migrations folder."""
    root = tmp_path_factory.mktemp("roundtrip")
    catalog = CatalogFactory.build("sqlite", db_path=root / "c.db", warehouse_dir=root / "wh")
    yield catalog, root
    catalog.close()


_EXAMPLE_NUMBERS = itertools.count()


def _load(migration_file: Path) -> MigrationScript:
    """The migration of ``migration_file`` as discovery loads it from its folder."""
    (script,) = [s for s in discover(migration_file.parent) if s.path == migration_file]
    return script


def _run(script: MigrationScript, catalog, namespace: str, direction: str) -> None:
    ctx = MigrationContext(catalog, namespace)
    getattr(script.migration, direction)(ctx)
    ctx.commit()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_pair())
def test_upgrade_to_b_and_downgrade_to_a(shared_catalog, pair):
    raw_a, raw_b, with_rows = pair
    model_a, model_b = model_from_dict(raw_a), model_from_dict(raw_b)
    catalog, root = shared_catalog
    namespace = f"ns{next(_EXAMPLE_NUMBERS)}"
    migrations = root / namespace
    migrations.mkdir()
    table_name = f"{namespace}.t"
    assert not catalog.namespace_exists(namespace)

    first = migrations / "0001_a.py"
    first.write_text(render_migration("create a", autogenerate(catalog, namespace, [model_a])))
    _run(_load(first), catalog, namespace, "upgrade")
    table_a = catalog.load_table(table_name)
    assert live_state(table_a, model_a) == expected_state(model_a)
    assert autogenerate(catalog, namespace, [model_a]) == []
    if with_rows:
        append_rows(table_a)
        table_a = catalog.load_table(table_name)
    rows = read_rows(table_a)
    assert len(rows) == (ROWS if with_rows else 0)

    operations = autogenerate(catalog, namespace, [model_b])
    second = migrations / "0002_b.py"
    second.write_text(render_migration("a to b", operations))
    second_script = _load(second)  # loaded once, like a run that upgrades then downgrades
    _run(second_script, catalog, namespace, "upgrade")
    table_b = catalog.load_table(table_name)
    assert live_state(table_b, model_b) == expected_state(model_b)
    assert autogenerate(catalog, namespace, [model_b]) == []
    assert read_rows(table_b) == projected(rows, table_a, table_b)

    irreversible = []
    for op in operations:
        try:
            op.reverse()
        except Irreversible as reason:
            irreversible.append(str(reason))
    if irreversible:
        with pytest.raises(IrreversibleMigrationError) as info:
            _run(second_script, catalog, namespace, "downgrade")
        assert all(reason in str(info.value) for reason in irreversible)
        table = catalog.load_table(table_name)
        assert live_state(table, model_b) == expected_state(model_b)
        assert read_rows(table) == projected(rows, table_a, table)
    else:
        _run(second_script, catalog, namespace, "downgrade")
        table = catalog.load_table(table_name)
        assert live_state(table, model_a) == expected_state(model_a)
        assert index_name_by_id(table.schema()) == index_name_by_id(table_a.schema())  # same field ids
        assert read_rows(table) == rows


def test_type_strings_used_by_the_generator_parse():
    for text in [*TYPES, *PROMOTIONS.values()]:
        assert format_type(parse_type(text)) == text
    for text in NESTED_SAMPLES:
        assert parse_type(format_type(parse_type(text))) == parse_type(text)


def test_row_values_fit_every_type_the_generator_uses():
    schema_types = [parse_type(text) for text in [*TYPES, *NESTED_SAMPLES]]
    fields = [NestedField(i, f"c{i}", t, required=i % 2 == 0) for i, t in enumerate(schema_types, start=1)]
    schema = assign_fresh_schema_ids(Schema(*fields))
    rows = [{f.name: field_value(f, i) for f in schema.fields} for i in range(ROWS)]
    table = pa.Table.from_pylist(rows, schema=schema.as_arrow())
    assert table.num_rows == ROWS
    assert project(table.to_pylist()[0], schema.as_struct(), schema.as_struct()) == table.to_pylist()[0]
