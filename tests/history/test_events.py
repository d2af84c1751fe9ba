"""History as an audit trail: every outcome and incident kept as an event, bounded and cheap to read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import MigrationFailedError
from iceberg_ops_provider.history.events import EVENTS_SCHEMA, EventLog, MigrationEvent
from iceberg_ops_provider.history.store import HistoryStore
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration

ADD_TABLE = 'ctx.create_table("t{n}", pa.schema([("n", pa.int64())]))'
DROP_TABLE = 'ctx.drop_table("t{n}")'


def _files_under(root: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def test_every_apply_rollback_failure_and_stamp_is_an_event(catalog, namespace, migrations_dir):
    for n in (1, 2):
        write_migration(migrations_dir, f"000{n}_t{n}.py", ADD_TABLE.format(n=n), DROP_TABLE.format(n=n))
    runner = MigrationRunner(catalog, namespace, migrations_dir)
    runner.upgrade()
    runner.downgrade("-1")
    runner.upgrade()
    write_migration(migrations_dir, "0003_boom.py", 'raise RuntimeError("disk on fire")')
    with pytest.raises(MigrationFailedError):
        runner.upgrade()
    runner.stamp("0002")  # 0003 was never applied: the stamp records nothing for it
    runner.stamp("0001")

    trail = [(e.event, e.version) for e in runner.events()]
    assert trail == [
        ("applied", "0001"),
        ("applied", "0002"),
        ("rolled_back", "0002"),
        ("applied", "0002"),
        ("failed", "0003"),
        ("stamped", "0002"),
    ]
    events = runner.events()
    first, failed, stamped = events[0], events[4], events[5]
    assert first.checksum == runner.state().script("0001").checksum and first.duration_ms is not None
    assert first.executed_by and first.run_id and first.message.startswith("applied 0001")
    assert failed.error == "RuntimeError: disk on fire" and "disk on fire" in failed.message
    assert stamped.message == "stamped 0002 as rolled back"
    # `history` keeps its per-version view: one row per version, its latest state.
    assert [(r.version, r.status) for r in runner.history()] == [
        ("0001", "applied"),
        ("0003", "failed"),
        ("0002", "rolled_back"),
    ]
    assert all(e.details.get("source") != "history" for e in events)  # all from the log itself


def test_a_run_killed_before_its_event_batch_still_shows_its_outcome_from_the_history(tmp_path: Path):
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_create.py", 'ctx.create_table("orders", pa.schema([("id", pa.int64())]))')
    hook = tmp_path / "sitecustomize_dir"
    hook.mkdir()
    # A real SIGKILL at the point where the run appends its outcomes to the event log.
    (hook / "sitecustomize.py").write_text(
        "import os, signal\n"
        "from iceberg_ops_provider.history import events\n"
        "def _die(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "events.EventLog.record_many = _die\n"
    )
    worker = (
        "import sys\nfrom pathlib import Path\nfrom iceberg_ops_provider.catalogs import CatalogFactory\n"
        "from iceberg_ops_provider.runner import MigrationRunner\nroot = Path(sys.argv[1])\n"
        "catalog = CatalogFactory.build('sqlite', db_path=root / 'c.db', warehouse_dir=root / 'w')\n"
        "catalog.create_namespace('sales')\n"
        "MigrationRunner(catalog, 'sales', root / 'migrations').upgrade()\n"
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", worker, str(tmp_path)], env=environment, timeout=120)
    assert result.returncode == -signal.SIGKILL

    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")
    runner = MigrationRunner(catalog, "sales", migrations)
    assert runner.status().is_clean and runner.current() == "0001"
    (event,) = runner.events()
    assert (event.event, event.version, event.details) == ("applied", "0001", {"source": "history"})


def test_the_event_log_stays_bounded_on_disk_and_keeps_every_recent_event(catalog, namespace, tmp_path: Path):
    log = EventLog(catalog, "_iceberg_ops")
    log.compact_after_files = 4
    table_root = tmp_path / "warehouse" / "_iceberg_ops" / "migration_events"
    sizes = []
    for batch in range(40):
        log.record(namespace, "applied", f"batch {batch}", version=f"{batch:04d}")
        if batch in (19, 39):
            sizes.append(_files_under(table_root))
    assert len(log.events(namespace)) == 40
    assert [e.message for e in log.events(namespace)] == [f"batch {n}" for n in range(40)]
    assert sizes[1] <= sizes[0] + 4, sizes  # 20 more appends leave the file count where it was
    assert sizes[1] < 40, sizes


def test_compaction_drops_events_older_than_keep_days(catalog, namespace):
    log = EventLog(catalog, "_iceberg_ops", keep_days=30)
    log.compact_after_files = 2
    old = datetime.now(UTC) - timedelta(days=31)
    log.record_many([MigrationEvent(namespace, old, "applied", "0001", "r0", "me", "ancient")])
    for n in range(3):
        log.record(namespace, "applied", f"recent {n}")
    assert [e.message for e in log.events(namespace)] == ["recent 0", "recent 1", "recent 2"]
    with pytest.raises(ValueError, match="keep_days must be positive"):
        EventLog(catalog, "_iceberg_ops", keep_days=0)


def test_an_event_log_of_an_earlier_release_gains_the_new_columns_and_keeps_its_rows(catalog, namespace):
    from iceberg_ops_provider.core.types import arrow_to_iceberg_schema

    catalog.create_namespace("_iceberg_ops")
    earlier = pa.schema([field for field in EVENTS_SCHEMA if field.name not in ("duration_ms", "checksum", "error")])
    table = catalog.create_table("_iceberg_ops.migration_events", arrow_to_iceberg_schema(earlier))
    row = {
        "namespace": namespace,
        "at": datetime.now(UTC) - timedelta(hours=1),
        "event": "force_unlock",
        "version": None,
        "run_id": None,
        "executed_by": "ops@host:1",
        "message": "released",
        "details": json.dumps({"run_id": "x"}),
    }
    table.append(pa.Table.from_pylist([row], schema=earlier))
    log = EventLog(catalog, "_iceberg_ops")
    log.record(namespace, "repair", "repaired")
    events = log.events(namespace)
    assert [(e.event, e.duration_ms) for e in events] == [("force_unlock", None), ("repair", None)]
    assert events[0].details == {"run_id": "x"}
    assert "error" in catalog.load_table("_iceberg_ops.migration_events").schema().column_names


# Runs of the bounded-history test. With keep_snapshots=4 and compact_after_files=3 the history table's
# cycles of compaction and trimming are shorter than half the runs, so the second half's largest
# footprint shows any growth; any leak of files is caught exactly after every run.
# ICEBERG_OPS_HISTORY_RUNS=60 checks the growth over 30 runs again.
HISTORY_RUNS = int(os.environ.get("ICEBERG_OPS_HISTORY_RUNS", "24"))


def _unreachable_history_files(table, root: Path) -> set[str]:
    """Files under ``root`` that no retained snapshot, manifest or metadata-log entry of ``table`` reaches."""
    from iceberg_ops_provider.maintenance.files import ManifestReader

    reader = ManifestReader(table.io)
    reached = {table.metadata_location, *(entry.metadata_file for entry in table.metadata.metadata_log)}
    for snapshot in table.snapshots():
        reached.add(snapshot.manifest_list)
        for manifest in reader.manifests(snapshot):
            reached.add(manifest.manifest_path)
            reached.update(entry.path for entry in reader.entries(manifest) if entry.live)
    on_disk = {os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names}
    return on_disk - {path.removeprefix("file://") for path in reached}


def test_the_history_table_stays_bounded_on_disk_however_many_runs(catalog, namespace, migrations_dir, tmp_path):
    runs = HISTORY_RUNS
    assert runs >= 24, "each half must hold whole cycles of compaction and trimming"
    runner = MigrationRunner(catalog, namespace, migrations_dir)
    runner.history_store.keep_snapshots = 4
    runner.history_store.compact_after_files = 3
    history_root = tmp_path / "warehouse" / "_iceberg_ops" / "migration_history"
    counts = []
    for n in range(1, runs + 1):
        write_migration(migrations_dir, f"{n:04d}_p.py", f'ctx.set_properties("orders", step="{n}")')
    catalog.create_table(f"{namespace}.orders", pa.schema([("id", pa.int64())]))
    for n in range(1, runs + 1):
        runner.upgrade("+1")
        # Nothing is left behind by any run: every file is one a retained snapshot or the metadata log reaches.
        history = catalog.load_table(("_iceberg_ops", "migration_history"))
        assert _unreachable_history_files(history, history_root) == set(), n
        counts.append(_files_under(history_root))
    first, second = counts[: runs // 2], counts[runs // 2 :]
    assert max(second) <= max(first), counts  # what is left does not grow with the number of runs
    assert max(counts) < 60, counts  # PyIceberg's own expiry would leave ~5 files per run
    assert len(runner.history()) == runs and runner.current() == f"{runs:04d}"


RACER = """
import os, sys, time, traceback
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.history.events import EventLog
from iceberg_ops_provider.history.records import HistoryRow
from iceberg_ops_provider.history.store import HistoryStore
from datetime import UTC, datetime


def race(root, name, count, names):
    catalog = CatalogFactory.build("sqlite", db_path=root / "c.db", warehouse_dir=root / "w")
    store = HistoryStore(catalog, keep_snapshots=3)
    log = EventLog(catalog, "_iceberg_ops")
    log.compact_after_files = 3
    (root / f"ready-{name}").touch()
    deadline = time.monotonic() + 60
    while not all((root / f"ready-{other}").exists() for other in names):  # all write at once
        if time.monotonic() > deadline:
            raise TimeoutError("another writer never got ready")
        time.sleep(0.005)
    status = None
    for n in range(count):
        row = HistoryRow("0001", name, "d", datetime.now(UTC), "applied" if n % 2 == 0 else "rolled_back")
        store.record(name, [row], {"0001": status})
        status = row.status
        log.record(name, "applied", f"{name} {n}")


# One writer process per namespace, forked once the modules are imported (as a prefork pool starts its
# workers): each opens its own catalog. Exits 1 when any writer failed; their tracebacks are on stderr.
root, count, names = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
writers = {}
for name in names:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            race(root, name, count, names)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    writers[pid] = name
failed = []
for _ in names:
    pid, status = os.wait()
    if os.waitstatus_to_exitcode(status) != 0:
        failed.append(writers[pid])
sys.exit(f"writers failed: {failed}" if failed else 0)
"""


def _unreferenced(table, data_root: Path) -> set[str]:
    from iceberg_ops_provider.maintenance.files import ManifestReader

    reader = ManifestReader(table.io)
    live = {
        entry.path.removeprefix("file://")
        for snapshot in table.snapshots()
        for manifest in reader.manifests(snapshot)
        for entry in reader.entries(manifest)
        if entry.live
    }
    on_disk = {os.path.join(folder, name) for folder, _, names in os.walk(data_root) for name in names}
    return on_disk - live


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_concurrent_writers_of_history_and_events_lose_nothing_and_leave_no_files_behind(tmp_path: Path):
    # Several processes (one namespace each) write the shared history and event tables while each
    # other's expiries and compactions remove the snapshots they started from.
    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")
    catalog.create_namespace("_iceberg_ops")
    HistoryStore(catalog)._ensure_table()
    EventLog(catalog, "_iceberg_ops").record("setup", "applied", "setup")
    names, count = ["ns0", "ns1", "ns2"], 16
    writers = subprocess.run(
        [sys.executable, "-c", RACER, str(tmp_path), str(count), *names], capture_output=True, text=True, timeout=300
    )
    errors = writers.stderr
    assert writers.returncode == 0, errors
    assert "could not record" not in errors, errors

    log = EventLog(catalog, "_iceberg_ops")
    for name in names:
        assert sorted(e.message for e in log.events(name)) == sorted(f"{name} {n}" for n in range(count))
    store = HistoryStore(catalog)
    assert {name: [r.status for r in store.rows(name)] for name in names} == {name: ["rolled_back"] for name in names}
    for table_name in ("migration_history", "migration_events"):
        table = catalog.load_table(("_iceberg_ops", table_name))
        for snapshot in table.snapshots():  # every retained snapshot still reads
            table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert _unreferenced(table, tmp_path / "w" / "_iceberg_ops" / table_name / "data") == set()
