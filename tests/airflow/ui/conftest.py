"""Airflow's own api-server application, in this process, with the plugin mounted, users of two roles,
and the lake of :mod:`tests.airflow.ui.support` behind ``iceberg_ops_default``.

Every response a test gets through :func:`client` is searched for the configured secrets when the
test ends (``no response ever contains a connection's secret``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.ui.support import EXAMPLE_MIGRATIONS, build_lake, connections, leaked
from tests.support.hostile import never, raw_server
from tests.support.lake import Lake

PASSWORDS = {"admin": "admin-pw-1234567", "viewer": "viewer-pw-1234567"}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """Keep each phase's report on the test item, so a fixture knows in its teardown whether the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="module")
def lake(airflow_db, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The environment of the api-server: connections, users, the plugin's options; and the lake built."""

    root = tmp_path_factory.mktemp("ui-lake")
    passwords = root / "passwords.json"
    passwords.write_text(json.dumps(PASSWORDS))
    with raw_server(never) as stalled, pytest.MonkeyPatch.context() as patch:
        env = {
            **connections(root, stalled.uri),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__ICEBERG_OPS__UI_MIGRATIONS_DIR": str(EXAMPLE_MIGRATIONS),
            "AIRFLOW__ICEBERG_OPS__UI_CACHE_SECONDS": "0",
        }
        for key, value in env.items():
            patch.setenv(key, value)
        catalog = Lake(root).catalog()
        built = build_lake(catalog)
        yield {"root": root, "catalog": catalog, "stalled": stalled.uri, **built}


@pytest.fixture(scope="module")
def app(lake):
    """Airflow's api-server application (the plugin mounted at /iceberg-ops by Airflow itself)."""
    from airflow.api_fastapi.app import create_app, purge_cached_app

    from iceberg_ops_provider.ui.app import READS
    from iceberg_ops_provider.ui.connections import LISTING

    READS.clear()
    LISTING.clear()
    application = create_app()
    yield application
    purge_cached_app()


class Recording:
    """A TestClient that keeps every response, logged in as ``user`` (or nobody)."""

    def __init__(self, app: Any, responses: list[Any]) -> None:
        from fastapi.testclient import TestClient

        self._client = TestClient(app, follow_redirects=False)
        self._responses = responses
        self.headers: dict[str, str] = {}

    def login(self, user: str) -> Recording:
        token = self._client.post("/auth/token", json={"username": user, "password": PASSWORDS[user]})
        assert token.status_code == 201, token.text
        self.headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        return self

    def get(self, path: str, **kwargs: Any) -> Any:
        response = self._client.get(path, headers={**self.headers, **kwargs.pop("headers", {})}, **kwargs)
        self._responses.append(response)
        return response


@pytest.fixture
def client(app) -> Iterator[Any]:
    """``client()`` makes a recording client; every response is searched for the secrets afterwards."""
    responses: list[Any] = []
    yield lambda: Recording(app, responses)
    for response in responses:
        text = response.text + json.dumps(dict(response.headers))
        assert not leaked(text), f"{response.request.url} leaked {leaked(text)}"


@pytest.fixture
def admin(client) -> Recording:
    return client().login("admin")


def html_text(response: Any) -> str:
    """The visible text of a page, roughly (tags dropped)."""
    import html
    import re

    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.text)))


__all__ = ["Path", "html_text"]
