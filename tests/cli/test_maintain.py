"""``iceberg-ops maintain ...`` run for real: subprocesses against a SQLite catalog (and SeaweedFS's S3
Tables catalog), checking exit codes, the JSON on stdout, progress on stderr, and the tables after."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyiceberg.transforms import IdentityTransform

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.maintenance.compaction import CompactionResult
from tests.cli.ops_support import run, seaweedfs_project, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import live_data_files, rows, small_files_table


@pytest.fixture
def lake(lake: Lake) -> Path:
    """A SQLite catalog with ``sales.events`` (12 small files in 2 partitions) and ``sales.tidy`` (one file)."""
    catalog = lake.catalog()
    small_files_table(catalog, "sales.events", appends=6, rows=50, partitioned=True)
    small_files_table(catalog, "sales.tidy", appends=1, rows=50)
    return lake.root


def _json(result) -> object:
    assert result.stdout.lstrip().startswith(("{", "[")), result.stdout
    return json.loads(result.stdout)


def test_health_exits_1_when_maintenance_is_due_and_0_when_not(lake):
    tidy = run(lake, *sqlite_flags(lake), "--json", "maintain", "health", "sales.tidy")
    assert tidy.returncode == 0, tidy.stderr
    assert _json(tidy)["healthy"] is True and tidy.stderr == ""

    # The real command above and below; the report of every table and the usage error in this process.
    every = CliRunner().invoke(cli, [*sqlite_flags(lake), "--json", "maintain", "health", "--all", "sales"])
    assert every.exit_code == 1, every.output
    reports = {report["table"]: report for report in _json(every)}
    assert reports["sales.events"]["needs"] == ["compact"] and reports["sales.tidy"]["needs"] == []

    human = run(lake, *sqlite_flags(lake), "maintain", "health", "sales.events")
    assert human.returncode == 1
    assert human.stdout.startswith("sales.events: needs compact") and "maintain compact sales.events" in human.stdout

    bad = CliRunner().invoke(
        cli, [*sqlite_flags(lake), "maintain", "health", "sales.events", "--threshold", "max_snapshots=0"]
    )
    assert bad.exit_code == 2 and "'--threshold'" in bad.stderr and "max_snapshots" in bad.stderr


def test_compact_shows_progress_on_stderr_and_prints_only_the_result_on_stdout(lake):
    table = sqlite_catalog(lake).load_table("sales.events")
    before = rows(table)

    result = run(
        lake, *sqlite_flags(lake), "--json", "maintain", "compact", "sales.events", "--target-file-size", "1MiB"
    )

    assert result.returncode == 0, result.stderr
    document = _json(result)
    assert set(document) == set(CompactionResult("t", False, "binpack", 1).to_json())  # the operators' XCom
    assert document["rewritten_data_files_count"] == 12 and document["committed_groups_count"] == 2
    progress = result.stderr.splitlines()
    assert progress and all(line.startswith("compact sales.events: ") for line in progress), result.stderr
    assert "12 of 12 files" in progress[-1] and "group 2 of 2 done" in progress[-1]
    table.refresh()
    assert rows(table) == before and len(live_data_files(table)) == 2

    again = run(lake, *sqlite_flags(lake), "maintain", "compact", "sales.events", "--target-file-size", "1MiB")
    assert again.returncode == 0 and "nothing to compact" in again.stdout and again.stderr == ""


def test_manifests_expire_and_orphans_change_the_table_as_asked(lake):
    catalog = sqlite_catalog(lake)
    table = catalog.load_table("sales.events")
    flags = sqlite_flags(lake)

    # Each command that changes the table runs for real; its dry run runs in this process.
    planned = CliRunner().invoke(cli, [*flags, "--json", "maintain", "manifests", "sales.events", "--dry-run"])
    assert planned.exit_code == 0, planned.output
    assert _json(planned)["rewritten_manifests_count"] == 6
    table.refresh()
    assert len(table.current_snapshot().manifests(table.io)) == 6  # a dry run changes nothing

    rewritten = run(lake, *flags, "--json", "maintain", "manifests", "sales.events")
    assert rewritten.returncode == 0 and _json(rewritten)["added_manifests_count"] == 1
    table.refresh()
    assert len(table.current_snapshot().manifests(table.io)) == 1

    expired = run(
        lake, *flags, "--json", "maintain", "expire", "sales.events", "--older-than", "0s", "--retain-last", "2"
    )
    assert expired.returncode == 0, expired.stderr
    assert len(_json(expired)["expired_snapshot_ids"]) == 5  # 6 appends and the manifest rewrite, 2 kept
    table.refresh()
    assert len(table.snapshots()) == 2

    orphan = Path(table.location().removeprefix("file://")) / "data" / "leftover.parquet"
    orphan.write_bytes(b"not referenced")
    os.utime(orphan, (orphan.stat().st_mtime - 60,) * 2)
    listed = CliRunner().invoke(
        cli, [*flags, "--json", "maintain", "orphans", "sales.events", "--older-than", "0s", "--dry-run"]
    )
    assert listed.exit_code == 0 and [
        p.endswith("leftover.parquet") for p in _json(listed)["orphan_file_locations"]
    ] == [True]
    assert orphan.exists()
    removed = run(lake, *flags, "maintain", "orphans", "sales.events", "--older-than", "0s")
    assert removed.returncode == 0 and "deleted 1 of 1 orphan file(s)" in removed.stdout
    assert not orphan.exists()


def test_all_reports_a_failing_table_and_goes_on_with_the_others(lake):
    catalog = sqlite_catalog(lake)
    small_files_table(catalog, "sales.sorted", appends=6, rows=50)
    with catalog.load_table("sales.sorted").update_sort_order() as order:
        order.asc("id", IdentityTransform())

    result = run(lake, *sqlite_flags(lake), "--json", "maintain", "compact", "--all", "sales", "--strategy", "sort")

    assert result.returncode == 2
    documents = {document["table"]: document for document in _json(result)}
    assert documents["sales.sorted"]["rewritten_data_files_count"] == 6
    assert documents["sales.events"]["exit_code"] == 2 and "'--strategy'" in documents["sales.events"]["error"]
    assert "error: sales.events: Invalid value for '--strategy'" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["expire", "sales.events", "--older-than", "3x"], "Invalid value for '--older-than': '3x' is not an age"),
        (["compact", "sales.events", "--target-file-size", "12zz"], "Invalid value for '--target-file-size'"),
        (
            ["compact", "sales.events", "--where", "nope = 1"],
            "Invalid value for '--where': --where 'nope = 1' does not fit",
        ),
        (
            ["compact", "sales.events", "--where", "category ="],
            "Invalid value for '--where': 'category =' does not parse",
        ),
        (["compact", "sales.events", "--strategy", "sort"], "Invalid value for '--strategy'"),
        (["expire", "sales.events", "--retain-last", "0"], "Invalid value for '--retain-last'"),
        (["health", "sales.events", "--threshold", "nonsense=1"], "Unknown health threshold(s) ['nonsense']"),
        (["health", "sales.events", "--threshold", "nope"], "'nope' is not NAME=VALUE"),
        (["compact", "sales.missing"], "Invalid value for 'TABLE': table 'sales.missing' does not exist"),
        (["compact", "events"], "'events' has no namespace"),
        (["compact", "--all", "archive"], "namespace 'archive' does not exist"),
        (["orphans"], "name a table (namespace.table), or a namespace with --all"),
        (["expire", "sales.events", "--older-than", "2999-01-01"], "'--older-than': '2999-01-01' is in the future"),
        (["orphans", "sales.events", "--older-than", "2999-01-01T00:00:00"], "'2999-01-01T00:00:00' is in the future"),
        (["health", "sales.events", "--threshold", "x"], "'x' is not NAME=VALUE (for example max_snapshots=100)"),
        (["health", "sales"], "'sales' is a namespace: pass --all to work on every table of it"),
        (["health", "--all", "sales.events"], "'sales.events' is a table, not a namespace: leave out --all"),
    ],
)
def test_bad_input_exits_2_naming_the_option_and_changes_nothing(lake, arguments, expected):
    snapshot = sqlite_catalog(lake).load_table("sales.events").current_snapshot().snapshot_id

    result = CliRunner().invoke(cli, [*sqlite_flags(lake), "maintain", *arguments])

    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.stderr.split()), result.stderr
    assert sqlite_catalog(lake).load_table("sales.events").current_snapshot().snapshot_id == snapshot


def test_a_bare_table_name_is_read_in_the_namespace_option(lake):
    result = CliRunner().invoke(
        cli, [*sqlite_flags(lake), "--namespace", "sales", "--json", "maintain", "health", "tidy"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["table"] == "sales.tidy"


@pytest.mark.backends
def test_compact_and_health_on_seaweedfs_s3_tables(seaweedfs, unique_name, tmp_path):
    seaweedfs.create_table_bucket(unique_name)
    catalog = seaweedfs.rest_catalog(unique_name)
    table = small_files_table(catalog, f"{unique_name}.events", appends=6, rows=40, partitioned=True)
    before = rows(table)
    config = seaweedfs_project(tmp_path / "project", seaweedfs, unique_name)

    health = run(tmp_path, "--config", str(config), "--json", "maintain", "health", "events")
    assert health.returncode == 1 and _json(health)["needs"] == ["compact"], health.stderr

    compacted = run(
        tmp_path, "--config", str(config), "--json", "maintain", "compact", "--all", "--target-file-size", "1MiB"
    )
    assert compacted.returncode == 0, compacted.stderr
    [document] = _json(compacted)
    assert document["table"] == f"{unique_name}.events" and document["committed_groups_count"] == 2
    assert "12 of 12 files" in compacted.stderr
    table.refresh()
    assert rows(table) == before
    assert len(live_data_files(table)) == 2 and all(f.file_path.startswith("s3://") for f in live_data_files(table))


def test_json_is_accepted_after_the_subcommand_and_usage_errors_print_the_json_error(lake):
    after = run(lake, *sqlite_flags(lake), "maintain", "health", "--all", "sales", "--json")
    assert after.returncode == 1, after.stderr
    assert {report["table"] for report in _json(after)} == {"sales.events", "sales.tidy"}
    on_group = run(lake, *sqlite_flags(lake), "maintain", "--json", "health", "sales.tidy")
    assert on_group.returncode == 0 and _json(on_group)["healthy"] is True

    for arguments in (["--json", "maintain", "health", "sales.tidy", "--bogus"], ["maintain", "compact", "--json"]):
        usage = run(lake, *sqlite_flags(lake), *arguments)
        assert usage.returncode == 2, usage.stderr
        error = _json(usage)
        assert error["type"] == "UsageError" and error["exit_code"] == 2 and error["error"], error
        assert "Usage:" in usage.stderr


def test_ctrl_c_before_any_table_work_exits_130_with_the_json_error(lake, monkeypatch):
    # Ctrl-C at a chosen moment cannot be timed in a subprocess: the interrupt is raised where the catalog opens.
    import iceberg_ops_provider.cli.maintain_tables as cli_maintain

    def interrupted(settings, **options):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_maintain, "open_catalog", interrupted)
    result = CliRunner().invoke(cli, [*sqlite_flags(lake), "--json", "maintain", "compact", "sales.events"])

    assert result.exit_code == 130, result.output
    assert json.loads(result.stdout) == {
        "error": "stopped before any table was worked on; nothing was changed.",
        "type": "KeyboardInterrupt",
        "exit_code": 130,
    }
    assert "interrupted: stopped before any table" in result.stderr and "Aborted!" not in result.stderr


def test_ctrl_c_that_no_command_handles_exits_130_with_the_json_error(lake, monkeypatch):
    # The interrupt is raised where the command opens its catalog, as a Ctrl-C there would.
    from iceberg_ops_provider.cli.settings import Settings

    def interrupted(self, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Settings, "runner", interrupted)
    result = CliRunner().invoke(cli, [*sqlite_flags(lake), "--json", "status"])
    assert result.exit_code == 130, result.output
    assert json.loads(result.stdout)["exit_code"] == 130 and "interrupted: stopped by Ctrl-C" in result.stderr


def test_an_expiry_dry_run_shows_its_cut_off(tmp_path: Path):
    small_files_table(sqlite_catalog(tmp_path), "sales.events", appends=2, rows=5)
    flags = sqlite_flags(tmp_path)

    default = CliRunner().invoke(cli, [*flags, "maintain", "expire", "sales.events", "--dry-run"])
    given = CliRunner().invoke(
        cli, [*flags, "--json", "maintain", "expire", "sales.events", "--dry-run", "--older-than", "2026-01-02"]
    )

    assert default.exit_code == 0, default.output
    assert "would expire 0 snapshots (older than 20" in default.stdout  # the table's default: 5 days ago
    assert "at least the last 1 of each branch stay" in default.stdout
    assert json.loads(given.stdout)["older_than"] == "2026-01-02T00:00:00+00:00"


def test_compaction_warns_when_it_rewrites_the_values_of_a_dropped_column(tmp_path: Path):
    import pyarrow as pa

    catalog = sqlite_catalog(tmp_path)
    catalog.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("legacy", pa.string())])
    table = catalog.create_table("sales.events", schema)
    for i in range(3):
        table.append(pa.table({"id": [i], "legacy": [f"v{i}"]}, schema=schema))
    with table.update_schema() as update:
        update.delete_column("legacy")
    flags = [*sqlite_flags(tmp_path), "maintain", "compact", "sales.events", "--min-input-files", "2", "--no-progress"]

    planned = CliRunner().invoke(cli, [*flags, "--dry-run"])
    compacted = CliRunner().invoke(cli, flags)
    again = CliRunner().invoke(cli, [*flags, "--min-input-files", "1"])

    assert planned.exit_code == 0 and compacted.exit_code == 0, compacted.output
    for result in (planned, compacted):
        text = " ".join(result.stderr.split())
        assert "sales.events: compaction" in text and "values of dropped column legacy" in text
        assert 'ctx.restore_column("events", "legacy") would then bring back nulls' in text
    assert "dropped column" not in again.stderr  # nothing left to lose
