"""Autogenerate against live tables: operations, risks, rendering and refusals."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.autogen import autogenerate, render_migration
from iceberg_ops_provider.autogen.models import model_from_dict
from iceberg_ops_provider.errors import ForbiddenPromotionError, ModelError, SchemaEvolutionError
from iceberg_ops_provider.migration import MigrationContext

BASE = {
    "name": "orders",
    "columns": [
        {"name": "id", "type": "long", "required": True},
        {"name": "qty", "type": "int"},
        {"name": "addr", "type": "struct<city: string>"},
        {"name": "tags", "type": "list<string>"},
    ],
}


@pytest.fixture
def live(catalog):
    ctx = MigrationContext(catalog, "sales")
    for op in autogenerate(catalog, "sales", [model_from_dict(BASE)]):
        op.apply(ctx)
    ctx.commit()
    return catalog


def _with(**changes):
    return model_from_dict({**BASE, **changes})


def test_no_drift_when_the_table_matches(live):
    assert autogenerate(live, "sales", [model_from_dict(BASE)]) == []


def test_risks_and_descriptions(live):
    model = _with(
        columns=[
            {"name": "id", "type": "long", "required": True},
            {"name": "quantity", "type": "long", "renamed_from": "qty"},
            {"name": "addr", "type": "struct<city: string, zip: string>"},
            {"name": "note", "type": "string"},
        ]
    )
    ops = autogenerate(live, "sales", [model])
    summary = [(op.risk, op.describe()) for op in ops]
    assert summary == [
        ("review", "rename column orders.qty to quantity"),
        ("destructive", "drop column orders.tags"),
        ("review", "promote column orders.quantity from int to long"),
        ("safe", "add column orders.addr.zip string"),
        ("safe", "add column orders.note string"),
    ]
    text = render_migration("evolve orders", ops, source="models/orders.yaml")
    assert "# [destructive] drop column orders.tags" in text
    assert "raise IrreversibleMigrationError(" in text
    assert "cannot narrow a type back" in text  # the promotion is what cannot be undone
    assert '# ctx.restore_column("orders", "tags")' in text  # the drop's own downgrade brings the column back
    compile(text, "generated.py", "exec")


def test_forbidden_promotion_and_required_in_a_model_are_refused(live):
    with pytest.raises(ForbiddenPromotionError, match="'qty' from int to string"):
        autogenerate(live, "sales", [_with(columns=[BASE["columns"][0], {"name": "qty", "type": "string"}])])
    with pytest.raises(SchemaEvolutionError, match=r"'qty' is optional .* required in the model"):
        autogenerate(
            live, "sales", [_with(columns=[BASE["columns"][0], {"name": "qty", "type": "int", "required": True}])]
        )
    with pytest.raises(ForbiddenPromotionError, match=r"'tags\.element' from string to long"):
        autogenerate(live, "sales", [_with(columns=[*BASE["columns"][:3], {"name": "tags", "type": "list<long>"}])])
    with pytest.raises(ModelError, match="a list or map cannot change kind"):
        autogenerate(
            live, "sales", [_with(columns=[*BASE["columns"][:3], {"name": "tags", "type": "map<string,long>"}])]
        )
    with pytest.raises(ModelError, match="has neither column"):
        autogenerate(live, "sales", [_with(columns=[{"name": "x", "type": "int", "renamed_from": "nope"}])])


def test_dropped_table_model(live):
    (op,) = autogenerate(live, "sales", [model_from_dict({"name": "orders", "dropped": True})])
    assert op.risk == "destructive" and op.describe() == "drop table orders"
    assert autogenerate(live, "sales", [model_from_dict({"name": "gone", "dropped": True})]) == []


def test_reversible_migration_renders_a_real_downgrade(live):
    ops = autogenerate(live, "sales", [_with(properties={"owner": "sales"}, sort_by=["id desc"])])
    text = render_migration("tidy", ops)
    assert "IrreversibleMigrationError(" not in text.split("def downgrade")[1]
    assert 'ctx.remove_properties("orders", "owner")' in text
    assert 'ctx.set_sort_order("orders", [])' in text


def test_generated_create_table_is_readable_arrow(catalog):
    text = render_migration("create", autogenerate(catalog, "sales", [model_from_dict(BASE)]))
    assert 'pa.field("id", pa.int64(), nullable=False)' in text
    assert 'pa.field("addr", pa.struct([pa.field("city", pa.string())]))' in text
    namespace: dict = {}
    exec(compile(text, "generated.py", "exec"), namespace)  # it imports and defines Migration
    assert namespace["Migration"].description == "create"
    assert isinstance(namespace["pa"].schema([]), pa.Schema)


def test_nested_reordering_and_nanosecond_timestamps_are_refused(live):
    ctx = MigrationContext(live, "sales")
    ctx.add_column("orders", "addr.zip", "string")
    ctx.commit()
    reordered = [
        *BASE["columns"][:2],
        {"name": "addr", "type": "struct<zip: string, city: string>"},
        BASE["columns"][3],
    ]
    with pytest.raises(ModelError, match=r"reordered .*does not move nested fields"):
        autogenerate(live, "sales", [_with(columns=reordered)])
    with pytest.raises(ModelError, match="nanosecond timestamps need Iceberg format version 3"):
        model_from_dict({"name": "t", "columns": [{"name": "ts", "type": "timestamp_ns"}]})


@pytest.mark.parametrize("message", ['add """x"""', "C:\\new\\path", 'ends with "', "it's"])
def test_any_message_renders_a_file_that_parses(message):
    import ast

    from iceberg_ops_provider.autogen.scaffolding import SKELETON, docstring

    tree = ast.parse(render_migration(message, []))
    assert ast.get_docstring(tree).startswith(message)
    skeleton = ast.parse(SKELETON.format(docstring=docstring(message), description=repr(message), version="0001"))
    assert ast.get_docstring(skeleton) == message


def test_operations_are_described_in_words_not_python_values():
    from iceberg_ops_provider.autogen.operations import AddPartitionField, SetIdentifierFields, SetSortOrder

    assert SetSortOrder("users", ("signup_ts desc nulls last", "id")).describe() == (
        "sort users by signup_ts desc nulls last, id"
    )
    assert AddPartitionField("users", "day(signup_ts)").describe() == "partition users by day(signup_ts)"
    assert AddPartitionField("users", "day(signup_ts)", "d").describe() == "partition users by day(signup_ts) (field d)"
    assert SetIdentifierFields("users", ("id",)).describe() == "set identifier fields of users to id"
