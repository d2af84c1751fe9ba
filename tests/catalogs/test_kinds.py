"""Catalogs of any PyIceberg type through load_catalog: CatalogFactory.load, the ``pyiceberg`` kind, PyIceberg's
own types as kinds (with a note in the log), and the spec of an official ``iceberg`` connection.

Real SQLite files, PyIceberg's in-memory catalog, PostgreSQL on loopback (skipped where it does not
answer) and TCP servers on loopback that refuse or never answer.
"""

from __future__ import annotations

import logging
import socket
import time

import pytest

from iceberg_ops_provider.catalogs import (
    PYICEBERG_KIND,
    CatalogFactory,
    from_connection,
    from_name,
    open_catalog,
    pyiceberg_catalog_types,
)
from iceberg_ops_provider.errors import (
    CatalogConfigError,
    CatalogNotFoundError,
    CatalogUnavailableError,
    MissingExtraError,
    UnknownCatalogKindError,
)


def test_the_types_are_those_of_the_installed_pyiceberg():
    from pyiceberg.catalog import CatalogType

    assert pyiceberg_catalog_types() == tuple(member.value for member in CatalogType)
    assert {"rest", "hive", "glue", "dynamodb", "sql", "in-memory", "bigquery"} <= set(pyiceberg_catalog_types())


@pytest.mark.parametrize(
    ("fields", "properties"),
    [
        (
            {"host": "https://cat.example/api/", "login": "id", "password": "pw"},
            {"type": "rest", "uri": "https://cat.example/api", "credential": "id:pw"},
        ),
        ({"host": "cat.example:8181"}, {"type": "rest", "uri": "cat.example:8181"}),  # no scheme added
        ({"host": "/"}, {"type": "rest"}),  # nothing left of it
        ({"login": "id"}, {"type": "rest"}),  # one of the two: no credential
        ({"password": "pw", "extra": {"credential": "a:b"}}, {"type": "rest", "credential": "a:b"}),
        ({"login": "id", "password": "pw", "extra": {"credential": "a:b"}}, {"type": "rest", "credential": "id:pw"}),
        ({"host": "http://h", "extra": {"uri": "http://other"}}, {"type": "rest", "uri": "http://h"}),  # host wins
        ({"login": "id", "password": "pw", "extra": {"type": "glue"}}, {"type": "glue"}),  # credential is REST's
        # Exactly "rest" gets the credential, as there; the type itself is PyIceberg's, which reads it lowercased.
        ({"login": "id", "password": "pw", "extra": {"type": "REST"}}, {"type": "rest"}),
        (
            {"extra": {"type": None, "ssl": {"cabundle": "/ca.pem"}, "n": 5}},
            {"type": "rest", "ssl": {"cabundle": "/ca.pem"}, "n": 5},
        ),
    ],
)
def test_official_connection_spec(fields, properties):
    spec = from_connection(
        "conn",
        "iceberg",
        host=fields.get("host"),
        port=8181,  # never used by the official provider
        login=fields.get("login"),
        password=fields.get("password"),
        extra=fields.get("extra", {}),
    )
    assert spec.kind == PYICEBERG_KIND and spec.name == "conn" and not spec.problems
    assert spec.pyiceberg_properties() == properties
    assert spec.source.kind == "connection" and spec.source.where == "conn"
    if "credential" in properties:  # a secret: kept apart, shown masked
        assert spec.properties["credential"] == "***" and spec.secrets["credential"] == properties["credential"]


def test_load_opens_any_pyiceberg_type_with_the_properties_as_given(tmp_path):
    uri, warehouse = f"sqlite:///{tmp_path / 'c.db'}", (tmp_path / "w").as_uri()
    with pytest.raises(CatalogNotFoundError):  # load creates nothing: the database must exist
        CatalogFactory.load("lake", type="sql", uri=uri, warehouse=warehouse)
    assert list(tmp_path.iterdir()) == []
    open_catalog(from_name("lake", {"type": "sql", "uri": uri, "warehouse": warehouse}), access="create").close()
    catalog = CatalogFactory.load("lake", type="sql", uri=uri, warehouse=warehouse, **{"x.flag": True})
    assert type(catalog).__name__ == "SqlCatalog" and catalog.name == "lake"
    # init_catalog_tables is this project's own: how a catalog opened without creating leaves its tables alone.
    assert catalog.properties["init_catalog_tables"] == "false"
    given = {key: value for key, value in catalog.properties.items() if key not in ("init_catalog_tables", "type")}
    assert given == {"uri": uri, "warehouse": warehouse, "x.flag": True}
    catalog.create_namespace("sales")
    # The pyiceberg kind is the same thing; without type, PyIceberg infers it from the uri.
    again = CatalogFactory.build(PYICEBERG_KIND, name="lake", uri=uri, warehouse=warehouse, timeout=5)
    assert type(again).__name__ == "SqlCatalog" and again.list_namespaces() == [("sales",)]
    assert "timeout" not in again.properties


def test_a_sql_catalog_keeps_the_type_it_was_given(tmp_path):
    uri, warehouse = f"sqlite:///{tmp_path / 'c.db'}", (tmp_path / "w").as_uri()
    catalog = open_catalog(from_name("lake", {"type": "sql", "uri": uri, "warehouse": warehouse}), access="create")
    assert catalog.properties["type"] == "sql"


def test_an_in_memory_catalog_is_built_in_the_calling_thread():
    # PyIceberg's in-memory SQLite database exists per thread: built elsewhere, its tables would be missing here.
    catalog = CatalogFactory.load("scratch", type="in-memory")
    catalog.create_namespace("a")
    assert catalog.list_namespaces() == [("a",)]


def test_pyiceberg_types_outside_the_kinds_are_kinds_too_with_a_note_in_the_log(caplog):
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.catalogs.open")
    catalog = CatalogFactory.build("in-memory", warehouse="file:///tmp/unused")
    assert type(catalog).__name__ == "InMemoryCatalog" and catalog.name == "in-memory"
    assert catalog.properties["type"] == "in-memory"
    notes = [r.getMessage() for r in caplog.records if r.name == "iceberg_ops_provider.catalogs.open"]
    expected = "Catalog kind 'in-memory' is not one of this project's kinds"
    assert any(expected in note and "PyIceberg's catalog type 'in-memory'" in note for note in notes), notes
    with pytest.raises(CatalogConfigError, match="the `type` option is not an option of the 'dynamodb' catalog"):
        CatalogFactory.build("dynamodb", type="glue")


def test_unknown_kinds_and_types_are_refused_listing_what_exists():
    with pytest.raises(UnknownCatalogKindError) as info:
        CatalogFactory.build("nessie")
    for kind in (*CatalogFactory.KINDS, PYICEBERG_KIND, "dynamodb", "in-memory", "bigquery"):
        assert kind in str(info.value)
    with pytest.raises(UnknownCatalogKindError, match=r"Unknown catalog kind 'nessie'\. Valid kinds are: rest, hive"):
        CatalogFactory.load("x", type="nessie")
    with pytest.raises(UnknownCatalogKindError, match=r"Unknown catalog kind \"\['rest'\]\"\. Valid kinds are: rest"):
        CatalogFactory.load("x", type=["rest"])
    (problem,) = from_name("x", {"type": ["rest"]}).problems
    assert str(problem.text).startswith("the `type` option must name a PyIceberg catalog type (rest, hive, ")
    with pytest.raises(CatalogConfigError, match="the `name` option must be a non-empty string, got ' '"):
        CatalogFactory.load(" ", type="in-memory")


def test_a_rest_catalog_without_uri_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))  # no .pyiceberg.yaml there
    with pytest.raises(
        CatalogConfigError, match=r"its uri is missing; give the `uri` option.*PYICEBERG_CATALOG__X__URI"
    ):
        CatalogFactory.load("x", type="rest")


def test_missing_properties_and_dependencies_are_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))  # no .pyiceberg.yaml there
    with pytest.raises(
        CatalogConfigError, match=r"its uri is missing; give the `uri` option.*PYICEBERG_CATALOG__X__URI"
    ):
        CatalogFactory.load("x")  # no type: PyIceberg infers it from a uri there is not
    with pytest.raises(
        CatalogConfigError, match="uri 'h:1' has no scheme; give the `uri` option whole, such as 'https://h:1'"
    ):
        CatalogFactory.load("x", type="rest", uri="h:1", timeout=5)
    try:
        import google.cloud.bigquery  # noqa: F401
    except ImportError:
        with pytest.raises(CatalogConfigError, match=r"pip install 'pyiceberg\[bigquery\]'") as info:
            CatalogFactory.load("x", type="bigquery")
        assert not isinstance(info.value, MissingExtraError)


def test_an_unreachable_rest_catalog_is_unavailable():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(CatalogUnavailableError, match="could not be reached") as info:
        CatalogFactory.load("x", type="rest", uri=uri, credential="id:pw-unsent")
    assert info.value.endpoint == uri


def test_a_rest_catalog_that_never_answers_gives_up_within_the_timeout():
    with socket.socket() as server:  # the kernel completes the handshake; nobody ever answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        uri = f"http://127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(
            CatalogUnavailableError, match=r"did not answer within 1 s \(GET (http://[^/]+)?/v1/config"
        ) as info:
            CatalogFactory.load("x", type="rest", uri=uri, timeout=1)
        assert time.monotonic() - started < 5 and info.value.timeout == 1


def test_a_sql_catalog_on_postgresql_commits_at_read_committed_and_hides_the_password(postgres_url, tmp_path):
    from sqlalchemy.engine import make_url

    properties = {"type": "sql", "uri": postgres_url, "warehouse": tmp_path.as_uri()}
    open_catalog(from_name("pyiceberg_pg", properties), access="create").close()
    catalog = CatalogFactory.load("pyiceberg_pg", type="sql", uri=postgres_url, warehouse=tmp_path.as_uri())
    assert catalog.engine.get_execution_options()["isolation_level"] == "READ COMMITTED"
    catalog.create_namespace_if_not_exists("sales")
    assert ("sales",) in catalog.list_namespaces()

    url = make_url(postgres_url).set(password="wrong-password-42", database="no_such_database_here")
    with pytest.raises(CatalogConfigError) as info:
        CatalogFactory.load("pyiceberg_pg", type="sql", uri=url.render_as_string(hide_password=False))
    assert "wrong-password-42" not in str(info.value)


@pytest.mark.parametrize("option", ["kind", "value", "about", "valid", "catalog_kind"])
def test_an_unknown_option_named_like_a_word_of_the_message_is_named_not_a_crash(option):
    from iceberg_ops_provider.catalogs import from_options

    (problem,) = from_options("sqlite", **{option: "x"}).problems
    text = str(problem.text)
    assert text.startswith(f"the `{option}` option is not an option of the 'sqlite' catalog; valid options: db_path")
