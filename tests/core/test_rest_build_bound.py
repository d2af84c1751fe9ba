"""Building a REST catalog whose server accepts connections and never answers: the build gives up after the
timeout, and so does the thread that was building it (its requests carry the bound), leaving nothing behind."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import CatalogUnavailableError


@pytest.fixture
def hung_server():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", held
    stop.set()
    thread.join(5)
    server.close()
    for connection in held:
        connection.close()


def _settled(baseline: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if threading.active_count() <= baseline:
            return True
        time.sleep(0.05)
    return False


def test_a_hung_rest_server_costs_the_timeout_and_no_thread_outlives_it(hung_server):
    uri, held = hung_server
    baseline = threading.active_count()
    started = time.monotonic()
    with pytest.raises(CatalogUnavailableError, match="did not answer"):
        CatalogFactory.build("rest", uri=uri, timeout=0.5)
    assert time.monotonic() - started < 3
    assert held  # it did connect: the server took the request and kept it
    assert _settled(baseline, within=3), "the thread building the catalog still waits on the hung server"


def test_requests_of_other_threads_keep_their_own_behaviour():
    import requests

    from iceberg_ops_provider.core.timeouts import requests_bounded

    seen: list[object] = []
    original = requests.adapters.HTTPAdapter.send

    def record(self, request, **kwargs):
        seen.append(kwargs.get("timeout"))
        raise requests.ConnectionError("not sent")

    requests.adapters.HTTPAdapter.send = record
    try:
        with pytest.raises(requests.ConnectionError):
            requests_bounded(lambda: requests.get("http://127.0.0.1:9/x"), 2.5)()
        with pytest.raises(requests.ConnectionError):
            requests.get("http://127.0.0.1:9/y")  # outside: no bound added
    finally:
        requests.adapters.HTTPAdapter.send = original
    assert seen == [2.5, None]
