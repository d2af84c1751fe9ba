"""The triggers against catalogs that misbehave, on real servers on loopback: a PostgreSQL catalog database that
goes away, a REST catalog that rate-limits or hangs, a table dropped and re-created while waiting; and what a wait
costs: database connections held between checks, threads shared with other triggers."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pyarrow as pa
import pytest
from sqlalchemy.engine import make_url

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.triggers import IcebergPartitionTrigger
from iceberg_ops_provider.triggers.polling import DEADLINE_GRACE
from tests.airflow.conftest import catalog_at
from tests.support.proxy import TcpProxy
from tests.support.servers import serve_http

pytestmark = pytest.mark.slow

IDS = pa.schema([("id", pa.int64())])


def _deadline(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def _event(trigger: IcebergPartitionTrigger) -> dict:
    async def first():
        return await anext(trigger.run())

    return asyncio.run(first()).payload


def _connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, extra: dict, host: str | None = None) -> None:
    connection = {"conn_type": "iceberg_ops", "extra": extra, **({"host": host} if host else {})}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection))


def _rest_catalog(behaviour: str, release: threading.Event | None = None) -> type[BaseHTTPRequestHandler]:
    """A REST catalog that answers ``GET /v1/config`` and then, to every request, 429 or nothing until ``release``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/v1/config"):
                self._answer(200, {"defaults": {}, "overrides": {}})
            elif behaviour == "429":
                self._answer(429, {"error": {"message": "Slow down", "type": "TooManyRequests", "code": 429}})
            elif release is not None:
                release.wait(60)

        def _answer(self, status: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def pg_behind_proxy(postgres_url, unique_name, tmp_path, monkeypatch):
    """Connection ``pgcat``: a ``sql`` catalog on PostgreSQL reached through a proxy that can cut it off.

    Yields the proxy and ``ns.t`` (empty) as the catalog opened directly, without the proxy, sees it.
    """
    url = make_url(postgres_url)
    proxy = TcpProxy(url.port or 5432).start()
    behind = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    extra = {"kind": "sql", "uri": behind, "warehouse_dir": str(tmp_path), "name": unique_name, "timeout": 3}
    _connection(monkeypatch, "pgcat", extra)
    direct = CatalogFactory.build("sql", uri=postgres_url, warehouse_dir=tmp_path, name=unique_name)
    direct.create_namespace("ns")
    table = direct.create_table("ns.t", IDS)
    try:
        yield proxy, table
    finally:
        proxy.stop()
        direct.close()


@pytest.mark.postgres
def test_a_trigger_waits_through_a_catalog_database_outage(pg_behind_proxy):
    proxy, table = pg_behind_proxy
    trigger = IcebergPartitionTrigger(
        table="ns.t", where="id >= 0", iceberg_conn_id="pgcat", deadline=_deadline(40), poll_interval=0.5
    )
    outage = {}

    def go_down_then_come_back() -> None:
        time.sleep(1.5)
        proxy.stop()  # connections cut, new ones refused
        outage["down"] = time.monotonic()
        time.sleep(3)
        proxy.start()
        time.sleep(1)
        table.append(pa.table({"id": pa.array([1], pa.int64())}))

    threading.Thread(target=go_down_then_come_back, daemon=True).start()
    event = _event(trigger)
    assert event["status"] == "success", event
    assert event["seen"]["rows"] == 1
    assert time.monotonic() - outage["down"] >= 3  # it ended after the outage, not during it


@pytest.mark.postgres
def test_waiting_triggers_hold_no_database_connection_between_checks(pg_behind_proxy):
    proxy, _ = pg_behind_proxy

    async def wait_and_count() -> tuple[list[int], list[str]]:
        triggers = [
            IcebergPartitionTrigger(
                table="ns.t", where="id >= 0", iceberg_conn_id="pgcat", deadline=_deadline(4), poll_interval=1
            )
            for _ in range(5)
        ]
        tasks = [asyncio.create_task(anext(trigger.run())) for trigger in triggers]
        await asyncio.sleep(1.5)
        held = []
        for _ in range(20):
            held.append(proxy.active)
            await asyncio.sleep(0.1)
        return held, [(await task).payload["status"] for task in tasks]

    held, statuses = asyncio.run(wait_and_count())
    assert statuses == ["timeout"] * 5
    assert min(held) == 0, held  # between checks, no connection is kept open


def test_a_rate_limited_rest_catalog_keeps_the_trigger_waiting(monkeypatch):
    with serve_http(_rest_catalog("429")) as url:
        _connection(monkeypatch, "throttled", {"kind": "rest", "timeout": 5}, url)
        trigger = IcebergPartitionTrigger(
            table="ns.t", where="id >= 0", iceberg_conn_id="throttled", deadline=_deadline(1.5), poll_interval=0.3
        )
        event = _event(trigger)
    assert event["status"] == "timeout", event  # not "failed": a 429 is worth another try
    assert "last error: TooManyRequestsError: TooManyRequests: Slow down" in event["message"]


def test_a_check_that_hangs_does_not_hold_the_wait_past_its_deadline(monkeypatch):
    release = threading.Event()
    with serve_http(_rest_catalog("hang", release)) as url:
        _connection(monkeypatch, "stalled", {"kind": "rest", "timeout": 30}, url)
        trigger = IcebergPartitionTrigger(
            table="ns.t", where="id >= 0", iceberg_conn_id="stalled", deadline=_deadline(1), poll_interval=0.3
        )
        started = time.monotonic()
        try:
            event = _event(trigger)
        finally:
            release.set()
    elapsed = time.monotonic() - started
    assert event["status"] == "timeout", event
    assert elapsed < 1 + DEADLINE_GRACE + 3, elapsed  # not the catalog's 30 s
    assert f"the check was still running {DEADLINE_GRACE:g} s after the deadline" in event["message"]


def test_a_catalog_that_does_not_answer_is_reported_with_its_bound(monkeypatch):
    release = threading.Event()
    with serve_http(_rest_catalog("hang", release)) as url:
        _connection(monkeypatch, "slow", {"kind": "rest", "timeout": 1}, url)
        trigger = IcebergPartitionTrigger(
            table="ns.t", where="id >= 0", iceberg_conn_id="slow", deadline=_deadline(1.5), poll_interval=0.3
        )
        try:
            event = _event(trigger)
        finally:
            release.set()
    assert event["status"] == "timeout", event
    assert f"last error: CatalogUnavailableError: The catalog at {url} did not answer within 1 s" in event["message"]


def test_checks_on_a_hanging_catalog_do_not_delay_other_triggers(iceberg_connection, monkeypatch):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", IDS).append(pa.table({"id": pa.array([1], pa.int64())}))
    release = threading.Event()

    async def healthy_among_hung() -> tuple[dict, float]:
        hung = [
            asyncio.create_task(
                anext(
                    IcebergPartitionTrigger(
                        table="ns.t", where="id >= 0", iceberg_conn_id="hanging", deadline=_deadline(60)
                    ).run()
                )
            )
            for _ in range(8)  # more than asyncio's default thread pool has threads here
        ]
        await asyncio.sleep(1.0)
        started = time.monotonic()
        event = await anext(IcebergPartitionTrigger(table="ns.t", where="id >= 0", deadline=_deadline(60)).run())
        elapsed = time.monotonic() - started
        for task in hung:
            task.cancel()
        return event.payload, elapsed

    with serve_http(_rest_catalog("hang", release)) as url:
        _connection(monkeypatch, "hanging", {"kind": "rest", "timeout": 30}, url)
        try:
            event, elapsed = asyncio.run(healthy_among_hung())
        finally:
            release.set()
    assert event["status"] == "success", event
    assert elapsed < 3, elapsed


def test_a_table_dropped_and_recreated_while_the_trigger_waits(iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", IDS).append(pa.table({"id": pa.array([1], pa.int64())}))
    trigger = IcebergPartitionTrigger(
        table="ns.t", where="id >= 0", min_rows=2, deadline=_deadline(30), poll_interval=0.3
    )

    def migrate() -> None:  # what a migration that re-creates the table does
        time.sleep(0.8)
        catalog.drop_table("ns.t")
        time.sleep(1.0)
        catalog.create_table("ns.t", IDS).append(pa.table({"id": pa.array([1, 2], pa.int64())}))

    threading.Thread(target=migrate, daemon=True).start()
    event = _event(trigger)
    assert event["status"] == "success", event
    assert event["seen"]["rows"] == 2
