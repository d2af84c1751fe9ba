"""The commit mode on the command line: ``status`` shows it, ``upgrade``/``downgrade --no-atomic`` turn it off.

On the project's own SQLite catalog, through click's runner.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli

MIGRATION = """\
import pyarrow as pa
from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    def upgrade(self, ctx):
        ctx.create_table("{name}", pa.schema([("id", pa.int64())]))
        ctx.create_table("{name}_items", pa.schema([("id", pa.int64())]))

    def downgrade(self, ctx):
        ctx.drop_table("{name}")
        ctx.drop_table("{name}_items")
"""


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "p"
    assert CliRunner().invoke(cli, ["--namespace", "sales", "init", str(root)]).exit_code == 0
    for number, name in ((1, "orders"), (2, "refunds")):
        (root / "migrations" / f"000{number}_{name}.py").write_text(MIGRATION.format(name=name))
    return root


def _run(project: Path, *args: str):
    result = CliRunner().invoke(cli, ["--config", str(project / "iceberg-ops.yaml"), *args], catch_exceptions=False)
    assert result.exit_code == 0, (result.output, result.stderr)
    return result


def test_status_shows_how_migrations_commit(project):
    line = next(line for line in _run(project, "status").stdout.splitlines() if line.startswith("commits:"))
    assert line.startswith("commits:   all-or-nothing (PyIceberg's SQL catalog: one database transaction")
    plan = json.loads(_run(project, "--json", "plan").stdout)
    assert plan["commit_mode"] == "all-or-nothing"  # the same words as status
    assert line.endswith("(sql-transaction))")
    status = json.loads(_run(project, "--json", "status").stdout)
    assert status["commit_mode"] == plan["commit_mode"] and status["commit_mode_reason"].endswith("(sql-transaction)")


def test_upgrade_and_downgrade_commit_all_or_nothing_unless_told_not_to(project):
    first = json.loads(_run(project, "--json", "upgrade", "+1").stdout)
    assert [(r["version"], r["atomic"], r["not_atomic_reason"]) for r in first] == [("0001", True, None)]
    assert first[0]["outside_atomic_commit"] == ["create namespace sales"]

    second = _run(project, "upgrade", "--no-atomic")
    header, _, row = second.stdout.splitlines()[:3]
    assert header.split() == ["version", "description", "status", "duration", "commit"]
    assert row.split()[0] == "0002" and row.split()[-1] == "table-by-table"
    assert "(all-or-nothing, with its history record)" not in second.stderr

    rolled_back = json.loads(_run(project, "--json", "downgrade", "-1", "--no-atomic").stdout)
    assert [(r["version"], r["status"], r["atomic"]) for r in rolled_back] == [("0002", "rolled_back", False)]
    assert rolled_back[0]["not_atomic_reason"] == "all-or-nothing commits are turned off (atomic_commits=False)"
    assert rolled_back[0]["outside_atomic_commit"] == ["sales.refunds (drop)", "sales.refunds_items (drop)"]

    again = _run(project, "upgrade")
    assert again.stdout.splitlines()[2].split()[-1] == "all-or-nothing"
    assert "0002 applied in" in again.stderr and "(all-or-nothing, with its history record)" in again.stderr
    stamped = _run(project, "stamp", "0001")
    assert stamped.stdout.splitlines()[2].split()[-2:] == ["rolled_back", "0.00s"]  # no commit column: a stamp
