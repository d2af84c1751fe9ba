"""A real Airflow deployment on loopback: PostgreSQL metadata, CeleryExecutor on Redis, several workers.

:class:`AirflowCluster` starts what a production deployment runs, each as its own process in its own
process group: ``airflow api-server``, ``scheduler``, ``dag-processor``, ``triggerer`` and N
``airflow celery worker`` processes with distinct Celery hostnames. The metadata database is a fresh
PostgreSQL database (migrated with ``airflow db migrate``), the Celery broker a Redis database number
of its own and the result backend the metadata database. The ``iceberg_ops_default`` connection is
an environment variable every process gets: a ``sql`` catalog on a PostgreSQL database of its own
(a SQLite catalog file when the provider has no ``sql`` kind), data files in the cluster's folder.

Everything the cluster created is removed by :meth:`AirflowCluster.stop`: processes by PID (SIGTERM,
then SIGKILL after a grace period, their process groups and every task process below them), the
databases dropped, the Redis database flushed. Usable from a script as well as from pytest::

    with AirflowCluster(Path("/tmp/cluster"), workers=2) as cluster:
        run = cluster.run_dag("migrate_then_load", {"namespace": "demo"})
        print(run.state, [ti["hostname"] for ti in run.task_instances])

Each worker reports a hostname of its own on the task instances it runs (the name it was started
with, see :func:`worker_hostname`), so which worker ran what can be read from the REST API.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = REPOSITORY / "dags_examples"
AIRFLOW = Path(sys.executable).parent / "airflow"
POSTGRES_HOST, POSTGRES_PORT, POSTGRES_USER = "127.0.0.1", 5432, "root"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
# The name a worker reports as the hostname of its task instances (read by worker_hostname()).
WORKER_NAME_VARIABLE = "ICEBERG_OPS_WORKER_NAME"
FINISHED_RUN_STATES = frozenset({"success", "failed"})


def worker_hostname() -> str:
    """The hostname a cluster's worker records on its task instances: the name it was started with.

    Airflow's ``[core] hostname_callable``. All workers of a cluster share this machine, so the
    machine's name could not tell them apart; elsewhere it is the machine's name.
    """
    return os.environ.get(WORKER_NAME_VARIABLE) or socket.getfqdn()


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def unavailable_reason() -> str | None:
    """Why a cluster cannot start on this machine (one line), or ``None`` when it can."""
    if not _answers(POSTGRES_HOST, POSTGRES_PORT):
        return f"PostgreSQL does not answer on {POSTGRES_HOST}:{POSTGRES_PORT}"
    if not _answers(REDIS_HOST, REDIS_PORT):
        return f"Redis does not answer on {REDIS_HOST}:{REDIS_PORT}"
    for module, package in (
        ("airflow.providers.celery", "apache-airflow-providers-celery"),
        ("redis", "redis"),
        ("psycopg", "psycopg[binary]"),
        ("psycopg2", "psycopg2-binary"),
    ):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"{package} is not installed (pip install {package})"
    return None


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Service:
    """One process of the deployment: its command, its process (the leader of its group) and its log."""

    name: str
    argv: list[str]
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, characters: int = 3000) -> str:
        """The end of the process's output, for failure messages."""
        try:
            return self.log_path.read_text(errors="replace")[-characters:]
        except OSError:
            return ""


@dataclass(frozen=True)
class DagRunResult:
    """A finished (or timed out) DAG run as the REST API reports it."""

    dag_id: str
    run_id: str
    state: str
    task_instances: list[dict[str, Any]]

    def of(self, task_id: str) -> list[dict[str, Any]]:
        """The task instances of ``task_id``, by map index."""
        return sorted((ti for ti in self.task_instances if ti["task_id"] == task_id), key=lambda ti: ti["map_index"])

    def states(self) -> dict[str, set[str]]:
        """Each task's states (one per mapped instance), for failure messages."""
        found: dict[str, set[str]] = {}
        for ti in self.task_instances:
            found.setdefault(ti["task_id"], set()).add(str(ti["state"]))
        return found


class ClusterError(RuntimeError):
    """The deployment did not start, or a request to it failed; the message holds the logs that tell why."""


class AirflowCluster:
    """An Airflow deployment with the CeleryExecutor and ``workers`` Celery workers, all on loopback.

    Args:
        root: An empty folder for AIRFLOW_HOME, the dags folder, the catalog's data and the logs.
        workers: How many ``airflow celery worker`` processes to start.
        worker_concurrency: Task slots of each worker.
        dags: The folder copied as the dags folder.
        heartbeat_timeout: Seconds without a heartbeat after which the scheduler fails a running task
            instance (and retries it, when it has retries left): how fast a killed worker's tasks move on.
        extra_env: More environment for every process (Airflow settings as ``AIRFLOW__SECTION__KEY``).
    """

    def __init__(
        self,
        root: Path,
        *,
        workers: int = 2,
        worker_concurrency: int = 2,
        dags: Path = EXAMPLES,
        heartbeat_timeout: int = 15,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers!r}: a cluster needs at least one worker.")
        if worker_concurrency < 1:
            raise ValueError(f"worker_concurrency={worker_concurrency!r}: a worker needs at least one slot.")
        self.root = Path(root)
        # Their Celery hostnames and the hostname on the task instances they run; start_worker() adds to it.
        self.worker_names = [f"worker-{n}" for n in range(1, workers + 1)]
        self.worker_concurrency = worker_concurrency
        self.dags_source = Path(dags)
        self.heartbeat_timeout = heartbeat_timeout
        self.extra_env = dict(extra_env or {})
        suffix = uuid.uuid4().hex[:10]
        self.metadata_database = f"airflow_{suffix}"
        self.catalog_database = f"iceberg_{suffix}"
        self.redis_db: int | None = None
        self.port = free_port()
        self.jwt_secret = secrets.token_urlsafe(64)  # every process signs and checks task tokens with it
        self.services: dict[str, Service] = {}
        self.killed: set[str] = set()  # workers stopped on purpose by kill_worker()
        self._created_databases: list[str] = []
        self._session: Any = None

    # ----------------------------------------------------------------------------------------------
    # Configuration

    @property
    def api_url(self) -> str:
        """The API server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def broker_url(self) -> str:
        """The Celery broker: the cluster's own Redis database."""
        return f"redis://{REDIS_HOST}:{REDIS_PORT}/{self.redis_db}"

    def _postgres_url(self, database: str, driver: str = "postgresql+psycopg2") -> str:
        return f"{driver}://{POSTGRES_USER}@{POSTGRES_HOST}:{POSTGRES_PORT}/{database}"

    @property
    def catalog_options(self) -> dict[str, Any]:
        """The ``CatalogFactory`` kind and options of the ``iceberg_ops_default`` connection (``kind`` included)."""
        from iceberg_ops_provider.catalogs import CatalogFactory

        warehouse = str(self.root / "warehouse")
        if "sql" in CatalogFactory.KINDS:
            uri = self._postgres_url(self.catalog_database, "postgresql+psycopg")
            return {"kind": "sql", "uri": uri, "warehouse_dir": warehouse}
        return {"kind": "sqlite", "db_path": str(self.root / "catalog.db"), "warehouse_dir": warehouse}

    def catalog(self) -> Any:
        """A PyIceberg catalog on the catalog the DAGs' connection points at."""
        from iceberg_ops_provider.catalogs import CatalogFactory

        options = dict(self.catalog_options)
        return CatalogFactory.build(options.pop("kind"), **options)

    @property
    def env(self) -> dict[str, str]:
        """The environment every process of the deployment gets."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
        metadata = self._postgres_url(self.metadata_database)
        env.update(
            {
                "AIRFLOW_HOME": str(self.root / "home"),
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.root / "dags"),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.worker_hostname",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.api_url}/execution/",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata,
                # Airflow would derive postgresql+asyncpg; psycopg 3 drives both sync and async connections.
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": self._postgres_url(
                    self.metadata_database, "postgresql+psycopg"
                ),
                "AIRFLOW__API__BASE_URL": f"{self.api_url}/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API_AUTH__JWT_SECRET": self.jwt_secret,
                "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
                "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self._postgres_url(self.metadata_database, "postgresql"),
                "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
                # Short loops: a small deployment that should react in about a second.
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(self.heartbeat_timeout),
                "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
                "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": str(max(1, self.heartbeat_timeout // 5)),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                # The DAG files do not change while the cluster runs: parse each once, not every 30 s.
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
                # Only the runs asked for: no scheduled run of table_maintenance (@daily) once it is unpaused.
                "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW_CONN_ICEBERG_OPS_DEFAULT": json.dumps(
                    {"conn_type": "iceberg_ops", "extra": self.catalog_options}
                ),
            }
        )
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [self._module_root, env.get("PYTHONPATH")]))
        env.update(self.extra_env)
        return env

    @property
    def _module_root(self) -> str:
        """The folder from which this module imports under its name (for ``hostname_callable``)."""
        path = Path(__file__).resolve().parent
        for _ in range(__name__.count(".")):
            path = path.parent
        return str(path)

    # ----------------------------------------------------------------------------------------------
    # Start and stop

    def __enter__(self) -> AirflowCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self, timeout: float = 240.0) -> None:
        """Create the databases, migrate, start every process and wait until all of them are ready.

        Raises:
            ClusterError: Something did not start within ``timeout`` seconds; the message holds its log.
        """
        reason = unavailable_reason()
        if reason:
            raise ClusterError(f"The cluster cannot start here: {reason}.")
        deadline = time.monotonic() + timeout
        try:
            self._prepare_folders()
            self._create_databases()
            self._pick_redis_db()
            self._define_services()
            # A worker touches no table before it runs a task: the workers start while the database is migrated.
            env = self.env
            for name in self.worker_names:
                self._launch(self.services[name], env)
            self._migrate(deadline)
            for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
                self._launch(self.services[name], env)
            self._wait_until_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def _prepare_folders(self) -> None:
        for folder in ("home", "logs", "warehouse"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.dags_source, self.root / "dags", ignore=shutil.ignore_patterns("__pycache__"))

    def _admin_connection(self) -> Any:
        import psycopg

        return psycopg.connect(
            host=POSTGRES_HOST, port=POSTGRES_PORT, user=POSTGRES_USER, dbname="postgres", autocommit=True
        )

    def _create_databases(self) -> None:
        with self._admin_connection() as connection:
            for database in (self.metadata_database, self.catalog_database):
                connection.execute(f'CREATE DATABASE "{database}"')
                self._created_databases.append(database)

    def _pick_redis_db(self) -> None:
        """A Redis database number no one uses (1..15), so parallel clusters do not share a queue."""
        import redis

        for number in random.sample(range(1, 16), 15):
            client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=number)
            try:
                # SETNX claims the number: another cluster picking the same one at the same moment sees the key.
                if client.dbsize() == 0 and client.set("iceberg-ops-cluster", self.metadata_database, nx=True):
                    self.redis_db = number
                    return
            finally:
                client.close()
        raise ClusterError("Every Redis database 1..15 holds keys: no free database number for the Celery broker.")

    def _migrate(self, deadline: float) -> None:
        migrate = subprocess.run(
            [str(AIRFLOW), "db", "migrate"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=max(1.0, deadline - time.monotonic()),
        )
        if migrate.returncode != 0:
            raise ClusterError(f"airflow db migrate failed:\n{migrate.stdout[-2000:]}\n{migrate.stderr[-3000:]}")

    def _define_services(self) -> None:
        home = self.root / "home"
        commands = {
            "api-server": ["api-server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
            "scheduler": ["scheduler", "--pid", str(home / "scheduler.pid")],
            "dag-processor": ["dag-processor", "--pid", str(home / "dag-processor.pid")],
            # Log serving needs a port of its own per process; all logs are files of this machine here.
            "triggerer": ["triggerer", "--skip-serve-logs", "--pid", str(home / "triggerer.pid")],
        }
        for name, argv in commands.items():
            self.services[name] = Service(name, [str(AIRFLOW), *argv], self.root / "logs" / f"{name}.log")
        for name in self.worker_names:
            self.services[name] = self._worker_service(name)

    def _worker_service(self, name: str) -> Service:
        argv = [str(AIRFLOW), "celery", "worker", "--celery-hostname", name]
        argv += ["--concurrency", str(self.worker_concurrency), "--skip-serve-logs"]
        argv += ["--pid", str(self.root / "home" / f"{name}.pid"), "--without-mingle", "--without-gossip"]
        return Service(name, argv, self.root / "logs" / f"{name}.log", {WORKER_NAME_VARIABLE: name})

    def _launch(self, service: Service, env: Mapping[str, str]) -> None:
        """Start ``service`` as the leader of a process group of its own, its output in its log file."""
        with open(service.log_path, "wb") as log:
            service.process = subprocess.Popen(
                service.argv,
                env={**env, **service.extra_env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
            )

    def start_worker(self, timeout: float = 120.0) -> str:
        """Start one more Celery worker (e.g. to replace a killed one) and wait until it answers; its name.

        Raises:
            ClusterError: It did not answer within ``timeout`` seconds (its log is in the message).
        """
        name = f"worker-{len(self.worker_names) + 1}"
        service = self.services[name] = self._worker_service(name)
        self.worker_names.append(name)
        self._launch(service, self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if name in self._workers_answering():
                return name
            time.sleep(0.5)
        raise ClusterError(f"{name} did not answer within {timeout:.0f}s:\n{service.log_tail()}")

    def _wait_until_ready(self, deadline: float) -> None:
        """Wait for the API server's health check (database, scheduler, triggerer, dag processor) and every worker."""
        healthy: dict[str, Any] = {}
        answering: set[str] = set()
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(Exception):
                healthy = self.request("GET", "/api/v2/monitor/health", timeout=5)
            components = ("metadatabase", "scheduler", "triggerer", "dag_processor")
            api_ready = bool(healthy) and all(
                (healthy.get(part) or {}).get("status") == "healthy" for part in components
            )
            answering = self._workers_answering() if api_ready else answering
            if api_ready and answering >= set(self.worker_names) - self.killed:
                return
            time.sleep(0.5)
        raise ClusterError(
            f"The cluster was not ready in time: health {healthy}, workers answering {sorted(answering)}.\n"
            + self.logs()
        )

    def _workers_answering(self) -> set[str]:
        """The workers answering a Celery ping on the broker (node ``celery@name`` reduced to ``name``)."""
        from celery import Celery

        app = Celery(broker=self.broker_url)
        try:
            replies = app.control.ping(timeout=1.0)
        except Exception:
            return set()
        finally:
            app.close()
        return {node.rsplit("@", 1)[-1] for reply in replies for node in reply}

    def _check_alive(self) -> None:
        for service in self.services.values():
            if service.name not in self.killed and service.process is not None and service.process.poll() is not None:
                raise ClusterError(
                    f"{service.name} exited with code {service.process.returncode}:\n{service.log_tail()}"
                )

    def logs(self, characters: int = 2500) -> str:
        """The end of every process's output, for failure messages."""
        return "\n".join(f"--- {name}\n{service.log_tail(characters)}" for name, service in self.services.items())

    def stop(self, grace: float = 5.0) -> None:
        """Stop every process (SIGTERM, then SIGKILL after ``grace`` s), drop the databases, flush Redis.

        Safe to call twice and after a failed :meth:`start`.
        """
        if self._session is not None:  # an open keep-alive connection holds up the API server's shutdown
            self._session.close()
            self._session = None
        running = [service for service in self.services.values() if service.process is not None]
        # Task processes run in process groups of their own: collect them before their parents go.
        groups = {pgid for service in running for pgid in _process_groups(service.process)}
        for pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        end = time.monotonic() + grace
        for service in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                service.process.wait(timeout=max(0.0, end - time.monotonic()))  # type: ignore[union-attr]
        for pgid in groups:
            _signal_group(pgid, signal.SIGKILL)
        for service in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                service.process.wait(timeout=5)  # type: ignore[union-attr]
        self.services.clear()
        self._drop_databases()
        self._flush_redis()

    def _drop_databases(self) -> None:
        if not self._created_databases:
            return
        with self._admin_connection() as connection:
            while self._created_databases:
                database = self._created_databases.pop()
                connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')

    def _flush_redis(self) -> None:
        if self.redis_db is None:
            return
        import redis

        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, db=self.redis_db)
        try:
            client.flushdb()
        finally:
            client.close()
        self.redis_db = None

    def kill_worker(self, name: str) -> None:
        """SIGKILL worker ``name`` and every process below it (the task processes too), as a lost machine.

        Nothing is restarted; its running task instances stop heartbeating and the scheduler retries them.
        """
        service = self.services[name]
        if not service.running:
            raise ClusterError(f"{name} is not running")
        self.killed.add(name)
        self._kill(service)

    def crash_and_restart(self, name: str) -> None:
        """SIGKILL service ``name`` (a scheduler, the triggerer, ...) and everything below it, then start it again.

        The new process writes its log from the start (the old one's output is gone).
        """
        service = self.services[name]
        if not service.running:
            raise ClusterError(f"{name} is not running")
        self._kill(service)
        self._launch(service, self.env)

    def _kill(self, service: Service) -> None:
        """SIGKILL ``service`` and every process group below it, and wait for it to end."""
        # Frozen first, then listed again: a process forked between the listing and the kill (a new task
        # process leads a group of its own) would otherwise live on (and a worker's would run tasks under its name).
        groups = _process_groups(service.process)
        for pgid in groups:
            _signal_group(pgid, signal.SIGSTOP)
        groups += [pgid for pgid in _process_groups(service.process) if pgid not in groups]
        for pgid in groups:
            _signal_group(pgid, signal.SIGKILL)
        service.process.wait(timeout=10)  # type: ignore[union-attr]

    def worker_running(self, pid: int) -> str | None:
        """The live worker whose process tree holds process ``pid`` (e.g. a task's process), or ``None``."""
        import psutil

        for name in self.worker_names:
            service = self.services.get(name)
            if service is None or not service.running:
                continue
            with contextlib.suppress(psutil.Error):
                leader = psutil.Process(service.process.pid)  # type: ignore[union-attr]
                if pid == leader.pid or any(child.pid == pid for child in leader.children(recursive=True)):
                    return name
        return None

    def failure_report(self, run: DagRunResult, characters: int = 2500) -> str:
        """Each task's states and the end of the logs of every task instance that did not succeed."""
        lines = [f"run {run.run_id} of {run.dag_id}: {run.state}; tasks {run.states()}"]
        logs = self.root / "home" / "logs" / f"dag_id={run.dag_id}" / f"run_id={run.run_id}"
        unfinished = {ti["task_id"] for ti in run.task_instances if ti["state"] not in ("success", "skipped")}
        for task_id in sorted(unfinished):
            for log in sorted((logs / f"task_id={task_id}").rglob("attempt=*.log")):
                lines.append(f"--- {log.relative_to(logs)}\n{log.read_text(errors='replace')[-characters:]}")
        return "\n".join(lines)

    # ----------------------------------------------------------------------------------------------
    # REST API

    def request(self, method: str, path: str, *, timeout: float = 30, **kwargs: Any) -> Any:
        """Call the REST API (the simple auth manager lets every request in as admin); the JSON answer.

        Raises:
            ClusterError: The API answered with an error status.
        """
        import requests

        if self._session is None:
            self._session = requests.Session()
        response = self._session.request(method, self.api_url + path, timeout=timeout, **kwargs)
        if response.status_code >= 400:
            raise ClusterError(f"{method} {path}: HTTP {response.status_code} {response.text[:2000]}")
        return response.json() if response.content else None

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """The DAG's details once the DAG processor has parsed it.

        Raises:
            ClusterError: Not parsed within ``timeout`` seconds (the import errors are in the message).
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.request("GET", f"/api/v2/dags/{dag_id}")
            except ClusterError as exc:
                if time.monotonic() > deadline:
                    errors = self.request("GET", "/api/v2/importErrors")
                    raise ClusterError(
                        f"DAG {dag_id!r} was not parsed in {timeout:.0f}s; import errors: {errors}"
                    ) from exc
                time.sleep(0.5)

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
        """Unpause ``dag_id`` (once parsed) and start a run of it with ``conf``; the run id."""
        self.wait_for_dag(dag_id)
        self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})
        run = self.request(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": dict(conf or {})}
        )
        return run["dag_run_id"]

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run (mapped ones one by one), with state, hostname, pid and try number."""
        found: list[dict[str, Any]] = []
        while True:
            page = self.request(
                "GET",
                f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances",
                params={"limit": 100, "offset": len(found)},
            )
            found += page["task_instances"]
            if len(found) >= page["total_entries"] or not page["task_instances"]:
                return found

    def tries(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> list[dict[str, Any]]:
        """Every try of one task instance (hostname, pid, state of each), the first first."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/{map_index}/tries"
        return sorted(self.request("GET", path)["task_instances"], key=lambda ti: ti["try_number"])

    def xcom(self, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> Any:
        """What a task instance returned."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        return self.request("GET", path, params={"map_index": map_index, "deserialize": True})["value"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 180.0, poll: float = 0.5) -> DagRunResult:
        """Poll the run until it succeeded or failed, or ``timeout`` seconds passed (its state then as it is)."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            self._check_alive()
            state = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in FINISHED_RUN_STATES:
                break
            time.sleep(poll)
        return DagRunResult(dag_id, run_id, state, self.task_instances(dag_id, run_id))

    def run_dag(self, dag_id: str, conf: Mapping[str, Any] | None = None, timeout: float = 180.0) -> DagRunResult:
        """Trigger a run of ``dag_id`` and wait for it."""
        return self.wait_for_run(dag_id, self.trigger(dag_id, conf), timeout)


def _process_groups(process: subprocess.Popen[bytes] | None) -> list[int]:
    """The process groups of ``process`` and of everything below it (task processes lead groups of their own)."""
    if process is None or process.poll() is not None:
        return [process.pid] if process is not None else []
    import psutil

    groups = [process.pid]
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(process.pid).children(recursive=True):
            with contextlib.suppress(OSError):
                pgid = os.getpgid(child.pid)
                if pgid not in groups:
                    groups.append(pgid)
    return groups


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


@contextlib.contextmanager
def running_cluster(root: Path, **options: Any) -> Iterator[AirflowCluster]:
    """A started :class:`AirflowCluster` for the ``with`` block, stopped afterwards."""
    cluster = AirflowCluster(root, **options)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
