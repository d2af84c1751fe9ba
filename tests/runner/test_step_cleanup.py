"""A recorded migration forgets its data steps: their state properties leave its tables once its history row is in."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table.update import RemovePropertiesUpdate

from iceberg_ops_provider.data_migration.state import find_state
from iceberg_ops_provider.data_steps import step_state
from iceberg_ops_provider.data_steps.forget import FORGET_ATTEMPTS
from iceberg_ops_provider.history import HistoryStore
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from iceberg_ops_provider.runner import MigrationRunner
from tests.data_steps.support import make_table
from tests.support.migrations import write_migration

STATE_PREFIXES = ("iceberg-ops.data-step.", "iceberg-ops.move.")
TABLES = ("sales.orders", "sales.archive")

UPGRADE = (
    'ctx.create_table("archive", pa.schema([("id", pa.int64()), ("region", pa.string())]), '
    f'properties={{"{UNIT_BYTES_PROPERTY}": 1}})\n'
    'ctx.update_rows("orders", {"k": 1}, where="region = \'eu\'")\n'
    'ctx.copy_rows("orders", "archive", columns=["id", "region"])\n'
    'ctx.delete_rows("orders", "id = 3")'
)
RESTORED = 'ctx.restore_data("orders")\nctx.restore_data("archive")\nctx.delete_rows("orders", "id = 5")'


def _orders(catalog):
    """``sales.orders`` in four files, one unit each, with a setting of its own besides the unit size."""
    table = make_table(catalog, files_per_region=2, rows=20)
    with table.transaction() as transaction:
        transaction.set_properties({UNIT_BYTES_PROPERTY: "1", "owner": "team-a"})
    return table


def _state_keys(catalog) -> dict[str, list[str]]:
    """The data-step and move state properties each table holds (not the unit size setting)."""
    found = {}
    for name in TABLES:
        try:
            properties = catalog.load_table(name).properties
        except NoSuchTableError:
            continue
        found[name] = sorted(k for k in properties if k.startswith(STATE_PREFIXES) and k != UNIT_BYTES_PROPERTY)
    return found


def test_an_upgrade_leaves_no_state_of_its_data_steps_and_copies(catalog, migrations_dir):
    _orders(catalog)
    write_migration(migrations_dir, "0001_fix.py", UPGRADE)
    mirrored: dict[str, set[str]] = {name: set() for name in TABLES}

    def watch(event: str) -> None:  # while the steps run, each unit mirrors its step's state
        if event.startswith("sales: 0001: "):
            for name, keys in _state_keys(catalog).items():
                mirrored[name].update(keys)

    [result] = MigrationRunner(catalog, "sales", migrations_dir, on_event=watch).upgrade()

    update, copy, delete = (step["step_id"] for step in result.data_steps)
    assert mirrored == {
        "sales.orders": {f"iceberg-ops.data-step.{update}", f"iceberg-ops.data-step.{delete}"},
        "sales.archive": {f"iceberg-ops.move.{copy}"},
    }
    assert _state_keys(catalog) == {"sales.orders": [], "sales.archive": []}
    assert [(r.version, r.status) for r in HistoryStore(catalog).rows("sales")] == [("0001", "applied")]
    orders, archive = (catalog.load_table(name) for name in TABLES)
    assert orders.properties[UNIT_BYTES_PROPERTY] == "1" and orders.properties["owner"] == "team-a"
    assert archive.properties[UNIT_BYTES_PROPERTY] == "1"
    assert "iceberg-ops/sales/0001" in orders.metadata.refs and "iceberg-ops/sales/0001" in archive.metadata.refs
    for step_id in (update, delete):  # the snapshot summaries still tell what each step did
        state = step_state(orders, step_id)
        assert state is not None and state.complete
    moved, _ = find_state(archive.metadata, copy, "main")
    assert moved is not None and moved.complete
    assert MigrationRunner(catalog, "sales", migrations_dir).upgrade() == []


def test_a_removal_that_fails_is_logged_and_a_restoring_downgrade_removes_what_it_left(lake, migrations_dir, caplog):
    catalog = lake.catalog()
    _orders(catalog)
    write_migration(migrations_dir, "0001_fix.py", UPGRADE, downgrade=RESTORED)
    # PyIceberg's SQL catalog applies a property removal to the table it reads inside commit_table, so
    # no real concurrent writer can make that commit lose from here: this catalog refuses it the way the SQL
    # catalog refuses a commit that another lands in the middle of, on every attempt.
    commit, refused = catalog.commit_table, []

    def refuse_forgetting(table, requirements, updates):
        removals = [key for update in updates if isinstance(update, RemovePropertiesUpdate) for key in update.removals]
        if any(key.startswith(STATE_PREFIXES) for key in removals):
            refused.append(removals)
            raise CommitFailedException(f"Table has been updated by another process: {'.'.join(table.name())}")
        return commit(table, requirements, updates)

    catalog.commit_table = refuse_forgetting

    with caplog.at_level(logging.WARNING, logger="iceberg_ops_provider.runner"):
        [result] = MigrationRunner(catalog, "sales", migrations_dir).upgrade()

    assert result.status == "applied"
    assert [(r.version, r.status) for r in HistoryStore(catalog).rows("sales")] == [("0001", "applied")]
    left = _state_keys(catalog)
    assert len(left["sales.orders"]) == 2 and len(left["sales.archive"]) == 1
    assert len(refused) == 2 * FORGET_ATTEMPTS  # each table's removal, every attempt
    warnings = [record.getMessage() for record in caplog.records if "could not remove" in record.getMessage()]
    assert len(warnings) == 2
    for name, keys in left.items():
        [warning] = [text for text in warnings if text.startswith(f"{name}: ")]
        assert all(key in warning for key in keys) and "CommitFailedException" in warning

    caplog.clear()
    MigrationRunner(lake.catalog(), "sales", migrations_dir).downgrade("base")

    # The restore took the upgrade's commits off main, and with them the state they left; the
    # downgrade's own step is forgotten as well.
    assert _state_keys(catalog) == {"sales.orders": [], "sales.archive": []}
    assert catalog.load_table("sales.orders").properties["owner"] == "team-a"
    assert "could not remove" not in caplog.text


KILLED_BEFORE_FORGETTING = """
import os
import sys
from pathlib import Path

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner, steps


def die(catalog, intent):  # SIGKILL right after the history row is recorded, before the removal
    os.kill(os.getpid(), 9)


steps.forget_data_steps = die
root = Path(sys.argv[1])
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
MigrationRunner(catalog, "sales", root / "migrations").upgrade()
"""


@pytest.mark.long  # a worker process
def test_a_run_killed_between_its_history_row_and_the_removal_is_cleaned_by_the_next_run(lake):
    _orders(lake.catalog())
    write_migration(lake.root / "migrations", "0001_fix.py", UPGRADE)
    worker = subprocess.run(
        [sys.executable, "-c", KILLED_BEFORE_FORGETTING, str(lake.root)], env=dict(os.environ), capture_output=True
    )
    assert worker.returncode == -9, worker.stderr.decode()[-2000:]
    catalog = lake.catalog()
    runner = MigrationRunner(catalog, "sales", lake.root / "migrations")
    assert [(r.version, r.status) for r in runner.history()] == [("0001", "applied")]
    left = _state_keys(catalog)
    assert len(left["sales.orders"]) == 2 and len(left["sales.archive"]) == 1  # harmless: nothing reads them
    assert runner.lock.intent() is not None  # the killed run's record, which tells the next run

    assert runner.upgrade() == []  # nothing runs again

    assert _state_keys(catalog) == {"sales.orders": [], "sales.archive": []}
    assert runner.lock.read() == (None, None)
    assert [(r.version, r.status) for r in runner.history()] == [("0001", "applied")]
