"""Airflow's own log lines stay off the command line's output when ``--conn-id`` makes it read a connection.

Airflow configures its logging when first imported and masks a connection's password as it reads it;
its secrets masker warns about every secret too short to mask. The command line prints no secret, so
that warning (or any other Airflow chatter below ERROR) must not reach its stderr, and nothing of
Airflow's may reach stdout, where ``--json`` goes. Run as real subprocesses: the logging Airflow sets
up is per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support import warm_cli
from tests.support.lake import Lake

BIN = Path(sys.executable).parent / "iceberg-ops"


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """A connection with a three-character password to a SQLite catalog holding ``sales.orders``."""
    where = tmp_path / "catalog"
    catalog = Lake(where).catalog()
    catalog.create_namespace("sales")
    catalog.create_table("sales.orders", schema=pa.schema([("id", pa.int64())]))
    catalog.close()
    connection = {
        "conn_type": "iceberg_ops",
        "login": "me",
        "password": "pw1",  # masked as Airflow reads it: too short to mask, so Airflow warns
        "extra": Lake(where).extra,
    }
    return {
        "PATH": str(Path(sys.executable).parent),
        "HOME": str(tmp_path),
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW_CONN_SHORT": json.dumps(connection),
    }


def _run(environment: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return warm_cli.run(BIN, ["--conn-id", "short", *args], env=environment, timeout=180)


def test_a_short_secret_brings_no_airflow_warning_to_stderr(environment):
    result = _run(environment, "maintain", "health", "sales.orders")

    assert result.returncode in (0, 1), result.stderr  # 1: maintenance due; either way it ran
    assert "sales.orders" in result.stdout
    assert "Skipping masking" not in result.stderr
    assert "secrets_masker" not in result.stderr
    assert "[warning" not in result.stderr, result.stderr


def test_with_json_stdout_holds_the_document_only(environment):
    result = _run(environment, "--json", "maintain", "health", "sales.orders")

    assert result.returncode in (0, 1), result.stderr
    document = json.loads(result.stdout)  # nothing of Airflow's before or after it
    assert document["table"] == "sales.orders"
    assert "Skipping masking" not in result.stderr


def test_an_undefined_connection_still_says_how_to_define_it(environment):
    result = warm_cli.run(
        BIN, ["--conn-id", "missing", "maintain", "health", "sales.orders"], env=environment, timeout=180
    )

    assert result.returncode == 2
    assert "Airflow connection 'missing' is not defined" in result.stderr
    assert "AIRFLOW_CONN_MISSING" in result.stderr
