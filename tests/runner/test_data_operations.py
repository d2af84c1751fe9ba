"""Data operations in migrations: run after the schema changes, checked before any commit, finished after a kill."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import IcebergOpsError, MigrationError, UnfinishedDataStepsError
from iceberg_ops_provider.history import HistoryStore
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("region", pa.string())])


def _orders(catalog, files: int = 4, rows: int = 25, *, unit_bytes: int | None = 1):
    """``sales.orders`` in ``files`` data files; with a tiny unit size each file is a unit of its own."""
    catalog.create_namespace_if_not_exists("sales")
    properties = {UNIT_BYTES_PROPERTY: str(unit_bytes)} if unit_bytes else {}
    table = catalog.create_table("sales.orders", SCHEMA, properties=properties)
    for n in range(files):
        ids = list(range(n * rows, (n + 1) * rows))
        regions = [None if i % 10 == 0 else ("eu" if i % 2 else "us") for i in ids]
        table.append(pa.table({"id": ids, "v": ids, "region": regions}, schema=SCHEMA))
    return table


def _rows(catalog) -> dict[int, dict]:
    data = catalog.load_table("sales.orders").scan().to_arrow().to_pylist()
    return {row["id"]: row for row in data}


def test_a_migration_adds_a_column_and_backfills_it(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_score.py",
        'ctx.add_column("orders", "score", "long")\nctx.backfill("orders", "score", 7, where="region = \'eu\'")',
    )
    [result] = runner.upgrade()
    rows = _rows(catalog)
    assert len(rows) == 100
    assert all(row["score"] == (7 if row["region"] == "eu" else None) for row in rows.values())
    assert result.status == "applied" and not result.atomic  # the data step commits in units
    assert [r.status for r in HistoryStore(catalog).rows("sales")] == ["applied"]
    assert runner.lock.info() is None or runner.lock.info().run_id is None


def test_update_and_delete_keep_rows_whose_where_is_null(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_fix.py",
        'ctx.update_rows("orders", {"v": lambda batch: pa.compute.multiply(batch["v"], 2)}, where="region = \'eu\'")\n'
        'ctx.delete_rows("orders", "region = \'us\'")',
    )
    runner.upgrade()
    rows = _rows(catalog)
    expected = {
        i: (i * 2 if i % 2 and i % 10 else i)
        for i in range(100)
        if i % 10 == 0 or i % 2  # null regions stay; us rows go
    }
    assert {i: row["v"] for i, row in rows.items()} == expected


def test_bad_input_fails_before_anything_is_committed(catalog, runner, migrations_dir):
    table = _orders(catalog)
    body = 'ctx.add_column("orders", "score", "long")\nctx.backfill("orders", "scroe", 1)'
    write_migration(migrations_dir, "0001_bad.py", body)
    with pytest.raises(MigrationError, match="scroe") as raised:
        runner.upgrade()
    assert "score" in str(raised.value)  # the closest name
    assert not raised.value.transient  # a refused input: retrying the task cannot pass
    after = catalog.load_table("sales.orders")
    assert after.schema().column_names == table.schema().column_names  # the added column did not commit
    assert after.current_snapshot().snapshot_id == table.current_snapshot().snapshot_id


@pytest.mark.parametrize(
    "call",
    [
        'ctx.delete_rows("orders", "")',
        'ctx.update_rows("orders", {"v": 0}, where="  ")',
        'ctx.backfill("orders", "v", 0, where="")',
        'ctx.rewrite_partitions("orders", where="")',
        'ctx.copy_rows("orders", "orders_copy", where="")',
    ],
)
def test_an_empty_where_is_refused_rather_than_read_as_every_row(catalog, runner, migrations_dir, call):
    table = _orders(catalog)
    catalog.create_table("sales.orders_copy", SCHEMA.append(pa.field("score", pa.int64())))
    write_migration(migrations_dir, "0001_empty_where.py", f'ctx.add_column("orders", "score", "long")\n{call}')
    with pytest.raises(MigrationError, match=r"on sales\.orders(_copy)?: where is .*, which names no rows") as raised:
        runner.upgrade()
    assert "pass where=None to mean every row" in str(raised.value)
    after = catalog.load_table("sales.orders")
    assert after.current_snapshot().snapshot_id == table.current_snapshot().snapshot_id and len(_rows(catalog)) == 100
    assert "score" not in after.schema().column_names  # nothing committed
    assert catalog.load_table("sales.orders_copy").current_snapshot() is None


def test_a_migration_of_data_steps_alone_says_so_in_its_commit_mode(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(migrations_dir, "0001_delete.py", 'ctx.delete_rows("orders", "v < 10")')
    [result] = runner.upgrade()
    assert result.not_atomic_reason == "its data steps commit in units of files, after its schema changes"


def test_a_data_step_on_a_table_the_migration_dropped_is_refused(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(migrations_dir, "0001_drop.py", 'ctx.drop_table("orders")\nctx.delete_rows("orders", "id < 3")')
    with pytest.raises(IcebergOpsError, match="dropped or renamed earlier"):
        runner.upgrade()
    assert catalog.table_exists("sales.orders")


KILLED_WORKER = """
import sys
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner

root = Path(sys.argv[1])
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
MigrationRunner(catalog, "sales", root / "migrations").upgrade()
"""

DOUBLE_AND_DIE = """
import os
import pyarrow.compute as pc

calls = []


def double(batch):
    calls.append(len(batch))
    if os.environ.get("KILL_AT_CALL") and len(calls) == int(os.environ["KILL_AT_CALL"]):
        os.kill(os.getpid(), 9)  # SIGKILL, in the middle of a later unit
    return pc.multiply(batch["v"], 2)
"""


def _killed_setup(tmp_path: Path):
    from iceberg_ops_provider.catalogs import CatalogFactory

    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "catalog.db", warehouse_dir=tmp_path / "warehouse")
    _orders(catalog)
    migrations = tmp_path / "migrations"
    write_migration(
        migrations,
        "0001_double.py",
        'ctx.add_column("orders", "note", "string")\n'
        'ctx.update_rows("orders", {"v": double})\n'
        'ctx.backfill("orders", "note", "checked")',
    )
    path = migrations / "0001_double.py"
    path.write_text(DOUBLE_AND_DIE + path.read_text())
    return catalog, migrations


@pytest.mark.long  # a worker process
@pytest.mark.parametrize("kill_at_call", [2, 3, 5])
def test_a_run_killed_in_a_data_step_is_finished_by_the_next_plain_upgrade(tmp_path, kill_at_call):
    # One unit per file: the first call of the function is the validation's probe, then one call per
    # unit, so the worker dies in the middle of a later unit, with earlier units committed.
    catalog, migrations = _killed_setup(tmp_path)
    env = {**__import__("os").environ, "KILL_AT_CALL": str(kill_at_call)}
    worker = subprocess.run([sys.executable, "-c", KILLED_WORKER, str(tmp_path)], env=env, capture_output=True)
    assert worker.returncode == -9, worker.stderr.decode()[-2000:]
    assert [r.status for r in HistoryStore(catalog).rows("sales")] == []  # nothing recorded yet

    runner = MigrationRunner(catalog, "sales", migrations)
    [result] = runner.upgrade()  # a plain upgrade, nobody settles anything by hand
    assert result.status == "applied"
    rows = _rows(catalog)
    assert {i: row["v"] for i, row in rows.items()} == {i: i * 2 for i in range(100)}  # each row doubled once
    assert {row["note"] for row in rows.values()} == {"checked"}
    assert [(r.version, r.status) for r in HistoryStore(catalog).rows("sales")] == [("0001", "applied")]
    kinds = [e.event for e in runner.event_log.events("sales")]
    assert "resuming" in kinds
    assert runner.upgrade() == []  # and it stays applied


@pytest.mark.long
def test_a_changed_file_does_not_resume_other_data_steps(tmp_path):
    catalog, migrations = _killed_setup(tmp_path)
    env = {**__import__("os").environ, "KILL_AT_CALL": "3"}
    worker = subprocess.run([sys.executable, "-c", KILLED_WORKER, str(tmp_path)], env=env, capture_output=True)
    assert worker.returncode == -9
    path = migrations / "0001_double.py"
    path.write_text(path.read_text().replace('"note", "checked"', '"note", "other"'))
    runner = MigrationRunner(catalog, "sales", migrations)
    with pytest.raises(UnfinishedDataStepsError) as raised:
        runner.upgrade()
    assert raised.value.changed and raised.value.version == "0001"


def _restorable(migrations_dir):
    write_migration(
        migrations_dir,
        "0001_double.py",
        'ctx.add_column("orders", "note", "string")\n'
        'ctx.update_rows("orders", {"v": lambda batch: pa.compute.multiply(batch["v"], 2)}, where="id < 50")',
        downgrade='ctx.restore_data("orders")\nctx.drop_column("orders", "note")',
    )


def test_a_downgrade_restores_the_rows_its_upgrade_changed(catalog, runner, migrations_dir):
    _orders(catalog)
    before = _rows(catalog)
    _restorable(migrations_dir)
    runner.upgrade()
    assert _rows(catalog)[3]["v"] == 6
    assert "iceberg-ops/sales/0001" in catalog.load_table("sales.orders").metadata.refs
    runner.downgrade("base")
    table = catalog.load_table("sales.orders")
    assert _rows(catalog) == before and "note" not in table.schema().column_names
    assert "iceberg-ops/sales/0001" not in table.metadata.refs  # the restore point is used up
    runner.upgrade()  # and the upgrade runs again from the start, with a new restore point
    assert _rows(catalog)[3]["v"] == 6


DOWNGRADING_WORKER = KILLED_WORKER.replace(".upgrade()", '.downgrade("base")')

DIE_AFTER_THE_RESTORE = """
import os
import pyarrow.compute as pc

calls = []


def touch(batch):
    calls.append(len(batch))
    if os.environ.get("KILL_AT_CALL") and len(calls) == 2:  # the probe, then the step after the restore
        os.kill(os.getpid(), 9)
    return pc.add(batch["v"], 1)
"""


@pytest.mark.slow  # a worker process
def test_a_downgrade_killed_right_after_its_restore_committed_is_finished_by_the_next_plain_downgrade(
    tmp_path, catalog, runner
):
    _orders(catalog)
    before = _rows(catalog)
    catalog.create_table("sales.audit", SCHEMA).append(pa.table({"id": [1], "v": [1], "region": ["eu"]}, schema=SCHEMA))
    path = write_migration(
        tmp_path / "migrations",
        "0001_double.py",
        'ctx.update_rows("orders", {"v": lambda batch: pa.compute.multiply(batch["v"], 2)}, where="id < 50")',
        downgrade='ctx.restore_data("orders")\nctx.update_rows("audit", {"v": touch})',
    )
    path.write_text(DIE_AFTER_THE_RESTORE + path.read_text())
    runner.upgrade()
    env = {**__import__("os").environ, "KILL_AT_CALL": "1"}
    worker = subprocess.run([sys.executable, "-c", DOWNGRADING_WORKER, str(tmp_path)], env=env, capture_output=True)
    assert worker.returncode == -9, worker.stderr.decode()[-2000:]
    assert _rows(catalog) == before  # the restore landed, and its tag went with it
    assert "iceberg-ops/sales/0001" not in catalog.load_table("sales.orders").metadata.refs

    MigrationRunner(catalog, "sales", tmp_path / "migrations").downgrade("base")
    assert _rows(catalog) == before
    assert catalog.load_table("sales.audit").scan().to_arrow()["v"].to_pylist() == [2]  # once
    assert [(r.version, r.status) for r in HistoryStore(catalog).rows("sales")][-1] == ("0001", "rolled_back")


def test_a_restore_over_someone_elses_commit_is_refused_before_anything_commits(catalog, runner, migrations_dir):
    from iceberg_ops_provider.errors import RestorePointError

    table = _orders(catalog)
    _restorable(migrations_dir)
    runner.upgrade()
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [1000], "v": [1], "region": ["eu"], "note": [None]}, schema=table.schema().as_arrow()))
    head = catalog.load_table("sales.orders").current_snapshot().snapshot_id
    with pytest.raises(MigrationError) as raised:
        runner.downgrade("base")
    cause = raised.value.__cause__
    assert isinstance(cause, RestorePointError) and cause.reason == "foreign_commits"
    assert str(head) in str(raised.value)
    moment = datetime.fromtimestamp(catalog.load_table("sales.orders").current_snapshot().timestamp_ms / 1000, UTC)
    assert f"{head} (append, at {moment.isoformat(timespec='seconds')})" in str(cause)  # a time, not epoch ms
    assert str(cause).endswith("in the downgrade (update_rows, delete_rows) instead of restore_data.")
    after = catalog.load_table("sales.orders")
    assert after.current_snapshot().snapshot_id == head and "note" in after.schema().column_names
    assert runner.current() == "0001"
