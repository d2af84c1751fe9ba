"""Holding a table's catalog commits on the deployment, and finding the tasks that wait in them; no tests here.

PyIceberg's SQL catalog commits with an ``UPDATE`` of the table's row in ``iceberg_tables``; holding
that row locked makes every writer of the table get as far as its commit (its data files written)
and wait there, as behind a slow catalog. The tests use it to make tasks run at the same time (so
two workers must share the work) and to kill a worker in the middle of a unit.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from tests.deployment.cluster import POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER, AirflowCluster


@contextlib.contextmanager
def commits_held(cluster: AirflowCluster, namespace: str, table: str) -> Iterator[None]:
    """Hold the catalog row of ``namespace.table`` locked: every commit to the table waits until the block ends."""
    import psycopg

    with psycopg.connect(
        host=POSTGRES_HOST, port=POSTGRES_PORT, user=POSTGRES_USER, dbname=cluster.catalog_database
    ) as connection:
        locked = connection.execute(
            "SELECT 1 FROM iceberg_tables WHERE table_namespace = %s AND table_name = %s FOR UPDATE",
            (namespace, table),
        ).fetchall()
        assert locked, f"{namespace}.{table} is not in the catalog"
        try:
            yield
        finally:
            connection.rollback()


def processes_waiting_to_commit(cluster: AirflowCluster) -> list[int]:
    """The processes whose catalog commit waits for a lock: PIDs of the clients of the waiting PostgreSQL backends."""
    import psutil
    import psycopg

    with psycopg.connect(
        host=POSTGRES_HOST, port=POSTGRES_PORT, user=POSTGRES_USER, dbname="postgres", autocommit=True
    ) as connection:
        ports = {
            port
            for (port,) in connection.execute(
                "SELECT client_port FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' "
                "AND query LIKE 'UPDATE iceberg_tables%%'",
                (cluster.catalog_database,),
            )
        }
    return sorted(
        {
            conn.pid
            for conn in psutil.net_connections(kind="tcp")
            if conn.pid and conn.laddr and conn.laddr.port in ports and conn.raddr and conn.raddr.port == POSTGRES_PORT
        }
    )


def task_waiting_to_commit(
    cluster: AirflowCluster, dag_id: str, run_id: str, task_id: str, timeout: float = 120.0
) -> dict[str, Any]:
    """A running instance of ``task_id`` whose work is written and whose commit waits (the first found)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = set(processes_waiting_to_commit(cluster))
        for ti in cluster.task_instances(dag_id, run_id):
            if ti["task_id"] == task_id and ti["state"] == "running" and ti["pid"] in waiting:
                return ti
        time.sleep(0.3)
    run = cluster.wait_for_run(dag_id, run_id, timeout=0)
    raise AssertionError(
        f"No {task_id} task waited in its commit within {timeout:.0f}s.\n{cluster.failure_report(run)}"
    )


def wait_for_tasks_on_workers(
    cluster: AirflowCluster, dag_id: str, run_id: str, task_id: str, workers: int, timeout: float = 120.0
) -> None:
    """Wait until instances of ``task_id`` run on ``workers`` different workers at once."""
    deadline = time.monotonic() + timeout
    hosts: set[str] = set()
    while time.monotonic() < deadline:
        running = [ti for ti in cluster.task_instances(dag_id, run_id) if ti["task_id"] == task_id]
        hosts = {ti["hostname"] for ti in running if ti["state"] == "running" and ti["hostname"]}
        if len(hosts) >= workers:
            return
        time.sleep(0.3)
    raise AssertionError(f"{task_id} tasks did not run on {workers} workers at once within {timeout:.0f}s: {hosts}")


def second_try(
    cluster: AirflowCluster, dag_id: str, run_id: str, task_id: str, map_index: int, timeout: float = 120.0
) -> dict[str, Any]:
    """The second try of a task instance once a worker has started it (running or done, its hostname set)."""
    deadline = time.monotonic() + timeout
    tries: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        tries = cluster.tries(dag_id, run_id, task_id, map_index)
        # Until a worker starts the new try, its row may still carry the hostname of the try before.
        if len(tries) > 1 and tries[-1]["hostname"] and tries[-1]["state"] in ("running", "success", "failed"):
            return tries[-1]
        time.sleep(0.5)
    raise AssertionError(f"{task_id}[{map_index}] was not retried on a worker within {timeout:.0f}s: {tries}")
