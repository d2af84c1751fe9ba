"""A namespace's tables on the pages and in the JSON: a health column that agrees with the maintenance queue,
the policy's state, sorting, filtering and paging by query parameters (checked at the edge); an expired lock
and a broken move said so; on Airflow's real api-server application and a real SQLite catalog."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from tests.airflow.ui.conftest import html_text
from tests.airflow.ui.support import CONTEXT, EVENTS_SCHEMA, small_files_table

pytestmark = [pytest.mark.slow, pytest.mark.long]  # Airflow's api-server application and metadata database

P = "iceberg-ops.maintenance."
API = "/iceberg-ops/api/c/iceberg_ops_default/ns/many"
PAGE = "/iceberg-ops/c/iceberg_ops_default/ns/many"

TABLES: dict[str, tuple[int, dict[str, str]]] = {
    "calm": (1, {}),
    "orders": (6, {}),
    "order_lines": (9, {}),
    "history": (3, {"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "1"}),
    "budget": (8, {f"{P}max-rewrite-bytes": "1"}),
    "paused": (8, {f"{P}enabled": "false"}),
    "nightly": (6, {f"{P}quiet-hours": "00-24"}),
    "typo": (6, {f"{P}min-input-files": "zero"}),
}


@pytest.fixture(scope="module")
def many(lake):
    """Namespace ``many``: a table in each state the health column words."""
    catalog = lake["catalog"]
    catalog.create_namespace("many")
    for name, (files, properties) in TABLES.items():
        table = catalog.create_table(f"many.{name}", schema=EVENTS_SCHEMA, properties=properties)
        for n in range(files):
            table.append(pa.table({"id": [n], "kind": ["k"]}, schema=EVENTS_SCHEMA))
    return catalog


def _rows(data):
    return {row["table"].removeprefix("many."): row for row in data["tables"]["tables"]}


def test_the_health_column_agrees_with_the_maintenance_queue(admin, many):
    from iceberg_ops_provider.maintenance.queue import maintenance_queue

    data = admin.get(API, params={"sort": "health"}).json()
    assert data["errors"] == {}
    rows = _rows(data)
    assert {name: row["status"]["state"] for name, row in rows.items()} == {
        "calm": "healthy",
        "orders": "due",
        "order_lines": "due",
        "history": "due",
        "budget": "over_budget",
        "paused": "disabled",
        "nightly": "due",
        "typo": "policy_error",
    }
    queue = maintenance_queue(many, "many")
    assert {e.table for e in queue.ranked} == {f"many.{n}" for n in ("orders", "order_lines", "history", "budget")}
    for entry in (*queue.ranked, *queue.held):
        assert tuple(rows[entry.table.removeprefix("many.")]["status"]["needs"]) == entry.needs
        assert rows[entry.table.removeprefix("many.")]["status"]["held"] == entry.held
    assert queue.healthy == ("many.calm",) and [e.table for e in queue.errors] == ["many.typo"]
    assert [row["table"] for row in data["tables"]["tables"]][:2] == ["many.typo", "many.budget"]  # attention first
    assert [row["table"] for row in data["tables"]["tables"]][-2:] == ["many.calm", "many.paused"]
    policies = {name: row["policy"]["state"] for name, row in rows.items()}
    assert (policies["calm"], policies["paused"], policies["nightly"], policies["typo"]) == (
        "on",
        "off",
        "quiet_hours",
        "invalid",
    )

    text = html_text(admin.get(PAGE, params={"sort": "health"}))
    for words in ("compaction due", "expiry due", "over budget", "policy off", "policy invalid", "quiet hours"):
        assert words in text, words
    assert "healthy" in text and "needs compact" not in text


def test_tables_are_sorted_filtered_and_paged_by_query_parameters(admin, many, monkeypatch):
    from iceberg_ops_provider.ui.app import READS

    monkeypatch.setenv("AIRFLOW__ICEBERG_OPS__UI_TABLES_PAGE_SIZE", "3")
    first = admin.get(API, params={"sort": "files", "order": "desc"}).json()["tables"]
    assert [row["table"] for row in first["tables"]] == ["many.order_lines", "many.budget", "many.paused"]
    assert (first["total"], first["matched"], first["page"], first["pages"], first["page_size"]) == (8, 8, 1, 3, 3)
    third = admin.get(API, params={"sort": "files", "order": "desc", "tpage": 3}).json()["tables"]
    assert [row["table"] for row in third["tables"]] == ["many.history", "many.calm"]
    past = admin.get(API, params={"sort": "files", "order": "desc", "tpage": 99}).json()["tables"]
    assert past["page"] == 3 and past["tables"] == third["tables"]  # a page past the last is the last

    found = admin.get(API, params={"filter": "ORDER"}).json()["tables"]
    assert [row["table"] for row in found["tables"]] == ["many.order_lines", "many.orders"]
    assert (found["total"], found["matched"], found["filter"]) == (8, 2, "ORDER")
    none = admin.get(API, params={"filter": "nothing-like-it"}).json()["tables"]
    assert (none["tables"], none["matched"]) == ([], 0)

    # Sorted by a column of the metadata file, only the page's tables are measured (manifests read).
    READS.metadata.clear()
    admin.get(API, params={"sort": "records", "order": "asc"})
    assert len(READS.metadata) == 3

    page = admin.get(PAGE, params={"sort": "files", "order": "desc", "tpage": 2})
    text = html_text(page)
    assert "page 2 of 3" in text and "← previous" in text and "next →" in text
    assert "?sort=files&amp;order=desc&amp;tpage=3#tables" in page.text  # the next page keeps the sort
    assert '?sort=files#tables"' in page.text  # the sorted column's header turns the order round (asc: default)
    assert 'aria-sort="descending"' in page.text
    filtered = admin.get(PAGE, params={"filter": "order"})
    assert 'value="order"' in filtered.text and "2 of 8 table(s) match" in html_text(filtered)
    assert "No table's name holds “zzz”." in html_text(admin.get(PAGE, params={"filter": "zzz"}))


@pytest.mark.parametrize(
    "query",
    ["sort=nope", "order=up", "tpage=0", "tpage=100001", "tpage=two", "filter=" + "x" * 201],
)
@pytest.mark.parametrize("prefix", [API, PAGE])
def test_bad_table_parameters_are_refused_with_422_before_a_catalog_is_asked(admin, monkeypatch, prefix, query):
    from iceberg_ops_provider.ui import views

    def must_not_run(*args, **kwargs):
        raise AssertionError("a catalog was asked with a bad parameter")

    monkeypatch.setattr(views, "namespace_view", must_not_run)
    response = admin.get(f"{prefix}?{query}")
    assert response.status_code == 422, response.text
    name = query.split("=")[0]
    if prefix == API:
        assert response.json()["detail"][0]["loc"] == ["query", name]
    else:
        assert f"query.{name}" in html_text(response)
        assert "Invalid value" in html_text(response) and "Invalid name" not in html_text(response)


def test_a_lock_whose_lease_ran_out_shows_as_expired(admin, lake):
    runner = lake["runner"]
    runner.lock.clock = lambda: datetime.now(UTC) - timedelta(days=1)  # taken a day ago, never renewed
    held = runner.lock.acquire("ui-stale-run", context=CONTEXT)
    del runner.lock.clock
    try:
        data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop").json()["migrations"]
        text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop"))
        summaries = admin.get("/iceberg-ops/api/c/iceberg_ops_default").json()["namespaces"]
        catalog_text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/"))
    finally:
        runner.lock.release(held.run_id)
    shop = next(summary for summary in summaries if summary["namespace"] == "shop")
    assert (shop["locked"], shop["lock_expired"]) == (True, True) and "lock expired" in catalog_text
    assert data["lock"] == {"state": "expired", "stale_cause": "lease_expired"}
    assert data["status"]["lock"]["run_id"] == "ui-stale-run"
    assert "Lock expired its lease ran out without being renewed" in text and "the next run takes it over" in text


def test_a_live_lock_shows_as_held(admin, lake):
    runner = lake["runner"]
    held = runner.lock.acquire("ui-live-run", context=CONTEXT)
    try:
        data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop").json()["migrations"]
        text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop"))
        summaries = admin.get("/iceberg-ops/api/c/iceberg_ops_default").json()["namespaces"]
    finally:
        runner.lock.release(held.run_id)
    shop = next(summary for summary in summaries if summary["namespace"] == "shop")
    assert (shop["locked"], shop["lock_expired"]) == (True, False)
    assert data["lock"] == {"state": "held", "stale_cause": None}
    assert "Lock held" in text and "expired" not in text


def test_a_move_without_its_state_shows_as_broken_never_in_progress(admin, lake):
    from iceberg_ops_provider.data_migration.state import MOVE_ID_KEY

    table = small_files_table(lake["catalog"], "shop.orphaned_copy", files=1)
    table.append(pa.table({"id": [9], "kind": ["k"]}, schema=EVENTS_SCHEMA), snapshot_properties={MOVE_ID_KEY: "lost"})
    moves = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/orphaned_copy").json()["facts"]["moves"]
    assert [(m["move_id"], m["state"], m["complete"]) for m in moves] == [("lost", "broken", False)]
    assert moves[0]["error"] == "no state recorded on main"
    text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/orphaned_copy"))
    assert "broken" in text and "in progress" not in text


def test_a_tables_page_says_over_budget_as_the_namespace_list_does(admin, many):
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/many/t/budget").json()
    assert data["errors"] == {}
    budget = data["health"]["budget"]
    assert budget["over_budget"] is True and budget["max_rewrite_bytes"] == 1 and budget["compaction_bytes"] > 1
    text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/many/t/budget"))
    assert "compaction due over budget" in text and "to compact, at most 1 B a run" in text
    calm = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/many/t/orders").json()["health"]["budget"]
    assert calm == {"compaction_bytes": calm["compaction_bytes"], "max_rewrite_bytes": None, "over_budget": False}
    assert "over budget" not in html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/many/t/orders"))
