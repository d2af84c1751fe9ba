"""REST catalogs whose every request ends by a deadline, against real servers on loopback that stall.

``BoundedRestCatalog`` bounds each request (the configuration asked while it is built included) to
``spec.timeout`` seconds in all, on the catalog's own session, in the calling thread: a server that
accepts and never answers, drips its answer a byte at a time, or sends an endless body costs the
timeout and leaves no thread and no socket behind, and nothing of ``requests`` or ``urllib3`` is
changed for anyone else. ``deadline(seconds)`` bounds every request inside a block in all. A
redirect to another origin is refused, one to the same origin followed; an answer past the byte
bound is refused.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest
import requests
import urllib3

from iceberg_ops_provider.catalogs import (
    DEFAULT_CATALOG_TIMEOUT,
    CatalogFactory,
    bound_catalog,
    bound_of,
    catalog_errors,
    deadline,
    spec_of,
)
from iceberg_ops_provider.catalogs.rest import AnswerTooLarge, BoundedRestCatalog, RedirectRefused
from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError
from tests.support.hostile import (
    CONFIG,
    SERVER_THREAD,
    RawServer,
    answer_json,
    client_sockets,
    config_then,
    drip,
    endless,
    never,
    raw_server,
)
from tests.support.servers import serve_http

# What this module's tests check stays as it is: nothing global of requests or urllib3 is patched.
ORIGINAL_REQUEST = requests.Session.request
ORIGINAL_SEND = requests.adapters.HTTPAdapter.send
ORIGINAL_CONNECTION_CLS = urllib3.connectionpool.HTTPConnectionPool.ConnectionCls


def _nothing_patched() -> None:
    assert requests.Session.request is ORIGINAL_REQUEST
    assert requests.adapters.HTTPAdapter.send is ORIGINAL_SEND
    assert urllib3.connectionpool.HTTPConnectionPool.ConnectionCls is ORIGINAL_CONNECTION_CLS
    assert "request" not in requests.Session().__dict__


def _other_threads(before: set[threading.Thread]) -> set[threading.Thread]:
    """Threads alive now that were not before, the test servers' own aside."""
    return {
        thread
        for thread in threading.enumerate()
        if thread not in before and not thread.name.startswith(SERVER_THREAD) and thread.is_alive()
    }


def _settled(check: Callable[[], bool], within: float = 3.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.fixture
def dripping_server() -> Iterator[RawServer]:
    """Answers a whole, valid ``/v1/config``, one byte every 0.2 s, headers included."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(CONFIG),
        CONFIG,
    )
    with raw_server(drip(answer, 0.2)) as server:
        yield server


@pytest.fixture
def endless_server() -> Iterator[RawServer]:
    """Sends a valid header, then a body that never ends (512 bytes every 10 ms)."""
    with raw_server(endless) as server:
        yield server


@pytest.fixture
def hung_server() -> Iterator[RawServer]:
    """Reads the request and never answers."""
    with raw_server(never) as server:
        yield server


# --- building a catalog ------------------------------------------------------------------------------------


SIGV4 = {
    "rest.sigv4-enabled": "true",
    "rest.signing-region": "us-east-1",
    "rest.signing-name": "s3tables",
    "client.access-key-id": "AKIDEXAMPLE",
    "client.secret-access-key": "not-a-secret",
}
AUTH = {
    "none": {},
    "token": {"token": "t0k3n"},
    "oauth2": {"credential": "client:secret"},  # the token request first, through the catalog's session
    "sigv4": SIGV4,
    "oauth2+sigv4": {"credential": "client:secret", **SIGV4},  # SigV4's adapter is mounted after the token
}


@pytest.mark.parametrize("auth", list(AUTH))
@pytest.mark.parametrize("server", ["dripping_server", "endless_server", "hung_server"])
def test_building_on_a_server_that_never_finishes_costs_the_timeout_and_leaves_nothing(request, server, auth):
    server = request.getfixturevalue(server)
    threads_before = set(threading.enumerate())
    started = time.monotonic()

    with pytest.raises(CatalogUnavailableError) as info:
        CatalogFactory.build("rest", uri=server.uri, timeout=1, **AUTH[auth])

    elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 2.5, elapsed  # one second and some slack, not a wait per byte
    error = info.value
    assert error.reason == "timeout" and error.timeout == 1 and error.endpoint == server.uri
    assert str(error).startswith(f"The catalog at {server.uri} did not answer within 1 s")
    assert server.accepted >= 1  # it did connect, and the request was sent
    assert _settled(lambda: server.closed_by_client == server.accepted), "the catalog's connection was left open"
    assert client_sockets(server.port) == 0
    assert _other_threads(threads_before) == set(), "a thread still works for the failed build"
    _nothing_patched()


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
    uri = re.escape(stalled_uri)
    assert re.match(rf"The catalog at {uri} did not answer within 1 s \(GET /v1/config\)", message), message
    assert "raise the `timeout` option" in message


def test_a_refused_connection_is_reported_as_unreachable_with_its_cause():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(CatalogUnavailableError, match="could not be reached") as info:
        CatalogFactory.build("rest", uri=uri, timeout=5)
    assert uri in str(info.value) and "GET /v1/config" in str(info.value)
    assert isinstance(info.value.__cause__, requests.exceptions.ConnectionError)
    assert info.value.timeout is None and info.value.reason == "unreachable"


def test_a_rest_catalog_gets_the_default_bound(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri)
    assert isinstance(catalog, BoundedRestCatalog)
    assert bound_of(catalog) == DEFAULT_CATALOG_TIMEOUT == 60.0
    assert catalog._session.request.seconds == 60.0
    assert "timeout" not in catalog.properties


# --- requests of a built catalog -------------------------------------------------------------------------------


def test_every_request_of_a_built_rest_catalog_is_bounded(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri, timeout=1)
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        catalog.list_namespaces()
    assert time.monotonic() - started < 2.5

    spec = spec_of(catalog)
    assert spec.endpoint() == half_stalled_uri and spec.timeout == 1
    started = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as info, catalog_errors(spec):
        catalog.namespace_exists("sales")
    assert time.monotonic() - started < 2.5
    assert isinstance(info.value.__cause__, requests.exceptions.Timeout)
    # PyIceberg asks with HEAD or GET depending on the endpoints the server advertises.
    message = str(info.value)
    assert message.startswith(f"The catalog at {half_stalled_uri} did not answer within 1 s (")
    assert "/v1/namespaces/sales); check that it is running" in message
    assert info.value.reason == "timeout" and info.value.request.endswith(" /v1/namespaces/sales")


def test_binding_again_updates_the_bound_instead_of_stacking(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri, timeout=30)
    wrapper = catalog._session.request
    bound_catalog(catalog, 0.5)
    bound_catalog(catalog, 0.3)
    assert catalog._session.request is wrapper and wrapper.seconds == 0.3 and bound_of(catalog) == 0.3
    assert wrapper.request.__func__ is requests.Session.request  # one level: the session's own method
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        catalog.list_namespaces()
    assert time.monotonic() - started < 1.5
    # A longer timeout the caller passes does not stretch the bound: the request ends within it in all.
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        catalog._session.get(f"{half_stalled_uri}/v1/namespaces", timeout=5)
    assert time.monotonic() - started < 1.5


def test_the_endpoint_never_shows_a_password_and_other_catalogs_are_left_alone(half_stalled_uri, tmp_path):
    with_password = half_stalled_uri.replace("http://", "http://admin:s3cret@")
    catalog = CatalogFactory.build("rest", uri=with_password, timeout=2)
    assert spec_of(catalog).endpoint() == half_stalled_uri.replace("http://", "http://admin@")
    assert "s3cret" not in repr(spec_of(catalog)) and "s3cret" not in str(spec_of(catalog).describe())
    sqlite = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")
    assert spec_of(sqlite).endpoint() == str((tmp_path / "c.db").resolve())
    hive = CatalogFactory.build("hive", uri="thrift://127.0.0.1:1", warehouse=(tmp_path / "wh").as_uri())
    assert spec_of(hive).endpoint() == "thrift://127.0.0.1:1"
    bound_catalog(hive, 1)  # not a REST catalog: left as it is
    bound_catalog(sqlite, 1)
    assert bound_of(hive) is None and bound_of(sqlite) is None
    sqlite.close()


def test_a_deadline_bounds_a_call_on_a_built_catalog(half_stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri, timeout=30)
    started = time.monotonic()
    with pytest.raises(CatalogUnavailableError) as info, catalog_errors(spec_of(catalog)), deadline(0.5):
        catalog.list_namespaces()
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 1.5, elapsed
    assert info.value.reason == "timeout"
    assert isinstance(info.value.__cause__, requests.exceptions.Timeout)
    _nothing_patched()


def test_a_deadline_bounds_every_request_inside_it_in_all():
    answered: list[str] = []

    def slowly(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(0.35)
        answer_json(handler, {"namespaces": []})
        answered.append(handler.path)

    with serve_http(config_then(slowly)) as uri:
        catalog = CatalogFactory.build("rest", uri=uri, timeout=30)
        assert catalog.list_namespaces() == []  # each answer takes 0.35 s
        calls = 0
        started = time.monotonic()
        with pytest.raises(requests.exceptions.Timeout), deadline(1.0):
            for _ in range(10):
                catalog.list_namespaces()
                calls += 1
        elapsed = time.monotonic() - started
    assert 1 <= calls <= 2, calls  # the block's second ran out on the second or third call, not on the eleventh
    assert 0.9 < elapsed < 1.5, elapsed


def test_requests_outside_the_catalog_keep_their_own_behaviour(half_stalled_uri, stalled_uri):
    catalog = CatalogFactory.build("rest", uri=half_stalled_uri, timeout=5)
    _nothing_patched()
    # A plain session inside a deadline is not bounded by it: only the catalog's sessions are.
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout), deadline(0.2):
        requests.get(f"{half_stalled_uri}/v1/namespaces", timeout=1.2)
    assert 1.1 < time.monotonic() - started < 3
    # The catalog's requests from another thread are bounded by the catalog's timeout, not this thread's deadline.
    spent: list[float] = []

    def elsewhere() -> None:
        begun = time.monotonic()
        try:
            catalog.list_namespaces()
        except requests.exceptions.Timeout:
            spent.append(time.monotonic() - begun)

    bound_catalog(catalog, 1.2)
    with deadline(0.2):
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join(10)
    assert len(spent) == 1 and 1.1 < spent[0] < 3, spent
    _nothing_patched()


# --- redirects and large answers -------------------------------------------------------------------------------


def _redirecting(routes: dict[str, str], seen: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            path = self.path.split("?")[0]
            if path in routes:
                self.send_response(302)
                self.send_header("Location", routes[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if path == "/v1/config":
                answer_json(self, CONFIG)
                return
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def test_a_redirect_to_another_origin_is_refused():
    seen: list[str] = []
    metadata = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"
    with serve_http(_redirecting({"/away/v1/config": metadata}, seen)) as uri:
        started = time.monotonic()
        with pytest.raises(CatalogConfigError) as info:
            CatalogFactory.build("rest", uri=f"{uri}/away", timeout=5)
        elapsed = time.monotonic() - started
    error = info.value
    assert error.reason == "redirect" and error.status == 302 and error.endpoint == f"{uri}/away"
    message = str(error)
    assert message.startswith(f"The catalog at {uri}/away answered GET /away/v1/config with a redirect (302)")
    assert "to another origin (http://169.254.169.254), which is not followed; check the `uri` option" in message
    assert "security-credentials" not in message  # the origin only
    assert isinstance(error.__cause__, RedirectRefused)
    assert elapsed < 2, elapsed  # no attempt to reach the link-local address (it would take the 5 s)
    assert seen == ["/away/v1/config"]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{other}/v1/config",  # same host, another port: another origin
        "https://127.0.0.1:{port}/v1/config",  # another scheme
        "http://localhost:{port}/v1/config",  # another host name for the same address
    ],
)
def test_every_other_origin_is_another_origin(target):
    seen: list[str] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        other = probe.getsockname()[1]
    routes: dict[str, str] = {}
    with serve_http(_redirecting(routes, seen)) as uri:
        port = int(uri.rsplit(":", 1)[1])
        routes["/away/v1/config"] = target.format(port=port, other=other)
        with pytest.raises(CatalogConfigError) as info:
            CatalogFactory.build("rest", uri=f"{uri}/away", timeout=5)
    assert info.value.reason == "redirect"
    assert seen == ["/away/v1/config"]


@pytest.mark.parametrize("location", ["/v1/config", "http://127.0.0.1:{port}/v1/config"])
def test_a_redirect_to_the_same_origin_is_followed(location):
    seen: list[str] = []
    routes: dict[str, str] = {}
    with serve_http(_redirecting(routes, seen)) as uri:
        routes["/moved/v1/config"] = location.format(port=int(uri.rsplit(":", 1)[1]))
        catalog = CatalogFactory.build("rest", uri=f"{uri}/moved", timeout=5)
    assert isinstance(catalog, BoundedRestCatalog)
    assert [path.split("?")[0] for path in seen] == ["/moved/v1/config", "/v1/config"]


def test_a_redirect_elsewhere_on_a_later_request_is_refused_too():
    seen: list[str] = []
    with serve_http(_redirecting({"/v1/namespaces": "http://169.254.169.254/v1/namespaces"}, seen)) as uri:
        catalog = CatalogFactory.build("rest", uri=uri, timeout=5)
        with pytest.raises(CatalogConfigError) as info, catalog_errors(spec_of(catalog)):
            catalog.list_namespaces()
    assert info.value.reason == "redirect" and info.value.status == 302
    assert "GET /v1/namespaces with a redirect (302) to another origin (http://169.254.169.254)" in str(info.value)


def test_an_answer_past_the_byte_bound_is_refused():
    def large(handler: BaseHTTPRequestHandler) -> None:
        answer_json(handler, {"namespaces": [["n" * 100]] * 1000})

    with serve_http(config_then(large)) as uri:
        catalog = CatalogFactory.build("rest", uri=uri, timeout=5)
        assert len(catalog.list_namespaces()) == 1000  # within the default bound
        bounded = deadline(5, max_answer_bytes=10_000)
        with pytest.raises(CatalogConfigError) as info, catalog_errors(spec_of(catalog)), bounded:
            catalog.list_namespaces()
    assert info.value.reason == "too-large"
    assert re.search(r"answered .* with more than 10000 bytes, which is not read further", str(info.value))
    assert isinstance(info.value.__cause__, AnswerTooLarge)
