"""A drop of a column whose every live row holds null loses nothing, so it is not ``destructive``
(a rollback of a migration that added it asks for no confirmation); a column holding one value is."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.cli.wording import cli_message
from iceberg_ops_provider.errors import ConfirmationRequiredError
from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.operators.wording import operator_message
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.commands import data_loss, refuse_data_loss
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


def test_a_rollback_that_loses_data_is_refused_with_its_losses_and_each_front_names_its_confirmation(
    catalog, orders, tmp_path
):
    orders.append(pa.table({"id": [1], "note": ["kept"]}, schema=orders.schema().as_arrow()))
    folder = tmp_path / "migrations"
    write_migration(
        folder,
        "0001_extra.py",
        'ctx.add_column("orders", "extra", "string")',
        downgrade='ctx.drop_column("orders", "note")',
    )
    runner = MigrationRunner(catalog, "sales", folder)
    runner.upgrade()

    with pytest.raises(ConfirmationRequiredError) as refused:
        refuse_data_loss(runner, "base")

    assert refused.value.losses == data_loss(runner, "base") and refused.value.losses[0].startswith("0001: ")
    assert refused.value.parameter == "allow_destructive"
    assert "loses data (0001: " in str(refused.value) and "nothing was rolled back" in str(refused.value)
    assert str(refused.value).endswith("run it again with allow_destructive=True.")
    assert cli_message(refused.value).endswith("run it again with --yes.")
    assert operator_message(refused.value).startswith("ConfirmationRequiredError: The rollback of 'sales' to base")
    assert operator_message(refused.value).endswith("allow_destructive=True.")
    refuse_data_loss(runner, "base", allow_destructive=True)  # allowed: nothing raised
