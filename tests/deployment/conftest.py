"""One real Airflow deployment per test module: CeleryExecutor with two workers, PostgreSQL, Redis.

Skipped, with one line saying why, where PostgreSQL or Redis do not answer on loopback or the
Celery provider is not installed (``pip install -e '.[dev]'`` installs it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.deployment.cluster import AirflowCluster, running_cluster, unavailable_reason


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowCluster]:
    """A started deployment with two Celery workers, shared by the module's tests, stopped by PID at the end.

    The stop (every process group by PID, then the databases dropped and the Redis database flushed)
    runs when the module's tests are done, whether they passed or not, and when the start fails.
    """
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    with running_cluster(tmp_path_factory.mktemp("cluster"), workers=2, worker_concurrency=2) as deployment:
        print(f"deployment ready in {time.monotonic() - started:.1f}s at {deployment.api_url}")
        yield deployment
