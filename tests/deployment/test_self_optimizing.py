"""The self-optimizing example DAG in a real deployment: the triggerer's watcher, not a schedule, starts its runs.

A namespace holds tables degraded by many small appends, a table whose policy caps the bytes one
compaction rewrites, and healthy tables. Once the DAG is unpaused (and its file parsed again, which
registers the watcher), the ``TableHealthTrigger`` in the triggerer announces the degraded tables, the
scheduler creates asset-triggered runs, and Celery workers compact exactly those tables: the budgeted
one in two runs, one per partition. The healthy tables get no new snapshot. A table whose budget is
smaller than any group is announced once and never again while it does not change, even across a
crash of the triggerer (the watch state is in the asset's state store). More small appends to one
table later bring it back, alone.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.deployment.cluster import EXAMPLES, AirflowCluster, running_cluster, unavailable_reason

pytestmark = [pytest.mark.deployment, pytest.mark.long]

DAG = "self_optimizing"
NAMESPACE = "selfopt"
SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])
DEGRADED = (f"{NAMESPACE}.clicks", f"{NAMESPACE}.views")
BUDGETED = f"{NAMESPACE}.budgeted"
TIGHT = f"{NAMESPACE}.tight"  # due, but its budget is smaller than any group: compaction never rewrites it
HEALTHY = (f"{NAMESPACE}.lookup", f"{NAMESPACE}.steady")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowCluster]:
    """A deployment whose only DAG is the self-optimizing one, watching ``selfopt`` every second.

    Unlike the other deployment tests, the scheduler creates runs on its own here (asset-triggered
    ones: the DAG has no time schedule).
    """
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    dags = tmp_path_factory.mktemp("dags")
    shutil.copy(EXAMPLES / f"{DAG}.py", dags / f"{DAG}.py")
    env = {
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "True",
        "ICEBERG_OPS_SELF_OPTIMIZING_NAMESPACE": NAMESPACE,
        "ICEBERG_OPS_SELF_OPTIMIZING_POLL_SECONDS": "1",
        # A crashed triggerer's triggers move to the new one once its heartbeat is this old (default 30 s).
        "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "6",
    }
    started = time.monotonic()
    root = tmp_path_factory.mktemp("cluster")
    with running_cluster(root, workers=2, worker_concurrency=2, dags=Path(dags), extra_env=env) as deployment:
        print(f"deployment ready in {time.monotonic() - started:.1f}s at {deployment.api_url}")
        yield deployment


def _appends(table: Any, count: int, regions: int = 1) -> None:
    for n in range(count):
        ids = [n * 100 + r for r in range(regions)]
        table.append(pa.table({"id": ids, "region": [f"r{r}" for r in range(regions)]}, schema=SCHEMA))


def _files(table: Any) -> int:
    return len(table.inspect.files())


def _compactions(table: Any) -> list[dict[str, str]]:
    """The summaries of the table's snapshots this project's compaction wrote, oldest first."""
    return [
        dict(s.summary.additional_properties)
        for s in table.snapshots()
        if s.summary is not None and s.summary.additional_properties.get("iceberg-ops.operation") == "compaction"
    ]


def _runs(cluster: AirflowCluster) -> list[dict[str, Any]]:
    runs = cluster.request("GET", f"/api/v2/dags/{DAG}/dagRuns", params={"limit": 100})["dag_runs"]
    return sorted(runs, key=lambda run: run["queued_at"] or "")


def _until(what: str, done: Callable[[], bool], cluster: AirflowCluster, timeout: float = 120.0) -> float:
    """Wait until ``done()``; the seconds it took. Fails with the runs and the triggerer's log otherwise."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout:
            runs = [(r["dag_run_id"], r["run_type"], r["state"]) for r in _runs(cluster)]
            triggerer = cluster.services["triggerer"].log_tail(4000)
            pytest.fail(f"{what}: not within {timeout:.0f}s; runs {runs}\n--- triggerer\n{triggerer}")
        time.sleep(0.5)
    return time.monotonic() - started


def _settled(cluster: AirflowCluster) -> bool:
    runs = _runs(cluster)
    return bool(runs) and all(run["state"] in ("success", "failed") for run in runs)


def _watch_state(cluster: AirflowCluster) -> dict[str, Any]:
    """The watch state the trigger keeps in the asset's state store (read from the metadata database)."""
    import psycopg

    from tests.deployment.cluster import POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER

    with psycopg.connect(
        host=POSTGRES_HOST, port=POSTGRES_PORT, user=POSTGRES_USER, dbname=cluster.metadata_database
    ) as connection:
        (value,) = connection.execute("SELECT value FROM asset_state_store WHERE key = 'table_health_watch'").fetchone()
    return json.loads(value)


def _print_timeline(cluster: AirflowCluster, runs: list[dict[str, Any]]) -> None:
    """When each run was queued, started and ended, and how long its tasks took (for the test's output)."""
    for run in runs:
        print(f"run {run['dag_run_id']}: queued {run['queued_at']}, start {run['start_date']}, end {run['end_date']}")
        for ti in sorted(cluster.task_instances(DAG, run["dag_run_id"]), key=lambda ti: ti["start_date"] or ""):
            print(f"  {ti['task_id']}[{ti['rendered_map_index']}] {ti['state']} {ti['start_date']} {ti['duration']}")


def _compacted_tables(cluster: AirflowCluster, run_id: str) -> list[str]:
    """The tables the run's mapped compact task maintained, by their map index names."""
    instances = [ti for ti in cluster.task_instances(DAG, run_id) if ti["task_id"] == "compact"]
    return sorted(ti["rendered_map_index"] for ti in instances if ti["map_index"] >= 0)


def test_the_watcher_starts_runs_that_compact_exactly_the_degraded_tables(cluster):
    catalog = cluster.catalog()
    catalog.create_namespace(NAMESPACE)
    for name in DEGRADED:
        _appends(catalog.create_table(name, SCHEMA), 12)  # twelve one-row files
    with catalog.create_table_transaction(BUDGETED, SCHEMA) as transaction, transaction.update_spec() as spec:
        spec.add_identity("region")
    budgeted = catalog.load_table(BUDGETED)
    _appends(budgeted, 6, regions=2)  # six small files in each of two partitions
    total = sum(budgeted.inspect.files().column("file_size_in_bytes").to_pylist())
    with catalog.load_table(BUDGETED).transaction() as transaction:  # one partition's files per run, not both
        transaction.set_properties({"iceberg-ops.maintenance.max-rewrite-bytes": str(total * 3 // 4)})
    tight = catalog.create_table(TIGHT, SCHEMA)
    _appends(tight, 6)
    with catalog.load_table(TIGHT).transaction() as transaction:
        transaction.set_properties({"iceberg-ops.maintenance.max-rewrite-bytes": "1"})
    _appends(catalog.create_table(HEALTHY[0], SCHEMA), 1)
    _appends(catalog.create_table(HEALTHY[1], SCHEMA), 3)  # fewer small files than a compaction needs
    untouched = {name: catalog.load_table(name).metadata_location for name in (*HEALTHY, TIGHT)}

    details = cluster.wait_for_dag(DAG)
    assert details["is_paused"] and _runs(cluster) == []  # paused when first seen: nothing watched, nothing run
    cluster.request("PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": False})
    # The watcher is registered when the file is parsed while the DAG is unpaused: ask for that parse now.
    cluster.request("PUT", f"/api/v2/parseDagFile/{details['file_token']}")

    def all_compacted() -> bool:
        tables = {name: catalog.load_table(name) for name in (*DEGRADED, BUDGETED)}
        return all(_files(tables[name]) == 1 for name in DEGRADED) and _files(tables[BUDGETED]) == 2

    took = _until("the degraded tables compacted", lambda: all_compacted() and _settled(cluster), cluster, 150)
    print(f"degraded tables compacted {took:.1f}s after the unpause")

    runs = _runs(cluster)
    _print_timeline(cluster, runs)
    assert [run["run_type"] for run in runs] == ["asset_triggered"] * len(runs)  # no schedule, no hand
    failed = [
        cluster.failure_report(cluster.wait_for_run(DAG, r["dag_run_id"], 1)) for r in runs if r["state"] != "success"
    ]
    assert not failed, "\n".join(failed)
    first = runs[0]["dag_run_id"]
    due = cluster.xcom(DAG, first, "due_tables")
    assert sorted(entry["table"] for entry in due) == sorted([*DEGRADED, BUDGETED, TIGHT])
    assert all(entry["needs"] == ["compact"] for entry in due), due
    assert _compacted_tables(cluster, first) == sorted([*DEGRADED, BUDGETED, TIGHT])
    (stuck,) = [
        cluster.xcom(DAG, first, "compact", ti["map_index"])
        for ti in cluster.task_instances(DAG, first)
        if ti["task_id"] == "compact" and ti["rendered_map_index"] == TIGHT
    ]
    assert stuck["deferred_groups_count"] == 1 and stuck["rewritten_data_files_count"] == 0, stuck
    # The budget let the first run rewrite one partition; the commit made the watcher announce the table
    # again, and a second run took the other partition. Nothing else was due then.
    assert len(runs) == 2, runs
    assert _compacted_tables(cluster, runs[1]["dag_run_id"]) == [BUDGETED]

    for name in DEGRADED:
        (summary,) = _compactions(catalog.load_table(name))
        assert summary["iceberg-ops.compaction.rewritten-data-files"] == "12", summary
    budget_runs = _compactions(catalog.load_table(BUDGETED))
    assert sorted(s["iceberg-ops.compaction.partition"] for s in budget_runs) == ["region=r0", "region=r1"]
    assert {name: catalog.load_table(name).metadata_location for name in (*HEALTHY, TIGHT)} == untouched

    # Healthy tables and tables already announced (the tight one, still due) do not fire again.
    time.sleep(5)
    assert len(_runs(cluster)) == 2
    stored = _watch_state(cluster)
    assert set(stored["locations"]) == {*DEGRADED, BUDGETED, TIGHT, *HEALTHY}
    assert stored["announced"] == {TIGHT: untouched[TIGHT]}, stored["announced"]

    # A crashed triggerer: the new one runs the watcher from the stored state, so the tight table, still
    # due, is not announced again (a watcher without that state would announce it and start a run).
    cluster.crash_and_restart("triggerer")
    triggerer = cluster.services["triggerer"]
    took = _until(
        "the watcher looking again", lambda: triggerer.log_tail(200_000).count("Watched 6 table(s)") >= 2, cluster
    )
    print(f"watcher running again {took:.1f}s after the triggerer crashed")
    assert "0 measured, 0 newly due" in triggerer.log_tail(200_000)
    assert len(_runs(cluster)) == 2

    # Round two: more small appends to one table bring it (and only it) back.
    compacted = {name: catalog.load_table(name).metadata_location for name in (*DEGRADED, BUDGETED)}
    _appends(catalog.load_table(DEGRADED[0]), 8)
    took = _until(
        "the table appended to compacted again",
        lambda: (
            len(_compactions(catalog.load_table(DEGRADED[0]))) == 2 and len(_runs(cluster)) == 3 and _settled(cluster)
        ),
        cluster,
    )
    print(f"second round compacted {took:.1f}s after the appends")
    third = _runs(cluster)[2]
    assert third["run_type"] == "asset_triggered" and third["state"] == "success", third
    assert _compacted_tables(cluster, third["dag_run_id"]) == [DEGRADED[0]]
    table = catalog.load_table(DEGRADED[0])
    assert _files(table) == 1 and _compactions(table)[-1]["iceberg-ops.compaction.rewritten-data-files"] == "9"
    assert table.scan().to_arrow().num_rows == 20
    for name in (DEGRADED[1], BUDGETED, TIGHT, *HEALTHY):
        before = {**compacted, **untouched}[name]
        assert catalog.load_table(name).metadata_location == before, name
