"""Links both ways between Airflow and the pages, after a real DAG run (``dag.test()``): a task of ours
has an "Iceberg" extra link that resolves to its namespace's page inside the UI; other tasks have none;
and no response carries a secret, even where one reached a page's text."""

from __future__ import annotations

from urllib.parse import quote

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.long]


@pytest.fixture(scope="module")
def dag_run(lake, airflow_db):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(airflow_db))
    run = bag.get_dag("migrate_then_load").test(run_conf={"namespace": "demo"})
    assert str(run.state) == "success"
    return run


def test_a_task_of_ours_links_to_its_namespace_page_and_others_do_not(admin, dag_run):
    links = f"/api/v2/dags/migrate_then_load/dagRuns/{dag_run.run_id}/taskInstances"
    migrate = admin.get(f"{links}/migrate/links").json()["extra_links"]
    load = admin.get(f"{links}/load/links").json()["extra_links"]
    run = quote(dag_run.run_id, safe="")
    assert migrate["Iceberg"] == f"/iceberg-ops/tasks/migrate_then_load/{run}/migrate?map_index=-1"
    assert load.get("Iceberg") is None  # a plain @task: no button

    resolved = admin.get(migrate["Iceberg"])
    assert resolved.status_code == 303
    assert resolved.headers["location"] == "/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/demo"
    not_ours = admin.get(f"/iceberg-ops/tasks/migrate_then_load/{dag_run.run_id}/load")
    assert not_ours.status_code == 404 and "has no Iceberg page" in not_ours.text


def test_the_namespace_page_links_back_to_the_dag_that_migrated_it(admin, dag_run):
    page = admin.get("/iceberg-ops/c/iceberg_ops_default/ns/demo")
    assert 'href="/dags/migrate_then_load"' in page.text
    assert f'href="/dags/migrate_then_load/runs/{quote(dag_run.run_id, safe="")}/tasks/migrate"' in page.text


def test_the_task_route_needs_a_user_too(client, dag_run):
    assert client().get(f"/iceberg-ops/tasks/migrate_then_load/{dag_run.run_id}/migrate").status_code == 401


def test_a_secret_that_reached_a_page_is_replaced_before_the_response_leaves(admin, monkeypatch):
    from iceberg_ops_provider.ui import app as ui_app
    from iceberg_ops_provider.ui.connections import SECRETS
    from tests.airflow.ui.support import SECRETS as CONFIGURED

    assert len(SECRETS) > 0  # the connections' secrets were registered when they were read
    original = ui_app.views.catalogs_view

    def leaky(*args, **kwargs):
        view = original(*args, **kwargs)
        view["problems"] = [f"a client library put {secret} in its message" for secret in CONFIGURED[:4]]
        return view

    monkeypatch.setattr(ui_app.views, "catalogs_view", leaky)
    for path in ("/iceberg-ops/", "/iceberg-ops/api/catalogs"):
        response = admin.get(path)  # the client fixture searches every response for the secrets
        assert response.status_code == 200 and "a client library put *** in its message" in response.text
