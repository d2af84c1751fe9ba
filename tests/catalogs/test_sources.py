"""``from_connection``: an Airflow connection's fields as a catalog spec, without Airflow.

A host or port that cannot be an address (a port past 65535 or not a number, in the Host or in the
Port field) is a problem of the spec, not an exception: parsing a list of connections never fails
for one bad entry, and opening the bad one raises ``CatalogConfigError`` naming the connection and
the field.
"""

from __future__ import annotations

import pytest

from iceberg_ops_provider.catalogs import CatalogSpec, from_connection, open_catalog
from iceberg_ops_provider.errors import CatalogConfigError


@pytest.mark.parametrize("kind", ["rest", "hive", "s3tables", "glue"])
@pytest.mark.parametrize(
    ("host", "port", "field", "value"),
    [
        ("h:99999", None, "Host", "'99999'"),
        ("https://h:99999/api", None, "Host", "'99999'"),
        ("h:0", None, "Host", "'0'"),
        ("h:abc", None, "Host", "'abc'"),
        ("http://h:8o8o/api", None, "Host", "'8o8o'"),
        ("h", 70000, "Port", "70000"),
        ("https://h/api", -1, "Port", "-1"),
    ],
)
def test_a_bad_host_or_port_is_a_problem_raised_when_opened(kind, host, port, field, value):
    extra = {"kind": kind, "region": "us-east-1", "warehouse": "arn:aws:s3tables:us-east-1:1:bucket/b"}

    spec = from_connection("lake", "iceberg_ops", host=host, port=port, extra=extra)  # never raises

    (problem,) = spec.problems
    text = str(problem.text)
    assert problem.key == "uri"
    assert field in text and "Airflow connection 'lake'" in text and value in text  # the field, and what it holds
    for access in ("read", "write", "create"):
        with pytest.raises(CatalogConfigError) as info:
            open_catalog(spec, access=access)
        assert str(info.value).startswith(text)
        assert info.value.reason == "configuration"


def test_a_list_of_connections_parses_despite_a_bad_one():
    fields = [("good", "https://catalog.example/api", 8181), ("bad", "h:99999", None), ("also", "h", 70000)]
    specs = {conn_id: from_connection(conn_id, "iceberg_ops", host=host, port=port) for conn_id, host, port in fields}
    assert [conn_id for conn_id, spec in specs.items() if spec.problems] == ["bad", "also"]
    assert specs["good"].properties["uri"] == "https://catalog.example:8181/api"
    assert all(isinstance(spec, CatalogSpec) for spec in specs.values())


@pytest.mark.parametrize(
    ("host", "port", "uri"),
    [
        ("https://h/api/catalog", 8181, "https://h:8181/api/catalog"),
        ("http://h:8080", 80, "http://h:8080"),  # the Host's own port wins
        ("h", None, "https://h"),
        ("h:65535", None, "https://h:65535"),
        ("thrift://metastore", 9083, "thrift://metastore:9083"),
        ("[::1]", 8181, "https://[::1]:8181"),
        ("http://[::1]:8181/api", None, "http://[::1]:8181/api"),
        ("http://[2001:db8::1]/api", 443, "http://[2001:db8::1]:443/api"),
        ("  catalog.example  ", None, "https://catalog.example"),
    ],
)
def test_host_and_port_become_the_uri(host, port, uri):
    spec = from_connection("lake", "iceberg_ops", host=host, port=port, extra={"kind": "hive"})
    assert not spec.problems
    assert spec.properties["uri"] == uri


def test_a_password_in_the_host_stays_a_secret_with_the_port_added():
    spec = from_connection("lake", "iceberg_ops", host="http://u:p@ss:w@h/api", port=81, extra={"kind": "hive"})
    assert not spec.problems
    assert spec.pyiceberg_properties()["uri"] == "http://u:p@ss:w@h:81/api"
    assert spec.properties["uri"] == "http://u:***@h:81/api"
    assert "p@ss:w" not in repr(spec)


def test_the_official_type_takes_the_host_as_it_is():
    # The official provider uses neither the port nor a scheme it would add: neither does its parity here.
    spec = from_connection("lake", "iceberg", host="h:99999", port=70000)
    assert not spec.problems
    assert spec.pyiceberg_properties() == {"type": "rest", "uri": "h:99999"}


@pytest.mark.parametrize("password", ["Top/Secret", "Top?Secret", "Top#Secret", "Top\\Secret"])
def test_an_http_password_holding_what_ends_a_host_is_a_problem_that_never_shows_it(password):
    """HTTP clients end the host at these characters and name what they took for it (part of the password)."""
    spec = from_connection("lake", "iceberg", host=f"http://client:{password}@127.0.0.1:1/api/catalog")
    (problem,) = spec.problems
    assert problem.key == "uri"
    with pytest.raises(CatalogConfigError) as info:
        open_catalog(spec, access="read")
    text = str(info.value)
    assert "percent-encode it ('/' as %2F, '?' as %3F, '#' as %23, '\\' as %5C)" in text
    assert "Top" not in text and "Secret" not in text


@pytest.mark.parametrize("password", ["p@ss", "p[ss", "p:ss", "p%2Fss"])
def test_other_characters_in_an_http_password_are_no_problem(password):
    assert from_connection("lake", "iceberg", host=f"http://client:{password}@127.0.0.1:1/api").problems == ()
