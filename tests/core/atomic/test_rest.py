"""All-or-nothing commits of several tables on a REST catalog: SeaweedFS's Iceberg REST catalog (SigV4).

SeaweedFS serves ``POST /v1/{prefix}/transactions/commit`` without listing it in ``/v1/config``. A
catalog without the endpoint, and one that fails after applying a commit, are SeaweedFS behind a
small loopback proxy that answers that one path itself (404, or 502 after forwarding) and forwards
everything else unchanged, signatures included.
"""

from __future__ import annotations

import http.client
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, NoSuchTableError
from pyiceberg.table.update import AssertCurrentSchemaId, SetPropertiesUpdate
from pyiceberg.types import StringType

from iceberg_ops_provider.core.atomic import rest as atomic_commit_rest
from iceberg_ops_provider.core.atomic.changes import TableChange
from iceberg_ops_provider.core.atomic.commit import atomic_commit_mode, commit_atomically
from tests.core.atomic.support import race_on_two_tables
from tests.support.servers import serve_http

pytestmark = pytest.mark.backends

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _open(seaweedfs, bucket: str, uri: str | None = None, timeout: float = 60.0):
    return seaweedfs.rest_catalog(bucket, uri=uri or seaweedfs.iceberg_uri, timeout=timeout)


@pytest.fixture
def bucket(seaweedfs, unique_name) -> str:
    seaweedfs.create_table_bucket(unique_name)
    catalog = _open(seaweedfs, unique_name)
    catalog.create_namespace("ns")
    catalog.create_table("ns.a", SCHEMA)
    catalog.create_table("ns.b", SCHEMA)
    return unique_name


@contextmanager
def proxy(upstream: str, answer: str) -> Iterator[tuple[str, list[str]]]:
    """A loopback proxy to ``upstream``; ``transactions/commit`` gets ``answer``.

    ``"404"``: answered here, not forwarded; ``"502"``: forwarded, then a 502 instead of the answer;
    ``"stall"``: forwarded, then no answer for 3 seconds.
    """
    target = urlsplit(upstream)
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> tuple[int, list[tuple[str, str]], bytes]:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:  # headers as sent (Host included), so SeaweedFS checks the client's SigV4 signature
                connection.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                response = connection.getresponse()
                return response.status, response.getheaders(), response.read()
            finally:
                connection.close()

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            if self.path.endswith("/transactions/commit"):
                seen.append(self.command)
                if answer == "404":
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self._reply(404, [("Content-Type", "text/plain")], b"404 page not found")
                    return
                self._forward()  # applied upstream, then the answer is lost in a failing gateway
                if answer == "stall":
                    time.sleep(3)
                self._reply(502, [("Content-Type", "text/plain")], b"Bad Gateway")
                return
            self._reply(*self._forward())

        do_GET = do_POST = do_DELETE = do_HEAD = _handle

        def log_message(self, *args: object) -> None:
            pass

    with serve_http(Handler) as url:
        yield url, seen


def _set(catalog, name: str, **props: str):
    transaction = catalog.load_table(name).transaction()
    transaction.set_properties(props)
    return transaction


def _props(catalog, name: str) -> dict[str, str]:
    return dict(catalog.load_table(name).properties)


def test_both_changes_land_in_one_request(seaweedfs, bucket):
    catalog = _open(seaweedfs, bucket)
    before = {name: catalog.load_table(name).metadata_location for name in ("ns.a", "ns.b")}
    first, second = _set(catalog, "ns.a", step="1"), catalog.load_table("ns.b").transaction()
    with first.update_schema() as update:
        update.add_column("note", StringType())
    second.set_properties(step="1")
    second.append(pa.table({"id": pa.array([7], pa.int64())}))

    result = commit_atomically(catalog, [TableChange.of(first), TableChange.of(second)])

    assert result.applied and result.mode == "rest-transaction" and result.tables == ("ns.a", "ns.b")
    assert atomic_commit_mode(catalog) == "rest-transaction"  # learnt from the answer
    a, b = catalog.load_table("ns.a"), catalog.load_table("ns.b")
    assert a.properties["step"] == "1" and "note" in a.schema().column_names
    assert b.properties["step"] == "1" and b.scan().to_arrow().column("id").to_pylist() == [7]
    assert a.metadata_location != before["ns.a"] and b.metadata_location != before["ns.b"]
    assert first._updates == ()


def test_a_failed_requirement_of_the_second_table_leaves_both_unchanged(seaweedfs, bucket):
    catalog = _open(seaweedfs, bucket)
    before = {name: catalog.load_table(name).metadata_location for name in ("ns.a", "ns.b")}
    changes = [
        TableChange.of(_set(catalog, "ns.a", x="1")),
        TableChange(
            ("ns", "b"), (SetPropertiesUpdate(updates={"x": "1"}),), (AssertCurrentSchemaId(current_schema_id=7),)
        ),
    ]
    with pytest.raises(CommitFailedException, match="nothing was applied"):
        commit_atomically(catalog, changes)
    assert {name: catalog.load_table(name).metadata_location for name in ("ns.a", "ns.b")} == before
    assert "x" not in _props(catalog, "ns.a") and "x" not in _props(catalog, "ns.b")


def test_a_concurrent_writer_fails_the_whole_commit(seaweedfs, bucket):
    catalog, other = _open(seaweedfs, bucket), _open(seaweedfs, bucket)
    first, second = _set(catalog, "ns.a", step="1"), catalog.load_table("ns.b").transaction()
    with second.update_schema() as update:
        update.add_column("mine", StringType())
    with other.load_table("ns.b").update_schema() as update:  # another writer evolves ns.b first
        update.add_column("theirs", StringType())

    with pytest.raises(CommitFailedException):
        commit_atomically(catalog, [TableChange.of(first), TableChange.of(second)])

    assert "step" not in _props(catalog, "ns.a")
    assert catalog.load_table("ns.b").schema().column_names == ["id", "theirs"]
    with pytest.raises(RuntimeError, match="cannot be reused"):
        first.commit_transaction()


def test_a_missing_table_applies_nothing_and_shows_the_endpoint_is_served(seaweedfs, bucket):
    catalog = _open(seaweedfs, bucket)
    gone = TableChange(("ns", "gone"), (SetPropertiesUpdate(updates={"x": "1"}),))
    with pytest.raises(NoSuchTableError):
        commit_atomically(catalog, [TableChange.of(_set(catalog, "ns.a", step="1")), gone])
    assert "step" not in _props(catalog, "ns.a")
    assert atomic_commit_mode(catalog) == "rest-transaction"


def test_creating_a_table_is_not_part_of_a_rest_multi_table_commit(seaweedfs, bucket):
    catalog = _open(seaweedfs, bucket)
    create = catalog.create_table_transaction("ns.c", SCHEMA)
    result = commit_atomically(catalog, [TableChange.of(create), TableChange.of(_set(catalog, "ns.a", step="1"))])
    assert not result.applied and "cannot create tables (ns.c)" in result.reason
    assert not catalog.table_exists("ns.c") and "step" not in _props(catalog, "ns.a")


def test_the_empty_probe_finds_the_endpoint_and_changes_nothing(seaweedfs, bucket):
    catalog = _open(seaweedfs, bucket)
    before = catalog.load_table("ns.a").metadata_location
    atomic_commit_rest.forget_support(catalog)
    assert atomic_commit_mode(catalog) is None  # not asked yet
    assert atomic_commit_mode(catalog, probe=True) == "rest-transaction"
    assert catalog.load_table("ns.a").metadata_location == before


def test_a_catalog_without_the_endpoint_is_detected_and_remembered(seaweedfs, bucket, caplog):
    with proxy(seaweedfs.iceberg_uri, "404") as (uri, seen):
        catalog = _open(seaweedfs, bucket, uri)
        first = _set(catalog, "ns.a", step="1")
        with caplog.at_level(logging.INFO, logger="iceberg_ops_provider.core.atomic.commit"):
            result = commit_atomically(
                catalog, [TableChange.of(first), TableChange.of(_set(catalog, "ns.b", step="1"))]
            )
        assert not result.applied and result.mode == "per-table" and "HTTP 404" in result.reason
        assert "table by table" in caplog.text
        assert seen == ["POST"]
        assert atomic_commit_mode(catalog) == "per-table"
        first.commit_transaction()  # the transaction is untouched: the caller commits it on its own
        assert _props(catalog, "ns.a")["step"] == "1" and "step" not in _props(catalog, "ns.b")

        again = _open(seaweedfs, bucket, uri)  # another catalog object on the same endpoint
        result = commit_atomically(again, [TableChange.of(_set(again, "ns.b", step="2"))])
        assert not result.applied and "learnt earlier" in result.reason
        assert seen == ["POST"]  # remembered: not asked again

        atomic_commit_rest.forget_support(again)
        assert atomic_commit_mode(again, probe=True) == "per-table"
        assert seen == ["POST", "POST"]


def test_a_commit_whose_answer_is_lost_is_reported_unknown_and_was_all_or_nothing(seaweedfs, bucket):
    with proxy(seaweedfs.iceberg_uri, "502") as (uri, seen):
        catalog = _open(seaweedfs, bucket, uri)
        first, second = _set(catalog, "ns.a", step="1"), _set(catalog, "ns.b", step="1")
        with pytest.raises(CommitStateUnknownException, match="all or none"):
            commit_atomically(catalog, [TableChange.of(first), TableChange.of(second)])
        assert seen == ["POST"]
    direct = _open(seaweedfs, bucket)
    assert _props(direct, "ns.a")["step"] == _props(direct, "ns.b")["step"] == "1"  # it had landed, both
    with pytest.raises(RuntimeError, match="cannot be reused"):
        first.commit_transaction()


def test_a_commit_whose_answer_times_out_is_reported_unknown(seaweedfs, bucket):
    with proxy(seaweedfs.iceberg_uri, "stall") as (uri, seen):
        catalog = _open(seaweedfs, bucket, uri, timeout=1)
        first, second = _set(catalog, "ns.a", step="1"), _set(catalog, "ns.b", step="1")
        with pytest.raises(CommitStateUnknownException, match="got no answer"):
            commit_atomically(catalog, [TableChange.of(first), TableChange.of(second)])
        assert seen == ["POST"]  # a POST is never resent by the transport: it could apply twice
    direct = _open(seaweedfs, bucket)
    assert _props(direct, "ns.a")["step"] == _props(direct, "ns.b")["step"] == "1"


def test_concurrent_multi_table_commits_never_half_apply(seaweedfs, bucket):
    expected = race_on_two_tables(lambda: _open(seaweedfs, bucket), writers=3, steps=3, attempts=40)
    catalog = _open(seaweedfs, bucket)
    a = sorted(catalog.load_table("ns.a").scan().to_arrow().column("id").to_pylist())
    b = sorted(catalog.load_table("ns.b").scan().to_arrow().column("id").to_pylist())
    assert a == b == expected
