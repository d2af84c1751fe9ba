"""All-or-nothing migrations: a migration's table changes and its history row in one commit.

On SQLite and PostgreSQL catalogs (``catalog_backend``) and on SeaweedFS's REST catalog. A migration
body reaches out through ``builtins`` hooks to act as a concurrent writer or a rival run at a chosen
moment; everything it does is a real commit on the same catalog.
"""

from __future__ import annotations

import builtins
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.types import StringType

from iceberg_ops_provider.errors import MigrationFailedError
from iceberg_ops_provider.history.intent import INTENT_PROPERTY, RECEIPT_PROPERTY
from iceberg_ops_provider.history.lock import LockLostError, NamespaceLock
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration

TWO_TABLES = (
    'ctx.create_table("orders", pa.schema([("id", pa.int64())]))\n'
    'ctx.create_table("items", pa.schema([("id", pa.int64())]))'
)


@pytest.fixture
def hook():
    """``builtins._atomic_test_hook``: called by a migration body; the test sets what it does."""
    calls: list[object] = []
    builtins._atomic_test_hook = lambda: calls.append(None)  # type: ignore[attr-defined]
    yield builtins
    del builtins._atomic_test_hook  # type: ignore[attr-defined]


def _statuses(runner: MigrationRunner) -> dict[str, str]:
    return {row.version: row.status for row in runner.history()}


def _columns(catalog, name: str) -> list[str]:
    return catalog.load_table(name).schema().column_names


def _runner(catalog, migrations: Path, **kwargs) -> MigrationRunner:
    return MigrationRunner(catalog, "sales", migrations, atomic_commits=True, **kwargs)


def test_a_multi_table_migration_and_its_history_row_are_one_commit(catalog_backend, migrations_dir):
    catalog = catalog_backend.build()
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_columns.py",
        'ctx.add_column("orders", "note", "string")\nctx.set_properties("items", owner="sales")',
    )
    events: list[str] = []
    runner = _runner(catalog, migrations_dir, on_event=events.append)
    assert runner.commit_mode() == "sql-transaction"
    lock_before = runner.lock._table()

    assert [r.version for r in runner.upgrade()] == ["0001", "0002"]

    assert _statuses(runner) == {"0001": "applied", "0002": "applied"}
    assert "note" in _columns(catalog, "sales.orders")
    assert catalog.load_table("sales.items").properties["owner"] == "sales"
    assert any(
        e.startswith("[2/2] 0002 applied in") and e.endswith("(all-or-nothing, with its history record)")
        for e in events
    )
    # No intent was needed: the lock table saw only the acquisition and the release of each run.
    lock = runner.lock._table()
    assert INTENT_PROPERTY not in lock.properties
    assert lock_before is None and len(lock.metadata.metadata_log) <= 4
    # The receipts still ride on each table's commit.
    assert catalog.load_table("sales.items").properties[RECEIPT_PROPERTY].endswith("step=2")
    assert runner.status().is_clean
    events_log = [(e.event, e.version) for e in runner.events()]
    assert events_log == [("applied", "0001"), ("applied", "0002")]


def test_a_rejected_last_table_change_leaves_every_table_and_the_history_untouched(
    catalog_backend, migrations_dir, hook, caplog
):
    catalog = catalog_backend.build()
    other = catalog_backend.build()
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_both.py",
        'ctx.add_column("orders", "c2", "string")\nctx.add_column("items", "c2", "string")\n'
        "import builtins\nbuiltins._atomic_test_hook()",
    )
    runner = _runner(catalog, migrations_dir)
    runner.upgrade("0001")
    orders_before = catalog.load_table("sales.orders").metadata_location

    def concurrent_writer() -> None:  # another writer evolves items after the migration staged its change
        with other.load_table("sales.items").update_schema() as update:
            update.add_column("theirs", StringType())

    hook._atomic_test_hook = concurrent_writer
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.core.retrying")
    with pytest.raises(MigrationFailedError, match=r"sales\.items changed under this run") as failure:
        runner.upgrade()
    assert "None of its changes were committed" in str(failure.value)
    assert "another writer got there first" not in caplog.text  # a migrated table that changed is not retried

    assert catalog.load_table("sales.orders").metadata_location == orders_before
    assert _columns(catalog, "sales.orders") == ["id"]
    assert _columns(catalog, "sales.items") == ["id", "theirs"]
    assert _statuses(runner) == {"0001": "applied", "0002": "failed"}
    assert runner.status().interrupted is None  # nothing partial to settle
    hook._atomic_test_hook = lambda: None
    assert [r.version for r in runner.upgrade()] == ["0002"]  # simply runs again
    assert _columns(catalog, "sales.items") == ["id", "theirs", "c2"]
    other.close()


@pytest.mark.parametrize("atomic", [True, False], ids=["all-or-nothing", "per-table"])
def test_rows_appended_after_the_emptiness_check_refuse_a_required_column(
    catalog_backend, migrations_dir, hook, atomic
):
    """A required column may only go to an empty table: the commit requires it to be empty still."""
    catalog = catalog_backend.build()
    other = catalog_backend.build()
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_required.py",
        'ctx.add_column("orders", "must", "long", required=True)\nctx.set_properties("items", k="v")\n'
        "import builtins\nbuiltins._atomic_test_hook()",
    )
    runner = MigrationRunner(catalog, "sales", migrations_dir, atomic_commits=atomic)
    runner.upgrade("0001")

    def concurrent_writer() -> None:  # rows land after the body checked the table was empty
        other.load_table("sales.orders").append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))

    hook._atomic_test_hook = concurrent_writer
    with pytest.raises(MigrationFailedError, match="branch main was created concurrently") as failure:
        runner.upgrade()
    assert "None of its changes were committed" in str(failure.value)
    assert _columns(catalog, "sales.orders") == ["id"]
    assert catalog.load_table("sales.orders").scan().to_arrow().num_rows == 3  # still readable
    assert "k" not in catalog.load_table("sales.items").properties
    assert _statuses(runner) == {"0001": "applied", "0002": "failed"}
    hook._atomic_test_hook = lambda: None
    with pytest.raises(MigrationFailedError, match="it has 3 row"):  # the rerun sees the rows and says what to do
        runner.upgrade()
    other.close()


def test_a_run_that_lost_its_lock_commits_nothing(catalog_backend, migrations_dir, hook):
    catalog = catalog_backend.build()
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_both.py",
        'ctx.add_column("orders", "c2", "string")\nctx.add_column("items", "c2", "string")\n'
        "import builtins\nbuiltins._atomic_test_hook()",
    )
    runner = _runner(catalog, migrations_dir)
    runner.upgrade("0001")
    rival = NamespaceLock(catalog_backend.build(), runner.meta_namespace, "sales")

    def take_over() -> None:  # an operator force-unlocks and another run takes the lock mid-body
        rival.force_unlock()
        rival.acquire("rival-run")

    hook._atomic_test_hook = take_over
    with pytest.raises(LockLostError):
        runner.upgrade()
    assert _columns(catalog, "sales.orders") == _columns(catalog, "sales.items") == ["id"]
    assert _statuses(runner) == {"0001": "applied"}
    assert rival.info().run_id == "rival-run"


def test_drops_and_renames_fall_outside_and_are_named(catalog_backend, migrations_dir):
    catalog = catalog_backend.build()
    write_migration(
        migrations_dir, "0001_tables.py", TWO_TABLES + '\nctx.create_table("old", pa.schema([("n", pa.int64())]))'
    )
    write_migration(
        migrations_dir,
        "0002_mixed.py",
        'ctx.drop_table("old")\nctx.rename_table("items", "archive.items")\nctx.add_column("orders", "c2", "string")',
    )
    events: list[str] = []
    runner = _runner(catalog, migrations_dir, on_event=events.append)
    runner.upgrade()
    outside = [e for e in events if "committed outside its all-or-nothing commit" in e]
    assert outside == [
        "sales: 0001: committed outside its all-or-nothing commit, one by one before it: create namespace sales",
        "sales: 0002: committed outside its all-or-nothing commit, one by one before it: sales.old (drop), "
        "sales.items (rename to archive.items), create namespace archive",
    ]
    assert not catalog.table_exists("sales.old") and catalog.table_exists("archive.items")
    assert "c2" in _columns(catalog, "sales.orders")
    assert _statuses(runner) == {"0001": "applied", "0002": "applied"}
    assert runner.status().is_clean


def test_a_migration_that_commits_early_keeps_per_table_commits(catalog_backend, migrations_dir):
    catalog = catalog_backend.build()
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_early.py",
        'ctx.add_column("orders", "c2", "string")\nctx.commit()\nctx.add_column("items", "c2", "string")',
    )
    events: list[str] = []
    runner = _runner(catalog, migrations_dir, on_event=events.append)
    runner.upgrade()
    assert not any("all-or-nothing" in e for e in events if "0002" in e)
    assert _statuses(runner) == {"0001": "applied", "0002": "applied"}
    assert "c2" in _columns(catalog, "sales.items")


RACER = """
import json, os, signal, sys, time, traceback
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner


def race(root, namespace, backend):
    catalog = CatalogFactory.build(backend["kind"], **backend["options"])
    runner = MigrationRunner(catalog, namespace, root / namespace, atomic_commits=True)
    (root / f"ready-{namespace}").touch()
    deadline = time.monotonic() + 150
    while not (root / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never said go")
        time.sleep(0.005)
    runner.upgrade()


# One worker process per namespace, forked once the modules are imported (as a prefork pool starts its
# workers): each opens its own catalog; each one's stderr goes to stderr-<namespace>.
root, backend, namespaces = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3:]
workers = {}
for namespace in namespaces:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with open(root / f"stderr-{namespace}", "w") as err:
                os.dup2(err.fileno(), 2)
            race(root, namespace, backend)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    workers[pid] = namespace
failed, running = [], set(workers)
while running:
    pid, status = os.wait()
    running.discard(pid)
    if os.waitstatus_to_exitcode(status) != 0:
        failed.append(workers[pid])
        if not (root / "go").exists():  # died before the start: stop the others, the test reports it
            for other in running:
                os.kill(other, signal.SIGKILL)
print(json.dumps(failed))
sys.exit(1 if failed else 0)
"""


def test_runs_of_several_namespaces_share_the_history_table(catalog_backend, tmp_path: Path):
    """Worker processes migrating four namespaces at once race on the history table; a lost race is staged again."""
    namespaces = ("east", "west", "north", "south")
    for namespace in namespaces:
        folder = tmp_path / namespace
        for number in range(1, 7):
            body = (
                f'ctx.create_table("t{number}", pa.schema([("id", pa.int64())]))\n'
                f'ctx.set_properties("t{number}" if {number} == 1 else "t1", step="{number}")'
            )
            write_migration(folder, f"{number:04d}_step.py", body)
    catalog = catalog_backend.build()  # the catalog's tables exist before the workers open it

    launcher = subprocess.Popen(
        [sys.executable, "-c", RACER, str(tmp_path), catalog_backend.to_json(), *namespaces],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def stderr_of(namespace: str) -> str:
        path = tmp_path / f"stderr-{namespace}"
        return path.read_text()[-3000:] if path.exists() else ""

    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{namespace}").exists() for namespace in namespaces):
        if launcher.poll() is not None or time.monotonic() >= deadline:
            launcher.kill()
            raise AssertionError(f"a worker died: {launcher.communicate()}, {[stderr_of(n) for n in namespaces]}")
        time.sleep(0.01)
    (tmp_path / "go").touch()  # all start their upgrades at the same moment
    stdout, stderr = launcher.communicate(timeout=300)
    assert launcher.returncode in (0, 1) and stdout.startswith("["), (launcher.returncode, stdout, stderr)
    failures = {namespace: stderr_of(namespace) for namespace in json.loads(stdout)}
    assert not failures, failures
    for namespace in namespaces:
        runner = MigrationRunner(catalog, namespace, tmp_path / namespace, atomic_commits=True)
        assert set(_statuses(runner).values()) == {"applied"} and len(_statuses(runner)) == 6
        assert catalog.load_table(f"{namespace}.t1").properties["step"] == "6"


def test_all_or_nothing_by_default_and_per_table_when_turned_off(catalog, migrations_dir):
    assert MigrationRunner(catalog, "sales", migrations_dir).commit_mode() == "sql-transaction"
    runner = MigrationRunner(catalog, "sales", migrations_dir, atomic_commits=False)
    assert runner.commit_mode() == "per-table"
    assert runner.commit_mode_reason() == "all-or-nothing commits are turned off (atomic_commits=False)"


@pytest.mark.backends
def test_all_or_nothing_on_a_rest_catalog(seaweedfs, unique_name, migrations_dir, hook):
    seaweedfs.create_table_bucket(unique_name)
    catalog, other = seaweedfs.rest_catalog(unique_name), seaweedfs.rest_catalog(unique_name)
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_both.py",
        'ctx.add_column("orders", "c2", "string")\nctx.add_column("items", "c2", "string")\n'
        "import builtins\nbuiltins._atomic_test_hook()",
    )
    events: list[str] = []
    runner = MigrationRunner(
        catalog, "sales", migrations_dir, meta_namespace="ops_meta", atomic_commits=True, on_event=events.append
    )
    assert runner.commit_mode() == "rest-transaction"
    runner.upgrade("0001")  # creating tables is not part of a REST multi-table commit: they go one by one
    assert not any(e.endswith("(all-or-nothing, with its history record)") for e in events), events
    assert any("0001 applied" in e and "commit on their own" in e for e in events), events

    def concurrent_writer() -> None:
        with other.load_table("sales.items").update_schema() as update:
            update.add_column("theirs", StringType())

    hook._atomic_test_hook = concurrent_writer
    with pytest.raises(MigrationFailedError, match=r"sales\.items changed under this run"):
        runner.upgrade()
    assert _columns(catalog, "sales.orders") == ["id"]
    assert _statuses(runner) == {"0001": "applied", "0002": "failed"}

    hook._atomic_test_hook = lambda: None
    events.clear()
    assert [r.version for r in runner.upgrade()] == ["0002"]
    assert any(e.endswith("(all-or-nothing, with its history record)") for e in events)
    assert _columns(catalog, "sales.orders") == ["id", "c2"]
    assert _columns(catalog, "sales.items") == ["id", "theirs", "c2"]
    assert runner.status().is_clean
