"""``iceberg-ops lint`` on the command line: namespace subfolders and an empty folder, a catalog that cannot
be reached, the rules as JSON, what it needs without a project file, no namespace to judge live in,
and ``check`` judging a restore after the upgrade that drops its column."""

from __future__ import annotations

import json

import pyarrow as pa
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_catalog, sqlite_flags
from tests.support.migrations import write_migration


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
