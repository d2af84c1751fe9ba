"""A small real Airflow for the browser suite: api-server, scheduler and dag-processor on loopback, SQLite
metadata and the LocalExecutor, users who log in (the simple auth manager with two roles).

It is :class:`tests.deployment.cluster.AirflowCluster` (processes in process groups of their own,
stopped by PID; the REST calls ``trigger``, ``wait_for_run``, ...) without what a Celery deployment
needs: no PostgreSQL, no Redis, no workers, no triggerer. REST calls carry the admin's token.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from tests.airflow.ui.support import EXAMPLE_MIGRATIONS, connections
from tests.deployment.cluster import AIRFLOW, AirflowCluster, ClusterError, Service, free_port

USERS = {"admin": ("admin", "admin-pw-browser-1"), "viewer": ("viewer", "viewer-pw-browser-1")}


class LocalAirflow(AirflowCluster):
    """Airflow on this machine with the LocalExecutor; the ``iceberg_ops_default`` catalog is SQLite in ``root``.

    Args:
        root: An empty folder.
        stalled_uri: The address of a catalog that never answers (``iceberg_stalled``).
    """

    def __init__(self, root: Path, stalled_uri: str, **options: Any) -> None:
        super().__init__(root, workers=1, **options)
        self.worker_names = []
        self.stalled_uri = stalled_uri
        # The LocalExecutor's log server listens on 0.0.0.0:8793 by default, as a Celery worker of the
        # deployment suite (which may run beside this one) does: ports of its own.
        self.log_ports = (free_port(), free_port())

    @property
    def catalog_options(self) -> dict[str, Any]:
        """The SQLite catalog the DAGs and the pages share."""
        return {
            "kind": "sqlite",
            "db_path": str(self.root / "catalog.db"),
            "warehouse_dir": str(self.root / "warehouse"),
        }

    @property
    def env(self) -> dict[str, str]:
        """The Celery deployment's environment, turned into a local one."""
        env = {k: v for k, v in super().env.items() if not k.startswith("AIRFLOW__CELERY__")}
        env.pop("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC", None)
        env.pop("AIRFLOW__CORE__HOSTNAME_CALLABLE", None)
        env.update(
            {
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.root / 'home' / 'airflow.db'}",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "2",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{role}" for u, (role, _) in USERS.items()),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.root / "home" / "passwords.json"),
                "AIRFLOW__ICEBERG_OPS__UI_MIGRATIONS_DIR": str(EXAMPLE_MIGRATIONS),
                "AIRFLOW__ICEBERG_OPS__UI_CACHE_SECONDS": "2",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "60",
                "AIRFLOW__OPENLINEAGE__DISABLED": "true",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(self.log_ports[0]),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(self.log_ports[1]),
                **connections(self.root, self.stalled_uri),
            }
        )
        return env

    def _define_services(self) -> None:
        super()._define_services()
        for name in ("triggerer", *[n for n in self.services if n.startswith("worker-")]):
            self.services.pop(name, None)

    def start(self, timeout: float = 240.0) -> None:
        """Migrate the metadata database, start the three processes, wait until they are healthy, log in."""
        deadline = time.monotonic() + timeout
        try:
            self._prepare_folders()
            (self.root / "home" / "passwords.json").write_text(json.dumps({u: pw for u, (_, pw) in USERS.items()}))
            self._define_services()
            env = self.env
            self._migrate(deadline)
            for service in self.services.values():
                self._launch(service, env)
            self._wait_until_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def _wait_until_ready(self, deadline: float) -> None:
        import requests

        healthy: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(Exception):
                healthy = requests.get(f"{self.api_url}/api/v2/monitor/health", timeout=5).json()
            parts = ("metadatabase", "scheduler", "dag_processor")
            if healthy and all((healthy.get(part) or {}).get("status") == "healthy" for part in parts):
                self._session = requests.Session()
                self._session.headers["Authorization"] = f"Bearer {self.token('admin')}"
                return
            time.sleep(0.5)
        raise ClusterError(f"Airflow was not ready in time: health {healthy}.\n" + self.logs())

    def token(self, user: str) -> str:
        """A JWT of ``user`` from the auth manager's ``POST /auth/token``."""
        import requests

        answer = requests.post(
            f"{self.api_url}/auth/token", json={"username": user, "password": USERS[user][1]}, timeout=30
        )
        if answer.status_code >= 400:
            raise ClusterError(f"no token for {user}: HTTP {answer.status_code} {answer.text[:500]}")
        return answer.json()["access_token"]


class ApiServer(LocalAirflow):
    """Only Airflow's api-server (SQLite metadata, the simple auth manager), serving the Iceberg pages.

    The connections of :class:`LocalAirflow` and ``extra_env`` (more ``AIRFLOW_CONN_*``) are in its
    environment; it runs no scheduler and no DAG: its pages read catalogs, nothing else.
    """

    def _define_services(self) -> None:
        super()._define_services()
        for name in list(self.services):
            if name != "api-server":
                self.services.pop(name)

    def _wait_until_ready(self, deadline: float) -> None:
        import requests

        healthy: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(Exception):
                healthy = requests.get(f"{self.api_url}/api/v2/monitor/health", timeout=5).json()
            if (healthy.get("metadatabase") or {}).get("status") == "healthy":
                self._session = requests.Session()
                self._session.headers["Authorization"] = f"Bearer {self.token('admin')}"
                return
            time.sleep(0.3)
        raise ClusterError(f"The api-server was not ready in time: health {healthy}.\n" + self.logs())

    @property
    def pid(self) -> int:
        """The api-server's process id."""
        process = self.services["api-server"].process
        assert process is not None
        return process.pid


__all__ = ["AIRFLOW", "USERS", "ApiServer", "LocalAirflow", "Service"]
