"""The hook and ``--conn-id`` beyond CatalogFactory's kinds: ``iceberg_ops`` connections of any PyIceberg type
(with a note in the log), ``iceberg`` connections through the command line's configuration, and the masking
of every secret either kind of connection holds.

Real catalogs: PyIceberg's in-memory catalog, SQLite files, DynamoDB on moto's server (loopback).
"""

from __future__ import annotations

import json
import logging

import pytest
from airflow.sdk import Connection

from iceberg_ops_provider.cli.airflow_connections import read_airflow_connection
from iceberg_ops_provider.cli.catalog_flags import CatalogFlags, with_flags
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import CatalogConfigError, UnknownCatalogKindError
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook, connection_spec
from tests.support.servers import ACCESS_KEY, REGION, SECRET_KEY

NOTE = "is not one of this project's kinds"


def _define(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn_type: str, **fields: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": conn_type, **fields}))


def _notes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if NOTE in record.getMessage()]


def _redacted(text: str) -> str:
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    return str(redact(text))


# --- iceberg_ops connections of PyIceberg's other types ---------------------------------------------


def test_an_in_memory_kind_reaches_load_catalog_with_a_note_in_the_log(monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    _define(monkeypatch, "scratch", "iceberg_ops", extra={"kind": "in-memory", "warehouse": "file:///tmp/unused"})
    catalog = IcebergCatalogHook(iceberg_conn_id="scratch").get_conn()
    assert type(catalog).__name__ == "InMemoryCatalog" and catalog.name == "in-memory"
    assert catalog.properties["type"] == "in-memory" and catalog.properties["warehouse"] == "file:///tmp/unused"
    catalog.create_namespace("a")
    assert catalog.list_namespaces() == [("a",)]
    (note,) = _notes(caplog)
    assert "Catalog kind 'in-memory'" in note and "opening it as PyIceberg's catalog type 'in-memory'" in note


@pytest.mark.backends
def test_a_dynamodb_kind_opens_pyicebergs_dynamodb_catalog_on_moto(moto_server, unique_name, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    # PyIceberg 0.12's DynamoDB catalog has no endpoint property; botocore reads this variable.
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server.endpoint)
    extra = {
        "kind": "dynamodb",
        "table-name": unique_name,
        "dynamodb.region": REGION,
        "dynamodb.access-key-id": ACCESS_KEY,
        "dynamodb.secret-access-key": SECRET_KEY,
        "timeout": "20",
    }
    _define(monkeypatch, "dynamo", "iceberg_ops", extra=extra)
    spec = IcebergCatalogHook(iceberg_conn_id="dynamo").catalog_spec()
    assert spec.kind == "dynamodb" and spec.timeout == 20.0 and spec.catalog_type == "dynamodb"
    catalog = IcebergCatalogHook(iceberg_conn_id="dynamo").get_conn()
    assert type(catalog).__name__ == "DynamoDbCatalog" and catalog.dynamodb_table_name == unique_name
    catalog.create_namespace("sales")
    assert catalog.list_namespaces() == [("sales",)]
    assert "timeout" not in catalog.properties
    assert any("Catalog kind 'dynamodb'" in note for note in _notes(caplog))


def test_a_kind_pyiceberg_does_not_know_either_is_refused_listing_all(monkeypatch):
    _define(monkeypatch, "nessie", "iceberg_ops", host="http://127.0.0.1:1", extra={"kind": "nessie"})
    ok, message = IcebergCatalogHook(iceberg_conn_id="nessie").test_connection()
    assert not ok and "Unknown catalog kind 'nessie'" in message
    assert "s3tables" in message and "dynamodb" in message and "pyiceberg" in message
    with pytest.raises(UnknownCatalogKindError):
        IcebergCatalogHook(iceberg_conn_id="nessie").get_conn()


# --- the command line's --conn-id -------------------------------------------------------------------


def test_conn_id_opens_an_iceberg_connection_as_the_official_provider_does(tmp_path, monkeypatch):
    from pyiceberg.catalog.sql import SqlCatalog

    where = {"uri": f"sqlite:///{tmp_path / 'c.db'}", "warehouse": (tmp_path / "w").as_uri()}
    SqlCatalog("seed", **where).create_namespace("sales")  # the namespace lives under the catalog name "seed"
    _define(monkeypatch, "seed", "iceberg", extra={"type": "sql", **where, "timeout": "15"})
    monkeypatch.chdir(tmp_path)
    config = load_config(required=False, connection_reader=read_airflow_connection)
    config = with_flags(config, CatalogFlags(conn_id="seed"))
    catalog = config.open_catalog(access="read")
    assert type(catalog).__name__ == "SqlCatalog" and catalog.name == "seed"
    assert catalog.list_namespaces() == [("sales",)]
    assert config.catalog_timeout == 15.0 and config.catalog_spec.properties["uri"] == where["uri"]


def test_conn_id_refuses_an_in_memory_catalog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for conn_type, extra in (("iceberg", {"type": "in-memory"}), ("iceberg_ops", {"kind": "in-memory"})):
        _define(monkeypatch, "scratch", conn_type, extra=extra)
        config = load_config(required=False, connection_reader=read_airflow_connection)
        config = with_flags(config, CatalogFlags(conn_id="scratch"))
        for access in ("read", "write", "create"):
            with pytest.raises(CatalogConfigError, match=r"in-memory'? catalog cannot be used.* state is gone when"):
                config.open_catalog(access=access)


# --- masking ----------------------------------------------------------------------------------------


def test_every_secret_of_an_iceberg_connection_is_masked():
    extra = {
        "token": "token-value-0001",
        "s3.secret-access-key": "s3-secret-value-0002",
        "adls.account-key": "adls-key-value-0003",
        "header.Authorization": "Bearer header-value-0004",
        "auth": {"type": "oauth2", "oauth2": {"client_secret": "nested-secret-0005"}},
        "warehouse": "s3://visible-warehouse",
    }
    connection = Connection(
        conn_id="official",
        conn_type="iceberg",
        host="https://catalog.example/api/",
        login="client-id-0006",
        password="client-secret-0007",
        extra=json.dumps(extra),
    )
    spec = connection_spec(connection)
    assert spec.kind == "pyiceberg" and spec.secrets["credential"] == "client-id-0006:client-secret-0007"
    line = _redacted(" ".join(["0001", *(str(v) for v in spec.pyiceberg_properties().values())]))
    for secret in (
        "token-value",
        "s3-secret-value",
        "adls-key-value",
        "header-value",
        "nested-secret",
        "client-secret",
    ):
        assert secret not in line, line
    assert "s3://visible-warehouse" in line and "https://catalog.example/api" in line


@pytest.mark.parametrize("where", ["host", "extra"])
def test_the_password_in_a_sql_catalogs_url_is_masked_as_written_and_decoded(where):
    uri = "postgresql+psycopg://root:p%40ss-word-0008@127.0.0.1:5432/lake"
    fields = {"host": uri, "extra": {"type": "sql"}} if where == "host" else {"extra": {"type": "sql", "uri": uri}}
    connection = Connection(
        conn_id="pg", conn_type="iceberg", host=fields.get("host"), extra=json.dumps(fields["extra"])
    )
    spec = connection_spec(connection)
    assert spec.pyiceberg_properties()["uri"] == uri
    assert spec.properties["uri"] == "postgresql+psycopg://root:***@127.0.0.1:5432/lake"
    line = _redacted(f"{spec.pyiceberg_properties()['uri']} and p@ss-word-0008")
    assert "ss-word-0008" not in line, line
