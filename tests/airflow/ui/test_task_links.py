"""Links both ways between Airflow and the pages, after a real DAG run (``dag.test()``): a task of ours
has an "Iceberg" extra link that resolves to its namespace's page inside the UI; other tasks have none;
and no response carries a secret, even where one reached a page's text."""

from __future__ import annotations

import re
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


def test_a_path_carrying_a_guessed_password_answers_as_any_other_name_does(app):
    """No response is searched for secrets and rewritten: a guess that is a password gets no ``***`` back."""
    from fastapi.testclient import TestClient

    from tests.airflow.ui.conftest import PASSWORDS
    from tests.airflow.ui.support import SECRETS

    client = TestClient(app)  # not the recording client: these pages echo the name typed, secret or not
    token = client.post("/auth/token", json={"username": "admin", "password": PASSWORDS["admin"]}).json()
    headers = {"Authorization": f"Bearer {token['access_token']}"}
    guess, other = SECRETS[0], "pw-GUESSED-ops-4712"  # the lake's password, and a name of the same shape
    for template in ("/iceberg-ops/c/iceberg_ops_default/ns/{}", "/iceberg-ops/api/c/iceberg_ops_default/ns/{}"):
        right = client.get(template.format(guess), headers=headers)
        wrong = client.get(template.format(other), headers=headers)
        assert right.status_code == wrong.status_code
        assert "***" not in right.text
        same = right.text.replace(guess, "NAME")
        assert re.sub(r"\d\d:\d\d:\d\d|\d+(\.\d+)?s", "", same) == re.sub(
            r"\d\d:\d\d:\d\d|\d+(\.\d+)?s", "", wrong.text.replace(other, "NAME")
        )
