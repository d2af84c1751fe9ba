"""The Iceberg pages and their JSON on Airflow's real api-server application, in process: what they show,
who may see them, names checked before a catalog sees them, a stalled catalog, no secret in any response."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.airflow.ui.conftest import html_text
from tests.airflow.ui.support import CONTEXT

pytestmark = [pytest.mark.slow, pytest.mark.long]  # Airflow's api-server application and metadata database

ROUTES = [
    "/iceberg-ops/",
    "/iceberg-ops/c/iceberg_ops_default/",
    "/iceberg-ops/c/iceberg_ops_default/ns/shop",
    "/iceberg-ops/c/iceberg_ops_default/ns/shop/t/events",
    "/iceberg-ops/api/catalogs",
    "/iceberg-ops/api/c/iceberg_ops_default",
    "/iceberg-ops/api/c/iceberg_ops_default/ns/shop",
    "/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events",
    "/iceberg-ops/openapi.json",
    "/iceberg-ops/docs",
]


@pytest.mark.parametrize("path", ROUTES)
def test_an_anonymous_request_is_refused_with_401(client, path):
    response = client().get(path)
    assert response.status_code == 401
    if "/api/" in path or path.endswith(".json"):
        assert response.json() == {"detail": "Not authenticated"}
    else:
        assert "Log in to Airflow" in response.text  # a page says how, with the auth manager's login link
        assert "/auth/login" in response.text


@pytest.mark.parametrize("path", ROUTES)
def test_a_user_whose_role_may_not_read_connections_gets_403(client, path):
    response = client().login("viewer").get(path)  # the simple auth manager: connections need the op role
    assert response.status_code == 403


def test_a_forged_token_is_refused(client):
    response = client().get("/iceberg-ops/api/catalogs", headers={"Authorization": "Bearer not.a.token"})
    assert response.status_code in (401, 403)


@pytest.mark.parametrize("path", ROUTES)
def test_an_admin_gets_every_route(admin, path):
    assert admin.get(path).status_code == 200


def test_the_catalogs_page_lists_both_connection_types_with_kind_and_whether_they_answer(admin, lake):
    data = admin.get("/iceberg-ops/api/catalogs").json()
    catalogs = {catalog["conn_id"]: catalog for catalog in data["catalogs"]}
    assert set(catalogs) == {"iceberg_ops_default", "iceberg_stalled"}  # other_db (postgres) is not listed
    lake_catalog, stalled = catalogs["iceberg_ops_default"], catalogs["iceberg_stalled"]
    assert (lake_catalog["conn_type"], lake_catalog["kind"], lake_catalog["answers"]) == ("iceberg_ops", "sqlite", True)
    assert lake_catalog["namespaces"] == 2  # shop and empty: the meta-namespace is not counted, as it is not listed
    assert (stalled["conn_type"], stalled["kind"], stalled["answers"]) == ("iceberg", "rest", False)
    assert stalled["endpoint"] == lake["stalled"]
    assert "iceberg_stalled" in stalled["error"] and "did not answer within 1.5 s" in stalled["error"]


def test_a_stalled_catalog_costs_its_timeout_and_shows_as_an_error_naming_it(admin):
    started = time.monotonic()
    page = admin.get("/iceberg-ops/c/iceberg_stalled/")
    took = time.monotonic() - started
    assert page.status_code == 200
    assert took < 1.5 + 3  # the connection's timeout, then the page
    text = html_text(page)
    assert "Could not read this part." in text and "'iceberg_stalled'" in text
    data = admin.get("/iceberg-ops/api/c/iceberg_stalled").json()
    assert data["namespaces"] is None and "iceberg_stalled" in data["errors"]["namespaces"]


def test_the_catalog_page_finds_the_namespace_with_pending_migrations(admin):
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default").json()
    summaries = {summary["namespace"]: summary for summary in data["namespaces"]}
    assert set(summaries) == {"shop", "empty"}  # the meta-namespace is left out
    assert (summaries["shop"]["current"], summaries["shop"]["pending"], summaries["shop"]["tables"]) == ("0001", 1, 3)
    assert summaries["empty"]["current"] is None and summaries["empty"]["pending"] == 2
    assert "1 pending" in html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/"))


def test_the_namespace_page_shows_versions_checksums_commit_mode_lock_events_and_dags(admin, lake):
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop").json()
    assert data["errors"] == {}
    status = data["migrations"]["status"]
    assert status["current"] == "0001" and status["commit_mode"] == "atomic" and status["lock"] is None
    versions = {row["version"]: row for row in data["migrations"]["versions"]}
    assert versions["0001"]["state"] == "applied" and versions["0001"]["recorded_checksum"].startswith("ast1:")
    assert versions["0002"]["state"] == "pending" and versions["0002"]["file_checksum"].startswith("ast1:")
    assert versions["0002"]["description"] == "add channel, widen amount"
    events = data["audit"]["events"]
    assert [(event["event"], event["version"]) for event in events] == [("applied", "0001")]
    assert events[0]["executed_by"] and events[0]["duration_ms"] is not None
    assert data["audit"]["origins"][0]["context"] == CONTEXT
    assert {table["table"] for table in data["tables"]["tables"]} == {"shop.orders", "shop.events", "shop.events_copy"}

    page = admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop")
    text = html_text(page)
    for shown in ("1 pending", "create orders", "add channel, widen amount", "atomic", "No run holds", "applied"):
        assert shown in text
    assert 'href="/dags/migrate_then_load"' in page.text and "data-top" in page.text  # to the DAG that migrates it
    assert 'href="/dags/migrate_then_load/runs/manual__2026-11-30/tasks/migrate"' in page.text


def test_a_namespace_not_created_yet_shows_its_pending_migrations_and_no_table_without_an_error(admin):
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/later").json()
    assert data["errors"] == {}
    assert data["migrations"]["status"]["current"] is None and len(data["migrations"]["status"]["pending"]) == 2
    assert (data["tables"]["tables"], data["tables"]["exists"]) == ([], False)
    text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/later"))
    assert "The namespace does not exist yet: its first migration creates it." in text
    assert "Could not read this part" not in text


def test_the_meta_namespace_page_says_it_holds_the_history_and_lists_its_tables(admin):
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/_iceberg_ops").json()
    assert data["errors"] == {}
    assert data["migrations"] == {"status": None, "versions": [], "meta_namespace": "_iceberg_ops"}
    assert data["audit"] is None
    assert "_iceberg_ops.migration_history" in {table["table"] for table in data["tables"]["tables"]}
    text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/_iceberg_ops"))
    assert "This namespace holds the migration history and locks of the catalog's other namespaces" in text
    assert "not configured" not in text and "Could not read this part" not in text


def test_the_audit_trail_is_newest_first_and_paged(admin, lake, monkeypatch):
    runner = lake["runner"]
    runner.downgrade("base")
    runner.upgrade("0001")  # three events now: applied, rolled back, applied
    monkeypatch.setenv("AIRFLOW__ICEBERG_OPS__UI_EVENTS_PAGE_SIZE", "2")
    first = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop").json()["audit"]
    second = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop?page=2").json()["audit"]
    assert [event["event"] for event in first["events"]] == ["applied", "rolled_back"]
    assert [event["event"] for event in second["events"]] == ["applied"]
    assert (first["total"], first["offset"], second["offset"]) == (3, 0, 2)
    page = admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop")
    assert "older →" in page.text and "?page=2" in page.text


def test_a_held_lock_shows_its_holder_with_dag_run_task_try_and_lease(admin, lake):
    runner = lake["runner"]
    held = runner.lock.acquire("ui-test-run", context=CONTEXT)
    try:
        status = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop").json()["migrations"]["status"]
        text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop"))
    finally:
        runner.lock.release(held.run_id)
    assert status["lock"]["run_id"] == "ui-test-run" and status["lock"]["context"] == CONTEXT
    assert "held" in text and "lease expires" in text and "try_number" in text and "migrate_then_load" in text


def test_the_table_page_shows_health_recommendations_maintenance_and_moves(admin, lake):
    from tests.airflow.ui.support import small_files_table

    small_files_table(lake["catalog"], "shop.clicks", files=7)
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/clicks").json()
    assert data["health"]["needs"] == ["compact"]
    compact = data["health"]["recommendations"][0]
    assert compact["action"] == "compact" and compact["params"]["min_input_files"] == 5
    text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/clicks"))
    assert "compaction due" in text and "min_input_files=5" in text and "target_file_size_bytes=536870912" in text

    history = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events").json()["maintenance"]["commits"]
    assert [commit["kind"] for commit in history] == ["expire_snapshots", "rewrite_manifests", "compaction"]
    assert history[2]["details"]["rewritten_data_files"] == 8

    moves = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events_copy").json()["facts"]["moves"]
    assert [(m["move_id"], m["units_committed"], m["units_planned"], m["rows"], m["complete"]) for m in moves] == [
        ("copy-events", 1, 1, 8, True)
    ]
    assert moves[0]["bytes"] > 0
    text = html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/events_copy"))
    assert "1 of 1 units" in text and "complete" in text


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/iceberg-ops/c/not%20an%20id/", 422),
        ("/iceberg-ops/c/nope/", 404),
        ("/iceberg-ops/c/other_db/", 404),  # a connection of another type is never opened
        ("/iceberg-ops/c/iceberg_ops_default/ns/bad..name", 422),
        ("/iceberg-ops/c/iceberg_ops_default/ns/%20shop", 422),
        ("/iceberg-ops/c/iceberg_ops_default/ns/shop%5Cx", 422),
        ("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/a.b", 422),
        ("/iceberg-ops/api/c/iceberg_ops_default/ns/shop?page=0", 422),
        ("/iceberg-ops/api/c/iceberg_ops_default/ns/" + "x" * 1001, 422),
    ],
)
def test_names_from_the_url_are_checked_before_a_catalog_sees_them(admin, monkeypatch, path, code):
    from iceberg_ops_provider.ui import views

    def must_not_run(*args, **kwargs):
        raise AssertionError("a catalog was asked with a bad name")

    for name in ("catalog_view", "namespace_view", "table_view"):
        monkeypatch.setattr(views, name, must_not_run)
    response = admin.get(path)
    assert response.status_code == code, response.text


def test_the_openapi_document_describes_the_json_endpoints(admin):
    document = admin.get("/iceberg-ops/openapi.json").json()
    assert set(document["paths"]) == {
        "/api/catalogs",
        "/api/c/{connection_id}",
        "/api/c/{connection_id}/ns/{namespace}",
        "/api/c/{connection_id}/ns/{namespace}/t/{table}",
    }
    assert document["servers"] == [{"url": "/iceberg-ops"}]
    assert "NamespaceResponse" in document["components"]["schemas"]


def test_the_plugin_is_listed_by_airflow_plugins(lake):
    listing = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "plugins", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert '"name": "iceberg_ops"' in listing.stdout
    assert '"url_prefix": "/iceberg-ops"' in listing.stdout and '"url_route": "iceberg"' in listing.stdout


def test_the_table_page_shows_its_shape_history_files_policy_and_the_trigger_link(admin, lake, monkeypatch):
    data = admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events").json()
    assert data["errors"] == {}
    assert [field["name"] for field in data["details"]["fields"]][:1] == ["id"]
    assert [ref["name"] for ref in data["details"]["refs"]] == ["main"]
    assert data["timeline"]["snapshots"] == len(data["timeline"]["rows"]) >= 1
    assert data["timeline"]["growth"][-1]["current"] is True
    assert data["files"]["files"] == data["health"]["data_files"]["files"]
    assert {value["key"] for value in data["policy"]["values"]} >= {"write.target-file-size-bytes"}
    conf = {"namespace": "shop", "tables": ["shop.events"]}  # the table alone, as the DAG's `tables` param takes it
    assert data["trigger"] == {"dag_id": "table_maintenance", "conf": conf}
    page = admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/events")
    text = html_text(page)
    for section in ("Schema", "Partition specs", "Branches and tags", "Snapshot timeline", "File sizes"):
        assert section in text
    assert "Metadata growth" in text and "Maintenance policy" in text and "last compaction" in text
    assert 'href="/dags/table_maintenance"' in page.text and '{"namespace": "shop", "tables": ["shop.events"]}' in text

    monkeypatch.setenv("AIRFLOW__ICEBERG_OPS__UI_MAINTENANCE_DAG", "")  # no DAG named: no link
    assert admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events").json()["trigger"] is None
    assert "Run maintenance" not in html_text(admin.get("/iceberg-ops/c/iceberg_ops_default/ns/shop/t/events"))
