"""The example jobs run as a user runs them, twice (the second run finds nothing pending)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

EXAMPLES = Path(__file__).parent.parent / "dags_examples"


def test_core_tour_runs_twice_on_the_default_local_catalog(tmp_path):
    command = [sys.executable, str(EXAMPLES / "core_tour.py")]
    first = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "demo: 2 migration(s) to apply" in first.stdout and "6 inserted, 0 updated" in first.stdout
    assert "scale cannot change" in first.stdout
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "demo: 0 migration(s) to apply (current: 0002)" in second.stdout
    assert "0 inserted, 0 updated" in second.stdout
    catalog = CatalogFactory.build(
        "sqlite",
        db_path=tmp_path / "local_data" / "iceberg_catalog.db",
        warehouse_dir=tmp_path / "local_data" / "iceberg_warehouse",
    )
    assert catalog.load_table("demo.orders").scan().to_arrow().num_rows == 6


def test_example_migrations_go_up_and_down(catalog):
    runner = MigrationRunner(catalog, "shop", EXAMPLES / "migrations")
    runner.upgrade()
    schema = catalog.load_table("shop.orders").schema()
    assert schema.find_field("channel").doc == "web, shop or phone"
    assert str(schema.find_field("amount").field_type) == "decimal(18, 2)"
    runner.downgrade("base")
    assert not catalog.table_exists("shop.orders")
