"""Autogenerate round trip: for many model pairs A -> B, the generated migration (rendered, imported
and run) makes the live table match B, and its downgrade brings it back to A unless a step was
irreversible, in which case the downgrade refuses and changes nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iceberg_ops_provider.autogen import autogenerate, render_migration
from iceberg_ops_provider.autogen.compare import live_partition_exprs, live_sort_fields
from iceberg_ops_provider.autogen.models import TableModel, model_from_dict
from iceberg_ops_provider.autogen.operations import Irreversible
from iceberg_ops_provider.core.catalog import CatalogFactory
from iceberg_ops_provider.core.type_strings import format_type, parse_type
from iceberg_ops_provider.discovery import discover
from iceberg_ops_provider.errors import IrreversibleMigrationError
from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.migration.transforms import parse_partition_expr, parse_sort_field

TYPES = ["int", "long", "float", "double", "string", "date", "timestamptz", "decimal(10,2)", "boolean"]
PROMOTIONS = {"int": "long", "float": "double", "decimal(10,2)": "decimal(12,2)"}
NAMES = ["a", "b", "c", "d", "e", "f", "g"]
PARTITIONABLE = {"int", "long", "string", "date", "decimal(10,2)", "decimal(12,2)"}


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


@st.composite
def column(draw, name: str, allow_required: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "type": draw(st.sampled_from(TYPES)),
        "required": draw(st.booleans()) if allow_required else False,
        "doc": draw(st.sampled_from([None, "a doc", "another doc"])),
    }


def _extras(draw, columns: list[dict[str, Any]]) -> dict[str, Any]:
    names = [c["name"] for c in columns]
    partitionable = [c["name"] for c in columns if c["type"] in PARTITIONABLE]
    candidates = (
        [f"bucket(4, {n})" for n in partitionable]
        + [f"day({c['name']})" for c in columns if c["type"] in ("date", "timestamptz")]
        + [f"identity({n})" for n in partitionable]
    )
    partition_by = draw(st.lists(st.sampled_from(candidates), unique=True, max_size=2)) if candidates else []
    sort_by = draw(
        st.lists(st.sampled_from(names), unique=True, max_size=2).flatmap(
            lambda chosen: st.tuples(*[st.sampled_from([n, f"{n} desc", f"{n} asc nulls last"]) for n in chosen])
        )
    )
    required = [c["name"] for c in columns if c["required"] and c["type"] not in ("float", "double")]
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
def model_pair(draw) -> tuple[dict[str, Any], dict[str, Any]]:
    a_names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    a_columns = [draw(column(name)) for name in a_names]
    model_a = {"name": "t", "columns": a_columns, **_extras(draw, a_columns)}

    b_columns = []
    for index, col in enumerate(a_columns):
        last_chance = index == len(a_columns) - 1 and not b_columns
        if draw(st.integers(0, 5)) == 0 and not last_chance:
            continue  # dropped
        new = dict(col)
        if col["type"] in PROMOTIONS and draw(st.booleans()):
            new["type"] = PROMOTIONS[col["type"]]
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
        b_columns.insert(draw(st.integers(0, len(b_columns))), draw(column(name)))
    b_columns = draw(st.permutations(b_columns)) if draw(st.integers(0, 3)) == 0 else b_columns
    model_b = {"name": "t", "columns": list(b_columns), **_extras(draw, list(b_columns))}
    removed = [k for k in model_a["properties"] if k not in model_b["properties"]]
    model_b["properties"].update(dict.fromkeys(removed[:1]))  # null: remove the key
    return model_a, model_b


def _run(migration_file: Path, catalog, direction: str) -> None:
    (script,) = [s for s in discover(migration_file.parent) if s.path == migration_file]
    ctx = MigrationContext(catalog, "ns")
    getattr(script.migration, direction)(ctx)
    ctx.commit()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_pair())
def test_upgrade_to_b_and_downgrade_to_a(pair):
    raw_a, raw_b = pair
    model_a, model_b = model_from_dict(raw_a), model_from_dict(raw_b)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        catalog = CatalogFactory.build("sqlite", db_path=root / "c.db", warehouse_dir=root / "wh")
        migrations = root / "migrations"
        migrations.mkdir()

        first = migrations / "0001_a.py"
        first.write_text(render_migration("create a", autogenerate(catalog, "ns", [model_a])))
        _run(first, catalog, "upgrade")
        table = catalog.load_table("ns.t")
        assert live_state(table, model_a) == expected_state(model_a)
        assert autogenerate(catalog, "ns", [model_a]) == []

        operations = autogenerate(catalog, "ns", [model_b])
        second = migrations / "0002_b.py"
        second.write_text(render_migration("a to b", operations))
        _run(second, catalog, "upgrade")
        table = catalog.load_table("ns.t")
        assert live_state(table, model_b) == expected_state(model_b)
        assert autogenerate(catalog, "ns", [model_b]) == []

        irreversible = []
        for op in operations:
            try:
                op.reverse()
            except Irreversible as reason:
                irreversible.append(str(reason))
        if irreversible:
            with pytest.raises(IrreversibleMigrationError) as info:
                _run(second, catalog, "downgrade")
            assert all(reason in str(info.value) for reason in irreversible)
            assert live_state(catalog.load_table("ns.t"), model_b) == expected_state(model_b)
        else:
            _run(second, catalog, "downgrade")
            table = catalog.load_table("ns.t")
            assert live_state(table, model_a) == expected_state(model_a)
        catalog.close()


def test_type_strings_used_by_the_generator_parse():
    for text in [*TYPES, *PROMOTIONS.values()]:
        assert format_type(parse_type(text)) == text
