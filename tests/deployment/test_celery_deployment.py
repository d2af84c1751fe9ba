"""The example DAGs on a real deployment: CeleryExecutor with two workers, PostgreSQL, Redis, all on loopback.

Every run is triggered through the REST API and runs on the Celery workers, as in production; the
DAGs' ``iceberg_ops_default`` connection is a ``sql`` catalog on a PostgreSQL database of the
cluster's own. Nothing is mocked: the worker killed in the last test is a real ``SIGKILL`` of its
process groups, and the commit it dies in is a real catalog commit waiting for a real row lock.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.deployment.cluster import AirflowCluster
from tests.deployment.commit_holds import commits_held, second_try, task_waiting_to_commit, wait_for_tasks_on_workers

pytestmark = [pytest.mark.deployment, pytest.mark.long]

BACKFILL = "backfill_with_mover"
EVENTS = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("kind", pa.string())])
FIRST_DAY = date(2026, 11, 2)  # a Monday: the backfill DAG's weeks start on Mondays


def _rows(table: Any, row_filter: str = "True") -> Counter:
    """The rows of ``table`` matching ``row_filter``, as a multiset."""
    return Counter(tuple(row.values()) for row in table.scan(row_filter=row_filter).to_arrow().to_pylist())


def _events(catalog: Any, name: str, weeks: int, rows_per_day: int = 100) -> Any:
    """A source table of ``weeks`` weeks from :data:`FIRST_DAY`: one data file a day."""
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    table = catalog.create_table(name, EVENTS)
    for n in range(weeks * 7):
        ids = range(n * rows_per_day, (n + 1) * rows_per_day)
        day = {"id": ids, "day": [FIRST_DAY + timedelta(days=n)] * rows_per_day, "kind": ["click", "view"] * 50}
        table.append(pa.table(day, schema=EVENTS))
    return table


def _backfill_conf(source: str, target: str, weeks: int) -> dict[str, Any]:
    last = FIRST_DAY + timedelta(days=weeks * 7 - 1)
    return {"source": source, "target": target, "start": str(FIRST_DAY), "end": str(last), "days": 7}


def _mapped_results(cluster: AirflowCluster, run: Any, task_id: str) -> list[Any]:
    return [cluster.xcom(run.dag_id, run.run_id, task_id, ti["map_index"]) for ti in run.of(task_id)]


def test_migrate_then_load_runs_on_the_workers_and_the_table_holds_the_loaded_rows(cluster):
    run = cluster.run_dag("migrate_then_load", {"namespace": "sales"})

    assert run.state == "success", cluster.failure_report(run)
    assert {ti["hostname"] for ti in run.task_instances} <= set(cluster.worker_names)
    table = cluster.catalog().load_table("sales.orders")
    loaded = table.scan().to_arrow()
    assert sorted(loaded.column("id").to_pylist()) == [1, 2, 3, 4, 5, 6]
    assert "channel" in loaded.column_names  # the second migration ran before the load
    report = cluster.xcom(run.dag_id, run.run_id, "report")
    assert (report["table"], report["total_records"], report["inserted"]) == ("sales.orders", 6, 6)


def test_migrate_and_backfill_fills_the_new_column_on_the_workers(cluster):
    run = cluster.run_dag("migrate_and_backfill", {"namespace": "payments"})
    assert run.state == "success", cluster.failure_report(run)
    rows = cluster.catalog().load_table("payments.payments").scan().to_arrow().to_pylist()
    assert len(rows) == 3000 and all(row["fee_cents"] is not None for row in rows)
    summary = cluster.xcom(run.dag_id, run.run_id, "migrate")
    assert [m["version"] for m in summary["migrations"]] == ["0002"]
    assert summary["migrations"][0]["data_steps"][0]["rows_changed"] == 3000


def test_table_maintenance_compacts_the_namespace_tables_that_need_it(cluster):
    catalog = cluster.catalog()
    catalog.create_namespace("maint")
    schema = pa.schema([("id", pa.int64()), ("note", pa.string())])
    small_files = {"maint.clicks": 12, "maint.views": 8}
    for name, files in small_files.items():
        table = catalog.create_table(name, schema)
        for n in range(files):  # a tiny file per append: compaction candidates
            table.append(pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64()), "note": ["x"] * 10}))
    catalog.create_table("maint.quiet", schema).append(
        pa.table({"id": pa.array([1, 2, 3], pa.int64()), "note": ["a", "b", "c"]})
    )
    names = sorted([*small_files, "maint.quiet"])
    before = {name: _rows(catalog.load_table(name)) for name in names}
    quiet_metadata = catalog.load_table("maint.quiet").metadata_location

    run = cluster.run_dag("table_maintenance", {"namespace": "maint", "dry_run": False})

    assert run.state == "success", cluster.failure_report(run)
    reports = _mapped_results(cluster, run, "health")
    assert [sorted(report["needs"]) for report in reports] == [["compact"], [], ["compact"]]  # clicks, quiet, views
    compacted = {result["table"]: result for result in _mapped_results(cluster, run, "compact")}
    assert sorted(compacted) == sorted(small_files)
    for name, files in small_files.items():
        assert compacted[name]["rewritten_data_files_count"] == files
        assert len(catalog.load_table(name).inspect.files()) == 1
    assert {name: _rows(catalog.load_table(name)) for name in names} == before  # the same rows, in fewer files
    assert catalog.load_table("maint.quiet").metadata_location == quiet_metadata
    # The mapped tasks of one step spread over the workers' slots; all of them ran on a cluster worker.
    assert {ti["hostname"] for ti in run.task_instances if ti["hostname"]} <= set(cluster.worker_names)


def test_backfill_move_units_run_on_both_workers_and_move_each_row_once(cluster):
    catalog = cluster.catalog()
    source = _events(catalog, "backfill.events", weeks=4)
    catalog.create_table("backfill.events_v2", source.schema())  # so its commits can be held below

    # Commits wait until two units run at once, on two workers: neither worker can take every unit alone.
    with commits_held(cluster, "backfill", "events_v2"):
        run_id = cluster.trigger(BACKFILL, _backfill_conf("backfill.events", "backfill.events_v2", weeks=4))
        wait_for_tasks_on_workers(cluster, BACKFILL, run_id, "move", workers=2)
    run = cluster.wait_for_run(BACKFILL, run_id, timeout=180)

    assert run.state == "success", cluster.failure_report(run)
    moves = run.of("move")
    assert [ti["state"] for ti in moves] == ["success"] * 4  # one unit a week
    hosts = {ti["hostname"] for ti in moves}
    assert len(hosts) == 2 and hosts <= set(cluster.worker_names), moves  # both workers ran units
    assert len({(ti["hostname"], ti["pid"]) for ti in moves}) == 4  # each unit in a task process of its own
    results = _mapped_results(cluster, run, "move")
    assert [(result["units_committed"], result["rows"], result["complete"]) for result in results] == [
        (1, 700, True)
    ] * 4
    assert all(report["ok"] for report in _mapped_results(cluster, run, "verify"))
    target = catalog.load_table("backfill.events_v2")
    assert _rows(target) == _rows(source.refresh())  # exactly the source rows, each once


@pytest.mark.skipif(
    os.environ.get("ICEBERG_OPS_DEPLOYMENT_KILL") != "1",
    reason="kills a Celery worker mid-move; ICEBERG_OPS_DEPLOYMENT_KILL=1 runs it (make test-all, make crash set it)",
)
def test_a_worker_killed_in_the_middle_of_a_move_unit_the_other_worker_retries_it(cluster):
    catalog = cluster.catalog()
    source = _events(catalog, "crash.events", weeks=2)
    # The target exists before the run, so its catalog row can be locked before any unit commits.
    target = catalog.create_table("crash.events_v2", source.schema())

    with commits_held(cluster, "crash", "events_v2"):
        run_id = cluster.trigger(BACKFILL, _backfill_conf("crash.events", "crash.events_v2", weeks=2))
        victim = task_waiting_to_commit(cluster, BACKFILL, run_id, "move")
        doomed = cluster.worker_running(victim["pid"])
        assert doomed == victim["hostname"], (doomed, victim)
        # In the middle of the unit: its files are written, its commit has not landed.
        data = Path(target.location().removeprefix("file://")) / "data"
        assert any(data.rglob("*.parquet")), f"no copied file under {data}"
        assert catalog.load_table("crash.events_v2").current_snapshot() is None
        cluster.kill_worker(doomed)
    # The commits go on; the killed worker's task stops heartbeating, fails, and is retried elsewhere.
    (survivor,) = set(cluster.worker_names) - cluster.killed
    retry = second_try(cluster, BACKFILL, run_id, "move", victim["map_index"])
    assert retry["hostname"] == survivor, retry
    # A replacement, so the cluster has two workers again for whatever runs after (started once the
    # retry has a worker, so it cannot be the one to take it).
    replacement = cluster.start_worker()

    run = cluster.wait_for_run(BACKFILL, run_id, timeout=120)

    assert run.state == "success", cluster.failure_report(run)
    tries = cluster.tries(BACKFILL, run_id, "move", victim["map_index"])
    assert [(t["try_number"], t["hostname"]) for t in tries] == [(1, doomed), (2, survivor)], tries
    assert tries[0]["state"] == "failed" and tries[1]["state"] == "success", tries
    assert all(report["ok"] for report in _mapped_results(cluster, run, "verify"))
    assert _rows(catalog.load_table("crash.events_v2")) == _rows(source.refresh())  # each source row exactly once
    assert replacement not in (doomed, survivor)
