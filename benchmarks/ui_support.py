"""What the UI benchmarks share: the Airflow environment of a measuring child, its database, an app without auth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

UNCHECKED_APP = """
from fastapi.testclient import TestClient
from iceberg_ops_provider.ui.app import create_app
from airflow.api_fastapi.core_api.security import get_user
app = create_app()
for route in app.routes:  # the auth manager's check on each route: Airflow's, per request, left out here
    for dependency in getattr(route, "dependencies", []):
        app.dependency_overrides[dependency.dependency] = lambda: None
app.dependency_overrides[get_user] = lambda: None  # as is its user
client = TestClient(app)
"""
"""Code that makes ``client``, a test client of the pages with Airflow's auth checks left out (child's prelude)."""


def airflow_environment(root: Path, **settings: str) -> dict[str, str]:
    """This process's environment without its Airflow settings, plus an Airflow home in ``root`` and a
    connection ``bench`` to the SQLite catalog in ``root``; ``settings`` are ``[iceberg_ops]`` options."""
    connection = {
        "conn_type": "iceberg_ops",
        "extra": {"kind": "sqlite", "db_path": str(root / "catalog.db"), "warehouse_dir": str(root / "warehouse")},
    }
    return {
        **{key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")},
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        **{f"AIRFLOW__ICEBERG_OPS__{key.upper()}": value for key, value in settings.items()},
        "AIRFLOW_CONN_BENCH": json.dumps(connection),
        "PYTHONWARNINGS": "ignore",
    }


def airflow_db(environment: dict[str, str]) -> None:
    """Create (or migrate) Airflow's metadata database of ``environment``'s Airflow home."""
    Path(environment["AIRFLOW_HOME"]).mkdir(exist_ok=True)
    migrate = subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        env=environment,
        capture_output=True,
        text=True,
    )
    if migrate.returncode != 0:
        raise SystemExit(migrate.stderr[-3000:])
