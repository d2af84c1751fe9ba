"""A step that fails, as the commands show it: ``plan`` of a body that raises says the step failed and
exits 1 (human and ``--json``); ``status`` and ``history`` show a failed attempt's error, not only that
it failed. On a real SQLite catalog."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_flags
from tests.support.migrations import write_migration

CREATE = 'ctx.create_table("users", pa.schema([pa.field("id", pa.int64())]))'


def _cli(root: Path, *args: str):
    options = [*sqlite_flags(root), "--namespace", "sales", "--migrations-dir", str(root / "migrations")]
    return CliRunner().invoke(cli, [*options, *args])


def test_plan_of_a_body_that_raises_says_failed_and_exits_1(tmp_path: Path):
    write_migration(tmp_path / "migrations", "0001_users.py", CREATE)
    assert _cli(tmp_path, "upgrade").exit_code == 0
    write_migration(tmp_path / "migrations", "0002_boom.py", 'raise RuntimeError("boom")')

    result = _cli(tmp_path, "plan")

    assert result.exit_code == 1, result.output
    assert "upgrade 0002 boom  [failed]" in result.stdout
    assert "RuntimeError: boom" in result.stdout
    document = json.loads(_cli(tmp_path, "--json", "plan").stdout)
    step = document["steps"][0]
    assert step["risk"] == "failed" and step["complete"] is False
    assert _cli(tmp_path, "--json", "plan").exit_code == 1


def test_plan_of_a_misspelt_table_fails_and_names_the_close_one(tmp_path: Path):
    write_migration(tmp_path / "migrations", "0001_users.py", CREATE)
    assert _cli(tmp_path, "upgrade").exit_code == 0
    write_migration(tmp_path / "migrations", "0002_email.py", 'ctx.add_column("userz", "email", pa.string())')

    result = _cli(tmp_path, "plan")

    assert result.exit_code == 1
    assert "[failed]" in result.stdout and "Did you mean 'users'?" in result.stdout


def test_status_and_history_show_the_error_of_a_failed_attempt(tmp_path: Path):
    write_migration(tmp_path / "migrations", "0001_boom.py", 'raise RuntimeError("the disk is full")')
    assert _cli(tmp_path, "upgrade").exit_code == 1

    status = _cli(tmp_path, "status")
    history = _cli(tmp_path, "history")

    assert "failed: RuntimeError: the disk is full" in status.stdout
    assert "0001 failed: RuntimeError: the disk is full" in history.stdout
    assert json.loads(_cli(tmp_path, "--json", "status").stdout)["errors"] == {"0001": "RuntimeError: the disk is full"}
    assert json.loads(_cli(tmp_path, "--json", "history").stdout)[0]["error"] == "RuntimeError: the disk is full"


def test_status_without_the_files_shows_the_error_too(tmp_path: Path):
    write_migration(tmp_path / "migrations", "0001_boom.py", 'raise RuntimeError("the disk is full")')
    assert _cli(tmp_path, "upgrade").exit_code == 1

    result = CliRunner().invoke(cli, [*sqlite_flags(tmp_path), "--namespace", "sales", "status"])

    assert "failed:    0001: its last attempt failed: RuntimeError: the disk is full" in result.stdout
