"""``iceberg-ops policy show|set``: real processes on a SQLite catalog."""

from __future__ import annotations

import json
import subprocess

import pyarrow as pa
import pytest

from tests.cli.ops_support import run
from tests.support.lake import Lake

SCHEMA = pa.schema([pa.field("id", pa.int64())])


@pytest.fixture
def tables(lake: Lake):
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    return catalog.create_table("sales.a", SCHEMA), catalog.create_table("sales.b", SCHEMA)


def _ops(lake: Lake, *args: str) -> subprocess.CompletedProcess[str]:
    return run(lake.root, *lake.flags, *args)


def test_set_then_show_round_trips_and_empty_value_restores_the_default(lake, tables):
    done = _ops(
        lake, "policy", "set", "sales.a", "quiet-hours=01-05", "enabled=false", "write.target-file-size-bytes=1000"
    )
    assert done.returncode == 0, done.stderr
    assert "sales.a: set iceberg-ops.maintenance.quiet-hours=01-05" in done.stdout
    properties = lake.catalog().load_table("sales.a").properties
    assert properties["iceberg-ops.maintenance.enabled"] == "false"
    assert properties["write.target-file-size-bytes"] == "1000"

    shown = _ops(lake, "--json", "policy", "show", "sales.a")
    assert shown.returncode == 0, shown.stderr
    values = {v["key"]: v for v in json.loads(shown.stdout)["values"]}
    assert values["iceberg-ops.maintenance.enabled"]["value"] is False
    assert values["iceberg-ops.maintenance.enabled"]["source"] == "iceberg-ops.maintenance.enabled"
    assert values["iceberg-ops.maintenance.quiet-hours"]["value"] == [[1, 5]]
    assert values["iceberg-ops.maintenance.min-input-files"]["source"] == "default"
    assert values["iceberg-ops.maintenance.min-input-files"]["value"] == 5
    human = _ops(lake, "policy", "show", "sales.a")
    assert human.stdout.startswith("sales.a: maintenance off (no maintenance runs)")

    location = lake.catalog().load_table("sales.a").metadata_location
    again = _ops(lake, "policy", "set", "sales.a", "enabled=false")
    assert again.returncode == 0 and "nothing to change; no commit made" in again.stdout
    assert lake.catalog().load_table("sales.a").metadata_location == location

    removed = _ops(lake, "policy", "set", "sales.a", "enabled=")
    assert removed.returncode == 0, removed.stderr
    assert "removed iceberg-ops.maintenance.enabled (its default applies)" in removed.stdout
    assert "iceberg-ops.maintenance.enabled" not in lake.catalog().load_table("sales.a").properties
    shown = json.loads(_ops(lake, "--json", "policy", "show", "sales.a").stdout)
    assert shown["enabled"] is True and shown["values"][0]["source"] == "default"


def test_bad_keys_and_values_are_refused_before_any_commit(lake, tables):
    location = lake.catalog().load_table("sales.a").metadata_location
    unknown = _ops(lake, "policy", "set", "sales.a", "enabled=false", "quiet-hour=01-05")
    assert unknown.returncode == 2
    assert "'quiet-hour' is not a maintenance policy key (did you mean 'iceberg-ops.maintenance.quiet-hours'?)" in (
        unknown.stderr
    )
    bad = _ops(lake, "policy", "set", "sales.a", "enabled=yes", "small-file-share=1.5", "orphan-age=soon")
    assert bad.returncode == 2
    assert "iceberg-ops.maintenance.enabled='yes' is not accepted: it takes true or false" in bad.stderr
    assert (
        "iceberg-ops.maintenance.small-file-share='1.5' is not accepted: it takes a number >= 0 and < 1" in bad.stderr
    )
    assert "iceberg-ops.maintenance.orphan-age='soon' is not accepted" in bad.stderr
    hours = _ops(lake, "policy", "set", "sales.a", "quiet-hours=25-03")
    assert hours.returncode == 2 and "UTC hour ranges" in hours.stderr
    other = _ops(lake, "policy", "set", "sales.a", "owner=sales")
    assert other.returncode == 2 and "'owner' is not a maintenance policy key" in other.stderr
    malformed = _ops(lake, "policy", "set", "sales.a", "enabled")
    assert malformed.returncode == 2 and "is not KEY=VALUE" in malformed.stderr
    assert lake.catalog().load_table("sales.a").metadata_location == location


def test_show_names_a_bad_property_written_by_another_engine(lake, tables):
    with tables[0].transaction() as transaction:
        transaction.set_properties({"iceberg-ops.maintenance.max-rewrite-bytes": "lots"})
    shown = _ops(lake, "policy", "show", "sales.a")
    assert shown.returncode == 2
    assert "iceberg-ops.maintenance.max-rewrite-bytes='lots' is not accepted" in shown.stderr
    assert "an integer >= 1 (bytes), or none for no limit" in shown.stderr
    fixed = _ops(lake, "policy", "set", "sales.a", "max-rewrite-bytes=")
    assert fixed.returncode == 0, fixed.stderr
    assert _ops(lake, "policy", "show", "sales.a").returncode == 0


def _small_files(table, count: int) -> None:
    for start in range(count):
        table.append(pa.table({"id": pa.array([start], pa.int64())}))


def test_maintenance_skips_disabled_and_quiet_tables_and_a_bad_policy_stops_only_its_table(lake, tables):
    a, b = tables
    _small_files(a, 6)
    _small_files(b, 6)
    catalog = lake.catalog()
    catalog.create_table("sales.c", SCHEMA)
    _small_files(catalog.load_table("sales.c"), 6)
    assert _ops(lake, "policy", "set", "sales.a", "enabled=false").returncode == 0
    every_hour = "00-24"
    assert _ops(lake, "policy", "set", "sales.b", f"quiet-hours={every_hour}").returncode == 0
    with catalog.load_table("sales.c").transaction() as transaction:
        transaction.set_properties({"iceberg-ops.maintenance.min-input-files": "many"})

    health = _ops(lake, "--json", "maintain", "health", "--all", "sales")
    reports = {report["table"]: report for report in json.loads(health.stdout)}
    assert reports["sales.a"]["policy_enabled"] is False and reports["sales.a"]["recommendations"] == []
    assert reports["sales.b"]["needs"] == ["compact"]  # quiet hours stop runs, not the report
    assert reports["sales.c"]["exit_code"] == 2
    assert "iceberg-ops.maintenance.min-input-files='many' is not accepted" in reports["sales.c"]["error"]

    before = {name: catalog.load_table(name).metadata_location for name in ("sales.a", "sales.b", "sales.c")}
    compact = _ops(lake, "maintain", "compact", "--all", "sales", "--no-progress")
    assert compact.returncode == 2
    assert (
        "sales.a: skipped: maintenance is off by its policy (iceberg-ops.maintenance.enabled=false)" in compact.stdout
    )
    assert "sales.b: skipped: inside its quiet hours (iceberg-ops.maintenance.quiet-hours=00-24, UTC)" in compact.stdout
    assert "iceberg-ops.maintenance.min-input-files='many' is not accepted" in compact.stderr
    assert "error: sales.c: maintenance policy: " in compact.stderr  # the table named once
    assert {name: lake.catalog().load_table(name).metadata_location for name in before} == before

    # The bad value fixed, the same run compacts sales.c; the other two tables are still skipped.
    assert _ops(lake, "policy", "set", "sales.c", "min-input-files=6").returncode == 0
    compact = _ops(lake, "maintain", "compact", "--all", "sales", "--no-progress")
    assert compact.returncode == 0, compact.stderr
    assert "sales.c: rewrote 6 small file(s)" in compact.stdout
    assert len(list(lake.catalog().load_table("sales.c").scan().plan_files())) == 1
    assert lake.catalog().load_table("sales.a").metadata_location == before["sales.a"]


def test_compaction_rewrites_at_most_the_policys_bytes_per_run(lake, tables):
    a, _ = tables
    # Two partitions' worth of groups: a tiny target makes each file its own group of one output file.
    assert (
        _ops(lake, "policy", "set", "sales.a", "write.target-file-size-bytes=100000", "min-input-files=1").returncode
        == 0
    )
    _small_files(a, 4)
    sizes = sorted(task.file.file_size_in_bytes for task in lake.catalog().load_table("sales.a").scan().plan_files())
    one_file = max(sizes)
    assert _ops(lake, "policy", "set", "sales.a", f"max-rewrite-bytes={one_file}").returncode == 0
    dry = _ops(lake, "--json", "maintain", "compact", "sales.a", "--dry-run")
    planned = json.loads(dry.stdout)
    assert planned["rewritten_bytes_count"] <= one_file
    assert planned["deferred_groups_count"] >= 1
    plan = json.loads(_ops(lake, "--json", "maintain", "compact", "sales.a", "--plan").stdout)
    assert plan["units"] == []  # the one group does not fit in the run's limit
    uncapped = _ops(lake, "policy", "set", "sales.a", "max-rewrite-bytes=")
    assert uncapped.returncode == 0
    full = json.loads(_ops(lake, "--json", "maintain", "compact", "sales.a", "--dry-run").stdout)
    assert full["deferred_groups_count"] == 0 and full["rewritten_bytes_count"] == sum(sizes)
    plan = json.loads(_ops(lake, "--json", "maintain", "compact", "sales.a", "--plan").stdout)
    assert len(plan["units"]) == 1 and plan["units"][0]["bytes"] == sum(sizes)


def test_a_migration_setting_a_bad_policy_value_fails_before_its_commit(lake, tables):
    from tests.cli.ops_support import CommandLake
    from tests.support.migrations import write_migration

    command = CommandLake(lake.root)
    write_migration(
        command.migrations, "0001_policy.py", 'ctx.set_properties("a", {"iceberg-ops.maintenance.quiet-hours": "1-5"})'
    )
    write_migration(
        command.migrations, "0002_bad_policy.py", 'ctx.set_properties("a", {"iceberg-ops.maintenance.enabled": "off"})'
    )
    location = lake.catalog().load_table("sales.a").metadata_location
    done = command.run("upgrade")
    assert done.returncode != 0
    assert "iceberg-ops.maintenance.enabled='off' is not accepted: it takes true or false" in done.stdout + done.stderr
    table = lake.catalog().load_table("sales.a")
    assert table.properties.get("iceberg-ops.maintenance.quiet-hours") == "1-5"  # the first migration committed
    assert "iceberg-ops.maintenance.enabled" not in table.properties
    assert table.metadata_location != location


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["policy", "show", "sales.nope"], "table 'sales.nope' does not exist in the catalog (tables of sales: a, b)."),
        (["policy", "set", "sales", "enabled=false"], "'sales' is a namespace: name a table as sales.TABLE."),
        (["tag", "list", "a"], "'a' has no namespace: name it as namespace.table (or pass --namespace)."),
    ],
)
def test_one_table_commands_do_not_suggest_an_all_flag_they_lack(lake, tables, args, expected):
    refused = _ops(lake, *args)
    assert refused.returncode == 2
    assert expected in " ".join(refused.stderr.split())
    assert "--all" not in refused.stderr
