"""One table's compaction fanned out over a real deployment: CeleryExecutor with two workers, PostgreSQL, Redis.

The maintenance DAG plans the table as units (one a partition) and maps one compact task per unit.
The table's catalog commits are held (its row in the catalog locked) until units run on both
workers at once, so neither worker can have taken every unit. The last test SIGKILLs a worker while
its unit waits in its commit: the retry, on the other worker, redoes that unit, and every unit is
committed exactly once.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from tests.deployment.cluster import AirflowCluster
from tests.deployment.commit_holds import commits_held, second_try, task_waiting_to_commit, wait_for_tasks_on_workers

pytestmark = [pytest.mark.deployment, pytest.mark.long]

MAINTENANCE = "table_maintenance"
SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string())])


def _regional(cluster: AirflowCluster, name: str, regions: int, files: int = 6) -> Any:
    """A table partitioned by ``region`` with ``files`` small files in each of ``regions`` regions."""
    catalog = cluster.catalog()
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    with catalog.create_table_transaction(name, SCHEMA) as transaction, transaction.update_spec() as spec:
        spec.add_identity("region")
    table = catalog.load_table(name)
    for n in range(files):
        ids = [n * 100 + r for r in range(regions)]
        table.append(pa.table({"id": ids, "region": [f"r{r}" for r in range(regions)]}, schema=SCHEMA))
    return catalog.load_table(name)


def _rows(table: Any) -> Counter:
    return Counter(tuple(row.values()) for row in table.scan().to_arrow().to_pylist())


def _replaces(table: Any) -> int:
    return sum(1 for s in table.snapshots() if s.summary is not None and s.summary.operation.value == "replace")


def test_one_tables_units_run_on_both_workers_and_the_rows_stay_the_same(cluster):
    table = _regional(cluster, "fan.visits", regions=4)
    before = _rows(table)

    with commits_held(cluster, "fan", "visits"):
        run_id = cluster.trigger(MAINTENANCE, {"namespace": "fan", "dry_run": False})
        wait_for_tasks_on_workers(cluster, MAINTENANCE, run_id, "compact", workers=2)
    run = cluster.wait_for_run(MAINTENANCE, run_id, timeout=180)

    assert run.state == "success", cluster.failure_report(run)
    compacts = run.of("compact")
    assert [ti["state"] for ti in compacts] == ["success"] * 4  # one task a unit, a unit a region
    assert {ti["hostname"] for ti in compacts} == set(cluster.worker_names)  # both workers took units
    results = [cluster.xcom(MAINTENANCE, run_id, "compact", ti["map_index"]) for ti in compacts]
    assert sorted(r["groups"][0]["partition"] for r in results) == [f"region=r{r}" for r in range(4)]
    assert all(r["committed_groups_count"] == 1 for r in results)
    after = cluster.catalog().load_table("fan.visits")
    assert _rows(after) == before and len(after.inspect.files()) == 4 and _replaces(after) == 4


@pytest.mark.skipif(
    os.environ.get("ICEBERG_OPS_DEPLOYMENT_KILL") != "1",
    reason="kills a Celery worker mid-unit; ICEBERG_OPS_DEPLOYMENT_KILL=1 runs it (make test-all, make crash set it)",
)
def test_a_worker_killed_in_a_units_commit_has_the_unit_retried_on_the_other_and_committed_once(cluster):
    table = _regional(cluster, "fancrash.visits", regions=2)
    before = _rows(table)

    with commits_held(cluster, "fancrash", "visits"):
        run_id = cluster.trigger(MAINTENANCE, {"namespace": "fancrash", "dry_run": False})
        victim = task_waiting_to_commit(cluster, MAINTENANCE, run_id, "compact")
        doomed = cluster.worker_running(victim["pid"])
        assert doomed == victim["hostname"], (doomed, victim)
        assert _replaces(cluster.catalog().load_table("fancrash.visits")) == 0  # written, not committed
        cluster.kill_worker(doomed)
    (survivor,) = set(cluster.worker_names) - cluster.killed
    retry = second_try(cluster, MAINTENANCE, run_id, "compact", victim["map_index"], timeout=180)
    assert retry["hostname"] == survivor, retry
    replacement = cluster.start_worker()  # two workers again for whatever runs after

    run = cluster.wait_for_run(MAINTENANCE, run_id, timeout=180)

    assert run.state == "success", cluster.failure_report(run)
    tries = cluster.tries(MAINTENANCE, run_id, "compact", victim["map_index"])
    assert [(t["try_number"], t["hostname"]) for t in tries] == [(1, doomed), (2, survivor)], tries
    assert tries[0]["state"] == "failed" and tries[1]["state"] == "success", tries
    after = cluster.catalog().load_table("fancrash.visits")
    assert _rows(after) == before  # every row exactly once
    assert len(after.inspect.files()) == 2 and _replaces(after) == 2  # each unit committed once
    assert replacement not in (doomed, survivor)
