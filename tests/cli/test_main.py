"""The CLI end to end, with click's runner and as a real subprocess, on a real SQLite catalog:
init -> revision --autogenerate -> upgrade -> change the model -> revision --autogenerate -> plan ->
upgrade -> check 0 -> downgrade base -> check 1. Every generated file is read, imported and run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.migration.discovery import discover

ORDERS_V1 = """\
name: orders
columns:
  - {name: id, type: long, required: true, doc: "order id"}
  - {name: ts, type: timestamptz}
  - {name: email, type: string}
partition_by: ["day(ts)"]
sort_by: ["ts desc"]
identifier_fields: [id]
"""

ORDERS_V2 = """\
name: orders
columns:
  - {name: id, type: long, required: true, doc: "order id"}
  - {name: customer_email, type: string, renamed_from: email}
  - {name: ts, type: timestamptz}
  - {name: amount, type: "decimal(12,2)"}
partition_by: ["day(ts)", "bucket(16, id)"]
sort_by: ["ts desc"]
properties: {owner: sales}
identifier_fields: [id]
"""

BIN = Path(sys.executable).parent / "iceberg-ops"


def _invoke(project: Path, *args: str, code: int = 0):
    result = CliRunner().invoke(cli, ["--config", str(project / "iceberg-ops.yaml"), *args], catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr if result.stderr_bytes else "")
    return result


def _review(path: Path) -> None:
    """A generated migration must be valid Python that discovery accepts."""
    compile(path.read_text(), str(path), "exec")
    assert any(script.path == path for script in discover(path.parent))


def test_the_whole_workflow_with_clicks_runner(tmp_path):
    project = tmp_path / "project"
    result = CliRunner().invoke(cli, ["--namespace", "sales", "init", str(project)], catch_exceptions=False)
    assert result.exit_code == 0 and "iceberg-ops.yaml" in result.output
    assert "namespace: sales" in (project / "iceberg-ops.yaml").read_text()
    (project / "models" / "orders.yaml").write_text(ORDERS_V1)

    first = _invoke(project, "revision", "-m", "create orders", "--autogenerate")
    written = project / "migrations" / "0001_create_orders.py"
    assert f"wrote {written}" in first.output and "[safe] create table orders" in first.output
    _review(written)
    _invoke(project, "upgrade")
    assert (project / "local_data" / "iceberg_catalog.db").is_file()  # local_data next to the config
    assert _invoke(project, "check").output.startswith("sales: up to date")

    (project / "models" / "orders.yaml").write_text(ORDERS_V2)
    drift = _invoke(project, "check", code=1)
    assert "drift [review] rename column orders.email to customer_email" in drift.output
    second = _invoke(project, "revision", "-m", "rename email add amount", "--autogenerate", "--target-table", "orders")
    written_second = project / "migrations" / "0002_rename_email_add_amount.py"
    assert written_second.exists() and '"orders"' in written_second.read_text()  # bare name kept
    assert "[review] partition orders by bucket(16, id)" in second.output
    _review(written_second)

    plan = json.loads(_invoke(project, "--json", "plan").stdout)["steps"]
    assert [step["version"] for step in plan] == ["0002"]
    assert {"operation": "rename column orders.email to customer_email", "risk": "review"} in plan[0]["operations"]
    upgraded = json.loads(_invoke(project, "--json", "upgrade").stdout)
    assert [(r["version"], r["status"]) for r in upgraded] == [("0002", "applied")]
    assert _invoke(project, "check").exit_code == 0
    assert _invoke(project, "current").stdout.strip() == "0002"

    status = json.loads(_invoke(project, "--json", "status").stdout)
    assert status["current"] == "0002" and status["pending"] == []
    history = json.loads(_invoke(project, "--json", "history").stdout)
    assert [row["version"] for row in history] == ["0001", "0002"]

    # 0002 renamed, added and re-partitioned: all reversible, so base is reachable.
    downgraded = _invoke(project, "downgrade", "base")
    assert "rolled_back" in downgraded.output
    failing = _invoke(project, "check", code=1)
    assert "pending 0001 create orders" in failing.output
    assert _invoke(project, "current").stdout.strip() == "base"
    assert _invoke(project, "unlock").stdout.strip() == "The namespace was not locked."
    # The audit trail keeps every state each version went through; `history` only the latest.
    trail = _invoke(project, "history", "--events").stdout
    assert [line.split()[2] for line in trail.splitlines()[2:]] == ["applied", "applied", "rolled_back", "rolled_back"]
    assert "rolled back 0001 create orders in " in trail


@pytest.mark.long  # the same workflow as above, each step a process of its own (about 20 s)
def test_the_workflow_as_a_real_subprocess(tmp_path):
    project = tmp_path / "project"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN), "--config", str(project / "iceberg-ops.yaml"), *args],
            capture_output=True,
            text=True,
            timeout=300,
        )

    assert run("--namespace", "sales", "init", str(project)).returncode == 0
    (project / "models" / "orders.yaml").write_text(ORDERS_V1)
    assert run("revision", "-m", "create orders", "--autogenerate").returncode == 0
    upgraded = run("upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "[1/1] applying 0001 create orders" in upgraded.stderr  # progress on stderr
    assert run("check").returncode == 0
    (project / "models" / "orders.yaml").write_text(ORDERS_V2)
    assert run("check").returncode == 1
    assert run("revision", "-m", "v2", "--autogenerate").returncode == 0
    assert run("upgrade").returncode == 0
    assert run("check").returncode == 0
    assert run("downgrade", "base").returncode == 0
    final = run("--json", "check")
    assert final.returncode == 1
    assert json.loads(final.stdout)["ok"] is False
    (project / "migrations" / "0003_boom.py").write_text(
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        raise RuntimeError('boom')\n"
    )
    failed = run("upgrade", "0003")
    assert failed.returncode == 1 and failed.stderr.count("0003 FAILED") == 1, failed.stderr  # not twice
    assert failed.stderr.rstrip().splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize("flag", ["--db-path", "--warehouse"])
def test_sqlite_location_options(tmp_path, flag):
    project = tmp_path / "p"
    CliRunner().invoke(cli, ["--namespace", "ns", "init", str(project)])
    (project / "migrations" / "0001_x.py").write_text(
        "from iceberg_ops_provider.migration import BaseMigration\n"
        "class Migration(BaseMigration):\n"
        "    def upgrade(self, ctx):\n"
        "        ctx.catalog.create_namespace_if_not_exists('ns')\n"
    )
    target = tmp_path / ("other.db" if flag == "--db-path" else "other_wh")
    _invoke(project, flag, str(target), "upgrade")
    assert target.exists()
