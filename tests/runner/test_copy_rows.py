"""``ctx.copy_rows`` in migrations: the data mover as a data step, checked first, exactly once after a kill."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.data_migration.state import MOVE_ID_KEY, find_state
from iceberg_ops_provider.errors import MigrationError, RestorePointError
from iceberg_ops_provider.history import HistoryStore
from iceberg_ops_provider.history.intent import Intent, assess
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("region", pa.string())])

CREATE_ARCHIVE = (
    'ctx.create_table("archive", pa.schema([("id", pa.int64()), ("v", pa.int64()), ("region", pa.string())]), '
    f'properties={{"{UNIT_BYTES_PROPERTY}": 1}})\n'
)


def _orders(catalog, files: int = 4, rows: int = 25):
    """``sales.orders`` in ``files`` data files of ``rows`` rows; every tenth row has a null region."""
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table("sales.orders", SCHEMA)
    for n in range(files):
        ids = list(range(n * rows, (n + 1) * rows))
        regions = [None if i % 10 == 0 else ("eu" if i % 2 else "us") for i in ids]
        table.append(pa.table({"id": ids, "v": ids, "region": regions}, schema=SCHEMA))
    return table


def _ids(catalog, name: str) -> Counter:
    """The ids of a table's rows, each with how many rows hold it."""
    return Counter(catalog.load_table(name).scan().to_arrow().column("id").to_pylist())


def test_a_copy_into_a_table_the_same_migration_creates(catalog, migrations_dir):
    _orders(catalog)
    write_migration(migrations_dir, "0001_archive.py", CREATE_ARCHIVE + 'ctx.copy_rows("orders", "archive")')
    events: list[str] = []
    runner = MigrationRunner(catalog, "sales", migrations_dir, on_event=events.append)
    [result] = runner.upgrade()
    progress = [e for e in events if e.startswith("sales: 0001: copy rows of orders into archive: ")]
    assert {f"unit {n} of 4 done" for n in range(1, 5)} <= {part for e in progress for part in e.split(", ")}
    assert result.status == "applied" and not result.atomic
    assert _ids(catalog, "sales.archive") == Counter(range(100))  # every row once
    [copied] = result.data_steps
    assert copied["kind"] == "copy_rows" and copied["complete"] and copied["units_total"] == 4  # one unit per file
    step_id = copied["step_id"]
    assert copied["move_id"] == step_id and step_id.startswith("sales/0001/upgrade/")
    archive = catalog.load_table("sales.archive")
    state, _ = find_state(archive.metadata, step_id, "main")
    assert state is not None and state.complete and state.rows == 100
    assert "iceberg-ops/sales/0001" in archive.metadata.refs  # the restore point, on the empty table
    assert [r.status for r in HistoryStore(catalog).rows("sales")] == ["applied"]
    assert runner.upgrade() == []


class _ReportFailed(Exception):
    pass


def _files_on_disk(table) -> set[str]:
    root = table.location().removeprefix("file://") + "/data"
    return {f"{folder}/{name}" for folder, _, names in os.walk(root) for name in names}


def test_a_progress_report_that_raises_fails_the_run_on_the_thread_that_commits(catalog, migrations_dir):
    # The runner checks its lease and calls on_event with each unit's progress line: either may raise.
    _orders(catalog, files=6, rows=20)
    write_migration(migrations_dir, "0001_archive.py", CREATE_ARCHIVE + 'ctx.copy_rows("orders", "archive")')
    threads = []

    def report(event: str) -> None:
        threads.append(threading.current_thread())
        if event.startswith("sales: 0001: copy rows of orders into archive: ") and "unit 2 of 6 done" in event:
            raise _ReportFailed(event)

    with pytest.raises(MigrationError) as raised:
        MigrationRunner(catalog, "sales", migrations_dir, on_event=report).upgrade()

    assert isinstance(raised.value.__cause__, _ReportFailed)
    assert set(threads) == {threading.current_thread()}  # every report, on the thread that runs the migration
    assert [thread for thread in threading.enumerate() if thread.name.startswith("iceberg-ops-copy-")] == []
    archive = catalog.load_table("sales.archive")
    assert sum(_ids(catalog, "sales.archive").values()) == 40  # two units committed
    committed = {task.file.file_path.removeprefix("file://") for task in archive.scan().plan_files()}
    assert _files_on_disk(archive) == committed  # the unit copied ahead left no file
    assert MigrationRunner(catalog, "sales", migrations_dir).upgrade()[0].status == "applied"  # resumed
    assert _ids(catalog, "sales.archive") == Counter(range(120))


def test_a_copy_with_where_columns_and_rename(catalog, runner, migrations_dir):
    _orders(catalog)
    catalog.create_table("sales.eu", pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("note", pa.string())]))
    write_migration(
        migrations_dir,
        "0001_eu.py",
        'ctx.copy_rows("orders", "eu", where="region = \'eu\' and id < 50", columns=["id", "v"], '
        'rename={"v": "amount"})',
    )
    runner.upgrade()
    rows = catalog.load_table("sales.eu").scan().to_arrow().to_pylist()
    expected = [i for i in range(50) if i % 2 and i % 10]  # a null region is not 'eu'
    assert sorted(row["id"] for row in rows) == expected
    assert all(row["amount"] == row["id"] and row["note"] is None for row in rows)


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ('ctx.copy_rows("ordres", "archive")', ["ordres", "Did you mean 'sales.orders'?"]),
        ('ctx.copy_rows("orders", "archive", columns=["id", "regoin"])', ["regoin", "Did you mean 'region'?"]),
        ('ctx.copy_rows("orders", "archive", rename={"vv": "value"})', ["vv", "Did you mean 'v'?"]),
        ('ctx.copy_rows("orders", "archive", where="regoin = \'eu\'")', ["regoin", "the closest: 'region'"]),
        ('ctx.copy_rows("orders", "archive", rename={"region": "regoin"})', ["regoin", "Did you mean 'region'?"]),
        ('ctx.copy_rows("orders", "orders")', ["same table"]),
    ],
)
def test_bad_input_fails_before_anything_is_committed(catalog, runner, migrations_dir, body, names):
    orders = _orders(catalog)
    write_migration(
        migrations_dir, "0001_bad.py", 'ctx.add_column("orders", "score", "long")\n' + CREATE_ARCHIVE + body
    )
    with pytest.raises(MigrationError) as raised:
        runner.upgrade()
    assert all(name in str(raised.value) for name in names), str(raised.value)
    assert not catalog.table_exists("sales.archive")  # nothing committed: not the table, not the column
    after = catalog.load_table("sales.orders")
    assert after.schema().column_names == orders.schema().column_names
    assert runner.current() is None


def test_a_copy_into_a_column_of_an_incompatible_type_is_refused_before_anything_commits(
    catalog, runner, migrations_dir
):
    _orders(catalog)
    catalog.create_table("sales.codes", pa.schema([("id", pa.int64()), ("region", pa.int32())]))
    write_migration(
        migrations_dir,
        "0001_codes.py",
        'ctx.add_column("codes", "note", "string")\nctx.copy_rows("orders", "codes", columns=["id", "region"])',
    )
    with pytest.raises(MigrationError, match="region") as raised:
        runner.upgrade()
    assert "string" in str(raised.value) and "int" in str(raised.value)
    codes = catalog.load_table("sales.codes")
    assert codes.current_snapshot() is None and "note" not in codes.schema().column_names


def test_a_copy_from_a_table_the_migration_drops_is_refused(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir, "0001_drop.py", CREATE_ARCHIVE + 'ctx.drop_table("orders")\nctx.copy_rows("orders", "archive")'
    )
    with pytest.raises(MigrationError, match="dropped or renamed earlier"):
        runner.upgrade()
    assert catalog.table_exists("sales.orders") and not catalog.table_exists("sales.archive")


def test_a_downgrade_restores_the_target_to_its_rows_before_the_copy(catalog, runner, migrations_dir):
    _orders(catalog)
    archive = catalog.create_table("sales.archive", SCHEMA)
    archive.append(pa.table({"id": [1000, 1001], "v": [0, 0], "region": ["eu", "us"]}, schema=SCHEMA))
    write_migration(
        migrations_dir,
        "0001_copy.py",
        'ctx.copy_rows("orders", "archive", where="id < 10")',
        downgrade='ctx.restore_data("archive")',
    )
    runner.upgrade()
    assert _ids(catalog, "sales.archive") == Counter([*range(10), 1000, 1001])
    runner.downgrade("base")
    assert _ids(catalog, "sales.archive") == Counter([1000, 1001])
    assert "iceberg-ops/sales/0001" not in catalog.load_table("sales.archive").metadata.refs
    runner.upgrade()  # a new run copies again, as a new move
    assert _ids(catalog, "sales.archive") == Counter([*range(10), 1000, 1001])


def test_a_downgrade_empties_a_target_the_upgrade_created(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_archive.py",
        CREATE_ARCHIVE + 'ctx.copy_rows("orders", "archive")',
        downgrade='ctx.restore_data("archive")',
    )
    runner.upgrade()
    runner.downgrade("base")
    assert _ids(catalog, "sales.archive") == Counter()


def test_a_restore_over_someone_elses_commit_to_the_target_is_refused(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_archive.py",
        CREATE_ARCHIVE + 'ctx.copy_rows("orders", "archive", where="id < 10")',
        downgrade='ctx.restore_data("archive")',
    )
    runner.upgrade()
    archive = catalog.load_table("sales.archive")
    archive.append(pa.table({"id": [1000], "v": [1], "region": ["eu"]}, schema=SCHEMA))
    with pytest.raises(MigrationError) as raised:
        runner.downgrade("base")
    assert isinstance(raised.value.__cause__, RestorePointError) and raised.value.__cause__.reason == "foreign_commits"
    assert _ids(catalog, "sales.archive") == Counter([*range(10), 1000])


KILLED_WORKER = """
import os
import sys
from pathlib import Path

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.data_migration import unit_runner
from iceberg_ops_provider.runner import MigrationRunner

commit_unit, calls = unit_runner.commit_unit, []


def commit_then_die(*args, **kwargs):
    # SIGKILL at a unit's commit: before it (its files written, none committed) or right after it.
    calls.append(1)
    when, at = os.environ["KILL"].split(":")
    if when == "before" and len(calls) == int(at):
        os.kill(os.getpid(), 9)
    result = commit_unit(*args, **kwargs)
    if when == "after" and len(calls) == int(at):
        os.kill(os.getpid(), 9)
    return result


unit_runner.commit_unit = commit_then_die
root = Path(sys.argv[1])
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
MigrationRunner(catalog, "sales", root / "migrations").upgrade()
"""


def _killed(tmp_path: Path, kill: str, body: str, *, archive: bool = False):
    """A worker that runs ``body`` as migration 0001 and is killed at a unit commit of its copy: the catalog.

    ``archive``: ``sales.archive`` exists before (one file per unit), else the migration creates it.
    """
    from iceberg_ops_provider.catalogs import CatalogFactory

    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "catalog.db", warehouse_dir=tmp_path / "warehouse")
    _orders(catalog, files=6, rows=20)
    if archive:
        catalog.create_table("sales.archive", SCHEMA, properties={UNIT_BYTES_PROPERTY: "1"})
    write_migration(tmp_path / "migrations", "0001_archive.py", body)
    env = {**os.environ, "KILL": kill}
    worker = subprocess.run([sys.executable, "-c", KILLED_WORKER, str(tmp_path)], env=env, capture_output=True)
    assert worker.returncode == -9, worker.stderr.decode()[-2000:]
    archive = catalog.load_table("sales.archive")
    committed = sum(1 for s in archive.snapshots() if (s.summary or {}).get(MOVE_ID_KEY))
    assert committed == int(kill.split(":")[1]) - kill.startswith("before")  # the kill landed inside the copy
    return catalog


def _settles(catalog, tmp_path: Path, expected: Counter, outcome: str = "resumable") -> None:
    """The interrupted run is judged ``outcome``; a plain upgrade settles it; every row is in the target once.

    ``resumable``: the upgrade finishes the data steps; ``all``: every unit was committed, only the
    history row is missing, and the upgrade records it without running anything again.
    """
    runner = MigrationRunner(catalog, "sales", tmp_path / "migrations")
    intent = Intent.from_properties(catalog.load_table(runner.lock.identifier).properties)
    assert intent is not None and assess(catalog, intent).outcome == outcome
    results = runner.upgrade()  # a plain upgrade, nobody settles anything by hand
    assert [r.status for r in results] == (["applied"] if outcome == "resumable" else [])
    assert _ids(catalog, "sales.archive") == expected
    assert [(r.version, r.status) for r in HistoryStore(catalog).rows("sales")] == [("0001", "applied")]
    assert ("resuming" in [e.event for e in runner.event_log.events("sales")]) == (outcome == "resumable")
    assert runner.upgrade() == []


@pytest.mark.long  # a worker process
@pytest.mark.parametrize("kill", ["before:1", "before:3", "after:2", "after:6"])
def test_a_run_killed_in_a_copy_into_a_new_table_is_finished_by_the_next_plain_upgrade(tmp_path, kill):
    body = CREATE_ARCHIVE + 'ctx.copy_rows("orders", "archive")\nctx.backfill("orders", "region", "none")'
    catalog = _killed(tmp_path, kill, body)
    _settles(catalog, tmp_path, Counter(range(120)))
    assert catalog.load_table("sales.orders").scan(row_filter="region = 'none'").to_arrow().num_rows == 12


@pytest.mark.long
@pytest.mark.parametrize(("kill", "outcome"), [("after:1", "resumable"), ("after:6", "all")])
def test_a_run_killed_in_its_only_data_step_a_copy_is_judged_by_the_moves_record(tmp_path, kill, outcome):
    # Nothing but the copy commits: only the move's own record tells that the run started (a new run,
    # with new step ids, would start a new move and copy every row again) and whether it finished.
    catalog = _killed(tmp_path, kill, 'ctx.copy_rows("orders", "archive", where="id >= 0")', archive=True)
    _settles(catalog, tmp_path, Counter(range(120)), outcome)


@pytest.mark.long
def test_a_copy_changed_in_the_file_after_a_kill_is_not_resumed(tmp_path):
    from iceberg_ops_provider.errors import UnfinishedDataStepsError

    catalog = _killed(tmp_path, "after:2", 'ctx.copy_rows("orders", "archive", where="id >= 0")', archive=True)
    path = tmp_path / "migrations" / "0001_archive.py"
    path.write_text(path.read_text().replace('where="id >= 0"', 'where="id >= 10"'))
    with pytest.raises(UnfinishedDataStepsError) as raised:
        MigrationRunner(catalog, "sales", tmp_path / "migrations").upgrade()
    assert raised.value.changed
    assert sum(_ids(catalog, "sales.archive").values()) == 40  # the two units committed, nothing more
