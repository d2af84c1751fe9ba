"""A drop of a column whose every live row holds null loses nothing, so it is not ``destructive``
(a rollback of a migration that added it asks for no confirmation); a column holding one value is."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.commands import data_loss
from tests.support.migrations import write_migration


@pytest.fixture
def orders(catalog):
    ctx = MigrationContext(catalog, "sales")
    ctx.create_table("orders", pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())]))
    ctx.commit()
    return catalog.load_table("sales.orders")


def _drop_risk(catalog) -> str:
    ctx = MigrationContext(catalog, "sales")
    ctx.drop_column("orders", "note")
    risk = ctx.operations[-1]["risk"]
    ctx.discard()
    return risk


@pytest.mark.parametrize(("notes", "risk"), [([None, None], "review"), ([None, "kept"], "destructive")])
def test_only_a_column_holding_a_value_is_a_destructive_drop(catalog, orders, notes, risk):
    orders.append(pa.table({"id": [1, 2], "note": notes}, schema=orders.schema().as_arrow()))
    assert _drop_risk(catalog) == risk


def test_rolling_back_a_column_added_a_moment_ago_loses_nothing(catalog, orders, tmp_path):
    orders.append(pa.table({"id": [1, 2], "note": ["a", "b"]}, schema=orders.schema().as_arrow()))
    folder = tmp_path / "migrations"
    write_migration(
        folder,
        "0001_email.py",
        'ctx.add_column("orders", "email", "string")',
        downgrade='ctx.drop_column("orders", "email")',
    )
    runner = MigrationRunner(catalog, "sales", folder)
    runner.upgrade()
    assert data_loss(runner, "base") == []
