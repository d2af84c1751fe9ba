"""What a refusal of a name that is not there adds: the names that are, and the closest one.

``core/name_hints.py`` on a real SQLite catalog, and the engine's refusals that use it from Python: a
misspelt namespace (``require_known_namespace``), a misspelt source or target table of a move, and a
misspelt health threshold.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.cli.wording import cli_message
from iceberg_ops_provider.core.name_hints import (
    closest,
    did_you_mean,
    existing_namespaces,
    listed,
    missing_table,
)
from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.errors import InvalidMoveError, ProjectConfigError
from iceberg_ops_provider.maintenance.health import HealthThresholds
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.commands import require_known_namespace
from tests.support.lake import Lake

SCHEMA = pa.schema([pa.field("id", pa.int64())])


@pytest.fixture
def lake(tmp_path: Path):
    """Namespaces ``sales`` (tables ``orders``, ``customers``) and ``finance`` (``ledger``)."""
    catalog = Lake(tmp_path).catalog()
    for namespace, tables in (("sales", ("orders", "customers")), ("finance", ("ledger",))):
        catalog.create_namespace(namespace)
        for table in tables:
            catalog.create_table(f"{namespace}.{table}", SCHEMA)
    return catalog


def test_listed_shows_twenty_names_then_an_ellipsis():
    assert listed([]) == "none"
    assert listed(["a", "b"]) == "a, b"
    names = [f"t{i:02d}" for i in range(25)]
    assert listed(names) == ", ".join(names[:20]) + ", ..."
    assert listed(names, limit=2) == "t00, t01, ..."


def test_closest_guesses_only_what_is_alike():
    assert closest("ordrs", ["customers", "orders"]) == "orders"
    assert closest("zzz", ["customers", "orders"]) is None
    assert closest("orders", []) is None
    assert did_you_mean("orders") == " Did you mean 'orders'?"
    assert did_you_mean(None) == ""


def test_existing_namespaces_leaves_out_the_hidden_ones(lake):
    lake.create_namespace("_iceberg_ops")

    assert existing_namespaces(lake) == ["_iceberg_ops", "finance", "sales"]
    assert existing_namespaces(lake, hidden={"_iceberg_ops"}) == ["finance", "sales"]


def test_a_misspelt_table_lists_its_namespaces_tables_and_guesses(lake):
    missing = missing_table(lake, "sales.ordres")

    assert (missing.namespace, missing.namespace_exists, missing.names) == ("sales", True, ["customers", "orders"])
    assert missing.guess == "sales.orders"
    assert missing.detail == "tables of sales: customers, orders"


def test_a_misspelt_namespace_lists_the_namespaces_and_guesses_the_table_in_the_closest(lake):
    missing = missing_table(lake, "salse.orders")

    assert (missing.namespace_exists, missing.names, missing.guess) == (False, ["finance", "sales"], "sales.orders")
    assert missing.detail == "namespace 'salse' does not exist either; existing namespaces: finance, sales"
    assert missing_table(lake, "nothing.alike").guess is None


def test_a_catalog_that_cannot_list_still_gets_its_message(tmp_path: Path):
    catalog = Lake(tmp_path).catalog()
    catalog.engine.dispose()
    (tmp_path / "catalog.db").write_bytes(b"not a database any more" * 100)

    missing = missing_table(catalog, "sales.orders")

    assert missing.guess is None and missing.detail.startswith("the catalog could not list what exists: ")


def test_a_misspelt_namespace_of_a_migration_command_gets_a_guess(lake, tmp_path: Path):
    runner = MigrationRunner(lake, "salse", None)

    with pytest.raises(ProjectConfigError) as raised:
        require_known_namespace(runner)

    text = str(raised.value)
    assert "Namespace 'salse' does not exist in the catalog and has no migration history." in text
    assert "(existing: finance, sales). Did you mean 'sales'?" in text
    assert "Check namespace (existing" in text and text.endswith("An upgrade creates a new one.")
    assert "Check --namespace (existing" in cli_message(raised.value)
    assert cli_message(raised.value).endswith("`iceberg-ops upgrade` creates a new one.")


def test_a_move_names_the_tables_there_are_and_the_closest(lake):
    with pytest.raises(InvalidMoveError) as source:
        DataMover(lake, "sales.ordrs", "finance.orders", create_target=True).plan()
    assert str(source.value) == (
        "The source table sales.ordrs does not exist (tables of sales: customers, orders). Did you mean 'sales.orders'?"
    )

    with pytest.raises(InvalidMoveError) as target:
        DataMover(lake, "sales.orders", "finance.ledgr").plan()
    text = str(target.value)
    assert text.startswith("The target table finance.ledgr does not exist (tables of finance: ledger).")
    assert "Did you mean 'finance.ledger'? Create it first, or pass create_target=True" in text


def test_a_misspelt_health_threshold_gets_the_known_ones_and_a_guess():
    with pytest.raises(ValueError, match=r"Unknown health threshold\(s\) \['max_snapshot'\]; the known ones") as one:
        HealthThresholds.from_json({"max_snapshot": 3})
    assert str(one.value).endswith("Did you mean 'max_snapshots'?")

    with pytest.raises(ValueError) as two:
        HealthThresholds.from_json({"max_snapshot": 3, "retain_lats": 1, "zzz": 1})
    assert str(two.value).endswith("Did you mean 'max_snapshots' for 'max_snapshot', 'retain_last' for 'retain_lats'?")
