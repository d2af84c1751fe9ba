"""A migration that adds a column and backfills it, run with ``iceberg-ops upgrade`` on a PostgreSQL-backed catalog.

Real subprocesses of the command line on a ``sql`` catalog in a PostgreSQL database of the test's own.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from tests.cli.ops_support import run
from tests.support.migrations import write_migration

pytestmark = [pytest.mark.long, pytest.mark.postgres]

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])


def test_upgrade_adds_a_column_backfills_it_and_reports_the_data_step(new_postgres_database: str, tmp_path: Path):
    warehouse = tmp_path / "warehouse"
    catalog = CatalogFactory.build("sql", uri=new_postgres_database, warehouse_dir=warehouse)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", SCHEMA, properties={"iceberg-ops.data-step.unit-bytes": "1"})
    for n in range(3):  # three files: three units
        ids = list(range(n * 10, n * 10 + 10))
        table.append(pa.table({"id": ids, "region": ["eu" if i % 2 else None for i in ids]}, schema=SCHEMA))
    write_migration(
        tmp_path / "migrations",
        "0001_currency.py",
        'ctx.add_column("orders", "currency", "string")\n'
        'ctx.backfill("orders", "currency", lambda b: pa.compute.if_else(pa.compute.is_null(b[\'region\']), '
        "'USD', 'EUR'))",
        downgrade='ctx.restore_data("orders")\nctx.drop_column("orders", "currency")',
    )
    project = ["--catalog", "sql", "--catalog-uri", new_postgres_database, "--warehouse", str(warehouse)]
    project += ["--namespace", "sales", "--migrations-dir", "migrations"]

    plan = run(tmp_path, *project, "plan")
    assert plan.returncode == 0, plan.stderr
    assert "backfill currency of orders" in plan.stdout and "data" in plan.stdout

    upgraded = run(tmp_path, *project, "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    output = upgraded.stdout + upgraded.stderr
    assert "unit 3/3" in output, output  # the data step's progress, unit by unit

    rows = catalog.load_table("sales.orders").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["currency"]) for r in rows) == [(i, "EUR" if i % 2 else "USD") for i in range(30)]
    status = run(tmp_path, *project, "status")
    assert "current:   0001" in status.stdout, status.stdout

    downgraded = run(tmp_path, *project, "downgrade", "base", "--yes")
    assert downgraded.returncode == 0, downgraded.stderr
    after = catalog.load_table("sales.orders")
    assert "currency" not in after.schema().column_names and after.scan().to_arrow().num_rows == 30
