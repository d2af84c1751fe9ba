"""Connections of type ``iceberg`` open as the official provider (apache-airflow-providers-apache-iceberg) opens them.

The official provider is installed beside this one (a test-only dependency, in the ``dev`` extra).
For each connection of the matrix, its ``IcebergHook`` and this project's ``IcebergCatalogHook``
open the catalog from the same ``AIRFLOW_CONN_<ID>`` variable, then list its namespaces: both
succeed with the same catalog (same class, name, properties and namespaces), or both refuse. The
catalogs are real: SeaweedFS's Iceberg REST catalog (OAuth2 client credentials and SigV4), SQLite
files, and moto's Glue, all on loopback.

The only properties allowed to differ are this project's own: ``rest.sigv4.max-retries`` (added to
REST catalogs to bound SigV4 retries), ``init_catalog_tables`` (how a SQL catalog is opened without
creating its tables, or with), and the ``timeout`` and ``meta_namespace`` extras, which the official
hook passes on to PyIceberg as properties and this one keeps for itself. This project's REST catalog
is PyIceberg's, its requests bounded (``BoundedRestCatalog``, a ``RestCatalog``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from airflow.providers.apache.iceberg.hooks.iceberg import IcebergHook
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog

from iceberg_ops_provider.catalogs.rest import BoundedRestCatalog
from iceberg_ops_provider.errors import CatalogAuthError, CatalogConfigError, IcebergOpsError
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from tests.support.servers import ACCESS_KEY, SECRET_KEY

# What this project adds to a catalog's properties: bounded SigV4 retries (REST), creating nothing unless asked (SQL).
OURS_ONLY = frozenset({"rest.sigv4.max-retries", "init_catalog_tables"})
KEPT_BACK = frozenset({"timeout", "meta_namespace"})  # extras this project reads and does not pass on


@dataclass
class Outcome:
    """What opening a connection's catalog and listing its namespaces gave."""

    catalog: Any = None
    namespaces: list[tuple[str, ...]] | None = None
    error: BaseException | None = None
    stage: str = ""  # "open" or "list" when it failed


def _attempt(open_catalog: Callable[[], Any]) -> Outcome:
    outcome = Outcome()
    try:
        outcome.catalog = open_catalog()
    except Exception as exc:
        return Outcome(error=exc, stage="open")
    try:
        outcome.namespaces = sorted(outcome.catalog.list_namespaces())
    except Exception as exc:
        outcome.error, outcome.stage = exc, "list"
    return outcome


def _define(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "iceberg", **fields}))


def _both(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> tuple[Outcome, Outcome]:
    """Define connection ``conn_id`` and open it with the official hook, then with this project's."""
    _define(monkeypatch, conn_id, **fields)
    theirs = _attempt(lambda: IcebergHook(iceberg_conn_id=conn_id).get_conn())
    ours = _attempt(lambda: IcebergCatalogHook(iceberg_conn_id=conn_id).get_conn())
    return theirs, ours


def _assert_same_catalog(theirs: Outcome, ours: Outcome) -> None:
    assert theirs.error is None, f"the official hook refused ({theirs.stage}): {theirs.error!r}"
    assert ours.error is None, f"this project's hook refused ({ours.stage}): {ours.error!r}"
    if isinstance(theirs.catalog, RestCatalog):
        assert type(ours.catalog) is BoundedRestCatalog
    else:
        assert type(ours.catalog) is type(theirs.catalog)
    assert ours.catalog.name == theirs.catalog.name
    skipped = KEPT_BACK
    their_properties = {k: v for k, v in theirs.catalog.properties.items() if k not in skipped}
    our_properties = {k: v for k, v in ours.catalog.properties.items() if k not in OURS_ONLY - set(their_properties)}
    assert our_properties == their_properties
    assert ours.namespaces == theirs.namespaces


def _assert_both_refuse(theirs: Outcome, ours: Outcome, stage: str) -> None:
    assert theirs.error is not None and theirs.stage == stage, f"the official hook: {theirs}"
    assert ours.error is not None and ours.stage == stage, f"this project's hook: {ours}"
    if stage == "open":  # this project's translation applies while building
        assert isinstance(ours.error, IcebergOpsError), repr(ours.error)


# --- REST: SeaweedFS's Iceberg REST catalog ---------------------------------------------------------


@pytest.fixture
def rest_bucket(seaweedfs, unique_name) -> str:
    """A table bucket holding namespace ``<name>_ns``; returns the bucket's name."""
    seaweedfs.create_table_bucket(unique_name)
    seaweedfs.rest_catalog(unique_name).create_namespace(f"{unique_name}_ns")
    return unique_name


def _sigv4_extra(seaweedfs, bucket: str) -> dict[str, Any]:
    return {key: value for key, value in seaweedfs.rest_properties(bucket).items() if key != "uri"}


@pytest.mark.backends
@pytest.mark.parametrize("suffix", ["", "/", "///"], ids=["plain", "trailing-slash", "trailing-slashes"])
def test_rest_with_oauth2_client_credentials_from_login_and_password(seaweedfs, rest_bucket, monkeypatch, suffix):
    theirs, ours = _both(
        monkeypatch,
        "rest_oauth",
        host=seaweedfs.iceberg_uri + suffix,
        login=ACCESS_KEY,
        password=SECRET_KEY,
        extra={"warehouse": f"s3://{rest_bucket}", **seaweedfs.s3_properties()},
    )
    _assert_same_catalog(theirs, ours)
    assert ours.namespaces == [(f"{rest_bucket}_ns",)]
    assert ours.catalog.properties["uri"] == seaweedfs.iceberg_uri  # the slashes stripped, nothing added
    assert ours.catalog.properties["credential"] == f"{ACCESS_KEY}:{SECRET_KEY}"


@pytest.mark.backends
def test_rest_with_a_wrong_client_secret_is_refused_by_both(seaweedfs, rest_bucket, monkeypatch):
    theirs, ours = _both(
        monkeypatch,
        "rest_bad_secret",
        host=seaweedfs.iceberg_uri,
        login=ACCESS_KEY,
        password="not-the-secret",
        extra={"warehouse": f"s3://{rest_bucket}"},
    )
    _assert_both_refuse(theirs, ours, "open")
    assert isinstance(ours.error, CatalogAuthError) and "not-the-secret" not in str(ours.error)


@pytest.mark.backends
def test_rest_with_a_login_and_no_password_sends_no_credential_in_both(seaweedfs, rest_bucket, monkeypatch, caplog):
    caplog.set_level(logging.WARNING)
    theirs, ours = _both(
        monkeypatch,
        "rest_login_only",
        host=seaweedfs.iceberg_uri,
        login=ACCESS_KEY,
        extra={"warehouse": f"s3://{rest_bucket}"},
    )
    _assert_both_refuse(theirs, ours, "list")  # both open (GET /v1/config is public), neither may list
    assert "credential" not in ours.catalog.properties and "credential" not in theirs.catalog.properties
    assert "both are needed for an OAuth2 credential" in caplog.text


@pytest.mark.backends
@pytest.mark.parametrize("enabled", ["true", True], ids=["text", "json-boolean"])
def test_rest_signed_with_sigv4_from_the_extra(seaweedfs, rest_bucket, monkeypatch, enabled):
    extra = {**_sigv4_extra(seaweedfs, rest_bucket), "rest.sigv4-enabled": enabled}
    theirs, ours = _both(monkeypatch, "rest_sigv4", host=seaweedfs.iceberg_uri, extra=extra)
    _assert_same_catalog(theirs, ours)
    assert ours.namespaces == [(f"{rest_bucket}_ns",)]
    assert ours.catalog.properties["rest.sigv4-enabled"] == enabled  # passed on unchanged, as the official hook does


@pytest.mark.backends
def test_this_projects_own_extras_are_not_passed_to_pyiceberg(seaweedfs, rest_bucket, monkeypatch):
    extra = {**_sigv4_extra(seaweedfs, rest_bucket), "timeout": "30", "meta_namespace": "ops_history"}
    theirs, ours = _both(monkeypatch, "rest_own_extras", host=seaweedfs.iceberg_uri, extra=extra)
    _assert_same_catalog(theirs, ours)
    assert theirs.catalog.properties["timeout"] == "30" and "timeout" not in ours.catalog.properties
    assert IcebergCatalogHook(iceberg_conn_id="rest_own_extras").meta_namespace() == "ops_history"


@pytest.mark.backends
def test_rest_host_without_scheme_is_refused_by_both(seaweedfs, rest_bucket, monkeypatch):
    host = seaweedfs.iceberg_uri.removeprefix("http://")  # no scheme is added, by either hook
    theirs, ours = _both(monkeypatch, "rest_no_scheme", host=host, extra=_sigv4_extra(seaweedfs, rest_bucket))
    _assert_both_refuse(theirs, ours, "open")
    assert isinstance(ours.error, CatalogConfigError) and "has no scheme" in str(ours.error)


@pytest.mark.backends
def test_rest_on_the_wrong_port_is_refused_by_both(seaweedfs, rest_bucket, monkeypatch):
    extra = {**_sigv4_extra(seaweedfs, rest_bucket), "timeout": 10}
    theirs, ours = _both(monkeypatch, "rest_s3_port", host=seaweedfs.s3_endpoint, extra=extra)
    assert theirs.error is not None and ours.error is not None


# --- SQL on SQLite ----------------------------------------------------------------------------------


@pytest.fixture
def sqlite_catalog(tmp_path) -> dict[str, str]:
    """A SQLite catalog file holding namespace ``sales``; returns its uri and warehouse."""

    where = {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": (tmp_path / "warehouse").as_uri()}
    catalog = SqlCatalog("sqlite_parity", **where)
    catalog.create_namespace("sales")
    catalog.close()
    return where


def test_sql_on_sqlite_from_the_extra(sqlite_catalog, monkeypatch):
    theirs, ours = _both(monkeypatch, "sqlite_parity", extra={"type": "sql", **sqlite_catalog})
    _assert_same_catalog(theirs, ours)
    assert ours.namespaces == [("sales",)]


def test_sql_on_sqlite_with_the_database_url_as_host(sqlite_catalog, monkeypatch):
    # The host wins over the extra's uri, as in the official hook; a URL's own slashes stay.
    extra = {"type": "sql", "uri": "sqlite:////nonexistent/other.db", "warehouse": sqlite_catalog["warehouse"]}
    theirs, ours = _both(monkeypatch, "sqlite_parity", host=sqlite_catalog["uri"] + "/", extra=extra)
    _assert_same_catalog(theirs, ours)
    assert ours.catalog.properties["uri"] == sqlite_catalog["uri"] and ours.namespaces == [("sales",)]


def test_sql_with_login_and_password_gets_no_credential(sqlite_catalog, monkeypatch):
    theirs, ours = _both(
        monkeypatch, "sqlite_parity", login="someone", password="pw-unused-123", extra={"type": "sql", **sqlite_catalog}
    )
    _assert_same_catalog(theirs, ours)
    assert "credential" not in ours.catalog.properties


def test_sql_catalog_keeps_its_type(sqlite_catalog, monkeypatch):
    theirs, ours = _both(monkeypatch, "sqlite_parity", extra={"type": "sql", **sqlite_catalog})
    assert theirs.catalog.properties["type"] == "sql"
    assert ours.catalog.properties.get("type") == theirs.catalog.properties["type"]


def test_in_memory_catalog(monkeypatch):
    theirs, ours = _both(monkeypatch, "memory_parity", extra={"type": "in-memory"})
    _assert_same_catalog(theirs, ours)
    assert ours.namespaces == []


# --- Glue on moto -----------------------------------------------------------------------------------


@pytest.mark.backends
def test_glue_on_moto(moto_server, unique_name, monkeypatch):
    import boto3

    from tests.support.servers import boto_kwargs

    boto3.client("glue", **boto_kwargs(moto_server.endpoint)).create_database(DatabaseInput={"Name": unique_name})
    extra = {"type": "glue", **moto_server.glue_properties(), **moto_server.s3_properties()}
    theirs, ours = _both(monkeypatch, "glue_parity", extra=extra)
    _assert_same_catalog(theirs, ours)
    assert (unique_name,) in ours.namespaces


# --- connections neither can open -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extra": {"warehouse": "w"}}, "its uri is missing"),  # type rest by default, and no host or uri
        ({"extra": {"type": "nessie", "uri": "http://127.0.0.1:1"}}, "Unknown catalog kind 'nessie'"),
        ({"extra": {"type": "sql", "uri": "sqlite:///x.db", "name": "other"}}, "sets 'name'"),
        ({"extra": {"type": 5, "uri": "http://127.0.0.1:1"}}, "Unknown catalog kind '5'"),
    ],
    ids=["no-uri", "unknown-type", "name-in-extra", "type-not-text"],
)
def test_connections_both_refuse(monkeypatch, tmp_path, fields, message):
    monkeypatch.chdir(tmp_path)
    theirs, ours = _both(monkeypatch, "refused", **fields)
    _assert_both_refuse(theirs, ours, "open")
    assert isinstance(ours.error, CatalogConfigError) and message in str(ours.error)
    assert not (tmp_path / "x.db").exists()
