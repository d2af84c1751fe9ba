"""Who may choose what a catalog runs and where its requests go, against real REST servers on loopback.

A REST catalog's configuration (``GET /v1/config``) or a table (its metadata's properties, the
``config`` of a load-table answer) naming a class for PyIceberg to import would run code where the
catalog is opened: refused from the server, ignored from a table, accepted from the user's own
settings. A configuration moving the catalog's address or token endpoint to another origin is
refused before any request goes there. A compressed answer is refused unread, and a failed open
leaves no connection behind. The trap (``tests.support.trap``) records any import of the class.
"""

from __future__ import annotations

import gc
import gzip
import json
import logging
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import (
    catalog_errors,
    from_connection,
    from_options,
    open_catalog,
    spec_of,
    without_classes,
)
from iceberg_ops_provider.errors import CatalogConfigError, IcebergOpsError
from tests.support import trap
from tests.support.hostile import answer_json, canned, client_sockets, endless, raw_server
from tests.support.lake import Lake
from tests.support.servers import serve_http

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False)])


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The trap's record, armed: the trap module is imported afresh if anything names it."""
    path = tmp_path / "trap.log"
    for name, value in trap.armed(path).items():
        monkeypatch.setenv(name, value)
    return path


@pytest.fixture
def lake(lake: Lake) -> dict[str, Any]:
    """A table ``shop.orders`` with one row in a SQLite catalog, and its metadata as a load-table answer holds it."""
    catalog = lake.catalog()
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.orders", SCHEMA)
    table.append(pa.table({"id": [1]}, schema=SCHEMA))
    table = catalog.load_table("shop.orders")
    return {
        "metadata-location": table.metadata_location,
        "metadata": json.loads(table.metadata.model_dump_json(by_alias=True, exclude_none=True)),
        "warehouse": str(lake.warehouse),
    }


def _catalog_server(
    config: Callable[[str], dict[str, Any]],
    table: dict[str, Any] | None = None,
    table_config: dict[str, str] | None = None,
) -> tuple[type[BaseHTTPRequestHandler], list[tuple[str, str, dict[str, str]]]]:
    """A REST catalog answering its configuration (``config(own_uri)``), namespaces and one table; the requests seen."""
    seen: list[tuple[str, str, dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, body: dict[str, Any], code: int = 200) -> None:
            answer_json(self, body, code)

        def do_GET(self) -> None:
            seen.append((self.command, self.path, dict(self.headers)))
            path = self.path.split("?")[0]
            if path.endswith("/v1/oauth/tokens"):
                self._answer({"access_token": "t0k3n", "token_type": "bearer", "expires_in": 3600})
            elif path.endswith("/v1/config"):
                self._answer(config(f"http://127.0.0.1:{self.server.server_address[1]}"))
            elif path.endswith("/v1/namespaces"):
                self._answer({"namespaces": [["shop"]]})
            elif path.endswith("/v1/namespaces/shop/tables/orders") and table is not None:
                self._answer(
                    {
                        "metadata-location": table["metadata-location"],
                        "metadata": table["metadata"],
                        "config": table_config or {},
                    }
                )
            else:
                self._answer({"error": {"message": "no", "type": "NoSuchTableException", "code": 404}}, 404)

        do_POST = do_HEAD = do_DELETE = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler, seen


def _open_and_read(uri: str, **options: Any) -> Any:
    """What a page does: open the catalog to read, load the table, read it."""
    catalog = open_catalog(from_options("rest", uri=uri, timeout=5, **options), access="read")
    table = catalog.load_table("shop.orders")
    table.scan().to_arrow()
    return table


# --- a class to import -------------------------------------------------------------------------------------


@pytest.mark.parametrize("place", ["defaults", "overrides"])
@pytest.mark.parametrize("key", ["py-io-impl", "s3.retry-strategy-impl"])
def test_a_configuration_naming_a_class_is_refused_before_anything_is_imported(record, lake, place, key):
    config = {"defaults": {}, "overrides": {}}
    config[place] = {key: trap.NAME, "/bin/sh": "x", "-c": "x"}
    handler, _ = _catalog_server(lambda own: config, lake)
    with serve_http(handler) as uri, pytest.raises(CatalogConfigError) as info:
        _open_and_read(uri)
    assert info.value.reason == "import"
    assert f"naming a class to import in {key!r}, which is refused" in str(info.value)
    assert trap.NAME not in str(info.value)
    assert trap.sprung(record) == []


def test_pyiceberg_s_own_file_io_from_the_configuration_is_taken(record, lake):
    config = {"defaults": {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}, "overrides": {}}
    handler, _ = _catalog_server(lambda own: config, lake)
    with serve_http(handler) as uri:
        table = _open_and_read(uri)
    assert type(table.io).__name__ == "FsspecFileIO"


@pytest.mark.parametrize("key", ["py-io-impl", "s3.retry-strategy-impl"])
def test_a_load_table_answer_naming_a_class_is_read_with_the_catalog_s_own_file_io(record, lake, key, caplog):
    handler, _ = _catalog_server(lambda own: {"defaults": {}, "overrides": {}}, lake, {key: trap.NAME})
    with serve_http(handler) as uri, caplog.at_level(logging.WARNING, "iceberg_ops_provider.catalogs.trust"):
        table = _open_and_read(uri)
    assert type(table.io).__name__ == "PyArrowFileIO"
    assert trap.sprung(record) == []
    assert f"names a class to import in {key}, which is not imported" in caplog.text


def test_a_table_s_own_properties_naming_a_class_are_ignored_on_every_catalog(record, tmp_path, caplog):
    options = {"db_path": tmp_path / "lake.db", "warehouse_dir": tmp_path / "warehouse"}
    writer = open_catalog(from_options("sqlite", **options), access="create")
    writer.create_namespace("shop")
    # Whoever may write the table may set its properties: here, a class to import (a commit, guarded too).
    writer.create_table("shop.orders", SCHEMA, properties={"py-io-impl": trap.NAME}).append(
        pa.table({"id": [1, 2]}, schema=SCHEMA)
    )
    with caplog.at_level(logging.WARNING, "iceberg_ops_provider.catalogs.trust"):
        table = open_catalog(from_options("sqlite", **options), access="read").load_table("shop.orders")
        assert table.scan().to_arrow().num_rows == 2
    assert table.metadata.properties["py-io-impl"] == trap.NAME  # kept as written, not obeyed
    assert type(table.io).__name__ == "PyArrowFileIO"
    assert trap.sprung(record) == []
    assert "names a class to import in py-io-impl" in caplog.text


def test_the_user_s_own_settings_may_name_a_class(record, tmp_path):
    """Not everything is refused: what the user's configuration names is imported, as PyIceberg does."""
    spec = from_options(
        "pyiceberg",
        type="sql",
        uri=f"sqlite:///{tmp_path / 'lake.db'}",
        warehouse=(tmp_path / "warehouse").as_uri(),
        **{"py-io-impl": trap.NAME},
    )
    catalog = open_catalog(spec, access="create")
    catalog.create_namespace("shop")
    with pytest.raises(AttributeError, match="'Trap' object has no attribute"):  # imported, built: it is no FileIO
        catalog.create_table("shop.orders", SCHEMA)
    assert trap.sprung(record)[:2] == ["imported", "called"]


def test_a_connection_naming_a_class_has_a_problem_where_no_code_may_run(record):
    spec = from_connection(
        "lake", "iceberg", host="http://127.0.0.1:1/api", extra={"py-io-impl": trap.NAME, "timeout": "2"}
    )
    checked = without_classes(spec)
    assert [problem.key for problem in checked.problems] == ["py-io-impl"]
    with pytest.raises(CatalogConfigError) as info:
        open_catalog(checked, access="read")
    assert "the `py-io-impl` extra of Airflow connection 'lake' names a class to import" in str(info.value)
    assert trap.sprung(record) == []
    own = {"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"}
    builtin = from_connection("lake", "iceberg", host="http://h:1", extra=own)
    assert without_classes(builtin).problems == ()


# --- the address ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["uri", "oauth2-server-uri"])
def test_a_configuration_moving_the_catalog_to_another_origin_is_refused_before_any_request_goes_there(lake, key):
    elsewhere, visits = _catalog_server(lambda own: {"defaults": {}, "overrides": {}}, lake)
    with serve_http(elsewhere) as other:
        moved = {"overrides": {key: f"{other}/imds" if key == "uri" else f"{other}/token"}, "defaults": {}}
        handler, _ = _catalog_server(lambda own: moved, lake)
        with serve_http(handler) as uri, pytest.raises(CatalogConfigError) as info:
            _open_and_read(uri, credential="client:CLIENT-SECRET", token="CONN-TOKEN-SECRET")
    assert info.value.reason == "redirect"
    assert f"moving {key!r} to another origin ({other})" in str(info.value)
    assert "/imds" not in str(info.value) and "SECRET" not in str(info.value)
    assert visits == []


def test_a_configuration_moving_the_catalog_within_its_origin_is_followed(lake):
    handler, seen = _catalog_server(lambda own: {"overrides": {"uri": f"{own}/prefixed"}, "defaults": {}}, lake)
    with serve_http(handler) as uri:
        assert open_catalog(from_options("rest", uri=uri, timeout=5), access="read").list_namespaces() == [("shop",)]
    assert [path for _, path, _ in seen] == ["/v1/config", "/prefixed/v1/namespaces"]


# --- the transport ---------------------------------------------------------------------------------------------


def test_answers_are_asked_for_uncompressed_and_a_compressed_one_is_refused_unread():
    body = gzip.compress(json.dumps({"defaults": {}, "overrides": {}}).encode() + b" " * 10_000_000)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
    answer = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    with raw_server(canned(answer), keep_alive=True) as server:
        with pytest.raises(CatalogConfigError) as info:
            open_catalog(from_options("rest", uri=server.uri, timeout=5), access="read")
        assert server.requests and b"\r\nAccept-Encoding: identity\r\n" in server.requests[0]
    assert info.value.reason == "compressed"
    assert "answered GET /v1/config compressed (gzip) though asked for an uncompressed answer" in str(info.value)


@pytest.mark.parametrize("kind", ["not-a-catalog", "endless"])
def test_a_failed_open_leaves_no_connection_open_even_before_garbage_collection(kind):
    body = b'["not a catalog"]'
    answer = canned(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    gc.disable()  # the connection must close when the open fails, not when an answer is collected
    try:
        with raw_server(answer if kind == "not-a-catalog" else endless, keep_alive=True) as server:
            for _ in range(3):
                with pytest.raises(IcebergOpsError):
                    open_catalog(from_options("rest", uri=server.uri, timeout=1 if kind == "endless" else 5))
            end = time.monotonic() + 2
            while client_sockets(server.port) and time.monotonic() < end:
                time.sleep(0.05)
            assert client_sockets(server.port) == 0
            assert server.accepted == 3
    finally:
        gc.enable()


@pytest.mark.parametrize("status", [404, 405])
def test_an_address_refusing_get_config_is_no_catalog_and_permanent(status):
    answer = canned(b"HTTP/1.1 %d Nope\r\nContent-Length: 0\r\n\r\n" % status)
    with raw_server(answer, keep_alive=True) as server, pytest.raises(CatalogConfigError) as info:
        open_catalog(from_options("rest", uri=server.uri, timeout=5), access="read")
    assert info.value.reason == "not-a-catalog" and info.value.status == status
    assert str(info.value).startswith(f"The endpoint {server.uri} is not an Iceberg REST catalog")


# --- how requests are signed --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "setting",
    [
        {"auth": {"type": "custom", "impl": trap.NAME, "custom": {}}},
        {"rest.sigv4-enabled": "true", "rest.signing-name": "s3"},
        {"header.Host": "victim-bucket.s3.amazonaws.com"},
    ],
)
def test_a_configuration_setting_how_requests_are_signed_or_authenticated_is_refused(record, lake, setting):
    handler, seen = _catalog_server(lambda own: {"defaults": {}, "overrides": setting}, lake)
    with serve_http(handler) as uri, pytest.raises(CatalogConfigError) as info:
        _open_and_read(uri, token="USER-TOKEN-SECRET")
    assert info.value.reason == "setting"
    assert f"a configuration setting {next(iter(setting))!r}, which is refused" in str(info.value)
    assert [path for _, path, _ in seen] == ["/v1/config"]  # nothing asked after it
    assert trap.sprung(record) == []


def test_the_user_s_own_signing_settings_repeated_by_the_server_are_no_change(lake):
    same = {"defaults": {"header.X-Client": "ops"}, "overrides": {"rest.sigv4-enabled": "false"}}
    handler, _ = _catalog_server(lambda own: same, lake)
    with serve_http(handler) as uri:
        open_catalog(from_options("rest", uri=uri, timeout=5, **{"rest.sigv4-enabled": "false"}), access="read")


@pytest.mark.parametrize("form", ["http://127.0.0.1:{other}\\@127.0.0.1:{own}", "http://127.0.0.1:{other}\t@h"])
def test_an_address_that_clients_read_differently_is_refused(lake, form):
    elsewhere, visits = _catalog_server(lambda own: {"defaults": {}, "overrides": {}}, lake)
    with serve_http(elsewhere) as other:
        other_port = other.rsplit(":", 1)[1]

        def config(own: str) -> dict[str, Any]:
            moved = form.format(other=other_port, own=own.rsplit(":", 1)[1])
            return {"defaults": {}, "overrides": {"uri": moved}}

        handler, _ = _catalog_server(config, lake)
        with serve_http(handler) as uri, pytest.raises(CatalogConfigError) as info:
            _open_and_read(uri, token="USER-TOKEN-SECRET")
    assert info.value.reason == "redirect" and visits == []


def test_a_configuration_past_a_megabyte_is_not_read():
    """A configuration is a few properties; parsed, a megabyte of JSON takes tens of megabytes."""
    body = b'{"defaults": {"x": [' + b"[]," * 400_000 + b"[]]}}"
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with raw_server(canned(answer), keep_alive=True) as server, pytest.raises(CatalogConfigError) as info:
        open_catalog(from_options("rest", uri=server.uri, timeout=5), access="read")
    assert info.value.reason == "too-large" and "with more than 1048576 bytes" in str(info.value)


# --- a table's location provider --------------------------------------------------------------------------


def test_a_table_naming_a_location_provider_is_refused_by_a_writer_and_read_by_a_reader(record, tmp_path):
    """PyIceberg imports a table's location provider to write its data files: whoever wrote the property chose."""
    options = {"db_path": tmp_path / "lake.db", "warehouse_dir": tmp_path / "warehouse"}
    named = {"write.py-location-provider.impl": trap.LOCATION_PROVIDER}
    owner = open_catalog(from_options("sqlite", **options, **named), access="create")  # the owner trusts it
    owner.create_namespace("shop")
    owner.create_table("shop.orders", SCHEMA, properties=named).append(pa.table({"id": [1]}, schema=SCHEMA))
    assert "called" in trap.sprung(record)
    trap.armed(record)

    reader = open_catalog(from_options("sqlite", **options), access="read")
    assert reader.load_table("shop.orders").scan().to_arrow().num_rows == 1
    writer = open_catalog(from_options("sqlite", **options), access="write")
    with pytest.raises(CatalogConfigError) as info, catalog_errors(spec_of(writer)):
        writer.load_table("shop.orders")
    assert info.value.reason == "import"
    assert "A table of the catalog" in str(info.value) and "'write.py-location-provider.impl'" in str(info.value)
    assert "name the same in the `write.py-location-provider.impl` option" in str(info.value)
    assert trap.sprung(record) == []
