"""TableHealthTrigger run under asyncio against a real SQLite catalog connection, and accepted by an AssetWatcher."""

from __future__ import annotations

import asyncio
import contextlib

import pyarrow as pa
import pytest

from iceberg_ops_provider.triggers import TableHealthTrigger
from iceberg_ops_provider.triggers.health import WATCH_STATE_KEY
from tests.airflow.conftest import catalog_at

SCHEMA = pa.schema([pa.field("id", pa.int64())])


class _Store:
    """A state store keeping JSON values in a dict, as the triggerer's accessor of one asset does."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.writes = 0

    def get(self, key: str, default: object = None) -> object:
        return self.values.get(key, default)

    def set(self, key: str, value: object) -> None:
        self.values[key] = value
        self.writes += 1


def _appends(table, count: int) -> None:
    for n in range(count):
        table.append(pa.table({"id": [n]}, schema=SCHEMA))


def _appends_at_once(table, count: int) -> None:
    """``count`` one-row files in one commit (one metadata change)."""
    with table.transaction() as transaction:
        for n in range(count):
            transaction.append(pa.table({"id": [n]}, schema=SCHEMA))


async def _events(trigger: TableHealthTrigger, seconds: float) -> list[dict]:
    """The payloads ``run()`` yields within ``seconds``."""
    events: list[dict] = []

    async def collect() -> None:
        async for event in trigger.run():
            events.append(event.payload)

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(collect(), seconds)
    return events


def test_the_trigger_fires_once_for_a_newly_due_table_and_keeps_its_watermark(iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("sales")
    due = catalog.create_table("sales.due", schema=SCHEMA)
    catalog.create_table("sales.healthy", schema=SCHEMA)
    _appends(due, 6)
    store = _Store()
    trigger = TableHealthTrigger(namespace="sales", poll_interval=0.2)
    trigger.asset_state_store = store

    events = asyncio.run(_events(trigger, 1.5))  # several polls, one change
    assert len(events) == 1, events
    (event,) = events
    assert event["namespace"] == "sales"
    assert [(t["table"], t["needs"]) for t in event["tables"]] == [("sales.due", ["compact"])]
    assert event["tables"][0]["score"] > 0
    assert set(store.values[WATCH_STATE_KEY]["locations"]) == {"sales.due", "sales.healthy"}
    assert store.writes == 1  # written when the state changed, not at every poll

    # re-created from its serialized kwargs, as after a triggerer restart: the kept state means no repeat
    classpath, kwargs = trigger.serialize()
    assert classpath == "iceberg_ops_provider.triggers.health.TableHealthTrigger"
    again = TableHealthTrigger(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    again.asset_state_store = store
    assert asyncio.run(_events(again, 0.8)) == []

    # without a state store it starts from nothing and announces the due table once more
    fresh = TableHealthTrigger(**kwargs)
    assert [t["table"] for e in asyncio.run(_events(fresh, 0.8)) for t in e["tables"]] == ["sales.due"]


def test_a_list_of_tables_is_watched_and_an_append_during_the_watch_fires(iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.t", schema=SCHEMA)
    catalog.create_table("sales.other", schema=SCHEMA)
    trigger = TableHealthTrigger(tables=["sales.t"], poll_interval=0.2)

    async def watch_while_appending() -> list[dict]:
        watching = asyncio.create_task(_events(trigger, 2.5))
        await asyncio.sleep(0.8)
        await asyncio.to_thread(_appends_at_once, table, 6)  # one commit: no look sees five of the six files
        return await watching

    events = asyncio.run(watch_while_appending())
    assert [[t["table"] for t in e["tables"]] for e in events] == [["sales.t"]]
    assert events[0]["namespace"] is None and events[0]["watched"] == 1


def test_a_trigger_shared_by_several_assets_keeps_its_state_in_memory(iceberg_connection):
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import AssetStateStoreAccessors

    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("sales")
    _appends(catalog.create_table("sales.due", schema=SCHEMA), 6)
    trigger = TableHealthTrigger(namespace="sales", poll_interval=0.2)
    # the triggerer's own accessors for two watched assets: an unsubscripted call is refused
    trigger.asset_state_store = AssetStateStoreAccessors(
        inlets=[Asset(name="a", uri="s3://a"), Asset(name="b", uri="s3://b")]
    )
    # 3 s: a first look under the fast suite's load took more than 1 s; the later looks must stay silent
    events = asyncio.run(_events(trigger, 3.0))
    assert [[t["table"] for t in e["tables"]] for e in events] == [["sales.due"]]  # watched, announced once


def test_a_missing_connection_keeps_the_watcher_alive(monkeypatch):
    trigger = TableHealthTrigger(iceberg_conn_id="nowhere", namespace="sales", poll_interval=0.1)
    assert asyncio.run(_events(trigger, 0.5)) == []  # it logs and tries again, it does not end


def test_an_asset_watcher_accepts_it_and_it_needs_a_namespace_or_tables():
    from airflow.sdk import Asset, AssetWatcher

    trigger = TableHealthTrigger(namespace="sales", iceberg_conn_id="lake", poll_interval=60)
    watcher = AssetWatcher(name="sales_health_watcher", trigger=trigger)
    asset = Asset(name="sales_health", uri="iceberg-ops://lake/sales", watchers=[watcher])
    assert asset.watchers[0].trigger is trigger
    with pytest.raises(ValueError, match="exactly one"):
        TableHealthTrigger(namespace="sales", tables=["sales.t"])
    with pytest.raises(ValueError, match="exactly one"):
        TableHealthTrigger()


class _FlakyStore(_Store):
    """A state store that does not answer its first read and its first write (an API server restarting)."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = {"get": 1, "set": 1}

    def _answer(self, call: str) -> None:
        if self.failures[call]:
            self.failures[call] -= 1
            raise ConnectionError(f"the state store did not answer a {call}")

    def get(self, key: str, default: object = None) -> object:
        self._answer("get")
        return super().get(key, default)

    def set(self, key: str, value: object) -> None:
        self._answer("set")
        super().set(key, value)


def test_a_state_store_that_does_not_answer_keeps_the_watcher_alive(iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.due", schema=SCHEMA)
    _appends(table, 6)
    store = _FlakyStore()
    trigger = TableHealthTrigger(namespace="sales", poll_interval=0.2)
    trigger.asset_state_store = store

    async def watch_while_appending() -> list[dict]:
        watching = asyncio.create_task(_events(trigger, 2.5))
        await asyncio.sleep(1.2)
        await asyncio.to_thread(_appends, table, 1)  # a change: the state is written again
        return await watching

    events = asyncio.run(watch_while_appending())
    # the first read failed: the look waited for the next poll, then read the store and announced the table;
    # the first write failed, the watcher went on, and the next change's write landed
    assert [[t["table"] for t in e["tables"]] for e in events] == [["sales.due"], ["sales.due"]]
    assert store.failures == {"get": 0, "set": 0} and store.writes == 1
    assert store.values[WATCH_STATE_KEY]["announced"]["sales.due"] == catalog.load_table("sales.due").metadata_location
