"""The policy-driven maintenance DAG and operator under a real Airflow, against a Polaris policy server on
loopback (tests/polaris/server.py: Polaris's policy endpoints and shapes; no JVM Polaris runs here) and
a real SQLite catalog holding the tables."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.airflow.conftest import catalog_at, xcom
from tests.polaris.server import PolarisServer

CATALOG = "prod"
CLIENT_ID, CLIENT_SECRET = "airflow", "airflow-Secret-77"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])


def content(enable: bool = True, **config: object) -> str:
    return json.dumps({"version": "2025-02-03", "enable": enable, "config": config})


@pytest.fixture
def polaris_connection(monkeypatch):
    """A Polaris policy server, and the connection ``polaris_policies`` to it (client credentials)."""
    with PolarisServer() as server:
        server.add_catalog(CATALOG)
        server.add_client(CLIENT_ID, CLIENT_SECRET)
        connection = {
            "conn_type": "iceberg_ops",
            "host": server.base_url,
            "login": CLIENT_ID,
            "password": CLIENT_SECRET,
            "extra": {"kind": "rest", "warehouse": CATALOG},
        }
        monkeypatch.setenv("AIRFLOW_CONN_POLARIS_POLICIES", json.dumps(connection))
        yield server


def _shop(catalog, polaris: PolarisServer) -> None:
    """Two tables: ``shop.clicks`` with twelve small files and six snapshots, ``shop.quiet`` with one."""
    catalog.create_namespace("shop")
    clicks = catalog.create_table("shop.clicks", SCHEMA)
    for n in range(12):
        clicks.append(pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64()), "note": ["x"] * 10}))
    quiet = catalog.create_table("shop.quiet", SCHEMA)
    quiet.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "note": ["a", "b", "c"]}))
    for name in ("shop.clicks", "shop.quiet"):
        polaris.add_table(CATALOG, name)
    # Expiry for the whole namespace, compaction only for clicks, a disabled manifest rewrite.
    polaris.put_policy(CATALOG, "shop", "keep-two", "system.snapshot-expiry", content(min_snapshot_to_keep="2"))
    polaris.attach(CATALOG, "shop", "keep-two", "namespace", "shop")
    polaris.put_policy(
        CATALOG, "shop", "compact-clicks", "system.data-compaction", content(target_file_size_bytes=8 * 2**20)
    )
    polaris.attach(CATALOG, "shop", "compact-clicks", "table-like", "shop.clicks")
    polaris.put_policy(CATALOG, "shop", "manifests-off", "system.metadata-compaction", content(enable=False))
    polaris.attach(CATALOG, "shop", "manifests-off", "namespace", "shop")


def test_the_policy_dag_plans_then_runs_what_each_tables_policies_ask(run_dag, iceberg_connection, polaris_connection):
    catalog = catalog_at(iceberg_connection)
    _shop(catalog, polaris_connection)
    rows_before = sorted(catalog.load_table("shop.clicks").scan().to_arrow().column("id").to_pylist())

    dag_run = run_dag("policy_maintenance", namespace="shop", polaris_conn_id="polaris_policies")

    assert str(dag_run.state) == "success"
    plan, done = xcom(dag_run, "plan"), xcom(dag_run, "run")
    assert plan["dry_run"] is True and done["dry_run"] is False
    clicks_plan = plan["tables"]["shop.clicks"]["policies"]
    assert clicks_plan["system.data-compaction"]["action"] == "dry run"
    assert clicks_plan["system.metadata-compaction"]["action"] == "skipped: disabled"
    clicks = done["tables"]["shop.clicks"]["policies"]
    quiet = done["tables"]["shop.quiet"]["policies"]
    assert clicks["system.data-compaction"]["action"] == "ran"
    assert clicks["system.data-compaction"]["results"][0]["rewritten_data_files_count"] == 12
    assert quiet["system.data-compaction"]["action"] == "skipped: no policy"
    expiry = clicks["system.snapshot-expiry"]
    assert expiry["action"] == "ran" and expiry["policy"] == "keep-two" and expiry["inherited"] is True
    table = catalog.load_table("shop.clicks")
    assert len(table.scan().plan_files()) == 1  # compacted
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == rows_before
    assert expiry["parameters"]["retain_last"]["source"].startswith("policy keep-two")


def test_the_operator_builds_the_policy_client_from_the_catalog_connection(polaris_connection, monkeypatch):
    from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
    from iceberg_ops_provider.operators.policy_maintenance import IcebergPolicyMaintenanceOperator

    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_OPS_DEFAULT", IcebergConnectionJson.of(polaris_connection))
    operator = IcebergPolicyMaintenanceOperator(task_id="t", namespace="shop")
    client = operator.policy_client(IcebergCatalogHook())
    polaris_connection.add_table(CATALOG, "shop.clicks")
    polaris_connection.put_policy(CATALOG, "shop", "keep-two", "system.snapshot-expiry", content())
    polaris_connection.attach(CATALOG, "shop", "keep-two", "namespace", "shop")
    (policy,) = client.applicable_policies("shop", table="clicks")
    assert policy.name == "keep-two" and policy.inherited is True
    assert CLIENT_SECRET not in repr(client)


def test_an_official_iceberg_connection_to_polaris_serves_the_policy_client(polaris_connection, monkeypatch):
    """Users of the official provider keep their `iceberg` connection (type from the extra, default rest)."""
    from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
    from iceberg_ops_provider.operators.policy_maintenance import IcebergPolicyMaintenanceOperator

    official = {
        "conn_type": "iceberg",
        "host": polaris_connection.base_url,
        "login": CLIENT_ID,
        "password": CLIENT_SECRET,
        "extra": {"warehouse": CATALOG},
    }
    monkeypatch.setenv("AIRFLOW_CONN_POLARIS_OFFICIAL", json.dumps(official))
    operator = IcebergPolicyMaintenanceOperator(task_id="t", namespace="shop", iceberg_conn_id="polaris_official")
    client = operator.policy_client(IcebergCatalogHook(iceberg_conn_id="polaris_official"))
    polaris_connection.add_table(CATALOG, "shop.clicks")
    polaris_connection.put_policy(CATALOG, "shop", "keep-two", "system.snapshot-expiry", content())
    polaris_connection.attach(CATALOG, "shop", "keep-two", "namespace", "shop")
    assert [policy.name for policy in client.applicable_policies("shop", table="clicks")] == ["keep-two"]


class IcebergConnectionJson:
    """The catalog connection users of Polaris have: the REST catalog at Polaris, client credentials."""

    @staticmethod
    def of(server: PolarisServer) -> str:
        return json.dumps(
            {
                "conn_type": "iceberg_ops",
                "host": server.base_url,
                "login": CLIENT_ID,
                "password": CLIENT_SECRET,
                "extra": {"kind": "rest", "warehouse": CATALOG},
            }
        )


def test_a_catalog_connection_without_a_policy_api_is_refused_with_the_fix(iceberg_connection):
    from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
    from iceberg_ops_provider.operators.policy_maintenance import AirflowFailException, IcebergPolicyMaintenanceOperator

    operator = IcebergPolicyMaintenanceOperator(task_id="t", namespace="shop")
    with pytest.raises(AirflowFailException, match="pass polaris_conn_id"):
        operator.policy_client(IcebergCatalogHook())


def test_bad_policy_content_fails_the_task_at_once_with_the_outcome_in_xcom(
    run_dag, iceberg_connection, polaris_connection
):
    catalog = catalog_at(iceberg_connection)
    _shop(catalog, polaris_connection)
    # Stored as is, bypassing the API's own check: a policy whose content the engine cannot use.
    polaris_connection.put_policy(
        CATALOG, "shop", "broken", "system.orphan-file-removal", '{"enable": "yes", "config": {}}'
    )
    polaris_connection.attach(CATALOG, "shop", "broken", "table-like", "shop.quiet")

    dag_run = run_dag("policy_maintenance", namespace="shop", polaris_conn_id="polaris_policies")

    assert str(dag_run.state) == "failed"
    plan = dag_run.get_task_instance("plan")
    assert str(plan.state) == "failed" and plan.try_number == 1  # permanent: no retry
    outcome = plan.xcom_pull(task_ids="plan", key="outcome")
    assert outcome["failed_tables"] == ["shop.quiet"]
    quiet = outcome["tables"]["shop.quiet"]["policies"]
    assert quiet["system.orphan-file-removal"]["action"] == "failed" and "broken" in json.dumps(quiet)
    assert quiet["system.snapshot-expiry"]["action"] == "dry run"  # the table's other policies still apply
    # The run goes ahead for the tables the broken policy does not concern, then fails on it again.
    run = dag_run.get_task_instance("run")
    assert str(run.state) == "failed" and run.try_number == 1
    ran = run.xcom_pull(task_ids="run", key="outcome")
    assert ran["tables"]["shop.clicks"]["policies"]["system.data-compaction"]["action"] == "ran"
    assert len(catalog.load_table("shop.clicks").scan().plan_files()) == 1


def test_a_mistyped_policy_connection_fails_at_once_naming_it(run_dag, iceberg_connection, polaris_connection):
    catalog = catalog_at(iceberg_connection)
    _shop(catalog, polaris_connection)

    dag_run = run_dag("policy_maintenance", namespace="shop", polaris_conn_id="polaris_policy")

    plan = dag_run.get_task_instance("plan")
    assert str(plan.state) == "failed" and plan.try_number == 1
    assert len(catalog.load_table("shop.clicks").scan().plan_files()) == 12  # nothing ran
