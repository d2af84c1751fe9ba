"""What a page says of a connection: its endpoint without a password and without the query string (which
may carry a key), and every such value registered so no response can carry it."""

from __future__ import annotations

from airflow.models.connection import Connection

from iceberg_ops_provider.ui.connections import SECRETS, describe_connection


def test_a_rest_uri_with_a_key_in_its_query_is_shown_without_it_and_the_key_is_redacted():
    conn = Connection(
        conn_id="lake_rest",
        conn_type="iceberg",
        host="https://polaris.example:8181/api/catalog?apikey=qs-SECRET-7777&tenant=t1#frag",
        login="client",
        password="client-secret-1234",
    )
    described = describe_connection(conn)
    assert described.endpoint == "https://polaris.example:8181/api/catalog"
    assert "qs-SECRET-7777" not in str(described.describe())
    assert SECRETS.redact("error calling ...?apikey=qs-SECRET-7777") == "error calling ...?apikey=***"
    assert SECRETS.redact("client-secret-1234") == "***"


def test_a_password_in_the_uri_is_dropped_and_a_plain_uri_is_shown_as_it_is():
    conn = Connection(
        conn_id="lake_sql",
        conn_type="iceberg_ops",
        extra={"kind": "sql", "uri": "postgresql+psycopg://ops:pg-Secret-999@db.example:5432/lake"},
    )
    assert describe_connection(conn).endpoint == "postgresql+psycopg://ops@db.example:5432/lake"
    plain = Connection(conn_id="lake_rest2", conn_type="iceberg", host="http://127.0.0.1:8181")
    assert describe_connection(plain).endpoint == "http://127.0.0.1:8181"
