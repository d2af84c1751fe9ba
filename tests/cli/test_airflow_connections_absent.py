"""``move --target-conn-id`` where Airflow is not installed says what to install, as ``--conn-id`` does.

Airflow is installed on this machine, so the CLI runs in a fresh interpreter where ``import airflow``
fails (``sys.modules['airflow'] = None``): that stands in for a machine without it, the one thing that
cannot run here for real. The source catalog is a real SQLite catalog.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from tests.support.lake import Lake


def test_a_target_connection_without_airflow_says_what_to_install(tmp_path: Path):
    catalog = Lake(tmp_path).catalog()
    catalog.create_namespace("sales")
    catalog.create_table("sales.orders", pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
    catalog.close()
    arguments = [
        "--catalog", "sqlite", "--db-path", str(tmp_path / "catalog.db"), "--warehouse", str(tmp_path / "warehouse"),
        "move", "sales.orders", "archive.orders", "--target-conn-id", "archive", "--create-target",
    ]  # fmt: skip
    code = (
        "import sys\n"
        "sys.modules['airflow'] = None\n"
        "from iceberg_ops_provider.cli import main\n"
        f"sys.argv = ['iceberg-ops', *{arguments!r}]\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "TypeError" not in result.stderr, result.stderr
    assert "The target catalog: " in result.stderr
    assert "Airflow connection 'archive'" in result.stderr
    assert "pip install apache-airflow" in result.stderr
