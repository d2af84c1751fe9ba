"""The ``sql`` kind: PyIceberg's SQL catalog on any SQLAlchemy URL, for real on SQLite files and PostgreSQL."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
import uuid

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogUnavailableError,
)

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
SECRET = "Sup3r-secret-pw"


def _round_trip(catalog, identifier: str = "sales.items") -> None:
    catalog.create_namespace(identifier.split(".")[0])
    catalog.create_table(identifier, ROWS.schema).append(ROWS)
    assert catalog.load_table(identifier).scan().to_arrow().sort_by("id") == ROWS


def _with_password(url: str, password: str = SECRET) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(password=password).render_as_string(hide_password=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"warehouse_dir": "wh"}, "the 'sql' catalog needs the `uri` option: the SQLAlchemy URL of its database"),
        ({"uri": "  ", "warehouse_dir": "wh"}, "needs the `uri` option: the SQLAlchemy URL of its database"),
        ({"uri": 5, "warehouse_dir": "wh"}, "the `uri` option must be text, got int"),
        ({"uri": f"root:{SECRET}@db/lake", "warehouse_dir": "wh"}, r"the `uri` option is not a SQLAlchemy URL"),
        ({"uri": "postgress://db/lake", "warehouse_dir": "wh"}, "not a SQLAlchemy URL of a database SQLAlchemy knows"),
        ({"uri": "sqlite://", "warehouse_dir": "wh"}, "in-memory SQLite database.*use kind 'memory'"),
        ({"uri": "sqlite:///:memory:", "warehouse_dir": "wh"}, "in-memory SQLite database"),
        ({"uri": "sqlite:///c.db"}, r"needs a place for its data files: warehouse_dir=<local folder> .* or warehouse="),
        (
            {"uri": "sqlite:///c.db", "warehouse_dir": "wh", "warehouse": "s3://b/w"},
            "one of the `warehouse_dir` option .* not both",
        ),
        ({"uri": "sqlite:///c.db", "warehouse": "wh"}, "the `warehouse` option must be a URI such as 's3://"),
        ({"uri": "sqlite:///c.db", "db_path": "c.db"}, "the `db_path` option is not an option of the 'sql' catalog"),
        ({"uri": "sqlite:///c.db", "warehouse_dir": "wh", "ecoh": "true"}, "the `ecoh` option is not an option of"),
        ({"uri": "sqlite:///c.db", "warehouse_dir": "wh", "type": "sql"}, "the `type` option is not an option of"),
    ],
)
def test_bad_options_are_refused_naming_the_fix(tmp_path, monkeypatch, options, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CatalogConfigError, match=message) as info:
        CatalogFactory.build("sql", **options)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


def test_a_driver_outside_the_extras_is_named(tmp_path):
    pytest.importorskip("sqlalchemy.dialects.mysql")
    if "pymysql" in sys.modules or _importable("pymysql"):
        pytest.skip("pymysql is installed here")
    with pytest.raises(CatalogConfigError, match="needs the database driver 'pymysql', which is not installed"):
        CatalogFactory.build("sql", uri=f"mysql+pymysql://root:{SECRET}@127.0.0.1/db", warehouse_dir=tmp_path)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize(
    "url", ["postgresql+psycopg://root@127.0.0.1:1/db", "postgresql+psycopg2://root@127.0.0.1:1/db"]
)
def test_a_missing_postgres_driver_names_the_postgres_extra(url):
    # A fresh interpreter where neither PostgreSQL driver can be imported, as without the extra.
    code = f"""
import sys
sys.modules["psycopg"] = sys.modules["psycopg2"] = None
from iceberg_ops_provider.catalogs import CatalogFactory
try:
    CatalogFactory.build("sql", uri={url!r}, warehouse_dir="wh")
except ImportError as exc:
    print(type(exc).__name__, "|", exc)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("MissingExtraError |")
    assert "pip install 'iceberg-ops[postgres]'" in result.stdout


def test_a_sqlite_url_works_and_catalog_names_keep_their_tables_apart(tmp_path):
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    first = CatalogFactory.build("sql", uri=uri, warehouse_dir=tmp_path / "wh")
    second = CatalogFactory.build("sql", uri=uri, warehouse_dir=tmp_path / "wh", name="other")
    _round_trip(first)

    assert isinstance(first, SqlCatalog) and first.name == "sql" and first.properties["uri"] == uri
    assert first.properties["warehouse"] == (tmp_path / "wh").as_uri()
    assert second.list_namespaces() == []  # the same database, another catalog
    assert not second.table_exists("sales.items")


def test_a_warehouse_uri_is_passed_unchanged(tmp_path):
    catalog = CatalogFactory.build(
        "sql", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse="s3://bucket/wh", **{"s3.endpoint": "http://127.0.0.1:1"}
    )
    assert catalog.properties["warehouse"] == "s3://bucket/wh"
    assert catalog.properties["s3.endpoint"] == "http://127.0.0.1:1"


def test_the_sql_kind_is_listed_among_the_kinds():
    assert "sql" in CatalogFactory.KINDS and len(CatalogFactory.KINDS) == 7
    with pytest.raises(CatalogConfigError, match="Valid kinds are: sqlite, memory, sql, glue, rest, hive, s3tables"):
        CatalogFactory.build("postgres")


# -- PostgreSQL ------------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("driver", ["postgresql+psycopg", "postgresql+psycopg2", "postgresql"])
def test_postgres_round_trip_with_each_driver(postgres_url, tmp_path, driver):
    uri = driver + postgres_url.removeprefix("postgresql+psycopg")
    name = f"t{uuid.uuid4().hex[:12]}"
    catalog = CatalogFactory.build("sql", uri=uri, warehouse_dir=tmp_path / "wh", name=name)
    _round_trip(catalog)

    again = CatalogFactory.build("sql", uri=uri, warehouse_dir=tmp_path / "wh", name=name)
    assert again.load_table("sales.items").scan().to_arrow().num_rows == 3
    other = CatalogFactory.build("sql", uri=uri, warehouse_dir=tmp_path / "wh", name=f"{name}x")
    assert other.list_namespaces() == []
    for each in (catalog, again, other):
        each.close()


@pytest.mark.postgres
def test_postgres_failures_name_the_database_and_never_the_password(postgres_url, tmp_path):
    from sqlalchemy.engine import make_url

    url = make_url(postgres_url)
    with pytest.raises(CatalogConfigError, match=r"does not exist.*create it") as missing:
        CatalogFactory.build(
            "sql", uri=_with_password(url.set(database="no_such_db").render_as_string(False)), warehouse_dir=tmp_path
        )
    assert not isinstance(missing.value, CatalogAuthError)
    with pytest.raises(CatalogAuthError, match=r'refused the login.*role "nobody_here" does not exist') as refused:
        CatalogFactory.build(
            "sql", uri=_with_password(url.set(username="nobody_here").render_as_string(False)), warehouse_dir=tmp_path
        )
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # nothing listens there
    with pytest.raises(
        CatalogUnavailableError, match=f"at postgresql\\+psycopg://root@127.0.0.1:{port}/.*could not be reached"
    ) as down:
        CatalogFactory.build(
            "sql", uri=_with_password(url.set(port=port).render_as_string(False)), warehouse_dir=tmp_path, timeout=5
        )

    for error in (missing.value, refused.value, down.value):
        assert SECRET not in str(error) and SECRET not in repr(error)
        assert SECRET not in getattr(error, "endpoint", "")
    assert down.value.transient and not refused.value.transient


@pytest.mark.postgres
def test_a_database_that_accepts_and_never_answers_times_out(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    outcome: list[BaseException | object] = []

    def build() -> None:
        try:
            outcome.append(
                CatalogFactory.build(
                    "sql",
                    uri=f"postgresql+psycopg://root:{SECRET}@127.0.0.1:{port}/db",
                    warehouse_dir=tmp_path,
                    timeout=1,
                )
            )
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    opener = threading.Thread(target=build, daemon=True)  # so that a hang fails the test rather than stalls it
    try:
        began = time.monotonic()
        opener.start()
        opener.join(10)
        assert not opener.is_alive(), "opening did not give up within 10 s"
        assert time.monotonic() - began < 10
        (error,) = outcome
        assert isinstance(error, CatalogUnavailableError), error
        endpoint = rf"postgresql\+psycopg://root@127.0.0.1:{port}/db"
        expected = rf"The catalog database at {endpoint} could not be reached \(connection timeout expired\)"
        assert re.match(rf"{expected}|The catalog at {endpoint} did not answer within 1 s", str(error)), error
        assert error.timeout == 1 and error.reason == "timeout" and SECRET not in str(error)
    finally:
        server.close()  # the connection waiting in its backlog is reset: a stalled opener ends
        opener.join(30)


@pytest.mark.postgres
def test_later_connections_get_the_timeout_and_a_url_setting_wins(postgres_url, tmp_path):
    from sqlalchemy import event

    def connect_parameters(catalog) -> dict:
        """What the driver is asked to connect with, seen by a listener that runs after the catalog's own."""
        seen: dict = {}
        event.listen(catalog.engine, "do_connect", lambda dialect, record, cargs, cparams: seen.update(cparams))
        catalog.engine.dispose()
        with catalog.engine.connect():
            pass
        return seen

    catalog = CatalogFactory.build("sql", uri=postgres_url, warehouse_dir=tmp_path, timeout=7.2)
    assert str(connect_parameters(catalog)["connect_timeout"]) == "8"
    own = CatalogFactory.build("sql", uri=f"{postgres_url}?connect_timeout=3", warehouse_dir=tmp_path)
    assert str(connect_parameters(own)["connect_timeout"]) == "3"
    assert catalog.properties["uri"] == postgres_url  # the URL names the catalog: left as given
    catalog.close()
    own.close()


@pytest.mark.postgres
def test_commits_racing_on_a_serializable_database_are_lost_races_not_raw_errors(new_postgres_database, tmp_path):
    """A database whose default isolation is SERIALIZABLE: the catalog still reports CommitFailedException."""
    import psycopg
    from sqlalchemy.engine import make_url

    conninfo = make_url(new_postgres_database)._replace(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            f'ALTER DATABASE "{make_url(new_postgres_database).database}" '
            "SET default_transaction_isolation = 'serializable'"
        )
    catalog = CatalogFactory.build("sql", uri=new_postgres_database, warehouse_dir=tmp_path)
    with catalog.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW default_transaction_isolation").scalar() == "serializable"
    catalog.create_namespace("n")
    catalog.create_table("n.t", ROWS.schema)
    lost: list[int] = []
    errors: list[BaseException] = []

    def commit_properties(worker: int) -> None:
        for step in range(12):
            table = catalog.load_table("n.t")
            try:
                with table.transaction() as transaction:
                    transaction.set_properties({f"worker-{worker}": str(step)})
            except CommitFailedException:
                lost.append(worker)
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=commit_properties, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors, errors[:2]
    assert lost  # the commits really raced
    catalog.close()


@pytest.mark.postgres
def test_an_opener_that_loses_the_race_to_create_the_catalog_tables_opens_it(new_postgres_database, tmp_path):
    """PyIceberg creates its tables after finding them missing. Another opener's CREATE TABLE, still
    uncommitted, makes this one wait; once it commits, PostgreSQL fails this one's CREATE TABLE with a
    unique violation: a lost race, after which the tables are there."""
    import psycopg
    from pyiceberg.catalog.sql import SqlCatalogBaseTable
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    engine = create_engine(new_postgres_database)
    other = engine.connect()
    transaction = other.begin()
    SqlCatalogBaseTable.metadata.create_all(other)  # the other opener, not committed yet
    built: list[object] = []
    thread = threading.Thread(
        target=lambda: built.append(_build_or_error(new_postgres_database, tmp_path)), daemon=True
    )
    thread.start()
    conninfo = make_url(new_postgres_database)._replace(drivername="postgresql").render_as_string(False)
    with psycopg.connect(conninfo, autocommit=True) as watcher:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until this opener's CREATE TABLE waits for the other's
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()[0]
            if waiting:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the opener never waited for the other's CREATE TABLE")
    transaction.commit()
    other.close()
    thread.join(timeout=30)

    (catalog,) = built
    assert isinstance(catalog, SqlCatalog), catalog
    _round_trip(catalog)
    catalog.close()
    engine.dispose()


def _build_or_error(uri: str, tmp_path) -> object:
    try:
        return CatalogFactory.build("sql", uri=uri, warehouse_dir=tmp_path)
    except Exception as exc:
        return exc
