"""``check`` lints the pending migrations (``--no-lint`` skips it), judged against the live tables."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.migrations import write_migration


def make_lake(tmp_path: Path) -> Path:
    """sales.events holding rows, 0001 applied, 0002 (dropping a column of it) pending."""
    migrations = tmp_path / "migrations"
    write_migration(
        migrations,
        "0001_events.py",
        'ctx.create_table("events", pa.schema([pa.field("id", pa.int64()), pa.field("legacy", pa.string())]))',
    )
    write_migration(migrations, "0002_drop_legacy.py", 'ctx.drop_column("events", "legacy")')
    result = _cli(tmp_path, "upgrade", "0001")
    assert result.exit_code == 0, result.output
    table = sqlite_catalog(tmp_path).load_table("sales.events")
    table.append(pa.table({"id": [1], "legacy": ["x"]}, schema=table.schema().as_arrow()))
    return tmp_path


@pytest.fixture
def lake(lake: Lake) -> Path:
    """sales.events holding rows, 0001 applied, 0002 (dropping a column of it) pending."""
    return make_lake(lake.root)


def _cli(root: Path, *args: str):
    options = [*sqlite_flags(root), "--namespace", "sales", "--migrations-dir", str(root / "migrations")]
    return CliRunner().invoke(cli, [*options, *args])


def test_check_lists_the_pending_migrations_findings(lake):
    result = _cli(lake, "check")
    assert result.exit_code == 1
    assert "lint " in result.stdout and "0002_drop_legacy.py:" in result.stdout and "[drop-column]" in result.stdout
    report = json.loads(_cli(lake, "--json", "check").stdout)
    assert [f["rule"] for f in report["findings"]] == ["drop-column"] and report["findings"][0]["severity"] == "error"


def test_no_lint_skips_it(lake):
    report = json.loads(_cli(lake, "--json", "check", "--no-lint").stdout)
    assert report["findings"] == [] and [step["version"] for step in report["pending"]] == ["0002"]


def test_a_failing_finding_is_listed_with_its_fix_above_what_does_not_fail(lake):
    result = _cli(lake, "check")

    lines = result.stdout.splitlines()
    assert lines[0] == "sales: NOT up to date"
    assert any(line.startswith("  lint ") and "(error)" in line for line in lines)
    assert any(line.strip().startswith("fix: ") for line in lines)
    assert "not failing the check:" not in result.stdout


def test_an_allowed_finding_and_an_info_one_are_shown_as_not_failing(lake):
    (lake / "migrations" / "0002_drop_legacy.py").unlink()
    write_migration(
        lake / "migrations",
        "0002_drop_legacy.py",
        'ctx.drop_column("events", "legacy")  # iceberg-ops: allow=drop-column reason="archived in events_archive"',
    )
    write_migration(
        lake / "migrations",
        "0003_empty.py",
        'ctx.create_table("scratch", pa.schema([pa.field("id", pa.int64())]))',
        'ctx.drop_table("scratch")',
    )

    result = _cli(lake, "check")

    head, _, passing = result.stdout.partition("not failing the check:\n")
    assert "allowed (archived in events_archive): " in passing and "[drop-column]" in passing
    assert "info: " in passing and "[drop-table]" in passing
    assert "lint " not in head and "(allowed" not in head
    assert result.exit_code == 1  # still pending, not because of the findings
    assert "pending 0002" in head
