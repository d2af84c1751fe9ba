"""``iceberg-ops lint``: exit codes 0, 1 and 2, text, JSON and GitHub annotations, the project's folder by
default, and drops judged against the catalog the global options name."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_catalog, sqlite_flags

DROP = textwrap.dedent(
    """\
    from iceberg_ops_provider.migration import BaseMigration


    class Migration(BaseMigration):
        def upgrade(self, ctx):
            ctx.drop_column("events", "legacy"){pragma}

        def downgrade(self, ctx):
            ctx.add_column("events", "legacy", "string")
    """
)


def _folder(root: Path, pragma: str = "") -> Path:
    folder = root / "migrations"
    folder.mkdir(exist_ok=True)
    (folder / "0001_drop_legacy.py").write_text(DROP.format(pragma=pragma))
    return folder


def _lint(*args: str):
    return CliRunner().invoke(cli, ["lint", *args])


def test_a_finding_exits_1_with_its_line_and_fix(tmp_path):
    result = _lint(str(_folder(tmp_path)))
    assert result.exit_code == 1, result.output
    assert "0001_drop_legacy.py:6: [drop-column] (error)" in result.stdout and "fix:" in result.stdout


def test_an_allowed_finding_exits_0(tmp_path):
    folder = _folder(tmp_path, '  # iceberg-ops: allow=drop-column reason="moved to events_archive"')
    result = _lint(str(folder))
    assert result.exit_code == 0, result.output
    assert "(allowed: moved to events_archive)" in result.stdout and result.stdout.rstrip().endswith(": ok")


def test_json_and_github_output(tmp_path):
    folder = _folder(tmp_path)
    data = json.loads(_lint(str(folder), "--json").stdout)
    assert data["ok"] is False and [f["rule"] for f in data["findings"]] == ["drop-column"]
    assert json.loads(_lint(str(folder), "--format", "json").stdout) == data
    github = _lint(str(folder), "--format", "github")
    assert github.exit_code == 1
    assert github.stdout.startswith(f"::error file={folder / '0001_drop_legacy.py'},line=6,title=drop-column::")


def test_usage_errors_exit_2(tmp_path):
    missing = _lint(str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert _lint(str(tmp_path), "--format", "xml").exit_code == 2


def test_list_rules_prints_every_rule():
    result = _lint("--list-rules")
    assert result.exit_code == 0 and "drop-column" in result.stdout and "direct-write" in result.stdout


def test_the_catalog_options_judge_drops_against_live_tables(tmp_path):
    catalog = sqlite_catalog(tmp_path)
    catalog.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("legacy", pa.string())])
    catalog.create_table("sales.events", schema)
    folder = _folder(tmp_path)
    flags = [*sqlite_flags(tmp_path), "--namespace", "sales"]

    empty = CliRunner().invoke(cli, [*flags, "lint", str(folder)])
    assert empty.exit_code == 0 and "(info)" in empty.stdout and "holds no rows" in empty.stdout

    catalog.load_table("sales.events").append(pa.table({"id": [1], "legacy": ["x"]}, schema=schema))
    full = CliRunner().invoke(cli, [*flags, "lint", str(folder)])
    assert full.exit_code == 1 and "holds 1 rows" in full.stdout


def test_without_paths_the_project_migrations_folder_is_linted(tmp_path):
    sqlite_catalog(tmp_path)  # the catalog the options name exists (lint never creates one)
    folder = _folder(tmp_path)
    result = CliRunner().invoke(
        cli, [*sqlite_flags(tmp_path), "--namespace", "sales", "--migrations-dir", str(folder), "lint"]
    )
    # Judged against the catalog the options name, where sales.events does not exist yet: nothing is lost.
    assert result.exit_code == 0 and "0001_drop_legacy.py:6: [drop-column] (info)" in result.stdout
