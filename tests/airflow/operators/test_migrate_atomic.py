"""The migrate operator's ``atomic_commits`` option and what its XCom says about each migration's commit."""

from __future__ import annotations

import json

import pytest

from tests.airflow.conftest import catalog_at, xcom
from tests.support.migrations import write_migration

pytestmark = pytest.mark.slow

TWO_TABLES = (
    'ctx.create_table("{name}", pa.schema([("id", pa.int64())]))\n'
    'ctx.create_table("{name}_items", pa.schema([("id", pa.int64())]))'
)


def test_the_xcom_says_how_each_migration_was_committed(run_dag, iceberg_connection):
    migrations = iceberg_connection / "migrations"
    write_migration(migrations, "0001_orders.py", TWO_TABLES.format(name="orders"))
    write_migration(migrations, "0002_refunds.py", TWO_TABLES.format(name="refunds"))
    write_migration(migrations, "0003_drop.py", 'ctx.drop_table("orders_items")\nctx.add_column("orders", "n", "long")')

    dag_run = run_dag("iceberg_ops_migrate_commit_modes", namespace="sales", migrations_dir=str(migrations))

    assert str(dag_run.state) == "success"
    per_table, atomic = xcom(dag_run, "per_table"), xcom(dag_run, "atomic")
    json.dumps([per_table, atomic])  # JSON-able as pushed
    (first,) = per_table["migrations"]
    assert (first["version"], first["atomic"]) == ("0001", False)
    assert first["not_atomic_reason"] == "all-or-nothing commits are turned off (atomic_commits=False)"
    assert first["outside_atomic_commit"] == [
        "sales.orders (create)",
        "sales.orders_items (create)",
        "create namespace sales",
    ]
    assert [(m["version"], m["atomic"], m["not_atomic_reason"]) for m in atomic["migrations"]] == [
        ("0002", True, None),
        ("0003", True, None),
    ]
    assert atomic["migrations"][1]["outside_atomic_commit"] == ["sales.orders_items (drop)"]
    assert "n" in catalog_at(iceberg_connection).load_table("sales.orders").schema().column_names
