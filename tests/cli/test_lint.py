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
from tests.support.migrations import write_migration

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


# --- ``iceberg-ops lint`` on the command line: namespace subfolders and an empty folder, a catalog that cannot
# be reached, the rules as JSON, what it needs without a project file, no namespace to judge live in,
# and ``check`` judging a restore after the upgrade that drops its column.


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_folder_of_namespace_subfolders_is_linted(tmp_path):
    write_migration(tmp_path / "migrations" / "sales", "0001_drop.py", 'ctx.drop_column("orders", "legacy")')
    result = _invoke("lint", str(tmp_path / "migrations"))
    assert result.exit_code == 1, result.output
    assert "sales/0001_drop.py:8: [drop-column] (error)" in result.stdout and "1 file(s)" in result.stdout


def test_a_folder_without_migration_files_warns_and_passes(tmp_path):
    (tmp_path / "migrations" / "sales").mkdir(parents=True)
    result = _invoke("lint", str(tmp_path / "migrations"))
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"warning: no migration file in {tmp_path / 'migrations'}: lint reads NNNN_slug.py")
    assert result.stderr.count("\n") == 1


def test_a_catalog_that_cannot_be_reached_leaves_the_findings_unjudged(tmp_path):
    write_migration(tmp_path, "0001_drop.py", 'ctx.drop_column("orders", "legacy")')
    result = _invoke(
        "--catalog",
        "rest",
        "--catalog-uri",
        "http://127.0.0.1:1",
        "--catalog-timeout",
        "3",
        "lint",
        "--live",
        str(tmp_path),
    )
    assert result.exit_code == 1, result.output
    assert "0001_drop.py:8: [drop-column] (error)" in result.stdout
    assert result.stderr.count("\n") == 1 and "http://127.0.0.1:1" in result.stderr
    assert "The findings are not judged live: each keeps its rule's severity." in result.stderr


def test_the_rules_as_json():
    for args in (["--json", "lint", "--list-rules"], ["lint", "--list-rules", "--format", "json"]):
        result = _invoke(*args)
        assert result.exit_code == 0, result.output
        rules = json.loads(result.stdout)
        drop = next(rule for rule in rules if rule["id"] == "drop-column")
        assert drop["severity"] == "error" and drop["effect"] and drop["fix"].endswith('reason="..."')


def test_without_paths_or_a_project_file_it_asks_for_the_migration_files_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _invoke("lint")
    assert result.exit_code == 2
    assert "needs only the migration files, no catalog" in result.output and "--migrations-dir DIR" in result.output
    assert "--catalog KIND" not in result.output and "--namespace NS" not in result.output


def test_live_without_a_namespace_says_how_to_give_one(tmp_path):
    sqlite_catalog(tmp_path).create_namespace("sales")
    write_migration(tmp_path / "migrations", "0001_drop.py", 'ctx.drop_column("orders", "legacy")')
    result = _invoke(*sqlite_flags(tmp_path), "lint", str(tmp_path / "migrations"))
    assert result.exit_code == 1, result.output
    assert "not judged live: no namespace to find orders in; give the namespace" in result.stdout
    assert "Empty namespace identifier" not in result.output


def test_check_judges_a_restore_once_the_pending_upgrade_dropping_its_column_has_run(tmp_path):
    migrations = tmp_path / "migrations"
    options = [*sqlite_flags(tmp_path), "--namespace", "sales", "--migrations-dir", str(migrations)]
    write_migration(
        migrations,
        "0001_events.py",
        'ctx.create_table("events", pa.schema([pa.field("id", pa.int64()), pa.field("legacy", pa.string())]))',
    )
    assert _invoke(*options, "upgrade", "0001").exit_code == 0
    table = sqlite_catalog(tmp_path).load_table("sales.events")
    table.append(pa.table({"id": [1], "legacy": ["x"]}, schema=table.schema().as_arrow()))
    write_migration(
        migrations,
        "0002_drop_legacy.py",
        'ctx.drop_column("events", "legacy")',
        'ctx.restore_column("events", "legacy")',
    )
    report = json.loads(_invoke(*options, "--json", "check").stdout)
    restore = next(f for f in report["findings"] if f["rule"] == "restore-column")
    assert restore["severity"] == "info" and "Rename or drop it first" not in restore["message"]
    assert "sales.events.legacy is live now: it is judged once the upgrade that drops it" in restore["message"]
