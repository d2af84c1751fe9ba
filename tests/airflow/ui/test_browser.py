"""The Iceberg pages in a real browser: Debian's Chromium driven by Playwright against a real api-server,
scheduler and dag-processor (LocalExecutor, SQLite metadata) with the provider installed.

A user logs in, opens "Iceberg" from the navigation, sees the catalog that never answers as an
error naming it, finds the namespace with pending migrations, triggers the migrate DAG from its
page in Airflow, and a reload shows the namespace at head with the new events; from there to
the DAG, and from the task back to the namespace. A table of many small files shows the compaction
recommendation, and after the maintenance DAG ran, its compaction in the table's history. An
anonymous browser is refused. Every response of the pages is searched for the connections' secrets.

Skipped, with one line, where ``/usr/bin/chromium`` is missing (``make test-all`` installs it with
apt when it runs as root). On a failure a screenshot is saved and its path printed;
``ICEBERG_OPS_UI_SCREENSHOTS=1`` refreshes the screenshots of docs/ui.md (docs/ui/*.png).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.airflow.ui.support import EVENTS_SCHEMA, REPOSITORY, leaked, small_files_table
from tests.support.hostile import never, raw_server

CHROMIUM = Path("/usr/bin/chromium")
MAX_REWRITE = "iceberg-ops.maintenance.max-rewrite-bytes"
ENABLED = "iceberg-ops.maintenance.enabled"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS = REPOSITORY / "docs" / "ui"
REFRESH_DOCS = os.environ.get("ICEBERG_OPS_UI_SCREENSHOTS") == "1"

pytestmark = [pytest.mark.browser, pytest.mark.long, pytest.mark.slow]


def _unavailable() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium; make test-all does it as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def airflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The deployment, with namespace ``demo`` (empty: two migrations pending) and ``demo.clicks`` (small files)."""
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    from tests.airflow.ui.deployment import LocalAirflow

    with raw_server(never) as stalled:
        deployment = LocalAirflow(tmp_path_factory.mktemp("browser-airflow"), stalled.uri)
        catalog = deployment.catalog()
        catalog.create_namespace("demo")
        small_files_table(catalog, "demo.clicks", files=8)
        _fleet(catalog)
        deployment.start()
        try:
            yield deployment
        finally:
            deployment.stop()


FLEET_SPARE = 50  # empty tables beside the three that need attention: more than one page of the list (50)


def _fleet(catalog: Any) -> None:
    """Namespace ``fleet``: a table due for compaction, one over its policy's budget, one whose policy is off,
    and :data:`FLEET_SPARE` empty (healthy) tables."""
    catalog.create_namespace("fleet")
    small_files_table(catalog, "fleet.orders", files=6)
    budget = catalog.create_table("fleet.budget", schema=EVENTS_SCHEMA, properties={MAX_REWRITE: "1"})
    paused = catalog.create_table("fleet.paused", schema=EVENTS_SCHEMA, properties={ENABLED: "false"})
    for n in range(8):
        for table in (budget, paused):
            table.append(pa.table({"id": [n], "kind": ["k"]}, schema=EVENTS_SCHEMA))
    for n in range(FLEET_SPARE):
        catalog.create_table(f"fleet.part_{n:02d}", schema=EVENTS_SCHEMA)


@pytest.fixture(scope="module")
def browser(airflow) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class Seen:
    """Every response of the pages (their bodies), to search for secrets."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, str]] = []

    def record(self, response: Any) -> None:
        if "/iceberg-ops/" not in response.url:
            return
        with contextlib.suppress(Exception):  # a redirect has no body
            self.bodies.append((response.url, response.text() + str(response.headers)))


@pytest.fixture
def page(browser, airflow, tmp_path, request) -> Iterator[Any]:
    """A logged-in admin's page; a screenshot is saved (and its path printed) when the test fails."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    seen = Seen()
    context.on("response", seen.record)
    tab = context.new_page()
    tab.set_default_timeout(30_000)
    tab.seen = seen
    try:
        yield tab
    finally:
        report = getattr(request.node, "report_call", None)
        if report is None or report.failed:
            shot = Path(os.environ.get("ICEBERG_OPS_UI_ARTIFACTS", tmp_path)) / "failure.png"
            with contextlib.suppress(Exception):
                shot.parent.mkdir(parents=True, exist_ok=True)
                tab.screenshot(path=str(shot), full_page=True)
                print(f"screenshot of the failure: {shot}")
        context.close()
    for url, body in seen.bodies:
        assert not leaked(body), f"{url} leaked {leaked(body)}"


def _log_in(page: Any, airflow: Any, user: str = "admin") -> None:
    from tests.airflow.ui.deployment import USERS

    page.goto(airflow.api_url + "/")
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(USERS[user][1])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"^[^?]*/(\?.*)?$"))


def _frame(page: Any) -> Any:
    return page.frame_locator("iframe[title=Iceberg]")


def _docs_shot(page: Any, name: str) -> None:
    if REFRESH_DOCS:
        DOCS.mkdir(parents=True, exist_ok=True)
        time.sleep(0.5)  # the frame's last paint
        page.screenshot(path=str(DOCS / f"{name}.png"))


def _until(check: Any, page: Any, seconds: float = 30) -> None:
    """Reload until ``check()`` holds (the pages reuse reads for two seconds here)."""
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(AssertionError, Exception):
            check()
            return
        if time.monotonic() > deadline:
            check()
        page.reload()


def _trigger_in_the_ui(page: Any, airflow: Any, dag_id: str) -> str:
    """Trigger a run of ``dag_id`` with the Trigger button of its page and the dialog's defaults; its run id."""
    airflow.wait_for_dag(dag_id)
    airflow.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})
    page.goto(f"{airflow.api_url}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger Dag").click()
    page.get_by_role("dialog").get_by_role("button", name="Trigger", exact=True).click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        runs = airflow.request("GET", f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]
        if runs:
            assert len(runs) == 1, runs
            return runs[0]["dag_run_id"]
        time.sleep(0.5)
    raise AssertionError(f"no run of {dag_id} after the Trigger button was clicked")


def test_from_the_navigation_to_a_namespace_at_head_and_a_compacted_table(page, airflow):
    from playwright.sync_api import expect

    _log_in(page, airflow)
    page.locator("a[aria-label=Iceberg]").click()  # the navigation's entry
    frame = _frame(page)
    expect(frame.get_by_role("heading", name="Iceberg catalogs")).to_be_visible()
    expect(frame.locator("tr", has_text="iceberg_ops_default")).to_contain_text("answers")
    stalled = frame.locator("tr", has_text="iceberg_stalled")
    expect(stalled).to_contain_text("does not answer")
    expect(stalled).to_contain_text("'iceberg_stalled' did not answer within 1.5 s")
    _docs_shot(page, "catalogs")

    # A catalog that never answers: its page comes after the connection's timeout, with an error panel naming it.
    frame.get_by_role("link", name="iceberg_stalled").click()
    started = time.monotonic()
    expect(frame.get_by_role("alert")).to_contain_text("'iceberg_stalled' did not answer within 1.5 s")
    assert time.monotonic() - started < 1.5 + 5
    frame.get_by_role("navigation").get_by_role("link", name="Iceberg", exact=True).click()  # the breadcrumbs

    frame.get_by_role("link", name="iceberg_ops_default").click()
    demo_row = frame.locator("tr", has_text="demo")
    expect(demo_row).to_contain_text("2 pending")
    _docs_shot(page, "catalog")
    demo_row.get_by_role("link", name="demo").click()
    expect(frame.get_by_role("heading", name="Namespace demo")).to_be_visible()
    expect(frame.locator("#migrations")).to_contain_text("2 pending")
    assert page.url.endswith("/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo")  # the UI's URL follows

    # Trigger the migrate DAG from Airflow's own page (its namespace param defaults to demo), then back to the
    # namespace by its address in the UI while the run runs (Airflow's page of a running run polls its API).
    run_id = _trigger_in_the_ui(page, airflow, "migrate_then_load")
    page.goto(f"{airflow.api_url}/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo")
    run = airflow.wait_for_run("migrate_then_load", run_id)
    assert run.state == "success", airflow.failure_report(run)

    def at_head() -> None:
        frame = _frame(page)
        expect(frame.locator("#migrations")).to_contain_text("at head", timeout=3000)
        expect(frame.locator("#migrations")).to_contain_text("0002")
        expect(frame.locator("#events tbody tr")).to_have_count(2)
        expect(frame.locator("#events")).to_contain_text("migrate_then_load.migrate")

    _until(at_head, page)
    _docs_shot(page, "namespace")

    # From the namespace to the DAG that migrates it: Airflow's own page, in Airflow's window.
    _frame(page).locator("#dags").get_by_role("link", name="migrate_then_load").click()
    page.wait_for_url(re.compile(r".*/dags/migrate_then_load$"))

    # From the task back to its namespace: the task's "Iceberg" extra link.
    page.goto(f"{airflow.api_url}/dags/migrate_then_load/runs/{run.run_id}/tasks/migrate/details")
    page.locator('a[href*="/iceberg-ops/tasks/migrate_then_load/"]').click()  # among the task's extra links
    page.wait_for_url(re.compile(r".*/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo$"))
    expect(_frame(page).get_by_role("heading", name="Namespace demo")).to_be_visible()

    # A table of many small files: the compaction the maintenance DAG would run, with its parameters.
    _frame(page).locator("#tables").get_by_role("link", name="clicks").click()
    health = _frame(page).locator("#health")
    expect(health).to_contain_text("compaction due")
    expect(health).to_contain_text("min_input_files=5")
    _docs_shot(page, "table")

    run = airflow.wait_for_run(
        "table_maintenance", airflow.trigger("table_maintenance", {"namespace": "demo"}), timeout=300
    )
    assert run.state == "success", airflow.failure_report(run)

    def compacted() -> None:
        history = _frame(page).locator("#maintenance")
        expect(history).to_contain_text("compaction", timeout=3000)
        expect(history).to_contain_text("8 files")
        expect(_frame(page).locator("#health")).to_contain_text("healthy")

    _until(compacted, page)
    _docs_shot(page, "table-maintained")
    assert page.seen.bodies, "no response of the pages was seen"


def test_a_namespace_s_tables_are_sorted_filtered_and_paged_with_their_health(page, airflow):
    from playwright.sync_api import expect

    _log_in(page, airflow)
    page.goto(f"{airflow.api_url}/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/fleet")
    tables = _frame(page).locator("#tables")
    total = FLEET_SPARE + 3
    expect(tables).to_contain_text(f"{total} table(s)")
    expect(tables).to_contain_text("page 1 of 2")
    rows = tables.locator("tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text("budget")  # by name: budget, orders, part_00, ...
    expect(rows.first).to_contain_text("compaction due")
    expect(rows.first).to_contain_text("over budget")

    # The health column, sorted: what calls for attention first, a policy that is off last.
    tables.get_by_role("link", name="health", exact=True).click()
    tables = _frame(page).locator("#tables")
    expect(tables.locator("th[aria-sort=ascending]")).to_contain_text("health")
    rows = tables.locator("tbody tr")
    expect(rows.nth(0)).to_contain_text("over budget")
    expect(rows.nth(1)).to_contain_text("orders")
    expect(rows.nth(1)).to_contain_text("compaction due")
    expect(rows.nth(2)).to_contain_text("healthy")
    assert "sort=health" in page.url or "sort=health" in _frame(page).locator("th[aria-sort] a").get_attribute("href")

    # The last page holds the rest, and the policy that is off.
    tables.get_by_role("link", name="next →").click()
    tables = _frame(page).locator("#tables")
    expect(tables).to_contain_text("page 2 of 2")
    expect(tables.locator("tbody tr")).to_have_count(total - 50)
    expect(tables.locator("tbody tr").last).to_contain_text("paused")
    expect(tables.locator("tbody tr").last).to_contain_text("policy off")

    # A filter by part of the name, kept in the address: the sort stays.
    tables.get_by_role("searchbox").fill("ORD")
    tables.get_by_role("button", name="Filter").click()
    tables = _frame(page).locator("#tables")
    expect(tables).to_contain_text(f"1 of {total} table(s) match")
    expect(tables.locator("tbody tr")).to_have_count(1)
    expect(tables.locator("tbody tr")).to_contain_text("compaction due")
    expect(tables.locator("th[aria-sort=ascending]")).to_contain_text("health")
    tables.scroll_into_view_if_needed()
    tables.get_by_role("link", name="show all").click()
    tables = _frame(page).locator("#tables")
    expect(tables.locator("tbody tr")).to_have_count(50)
    tables.get_by_role("link", name="data files", exact=True).click()
    tables = _frame(page).locator("#tables")
    expect(tables.locator("tbody tr").first).to_contain_text("budget")  # most data files first (8, 8, 6)
    expect(tables.locator("tbody tr").nth(2)).to_contain_text("orders")
    tables.get_by_role("link", name="health", exact=True).click()
    expect(_frame(page).locator("#tables th[aria-sort]")).to_contain_text("health")  # the sorted page is shown
    _frame(page).locator("#tables").scroll_into_view_if_needed()
    _docs_shot(page, "namespace-tables")


def test_an_anonymous_browser_is_led_to_the_login_and_back_to_the_page_it_asked_for(browser, airflow):
    from playwright.sync_api import expect

    from tests.airflow.ui.deployment import USERS

    context = browser.new_context()
    try:
        tab = context.new_page()
        response = tab.goto(airflow.api_url + "/iceberg-ops/api/catalogs")
        assert response is not None and response.status == 401 and not leaked(response.text())  # JSON: no page
        tab.goto(airflow.api_url + "/iceberg-ops/c/iceberg_ops_default/ns/demo?page=1")
        tab.locator("input[name=username]").fill("admin")  # Airflow's own login page
        tab.locator("input[name=password]").fill(USERS["admin"][1])
        tab.get_by_role("button", name="Sign in").click()
        tab.wait_for_url(re.compile(r".*/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo\?page=1$"))
        expect(_frame(tab).get_by_role("heading", name="Namespace demo")).to_be_visible()
    finally:
        context.close()


def test_a_session_ending_inside_the_frame_logs_in_in_airflow_s_window_and_returns_to_the_page(browser, airflow):
    """Airflow's frame may not navigate Airflow's window (its sandbox lacks allow-top-navigation): the login
    must still open there, not inside the frame, and come back to the page in the frame, not to Airflow in Airflow.
    """
    from playwright.sync_api import expect

    from tests.airflow.ui.deployment import USERS

    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        _log_in(tab, airflow)
        tab.goto(f"{airflow.api_url}/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/")
        frame = _frame(tab)
        expect(frame.get_by_role("heading", name="Catalog iceberg_ops_default")).to_be_visible()
        token = next(cookie for cookie in context.cookies() if cookie["name"] == "_token")
        context.add_cookies([{**token, "value": token["value"][:-8] + "AAAAAAAA"}])  # its signature no longer holds
        frame.get_by_role("link", name="demo", exact=True).click()
        tab.wait_for_url(re.compile(r".*/login.*"))  # Airflow's window, not the frame, shows the login
        tab.locator("input[name=username]").fill("admin")
        tab.locator("input[name=password]").fill(USERS["admin"][1])
        tab.get_by_role("button", name="Sign in").click()
        tab.wait_for_url(re.compile(r".*/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo$"))
        assert "/plugin/iceberg/plugin/" not in tab.url
        expect(_frame(tab).get_by_role("heading", name="Namespace demo")).to_be_visible()
        assert tab.locator("iframe[title=Iceberg]").count() == 1  # Airflow once, the page in its frame
    finally:
        context.close()


def test_the_pages_style_and_script_load_under_their_content_security_policy(page, airflow):
    from playwright.sync_api import expect

    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text) if "Content Security" in message.text else None)
    _log_in(page, airflow)
    page.goto(f"{airflow.api_url}/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/")
    frame = _frame(page)
    expect(frame.get_by_role("heading", name="Catalog iceberg_ops_default")).to_be_visible()
    panel = frame.locator("section.panel").first
    assert panel.evaluate("element => getComputedStyle(element).borderTopStyle") == "solid"  # pages.css applied
    assert refused == []


def test_a_user_whose_role_may_not_read_connections_is_refused(browser, airflow):
    context = browser.new_context()
    try:
        tab = context.new_page()
        _log_in(tab, airflow, "viewer")
        response = tab.goto(airflow.api_url + "/iceberg-ops/")
        assert response is not None and response.status == 403
    finally:
        context.close()


def test_a_table_page_shows_its_shape_history_files_and_policy_and_leads_to_the_maintenance_dag(page, airflow):
    from playwright.sync_api import expect

    _log_in(page, airflow)
    page.goto(f"{airflow.api_url}/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo/t/clicks")
    frame = _frame(page)
    expect(frame.locator("#policy")).to_contain_text("write.target-file-size-bytes")
    expect(frame.locator("#files")).to_contain_text("File sizes")
    expect(frame.locator("#timeline tbody tr").last).to_contain_text("append")  # the oldest
    expect(frame.locator("#schema")).to_contain_text("id")
    expect(frame.locator("#specs")).to_contain_text("main")
    expect(frame.locator("#growth")).to_contain_text("current")
    expect(frame.locator("#trigger-conf")).to_have_text('{"namespace": "demo", "tables": ["demo.clicks"]}')
    frame.locator("#timeline").scroll_into_view_if_needed()
    _docs_shot(page, "table-history")
    frame.locator("#trigger").get_by_role("link", name=re.compile("table_maintenance")).click()
    page.wait_for_url(re.compile(r".*/dags/table_maintenance$"))  # Airflow's page of the DAG, in its window
    expect(page.get_by_role("button", name="Trigger Dag")).to_be_visible()
