"""What a page says of a connection: its kind, its endpoint without password or query, never an option.

The spec holds a connection's secrets apart from what may be shown, so a password holding ``/``, ``[``,
``#``, ``:`` or ``@`` reaches no page; a connection that cannot be parsed is listed with its problem.
"""

from __future__ import annotations

import json

import pytest
from airflow.models.connection import Connection

from iceberg_ops_provider.ui.connections import describe_connection

PASSWORDS = ["pa/ss-SECRET-1", "pa[ss-SECRET-2", "pa#ss-SECRET-3", "pa:ss-SECRET-4", "pa@ss-SECRET-5"]


def _problem(described) -> str:
    return "; ".join(str(problem.text) for problem in described.spec.problems)


def _shown(described) -> str:
    return json.dumps(described.describe()) + repr(described) + _problem(described)


def test_a_rest_uri_with_a_key_in_its_query_is_shown_without_it():
    conn = Connection(
        conn_id="lake_rest",
        conn_type="iceberg",
        host="https://polaris.example:8181/api/catalog?apikey=qs-SECRET-7777&tenant=t1#frag",
        login="client",
        password="client-secret-1234",
    )
    described = describe_connection(conn)
    assert described.describe()["endpoint"] == "https://polaris.example:8181/api/catalog"
    assert "qs-SECRET-7777" not in _shown(described) and "client-secret-1234" not in _shown(described)


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_password_in_the_uri_is_shown_nowhere_whatever_it_holds(password):
    rest = Connection(conn_id="lake_uri", conn_type="iceberg", host=f"https://ops:{password}@polaris.example/api")
    sql = Connection(
        conn_id="lake_sql",
        conn_type="iceberg_ops",
        extra={"kind": "sql", "uri": f"postgresql://ops:{password}@db/lake"},
    )
    for conn in (rest, sql):
        described = describe_connection(conn)
        assert "SECRET" not in _shown(described), _shown(described)
        assert described.describe()["endpoint"].startswith(("https://ops@polaris.example", "postgresql://ops@db"))


def test_a_plain_uri_is_shown_as_it_is_and_sqlite_by_its_file(tmp_path):
    plain = Connection(conn_id="lake_rest2", conn_type="iceberg", host="http://127.0.0.1:8181")
    assert describe_connection(plain).describe()["endpoint"] == "http://127.0.0.1:8181"
    local = Connection(
        conn_id="lake", conn_type="iceberg_ops", extra={"kind": "sqlite", "db_path": str(tmp_path / "c.db")}
    )
    assert describe_connection(local).describe() | {"endpoint": str(tmp_path / "c.db"), "kind": "sqlite"} == (
        describe_connection(local).describe()
    )


@pytest.mark.parametrize(
    ("host", "port", "problem"),
    [
        ("https://catalog:99999", None, "'99999') is not a number from 1 to 65535"),
        ("https://u:pw-SECRET-9@catalog:abc", None, "'abc') is not a number from 1 to 65535"),
        ("catalog", 70000, "Port of Airflow connection 'bad' (70000) is not a number from 1 to 65535"),
    ],
)
def test_a_connection_that_cannot_be_parsed_is_described_with_its_problem(host, port, problem):
    described = describe_connection(Connection(conn_id="bad", conn_type="iceberg_ops", host=host, port=port))
    assert problem in _problem(described)
    assert "SECRET" not in _shown(described)
