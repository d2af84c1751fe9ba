"""IcebergCatalogHook: connection mapping (``connection_spec``), lazy catalog, test_connection (which creates
nothing), form metadata, discovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.sdk import Connection

from iceberg_ops_provider.catalogs import open_catalog
from iceberg_ops_provider.errors import CatalogConfigError, CatalogNotFoundError
from iceberg_ops_provider.get_provider_info import get_provider_info
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook, connection_spec


def _conn(**fields) -> Connection:
    extra = fields.pop("extra", {})
    return Connection(conn_id="c", extra=json.dumps(extra), **fields)


def test_iceberg_ops_connection_kinds():
    spec = connection_spec(_conn(conn_type="iceberg_ops", extra={"kind": "sqlite", "db_path": "/x.db"}))
    assert (spec.kind, spec.database, spec.properties["uri"]) == ("sqlite", Path("/x.db"), "sqlite:////x.db")
    assert spec.source.kind == "connection" and spec.source.where == "c" and not spec.problems
    spec = connection_spec(
        _conn(
            conn_type="iceberg_ops",
            host="https://polaris.local/api/catalog",
            login="client",
            password="s3cret-password",
            extra={"warehouse": "analytics", "extra__iceberg_ops__scope": "PRINCIPAL_ROLE:ALL"},
        )
    )
    assert spec.kind == "rest"  # the default
    assert spec.pyiceberg_properties() == {
        "type": "rest",
        "warehouse": "analytics",
        "scope": "PRINCIPAL_ROLE:ALL",
        "uri": "https://polaris.local/api/catalog",
        "credential": "client:s3cret-password",
        "rest.sigv4.max-retries": "2",
    }
    assert spec.properties["credential"] == "***" and "s3cret-password" not in repr(spec)
    spec = connection_spec(
        _conn(conn_type="iceberg_ops", host="s3tables.us-east-1.amazonaws.com/iceberg", extra={"kind": "s3tables"})
    )
    assert spec.kind == "s3tables" and spec.properties["uri"] == "https://s3tables.us-east-1.amazonaws.com/iceberg"


def test_official_iceberg_connections_are_mapped_like_the_official_provider():
    spec = connection_spec(
        _conn(
            conn_type="iceberg", host="http://127.0.0.1:8181", login="id", password="pw-12345", extra={"warehouse": "w"}
        )
    )
    assert spec.kind == "pyiceberg" and spec.name == "c"  # load_catalog with exactly these properties, named so
    assert spec.pyiceberg_properties() == {
        "type": "rest",
        "warehouse": "w",
        "uri": "http://127.0.0.1:8181",
        "credential": "id:pw-12345",
    }
    spec = connection_spec(_conn(conn_type="iceberg", extra={"type": "glue", "glue.region": "eu-west-1"}))
    assert spec.kind == "pyiceberg" and spec.pyiceberg_properties() == {"type": "glue", "glue.region": "eu-west-1"}


def test_credential_is_masked():
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    spec = connection_spec(_conn(conn_type="iceberg_ops", host="http://h", login="client-id", password="pw-abcdef-123"))
    assert "pw-abcdef-123" not in str(redact(f"using credential {spec.secrets['credential']}"))


def test_hook_builds_the_catalog_lazily_once_and_tests_the_connection(tmp_path, monkeypatch):
    connection = {"conn_type": "iceberg_ops", "extra": {"kind": "sqlite", "db_path": str(tmp_path / "c.db")}}
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE",
        json.dumps({**connection, "extra": {**connection["extra"], "warehouse_dir": str(tmp_path / "w")}}),
    )
    hook = IcebergCatalogHook(iceberg_conn_id="lake")
    assert not (tmp_path / "c.db").exists()  # nothing built yet
    catalog = hook.get_conn()
    assert hook.get_conn() is catalog and hook.catalog is catalog
    catalog.create_namespace("sales")
    assert hook.test_connection() == (True, "Connected; the catalog has 1 top-level namespace(s).")
    reader = hook.catalog_for("read")
    assert reader is not catalog and hook.catalog_for("read") is reader
    assert reader.list_namespaces() == [("sales",)]

    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", json.dumps({"conn_type": "iceberg_ops", "extra": {"kind": "postgres"}}))
    ok, message = IcebergCatalogHook(iceberg_conn_id="broken").test_connection()
    assert not ok and message.startswith("Connection 'broken' cannot be opened: ")
    assert "Unknown catalog kind 'postgres'" in message


def test_test_connection_and_reading_create_nothing(tmp_path, monkeypatch):
    extra = {"kind": "sqlite", "db_path": str(tmp_path / "lake" / "c.db"), "warehouse_dir": str(tmp_path / "w")}
    monkeypatch.setenv("AIRFLOW_CONN_NEW", json.dumps({"conn_type": "iceberg_ops", "extra": extra}))
    hook = IcebergCatalogHook(iceberg_conn_id="new")

    assert hook.test_connection() == (
        False,
        "The catalog of connection 'new' does not exist where the connection points.",
    )
    with pytest.raises(CatalogNotFoundError, match="the `db_path` extra of Airflow connection 'new'"):
        hook.catalog_for("read")
    with pytest.raises(CatalogNotFoundError):
        hook.catalog_for("write")
    assert list(tmp_path.iterdir()) == []

    hook.catalog_for("create").create_namespace("sales")  # what a task that creates tables does
    assert (tmp_path / "lake" / "c.db").is_file() and (tmp_path / "w").is_dir()
    assert IcebergCatalogHook(iceberg_conn_id="new").test_connection()[0]


def test_a_failed_test_connection_shows_no_secret(monkeypatch):
    extra = {"kind": "sql", "uri": "postgresql+psycopg://root:pw-secret-77@127.0.0.1:1/db", "timeout": 2}
    monkeypatch.setenv("AIRFLOW_CONN_PG", json.dumps({"conn_type": "iceberg_ops", "extra": extra}))
    ok, message = IcebergCatalogHook(iceberg_conn_id="pg").test_connection()
    assert not ok and message == "The catalog of connection 'pg' could not be reached."
    monkeypatch.setenv(
        "AIRFLOW_CONN_BADPORT", json.dumps({"conn_type": "iceberg_ops", "host": "h:99999", "password": "pw-88"})
    )
    ok, message = IcebergCatalogHook(iceberg_conn_id="badport").test_connection()
    assert not ok and message.startswith("Connection 'badport' cannot be opened: ") and "99999" in message
    assert "pw-88" not in message


def test_connection_form_metadata():
    (connection_type,) = get_provider_info()["connection-types"]
    assert connection_type["connection-type"] == IcebergCatalogHook.conn_type == "iceberg_ops"
    assert connection_type["hook-class-name"] == "iceberg_ops_provider.hooks.catalog.IcebergCatalogHook"
    assert set(connection_type["conn-fields"]) == {"kind", "warehouse", "region", "db_path", "warehouse_dir", "timeout"}
    assert IcebergCatalogHook.get_ui_field_behaviour()["relabeling"]["host"] == "Catalog URI"
    widgets = IcebergCatalogHook.get_connection_form_widgets()
    assert set(widgets) == set(connection_type["conn-fields"])


def test_real_airflow_lists_the_provider_hook_and_connection_type(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    airflow = str(Path(sys.executable).parent / "airflow")
    hooks = subprocess.run(
        [airflow, "providers", "hooks", "-o", "json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert hooks.returncode == 0, hooks.stderr
    listed = json.loads(next(line for line in hooks.stdout.splitlines() if line.startswith("[{")))
    ours = [h for h in listed if h.get("connection_type") == "iceberg_ops"]
    assert ours and ours[0]["class"] == "iceberg_ops_provider.hooks.catalog.IcebergCatalogHook"


def test_operator_refuses_an_unknown_action():
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    with pytest.raises(ValueError, match="action must be one of upgrade, downgrade, plan, check"):
        IcebergMigrateOperator(task_id="x", namespace="n", migrations_dir="m", action="migrate")
    operator = IcebergMigrateOperator(task_id="y", namespace="{{ params.ns }}", migrations_dir="m")
    assert operator.template_fields == ("namespace", "migrations_dir", "target", "iceberg_conn_id", "models_dir")


@pytest.mark.parametrize(
    ("host", "port", "uri"),
    [
        ("https://h/api/catalog", 8181, "https://h:8181/api/catalog"),
        ("http://h:8080", 80, "http://h:8080"),
        ("h", None, "https://h"),
        ("thrift://metastore", 9083, "thrift://metastore:9083"),
    ],
)
def test_host_and_port_become_the_uri(host, port, uri):
    spec = connection_spec(_conn(conn_type="iceberg_ops", host=host, port=port, extra={"kind": "hive"}))
    assert spec.properties["uri"] == uri


def test_secret_named_options_are_masked():
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    extra = {"kind": "rest", "adls.account-key": "adls-key-value-1", "header.Authorization": "Bearer header-value-2"}
    spec = connection_spec(_conn(conn_type="iceberg_ops", host="http://h", extra=extra))
    line = str(redact("adls-key-value-1 and Bearer header-value-2"))
    assert "adls-key-value-1" not in line and "header-value-2" not in line
    assert spec.properties["adls.account-key"] == "***" and spec.properties["header.Authorization"] == "***"


def test_the_connection_timeout_extra_reaches_the_catalog(tmp_path):
    spec = connection_spec(
        _conn(conn_type="iceberg_ops", host="http://127.0.0.1:8181", extra={"kind": "rest", "timeout": " 12.5 "})
    )
    assert spec.kind == "rest" and spec.timeout == 12.5 and "timeout" not in spec.properties
    spec = connection_spec(_conn(conn_type="iceberg", host="http://127.0.0.1:8181", extra={"timeout": 30}))
    assert spec.timeout == 30 and "timeout" not in spec.properties
    extra = {"kind": "sqlite", "db_path": str(tmp_path / "c.db"), "timeout": "soon"}
    spec = connection_spec(_conn(conn_type="iceberg_ops", extra=extra))  # a problem of the spec, not an exception
    assert [problem.key for problem in spec.problems] == ["timeout"]
    with pytest.raises(CatalogConfigError, match="the `timeout` extra of Airflow connection 'c' must be a number"):
        open_catalog(spec, access="create")
    assert not (tmp_path / "c.db").exists()


def test_the_meta_namespace_extra_is_for_the_runner_not_the_catalog():
    from iceberg_ops_provider.hooks.catalog import connection_meta_namespace

    connection = _conn(conn_type="iceberg_ops", extra={"kind": "sqlite", "db_path": "/x.db", "meta_namespace": "ops"})
    spec = connection_spec(connection)
    assert spec.kind == "sqlite" and "meta_namespace" not in spec.pyiceberg_properties() and not spec.problems
    assert connection_meta_namespace(connection) == "ops"
    assert connection_meta_namespace(_conn(conn_type="iceberg_ops", extra={"kind": "sqlite"})) is None
