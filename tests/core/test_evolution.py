"""Schema evolution limited to what the Iceberg specification allows, on real tables."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.types import (
    BinaryType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from iceberg_ops_provider.core.evolution import (
    check_promotion,
    evolve_schema,
    is_allowed_promotion,
    plan_evolution,
    promotion_problem,
)
from iceberg_ops_provider.errors import ForbiddenPromotionError, SchemaEvolutionError


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (IntegerType(), LongType()),
        (FloatType(), DoubleType()),
        (DecimalType(10, 2), DecimalType(12, 2)),
        (StringType(), StringType()),
    ],
)
def test_allowed_promotions(old, new):
    assert is_allowed_promotion(old, new)
    check_promotion("c", old, new)


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (DecimalType(12, 2), DecimalType(14, 4), "scale cannot change"),
        (DecimalType(12, 2), DecimalType(10, 2), "precision can only grow"),
        (StringType(), BinaryType(), "string and binary are different types"),
        (BinaryType(), StringType(), "string and binary are different types"),
        (LongType(), IntegerType(), "never narrowed"),
        (DoubleType(), FloatType(), "never narrowed"),
        (IntegerType(), StringType(), "not one of the promotions"),
        (LongType(), TimestampType(), "not one of the promotions"),
    ],
)
def test_forbidden_promotions_say_why_and_what_to_do(old, new, reason):
    assert not is_allowed_promotion(old, new)
    assert reason in (promotion_problem(old, new) or "")
    with pytest.raises(ForbiddenPromotionError) as info:
        check_promotion("amount", old, new)
    message = str(info.value)
    assert f"Cannot change column 'amount' from {old} to {new}" in message
    assert "add a new column, backfill it" in message
    assert isinstance(info.value, ValueError)


@pytest.fixture
def orders(catalog, namespace, orders_schema):
    table = catalog.create_table(f"{namespace}.orders", orders_schema)
    table.append(
        pa.table(
            {"id": pa.array([1], pa.int64()), "customer": ["a"], "amount": pa.array([1], pa.decimal128(12, 2))},
            schema=pa.schema(
                [pa.field("id", pa.int64(), False), ("customer", pa.string()), ("amount", pa.decimal128(12, 2))]
            ),
        )
    )
    return table


def test_decimal_scale_change_is_refused_and_the_table_is_untouched(orders):
    before = orders.schema()
    target = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("amount", pa.decimal128(14, 4))])
    with pytest.raises(ForbiddenPromotionError, match="scale cannot change"):
        evolve_schema(orders, target)
    orders.refresh()
    assert orders.schema() == before
    assert len(orders.schemas()) == 1


def test_string_to_binary_is_refused(orders):
    with pytest.raises(ForbiddenPromotionError, match="'customer' from string to binary"):
        evolve_schema(orders, pa.schema([pa.field("customer", pa.binary())]))


def test_allowed_changes_are_applied_in_one_commit(orders):
    target = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("customer", pa.string(), metadata={b"doc": b"who ordered"}),
            pa.field("amount", pa.decimal128(18, 2)),
            pa.field("note", pa.string()),
            pa.field("lines", pa.struct([pa.field("sku", pa.string()), pa.field("qty", pa.int32())])),
        ]
    )
    schemas_before = len(orders.schemas())
    plan = evolve_schema(orders, target)
    orders.refresh()
    schema = orders.schema()
    assert len(orders.schemas()) == schemas_before + 1  # one schema commit
    assert schema.find_field("amount").field_type == DecimalType(18, 2)
    assert schema.find_field("customer").doc == "who ordered"
    assert schema.find_field("lines.qty").field_type == IntegerType()
    assert schema.find_field("ts")  # not in the target, kept: drops are off by default
    assert [c.column for c in plan.ignored if c.kind == "removed"] == ["ts"]
    assert {c.column for c in plan.apply} == {"amount", "customer", "note", "lines"}
    assert orders.scan().to_arrow().column("amount").to_pylist()[0] == 1
    assert not evolve_schema(orders, target)  # already there: nothing to do, nothing committed


def test_nullable_arrow_field_does_not_silently_relax_a_required_column(orders):
    target = pa.schema([pa.field("id", pa.int64())])  # nullable, as Arrow fields are by default
    plan = evolve_schema(orders, target)
    orders.refresh()
    assert orders.schema().find_field("id").required
    assert [c.kind for c in plan.ignored if c.column == "id"] == ["required_changed"]
    evolve_schema(orders, target, relax_required=True)
    orders.refresh()
    assert not orders.schema().find_field("id").required


def test_drops_only_when_allowed(orders):
    target = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    evolve_schema(orders, target, allow_drop_columns=True)
    orders.refresh()
    assert orders.schema().column_names == ["id"]


def test_required_additions_and_optional_to_required_are_refused(orders):
    with pytest.raises(SchemaEvolutionError, match="Cannot add required column 'region'"):
        plan_evolution(orders.schema(), pa.schema([pa.field("region", pa.string(), nullable=False)]))
    with pytest.raises(SchemaEvolutionError, match="Cannot make column 'customer' required"):
        plan_evolution(orders.schema(), pa.schema([pa.field("customer", pa.string(), nullable=False)]))


def test_evolve_inside_a_transaction_commits_with_it(orders):
    with orders.transaction() as tx:
        evolve_schema(tx, pa.schema([pa.field("extra", pa.int64())]))
        tx.set_properties(owner="sales")
    orders.refresh()
    assert orders.schema().find_field("extra")
    assert orders.properties["owner"] == "sales"


def test_a_target_without_docs_keeps_existing_docs(orders):
    with orders.update_schema() as update:
        update.update_column("customer", doc="who ordered")
    plan = evolve_schema(orders, pa.schema([pa.field("customer", pa.string())]))
    assert not plan and [c.kind for c in plan.ignored if c.column == "customer"] == ["doc_changed"]
    orders.refresh()
    assert orders.schema().find_field("customer").doc == "who ordered"
