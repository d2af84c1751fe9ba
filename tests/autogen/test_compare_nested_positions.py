"""Nested fields added by autogenerate land where the model has them, so the next comparison finds
no drift: inside structs, structs in structs, list elements and map values, on tables with rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.autogen import autogenerate, render_migration
from iceberg_ops_provider.autogen.models import TableModel, model_from_dict
from iceberg_ops_provider.core.type_strings import format_type
from iceberg_ops_provider.errors import ModelError
from iceberg_ops_provider.migration import MigrationContext


def _model(**columns: str) -> TableModel:
    return model_from_dict({"name": "people", "columns": [{"name": n, "type": t} for n, t in columns.items()]})


def _apply(catalog, model: TableModel) -> list:
    ops = autogenerate(catalog, "sales", [model])
    ctx = MigrationContext(catalog, "sales")
    for op in ops:
        op.apply(ctx)
    ctx.commit()
    return ops


def _live_types(catalog) -> dict[str, str]:
    return {f.name: format_type(f.field_type) for f in catalog.load_table("sales.people").schema().fields}


def _wanted_types(model: TableModel) -> dict[str, str]:
    return {c.name: format_type(c.type) for c in model.columns}


def test_a_field_added_between_two_struct_fields_is_placed_between_them(catalog):
    _apply(catalog, _model(id="long", address="struct<street: string, city: string>"))
    wanted = _model(id="long", address="struct<street: string, zip: string, city: string>")
    ops = _apply(catalog, wanted)
    text = render_migration("zip", ops)
    assert 'ctx.add_column("people", "address.zip", "string", after="address.street")' in text
    assert _live_types(catalog)["address"] == "struct<street:string,zip:string,city:string>"
    assert autogenerate(catalog, "sales", [wanted]) == []


def test_fields_added_first_in_a_row_and_in_a_struct_inside_a_struct(catalog):
    _apply(catalog, _model(address="struct<street: string, geo: struct<lat: double>>"))
    geo = "geo: struct<alt: double, lat: double, lon: double>"
    wanted = _model(address=f"struct<country: string, line: string, street: string, {geo}>")
    ops = _apply(catalog, wanted)
    assert [(op.name, op.after, op.first) for op in ops] == [
        ("address.country", None, True),
        ("address.line", "address.country", False),
        ("address.geo.alt", None, True),
        ("address.geo.lon", "address.geo.lat", False),
    ]
    assert _live_types(catalog) == _wanted_types(wanted)
    assert autogenerate(catalog, "sales", [wanted]) == []


def test_struct_fields_in_list_elements_and_map_values_are_placed_and_promoted(catalog):
    _apply(
        catalog,
        _model(
            items="list<struct<sku: string, qty: int>>",
            prices="map<string, struct<amount: decimal(10,2), currency: string>>",
            tags="list<int not null>",
        ),
    )
    table = catalog.load_table("sales.people")
    rows = [{"items": [{"sku": "a", "qty": 1}], "prices": [("eu", {"amount": 1, "currency": "EUR"})], "tags": [7]}]
    table.append(pa.Table.from_pylist(rows, schema=table.schema().as_arrow()))
    wanted = _model(
        items="list<struct<sku: string, name: string, qty: long>>",
        prices="map<string, struct<tier: int, amount: decimal(12,2), currency: string>>",
        tags="list<long>",
    )
    ops = _apply(catalog, wanted)
    assert [op.describe() for op in ops] == [
        "add column people.items.element.name string",
        "promote column people.items.element.qty from int to long",
        "add column people.prices.value.tier int",
        "promote column people.prices.value.amount from decimal(10,2) to decimal(12,2)",
        "promote column people.tags.element from int to long",
        "make column people.tags.element optional",
    ]
    assert 'after="items.element.sku"' in render_migration("nested", ops)
    assert _live_types(catalog) == _wanted_types(wanted)
    assert autogenerate(catalog, "sales", [wanted]) == []
    (row,) = catalog.load_table("sales.people").scan().to_arrow().to_pylist()
    assert row["items"] == [{"sku": "a", "name": None, "qty": 1}]
    assert row["prices"][0][1]["tier"] is None and row["tags"] == [7]


def test_structs_whose_fields_are_all_replaced_are_never_left_empty(catalog):
    _apply(catalog, _model(address="struct<street: string>", items="list<struct<sku: string>>"))
    wanted = _model(address="struct<line1: string, line2: string>", items="list<struct<code: string>>")
    ops = _apply(catalog, wanted)
    assert [op.describe() for op in ops] == [
        "add column people.address.line1 string",
        "add column people.address.line2 string",
        "drop column people.address.street",
        "add column people.items.element.code string",
        "drop column people.items.element.sku",
    ]
    assert _live_types(catalog) == _wanted_types(wanted)
    assert autogenerate(catalog, "sales", [wanted]) == []


def test_map_keys_and_kind_changes_are_refused(catalog):
    _apply(catalog, _model(prices="map<string, long>", items="list<struct<sku: string>>"))
    with pytest.raises(ModelError, match=r"keys of map column 'prices' change from string to int; Iceberg cannot"):
        autogenerate(catalog, "sales", [_model(prices="map<int, long>", items="list<struct<sku: string>>")])
    with pytest.raises(ModelError, match=r"'items' changes from list<.*> to map<.*>; a list or map cannot change kind"):
        autogenerate(catalog, "sales", [_model(prices="map<string, long>", items="map<string, string>")])
