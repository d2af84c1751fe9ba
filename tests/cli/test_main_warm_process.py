"""``tests.support.warm_cli`` runs ``iceberg-ops`` as ``subprocess.run`` would: the tests that use it rely on that."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import warm_cli

BIN = Path(sys.executable).parent / "iceberg-ops"


def test_exit_status_streams_folder_and_environment_are_the_commands_own(tmp_path: Path):
    (tmp_path / "iceberg-ops.yaml").write_text("catalog: {kind: sqlite, db_path: missing.db}\nnamespace: sales\n")
    env = {**os.environ, "ICEBERG_OPS_WARM_CHECK": "1"}

    warm = warm_cli.run(BIN, ["status"], cwd=tmp_path, env=env, timeout=60)
    fresh = subprocess.run([str(BIN), "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    assert warm.returncode == fresh.returncode != 0  # the project file of the folder was read, and refused
    assert (warm.stdout, warm.stderr) == (fresh.stdout, fresh.stderr)
    assert "missing.db" in warm.stderr


def test_a_usage_error_exits_2_and_an_unknown_command_is_named():
    result = warm_cli.run(BIN, ["no-such-command"], timeout=60)

    assert result.returncode == 2
    assert "No such command 'no-such-command'" in result.stderr and result.stdout == ""


def test_a_command_past_its_timeout_is_stopped(tmp_path: Path):
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_slow.py").write_text(
        "import time\n"
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n"
        "    def upgrade(self, ctx):\n"
        "        time.sleep(120)\n"
    )
    flags = ["--catalog", "sqlite", "--db-path", "c.db", "--warehouse", "w", "--namespace", "sales"]
    started = time.monotonic()

    with pytest.raises(subprocess.TimeoutExpired):
        warm_cli.run(BIN, [*flags, "--migrations-dir", "migrations", "upgrade"], cwd=tmp_path, timeout=5)

    assert time.monotonic() - started < 60
