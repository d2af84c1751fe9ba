"""A catalog that hangs costs the api-server little: once one read of it timed out, its pages answer at
once with the error (saying when it is asked again); at most a few requests wait for it at a time; the
catalogs page waits a few seconds in all, not each catalog's timeout. Also what every user's menu and
every bad URL gets: the navigation's icon without the connection check, a 422 that does not echo the
URL back, a repeated error shown in full once, and the JSON link opened where its address shows."""

from __future__ import annotations

import threading
import time

import pytest

from tests.airflow.ui.conftest import html_text

pytestmark = [pytest.mark.slow, pytest.mark.long]  # Airflow's api-server application and metadata database

STALLED_PAGE = "/iceberg-ops/c/iceberg_stalled/ns/shop"


@pytest.fixture
def fresh_reads():
    """The application's reads forgotten, once the reads of earlier tests have ended (each holds a thread)."""
    from iceberg_ops_provider.ui.app import READS

    deadline = time.monotonic() + 10
    while any(READS._running.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    READS.clear()
    yield READS
    READS.clear()


def test_after_one_timeout_a_hung_catalogs_pages_answer_at_once_saying_when_it_is_asked_again(admin, fresh_reads):
    first = admin.get(STALLED_PAGE)
    assert first.status_code == 200 and "did not answer within 1.5 s" in html_text(first)
    started = time.monotonic()
    again = admin.get("/iceberg-ops/api/c/iceberg_stalled/ns/shop")
    assert time.monotonic() - started < 1.0  # not another timeout
    errors = again.json()["errors"]
    assert set(errors) == {"migrations", "audit", "tables"}
    assert all("'iceberg_stalled' did not answer within 1.5 s at" in error for error in errors.values())
    assert all("asked again" in error for error in errors.values())
    assert admin.get("/iceberg-ops/api/c/iceberg_ops_default/ns/shop").json()["errors"] == {}  # others still read


def test_many_requests_to_a_hung_catalog_hold_few_threads_and_airflow_keeps_answering(admin, fresh_reads):
    results: list[tuple[int, float, str]] = []

    def visit() -> None:
        started = time.monotonic()
        response = admin.get(STALLED_PAGE)
        results.append((response.status_code, time.monotonic() - started, html_text(response)))

    threads = [threading.Thread(target=visit) for _ in range(24)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert admin.get("/api/v2/monitor/health").status_code == 200
    airflow_took = time.monotonic() - started
    for thread in threads:
        thread.join(30)
    assert len(results) == 24 and all(code == 200 for code, _, _ in results)
    assert max(took for _, took, _ in results) < 1.5 + 4  # none waits past the connection's timeout
    refused = [text for _, _, text in results if "still answering 4 earlier requests" in text]
    assert refused  # more than 4 at once: the rest answered at once instead of holding a thread each
    assert airflow_took < 1.0


def test_the_catalogs_page_waits_a_few_seconds_in_all_and_shows_a_check_still_running(admin, fresh_reads, monkeypatch):
    from iceberg_ops_provider.ui import views

    monkeypatch.setattr(views, "CHECK_SECONDS", 0.3)
    started = time.monotonic()
    data = admin.get("/iceberg-ops/api/catalogs").json()
    assert time.monotonic() - started < 1.2  # not the stalled connection's 1.5 s
    stalled = {c["conn_id"]: c for c in data["catalogs"]}["iceberg_stalled"]
    assert (stalled["answers"], stalled["checking"]) == (False, True), stalled["error"]
    assert "'iceberg_stalled' has not answered after" in stalled["error"] and "reload to see" in stalled["error"]
    assert "still checking" in html_text(admin.get("/iceberg-ops/"))
    time.sleep(1.6)
    stalled = {c["conn_id"]: c for c in admin.get("/iceberg-ops/api/catalogs").json()["catalogs"]}["iceberg_stalled"]
    assert (stalled["answers"], stalled["checking"]) == (False, False)
    assert "did not answer within 1.5 s" in stalled["error"]


def test_the_navigation_icon_needs_no_connection_permission(client):
    for user in (client(), client().login("viewer")):
        response = user.get("/iceberg-ops/icon.svg")
        assert response.status_code == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert client().login("viewer").get("/iceberg-ops/api/catalogs").status_code == 403  # the data still needs it


def test_a_bad_name_is_refused_without_echoing_it_back(admin):
    name = "x" * 1001
    for path in (f"/iceberg-ops/api/c/iceberg_ops_default/ns/{name}", f"/iceberg-ops/c/iceberg_ops_default/ns/{name}"):
        response = admin.get(path)
        assert response.status_code == 422
        assert name not in response.text and "x" * 100 not in response.text
        assert "namespace" in response.text


def test_a_hung_catalogs_error_is_shown_in_full_once_and_the_json_opens_in_its_own_tab(admin, fresh_reads):
    page = admin.get(STALLED_PAGE).text
    assert page.count("did not answer within 1.5 s") == 1
    assert page.count("The same as above.") == 2
    assert 'href="/iceberg-ops/api/c/iceberg_stalled/ns/shop" target="_blank" rel="noopener"' in page
