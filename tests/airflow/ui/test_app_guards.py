"""What the Iceberg pages guard, tried against a real api-server process with real connections and hostile servers.

A page view changes no file and no database (an unrelated SQLite file named by a connection, a
database that does not exist, the lake itself); a connection that cannot be parsed is that
connection's error while every other page answers 200; a dripping catalog costs one bounded request
and leaves no thread or socket behind; the catalogs page with a dead and a dripping catalog answers
within the dripping one's deadline plus a second; no page shows a remote server's body or a password
(whatever it holds); a huge map index is a 422; every response says ``nosniff`` and carries the
pages' Content-Security-Policy; the API's page loads no script from elsewhere; a missing, expired or
foreign session leads to Airflow's login, and back to the page asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.airflow.ui.support import build_lake, leaked
from tests.support import trap
from tests.support.hostile import canned, closed_port, drip, endless, never, raw_server

pytestmark = [pytest.mark.slow, pytest.mark.long]  # a real api-server process, and hostile servers

DRIP_TIMEOUT = 2.0
PASSWORDS = {  # a password that URL parsers cut in the wrong place, one per connection
    "pw_slash": "pw/SLASH-SECRET-1",
    "pw_bracket": "pw[BRACKET-SECRET-2",
    "pw_hash": "pw#HASH-SECRET-3",
    "pw_at": "pw@AT-SECRET-4",
}
REDIRECT = b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/latest/meta-data/\r\nContent-Length: 0\r\n\r\n"
DRIP = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n" + b"{" * 100000
INTERNAL_BODY = b'{"note": "INTERNAL-BODY-SECRET: an internal service\'s answer"}'


def _rest(uri: str, timeout: float = DRIP_TIMEOUT, **extra: Any) -> dict[str, Any]:
    return {"conn_type": "iceberg_ops", "host": uri, "extra": {"kind": "rest", "timeout": str(timeout), **extra}}


def _files(*roots: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``roots``: size, modification time and digest."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file():
                data = path.read_bytes()
                found[str(path)] = (len(data), path.stat().st_mtime_ns, hashlib.sha256(data).hexdigest())
    return found


def _processes(pid: int) -> list[int]:
    """The api-server and its children (uvicorn may serve from a child process)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(OSError):  # a process may end while it is read
            for task in os.listdir(f"/proc/{current}/task"):
                todo.extend(int(child) for child in Path(f"/proc/{current}/task/{task}/children").read_text().split())
    return found


def _threads(pid: int) -> int:
    """Threads of the api-server's processes."""
    total = 0
    for process in _processes(pid):
        with contextlib.suppress(OSError):
            total += len(os.listdir(f"/proc/{process}/task"))
    return total


def _sockets_to(pid: int, port: int) -> int:
    """TCP sockets of the api-server's processes connected to loopback ``port``."""
    inodes: set[str] = set()
    for process in _processes(pid):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{process}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{process}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == port and fields[9] in inodes and fields[3] != "06":  # 06: TIME_WAIT, no socket held
            count += 1
    return count


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An api-server with the lake, an unrelated database, a missing one, bad ports, hostile catalogs."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs /proc to count a process's threads and sockets (Linux)")
    from tests.airflow.ui.deployment import ApiServer

    root = tmp_path_factory.mktemp("guards")
    unrelated = root / "app" / "app.db"
    unrelated.parent.mkdir()
    with sqlite3.connect(unrelated) as db:
        db.execute("create table users (id integer primary key, name text)")
        db.execute("insert into users (name) values ('ada')")
    with (
        raw_server(never) as stalled,
        raw_server(drip(DRIP, 0.3)) as drip_catalogs,
        raw_server(drip(DRIP, 0.3)) as drip_pages,
        raw_server(endless) as endless_catalog,
        raw_server(
            canned(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(INTERNAL_BODY) + INTERNAL_BODY),
            keep_alive=True,
        ) as internal,
        raw_server(canned(REDIRECT), keep_alive=True) as redirect,
    ):
        connections = {
            "unrelated": {"conn_type": "iceberg", "extra": {"type": "sql", "uri": f"sqlite:///{unrelated}"}},
            "unrelated_ops": {"conn_type": "iceberg_ops", "extra": {"kind": "sql", "uri": f"sqlite:///{unrelated}"}},
            "missing": {
                "conn_type": "iceberg_ops",
                "extra": {"kind": "sqlite", "db_path": str(root / "nowhere" / "catalog.db")},
            },
            "bad_port": {"conn_type": "iceberg_ops", "host": "https://ops:pw-PORT-SECRET@catalog.example:99999"},
            "bad_port_text": {"conn_type": "iceberg", "host": "https://catalog.example:abc"},
            "drip_catalogs": _rest(drip_catalogs.uri),
            "drip_pages": _rest(drip_pages.uri),
            "endless": _rest(endless_catalog.uri),
            "dead": _rest(f"http://127.0.0.1:{closed_port()}"),
            "internal": _rest(internal.uri),
            "redirect": _rest(redirect.uri),
            **{
                conn_id: {"conn_type": "iceberg", "host": f"http://ops:{password}@127.0.0.1:{closed_port()}/api"}
                for conn_id, password in PASSWORDS.items()
            },
        }
        # A connection naming a class to import, on the lake itself: opened, its tables would import it.
        connections["names_class"] = {
            "conn_type": "iceberg",
            "extra": {"type": "sql", "uri": f"sqlite:///{root / 'catalog.db'}", "py-io-impl": trap.NAME},
        }
        env = {f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(conn) for conn_id, conn in connections.items()}
        (root / "trap.log").touch()
        env[trap.VARIABLE] = str(root / "trap.log")
        server = ApiServer(root, stalled.uri, extra_env=env)
        build_lake(server.catalog(), maintained=False)
        server.start()
        try:
            yield {
                "server": server,
                "root": root,
                "unrelated": unrelated,
                "connections": connections,
                "drip_catalogs": drip_catalogs,
                "drip_pages": drip_pages,
                "endless": endless_catalog,
                "internal": internal,
                "redirect": redirect,
            }
        finally:
            server.stop()


def _get(served: dict[str, Any], path: str, **kwargs: Any) -> Any:
    import requests

    server = served["server"]
    headers = {"Authorization": f"Bearer {server.token('admin')}", **kwargs.pop("headers", {})}
    return requests.get(f"{server.api_url}{path}", headers=headers, timeout=60, allow_redirects=False, **kwargs)


def _every_page(served: dict[str, Any]) -> list[Any]:
    pages = ["/iceberg-ops/", "/iceberg-ops/api/catalogs", "/iceberg-ops/docs", "/iceberg-ops/openapi.json"]
    for conn_id in served["connections"]:
        pages += [f"/iceberg-ops/c/{conn_id}/", f"/iceberg-ops/api/c/{conn_id}", f"/iceberg-ops/c/{conn_id}/ns/shop"]
    pages += [
        "/iceberg-ops/c/iceberg_ops_default/",
        "/iceberg-ops/c/iceberg_ops_default/ns/shop",
        "/iceberg-ops/api/c/iceberg_ops_default/ns/shop",
        "/iceberg-ops/c/iceberg_ops_default/ns/shop/t/events",
        "/iceberg-ops/api/c/iceberg_ops_default/ns/shop/t/events",
    ]
    return [_get(served, page) for page in pages]


# The first two run first: the catalogs page asks every catalog, and a catalog that did not answer is not
# asked again for 30 s, so a later test could not count the one request a visit costs.


def test_a_dripping_catalog_costs_one_bounded_request_and_leaves_no_thread_or_socket(served):
    server, drip = served["server"], served["drip_pages"]
    port = int(drip.uri.rsplit(":", 1)[1])
    _get(served, "/iceberg-ops/c/iceberg_ops_default/ns/shop")  # the api-server's own threads started
    baseline = _threads(server.pid)
    accepted = drip.accepted
    started = time.monotonic()
    page = _get(served, "/iceberg-ops/c/drip_pages/ns/shop")
    assert page.status_code == 200 and time.monotonic() - started < DRIP_TIMEOUT + 1.0
    assert f"did not answer within {DRIP_TIMEOUT:g} s" in page.text
    time.sleep(1.0)  # the deadline has passed: everything the read held must be gone
    assert drip.accepted - accepted == 1
    assert _sockets_to(server.pid, port) == 0
    assert drip.open_connections() == 0
    assert _threads(server.pid) <= baseline
    time.sleep(1.5)  # past the pages' cache (2 s): a visit within the 30 s pause starts no request at all
    again = _get(served, "/iceberg-ops/c/drip_pages/ns/shop")
    assert again.status_code == 200 and drip.accepted - accepted == 1
    assert "asked again" in again.text


def test_the_catalogs_page_with_a_dead_and_a_dripping_catalog_answers_within_the_deadline_plus_a_second(served):
    drip = served["drip_catalogs"]
    accepted = drip.accepted
    started = time.monotonic()
    catalogs = _get(served, "/iceberg-ops/api/catalogs")
    took = time.monotonic() - started
    assert catalogs.status_code == 200 and took < DRIP_TIMEOUT + 1.0, took
    listed = {catalog["conn_id"]: catalog for catalog in catalogs.json()["catalogs"]}
    assert (listed["dead"]["answers"], listed["dead"]["answered"], listed["dead"]["error_kind"]) == (
        False,
        False,
        "unreachable",
    )
    assert (listed["drip_catalogs"]["answers"], listed["drip_catalogs"]["error_kind"]) == (False, "timeout")
    assert drip.accepted - accepted == 1  # one request, not one per part or per retry


def test_viewing_every_page_changes_no_file_and_no_database_and_shows_no_secret(served):
    unrelated, root = served["unrelated"], served["root"]
    lake = [root / "catalog.db", root / "warehouse"]
    before = _files(unrelated.parent, *lake)
    for response in _every_page(served):
        assert response.status_code in (200, 404), (response.url, response.status_code, response.text[:300])
        text = response.text + json.dumps(dict(response.headers))
        assert not leaked(text), (response.url, leaked(text))
        for password in [*PASSWORDS.values(), "pw-PORT-SECRET"]:
            assert password[3:] not in text, (response.url, password)  # nor what follows its odd character
        assert "INTERNAL-BODY-SECRET" not in text, response.url
    assert _files(unrelated.parent, *lake) == before
    with sqlite3.connect(unrelated) as db:  # no catalog tables were added to it
        assert [row[0] for row in db.execute("select name from sqlite_master where type = 'table'")] == ["users"]
    assert not (root / "nowhere").exists()


def test_a_connection_that_cannot_be_parsed_is_its_own_error_and_every_other_page_answers(served):
    catalogs = _get(served, "/iceberg-ops/api/catalogs")
    assert catalogs.status_code == 200
    listed = {catalog["conn_id"]: catalog for catalog in catalogs.json()["catalogs"]}
    assert "is not a number from 1 to 65535" in listed["bad_port"]["error"]
    page = _get(served, "/iceberg-ops/").text  # each failure's badge says what kind it is
    for conn_id, words in (("bad_port", "cannot be opened"), ("dead", "does not answer"), ("internal", "answers with")):
        row = re.search(rf"<tr>(?:(?!</tr>).)*>{conn_id}</a>(?:(?!</tr>).)*</tr>", page, re.S)
        assert row and words in row.group(0), (conn_id, row and row.group(0))
    assert "'99999'" in listed["bad_port"]["error"] and "'abc'" in listed["bad_port_text"]["error"]
    assert listed["iceberg_ops_default"]["answers"] is True
    for conn_id in ("bad_port", "bad_port_text"):
        page = _get(served, f"/iceberg-ops/c/{conn_id}/")
        assert page.status_code == 200 and "is not a number from 1 to 65535" in page.text
    assert _get(served, "/iceberg-ops/").status_code == 200
    assert _get(served, "/iceberg-ops/c/iceberg_ops_default/ns/shop").status_code == 200


def test_an_endless_answer_ends_by_the_deadline(served):
    endless = served["endless"]
    started = time.monotonic()
    page = _get(served, "/iceberg-ops/api/c/endless")
    assert page.status_code == 200 and time.monotonic() - started < DRIP_TIMEOUT + 1.0
    assert page.json()["errors"]["namespaces"]
    time.sleep(0.5)
    assert endless.open_connections() == 0


@pytest.mark.parametrize(
    ("conn_id", "kind", "status_class"),
    [("internal", "not-a-catalog", "2xx"), ("redirect", "redirect", "3xx")],
)
def test_the_probe_says_whether_the_catalog_answered_its_status_class_and_kind_never_its_body(
    served, conn_id, kind, status_class
):
    catalogs = _get(served, "/iceberg-ops/api/catalogs").json()["catalogs"]
    probe = {catalog["conn_id"]: catalog for catalog in catalogs}[conn_id]
    assert (probe["answers"], probe["answered"], probe["error_kind"]) == (False, True, kind), probe
    assert probe["status_class"] in (status_class, None)
    for page in (f"/iceberg-ops/c/{conn_id}/", "/iceberg-ops/", f"/iceberg-ops/api/c/{conn_id}"):
        text = _get(served, page).text
        assert "INTERNAL-BODY-SECRET" not in text and "169.254.169.254" not in text and "meta-data" not in text
    assert all(b"169.254.169.254" not in request for request in served["redirect"].requests)


def test_a_connection_naming_a_class_to_import_is_listed_with_that_problem_and_never_opened(served):
    listed = {c["conn_id"]: c for c in _get(served, "/iceberg-ops/api/catalogs").json()["catalogs"]}
    assert "names a class to import" in listed["names_class"]["error"]
    assert listed["names_class"]["error_kind"] == "configuration"
    for page in ("/iceberg-ops/c/names_class/", "/iceberg-ops/c/names_class/ns/shop/t/orders"):
        response = _get(served, page)
        assert response.status_code in (200, 404) and trap.NAME not in response.text
    assert trap.sprung(served["root"] / "trap.log") == []


def test_a_map_index_past_what_airflow_stores_is_a_422(served):
    response = _get(served, "/iceberg-ops/tasks/d/r/t", params={"map_index": 2**70})
    assert response.status_code == 422
    assert str(2**70) not in response.text


def test_every_response_says_nosniff_and_the_pages_load_their_own_files_only(served):
    for path in ("/iceberg-ops/", "/iceberg-ops/api/catalogs", "/iceberg-ops/docs", "/iceberg-ops/static/pages.css"):
        response = _get(served, path)
        assert response.headers["x-content-type-options"] == "nosniff", path
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'self'" in policy
        assert "unsafe-inline" not in policy
    page = _get(served, "/iceberg-ops/").text
    assert "<style" not in page and "<script>" not in page and 'style="' not in page  # nothing inline
    docs = _get(served, "/iceberg-ops/docs").text
    scripts = re.findall(r"<script[^>]*>", docs)
    assert scripts == ['<script src="/iceberg-ops/static/pages.js">'], scripts  # the package's own, or none
    assert "cdn" not in docs.lower() and "/iceberg-ops/api/catalogs" in docs
    assert _get(served, "/iceberg-ops/static/pages.js").headers["content-type"].startswith("text/javascript")


def test_a_missing_expired_or_foreign_session_leads_to_the_login_and_back_to_the_page(served):
    import jwt
    import requests

    server = served["server"]
    page = "/iceberg-ops/c/iceberg_ops_default/ns/shop?page=2"
    real = server.token("admin")
    header = jwt.get_unverified_header(real)
    claims = jwt.decode(real, options={"verify_signature": False})
    foreign = jwt.encode({**claims, "exp": time.time() + 600}, "x" * 64, algorithm=header["alg"], headers=header)
    expired = jwt.encode(
        {**claims, "exp": time.time() - 60}, server.jwt_secret, algorithm=header["alg"], headers=header
    )
    for cookies in ({}, {"_token": expired}, {"_token": foreign}):
        landing = requests.get(
            f"{server.api_url}{page}",
            cookies=cookies,
            headers={"Sec-Fetch-Dest": "document"},
            allow_redirects=False,
            timeout=30,
        )
        assert landing.status_code == 303, (cookies.keys(), landing.status_code, landing.text[:300])
        target = urlsplit(landing.headers["location"])
        assert target.path.endswith("/login")
        assert parse_qs(target.query)["next"] == ["/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/shop?page=2"]
        framed = requests.get(
            f"{server.api_url}{page}", cookies=cookies, headers={"Sec-Fetch-Dest": "iframe"}, timeout=30
        )
        assert framed.status_code == 401
        # The script opens the login in Airflow's window, back to the page in Airflow's frame; the link
        # itself (followed where no script runs, inside the frame) comes back to the page alone.
        on_top = re.search(r'data-login="([^"]+)"', framed.text)
        here = re.search(r'<a href="([^"]+)"[^>]*data-login', framed.text)
        assert on_top and here, framed.text
        assert parse_qs(urlsplit(html.unescape(on_top.group(1))).query)["next"] == [
            "/plugin/iceberg/iceberg-ops/c/iceberg_ops_default/ns/shop?page=2"
        ]
        assert parse_qs(urlsplit(html.unescape(here.group(1))).query)["next"] == [page]
    assert requests.get(f"{server.api_url}/iceberg-ops/api/catalogs", timeout=30).status_code == 401  # JSON: no login
    viewer = requests.get(
        f"{server.api_url}{page}",
        headers={"Authorization": f"Bearer {server.token('viewer')}", "Sec-Fetch-Dest": "document"},
        timeout=30,
    )
    assert viewer.status_code == 403 and "may not read connections" in viewer.text  # a role, not a session
