"""Bounded catalog calls, against real loopback servers that stall: building a REST catalog, its
requests afterwards, the CLI as a real subprocess, and the configuration of the bound."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.core.catalog_messages import catalog_endpoint
from iceberg_ops_provider.core.error_translation import catalog_errors
from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    call_with_timeout,
)
from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError, ProjectConfigError
from tests.support.servers import serve_http

BIN = Path(sys.executable).parent / "iceberg-ops"


@pytest.fixture
def stalled_uri() -> Iterator[str]:
    """A TCP server on loopback that accepts every connection and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.1)  # so the accepting thread notices the teardown promptly
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(connection)  # kept open: the client waits for an answer that never comes

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    server.close()
    for connection in held:
        connection.close()


@pytest.fixture
def half_stalled_uri() -> Iterator[str]:
    """An HTTP server that answers ``GET /v1/config`` like a REST catalog, then stalls on every other request."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _stall(self) -> None:
            release.wait(30)

        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/v1/config":
                self._stall()
                return
            body = json.dumps({"defaults": {}, "overrides": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_HEAD = do_POST = do_DELETE = _stall

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serve_http(Handler) as uri:
        try:
            yield uri
        finally:
            release.set()


def _project(root: Path, uri: str, *, timeout: float | None = None) -> Path:
    (root / "migrations").mkdir(parents=True, exist_ok=True)
    config = root / "iceberg-ops.yaml"
    lines = ["catalog:", "  kind: rest", f"  uri: {uri}"]
    if timeout is not None:
        lines.append(f"  timeout: {timeout}")
    config.write_text("\n".join([*lines, "namespace: sales", ""]))
    return config


# --- building a catalog ------------------------------------------------------------------------------


def test_building_a_rest_catalog_on_a_stalled_server_fails_within_the_timeout(stalled_uri):
    started = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as info:
        CatalogFactory.build("rest", uri=stalled_uri, timeout=1)
    elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    error = info.value
    assert isinstance(error, ConnectionError)
    assert error.endpoint == stalled_uri and error.timeout == 1
    message = str(error)
    assert "\n" not in message
    # The build's own bound and the socket timeout of its request are both 1 s: either may speak first.
    uri = re.escape(stalled_uri)
    expected = rf"The catalog at {uri} did not answer within 1 s \(GET ({uri})?/v1/config"
    assert re.match(expected, message), message
    assert "--catalog-timeout" in message


def test_a_refused_connection_is_reported_as_unreachable_with_its_cause():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(CatalogUnavailableError, match="could not be reached") as info:
        CatalogFactory.build("rest", uri=uri, timeout=5)
    assert uri in str(info.value) and "GET " in str(info.value)
    assert isinstance(info.value.__cause__, requests.exceptions.ConnectionError)
    assert info.value.timeout is None


def test_every_request_of_a_built_rest_catalog_is_bounded(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri, timeout=1)
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        catalog.list_namespaces()
    assert time.monotonic() - started < 5

    endpoint = catalog_endpoint(catalog)
    assert endpoint == half_stalled_uri
    started = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as info, catalog_errors(endpoint, 1):
        catalog.namespace_exists("sales")
    assert time.monotonic() - started < 5
    assert isinstance(info.value.__cause__, requests.exceptions.Timeout)
    # PyIceberg asks with HEAD or GET depending on the endpoints the server advertises.
    message = str(info.value)
    assert message.startswith(f"The catalog at {half_stalled_uri} did not answer within 1 s (")
    assert f" {half_stalled_uri}/v1/namespaces/sales); check that it is running" in message


def test_bound_catalog_requests_updates_the_bound_instead_of_stacking(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri, timeout=30)
    wrapper = catalog._session.request
    bound_catalog_requests(catalog, 0.5)
    bound_catalog_requests(catalog, 0.3)
    assert catalog._session.request is wrapper and wrapper.seconds == 0.3
    assert wrapper.request.__func__ is requests.Session.request  # one level: the session's own method
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        catalog.list_namespaces()
    assert time.monotonic() - started < 3
    # A timeout the caller passes wins over the bound.
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        catalog._session.get(f"{half_stalled_uri}/v1/namespaces", timeout=1.2)
    assert 1.1 < time.monotonic() - started < 4


def test_catalog_endpoint_never_shows_a_password(half_stalled_uri, tmp_path):
    with_password = half_stalled_uri.replace("http://", "http://admin:s3cret@")
    catalog = CatalogFactory.build("rest", uri=with_password, timeout=2)
    assert catalog_endpoint(catalog) == half_stalled_uri.replace("http://", "http://admin@")
    sqlite = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")
    assert catalog_endpoint(sqlite) == f"sqlite:///{(tmp_path / 'c.db').resolve()}"
    hive = CatalogFactory.build("hive", uri="thrift://127.0.0.1:1", warehouse=(tmp_path / "wh").as_uri())
    assert catalog_endpoint(hive) == "thrift://127.0.0.1:1"
    bound_catalog_requests(hive, 1)  # not a REST catalog: left as it is
    bound_catalog_requests(sqlite, 1)
    sqlite.close()


# --- the timeout option --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0, -1, 0.0, "30", True, float("nan"), float("inf"), 10**400, 7 * 24 * 3600 + 1, [30]]
)
@pytest.mark.parametrize("kind", ["rest", "sqlite"])
def test_bad_timeouts_are_refused_naming_the_option(tmp_path, kind, value):
    options = {"uri": "http://127.0.0.1:1"} if kind == "rest" else {"db_path": tmp_path / "c.db"}
    with pytest.raises(CatalogConfigError, match="Option 'timeout' must be a number of seconds greater than 0"):
        CatalogFactory.build(kind, timeout=value, **options)
    assert not (tmp_path / "c.db").exists()


def test_sql_kinds_accept_a_timeout_and_do_not_pass_it_on(tmp_path):
    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w", timeout=5)
    assert "timeout" not in catalog.properties
    catalog.create_namespace("sales")
    assert catalog.list_namespaces() == [("sales",)]
    catalog.close()
    memory = CatalogFactory.build("memory", timeout=2.5)
    assert "timeout" not in memory.properties
    memory.close()


def test_a_rest_catalog_gets_the_default_bound(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri)
    assert catalog._session.request.seconds == DEFAULT_CATALOG_TIMEOUT == 60.0
    assert "timeout" not in catalog.properties


def test_the_project_file_and_the_command_line_set_the_timeout(tmp_path):
    config = load_config(_project(tmp_path, "http://127.0.0.1:1", timeout=7))
    assert config.catalog_timeout == 7
    assert config.with_overrides(catalog_timeout=3).catalog_timeout == 3
    assert config.with_overrides(catalog_name="lake").catalog == {"name": "lake", "timeout": 7}
    assert config.with_overrides(catalog_kind="hive").catalog == {"kind": "hive", "timeout": 7}
    assert load_config(_project(tmp_path / "other", "http://127.0.0.1:1")).catalog_timeout == DEFAULT_CATALOG_TIMEOUT
    with pytest.raises(ProjectConfigError, match=r"Option 'catalog\.timeout' must be a number"):
        load_config(_project(tmp_path / "bad", "http://127.0.0.1:1", timeout=0))


# --- the command line ------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["option", "file"])
def test_the_cli_on_a_stalled_catalog_exits_1_with_one_line_naming_it(stalled_uri, tmp_path, where):
    config = _project(tmp_path, stalled_uri, timeout=2 if where == "file" else None)
    extra = ["--catalog-timeout", "2"] if where == "option" else []
    started = time.monotonic()
    result = subprocess.run(
        [str(BIN), "--config", str(config), *extra, "status"], capture_output=True, text=True, timeout=60
    )
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: The catalog at {stalled_uri} did not answer within 2 s")
    assert result.stdout == ""


def test_the_cli_reports_a_catalog_that_stalls_after_opening(half_stalled_uri, tmp_path):
    config = _project(tmp_path, half_stalled_uri)
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["--config", str(config), "--catalog-timeout", "1", "--json", "status"])
    assert time.monotonic() - started < 10
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: The catalog at {half_stalled_uri} did not answer")
    assert f"within 1 s (GET {half_stalled_uri}/v1/namespaces/" in lines[0]
    payload = json.loads(result.stdout)
    assert payload["type"] == "CatalogUnavailableError" and payload["exit_code"] == 1


@pytest.mark.parametrize("value", ["0", "-2", "soon"])
def test_a_bad_catalog_timeout_option_is_a_usage_error(tmp_path, value):
    config = _project(tmp_path, "http://127.0.0.1:1")
    result = CliRunner().invoke(cli, ["--config", str(config), "--catalog-timeout", value, "status"])
    assert result.exit_code == 2
    assert "--catalog-timeout" in result.output


def test_a_bad_timeout_in_the_project_file_is_a_configuration_error(tmp_path):
    config = _project(tmp_path, "http://127.0.0.1:1", timeout=-5)
    result = CliRunner().invoke(cli, ["--config", str(config), "status"])
    assert result.exit_code == 2
    assert "catalog.timeout" in result.stderr


# --- call_with_timeout --------------------------------------------------------------------------------------


def test_call_with_timeout_returns_raises_and_gives_up():
    assert call_with_timeout(lambda: 42, 5, what="answering", endpoint="x") == 42
    failure = KeyError("missing")

    def fail() -> None:
        raise failure

    with pytest.raises(KeyError) as info:
        call_with_timeout(fail, 5, what="failing", endpoint="x")
    assert info.value is failure
    never = threading.Event()
    started = time.monotonic()
    expected = r"The catalog at http://h:1 did not answer within 0\.2 s \(waiting\)"
    with pytest.raises(CatalogUnavailableError, match=expected):
        call_with_timeout(never.wait, 0.2, what="waiting", endpoint="http://h:1")
    assert time.monotonic() - started < 3
    never.set()
    with pytest.raises(CatalogConfigError, match="'timeout'"):
        call_with_timeout(lambda: 1, 0, what="x", endpoint="x")


def test_a_call_that_never_returns_does_not_keep_the_process_alive():
    code = """
import threading
from iceberg_ops_provider.core.timeouts import call_with_timeout
from iceberg_ops_provider.errors import CatalogUnavailableError
try:
    call_with_timeout(threading.Event().wait, 0.2, what="waiting forever", endpoint="http://h:1")
except CatalogUnavailableError as exc:
    print("gave up:", exc)
"""
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("gave up: The catalog at http://h:1 did not answer within 0.2 s")
    assert time.monotonic() - started < 10
