"""``maintain compact --plan``, ``--units FILE`` and ``--unit ID``: the plan as text and JSON, a subset of
units run, the same units file run by two processes at once (each unit committed exactly once), and
the bad inputs, each refused naming the option as typed, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import BIN, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import live_data_files, rows, small_files_table


@pytest.fixture
def lake(lake: Lake) -> Path:
    """``sales.events``: 8 small files in each of its partitions (``category``)."""
    small_files_table(lake.catalog(), "sales.events", appends=8, rows=20, partitioned=True)
    return lake.root


def _invoke(lake: Path, *args: str):
    return CliRunner().invoke(cli, [*sqlite_flags(lake), *args])


def _plan(lake: Path) -> dict:
    result = _invoke(lake, "--json", "maintain", "compact", "sales.events", "--plan")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_plan_lists_the_units_in_text_and_json_and_writes_nothing(lake):
    location = sqlite_catalog(lake).load_table("sales.events").metadata_location
    plan = _plan(lake)
    assert plan["table"] == "sales.events" and len(plan["units"]) >= 2
    assert all(len(unit["data_files"]) == 8 and unit["unit_id"] for unit in plan["units"])
    text = _invoke(lake, "maintain", "compact", "sales.events", "--plan").stdout
    assert f"sales.events: {len(plan['units'])} unit(s), {8 * len(plan['units'])} small file(s)" in text
    assert plan["units"][0]["unit_id"] in text and "--unit 1" in text
    only = _invoke(lake, "--json", "maintain", "compact", "sales.events", "--plan", "--unit", "2")
    assert [unit["index"] for unit in json.loads(only.stdout)["units"]] == [2]
    assert sqlite_catalog(lake).load_table("sales.events").metadata_location == location


def test_a_subset_of_units_runs_and_the_rest_later_each_once(lake, tmp_path):
    before = rows(sqlite_catalog(lake).load_table("sales.events"))
    plan = _plan(lake)
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(plan))
    first = plan["units"][0]

    one = _invoke(
        lake, "--json", "maintain", "compact", "sales.events", "--units", str(saved), "--unit", first["unit_id"]
    )
    assert one.exit_code == 0, one.output
    result = json.loads(one.stdout)
    assert (result["committed_groups_count"], result["rewritten_data_files_count"]) == (1, 8)

    rest = _invoke(lake, "maintain", "compact", "--units", str(saved))  # TABLE from the file
    assert rest.exit_code == 0, rest.output
    assert "1 skipped (another run had already compacted their files)" in rest.stdout
    table = sqlite_catalog(lake).load_table("sales.events")
    assert rows(table) == before and len(live_data_files(table)) == len(plan["units"])

    again = _invoke(lake, "maintain", "compact", "sales.events", "--unit", "1")  # a fresh plan has nothing left
    assert again.exit_code == 2 and "'--unit'" in again.stderr and "is not a unit of the plan" in again.stderr


def test_two_processes_running_the_same_units_commit_each_unit_once(lake, tmp_path):
    import subprocess

    before = rows(sqlite_catalog(lake).load_table("sales.events"))
    saved = tmp_path / "plan.json"
    saved.write_text(json.dumps(_plan(lake)))
    command = [str(BIN), *sqlite_flags(lake), "--json", "maintain", "compact", "--units", str(saved), "--no-progress"]
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120) for process in processes]
    results = []
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        # A process whose commit lost the race with every retry reports a transient conflict (exit 1).
        assert process.returncode in (0, 1), stderr
        if process.returncode == 0:
            results.append(json.loads(stdout))
    assert results
    committed = sum(result["committed_groups_count"] for result in results)
    units = len(json.loads(saved.read_text())["units"])
    table = sqlite_catalog(lake).load_table("sales.events")
    assert rows(table) == before  # no row lost or doubled
    assert len(live_data_files(table)) == units and committed <= units
    replaces = [s for s in table.snapshots() if s.summary and s.summary.operation.value == "replace"]
    assert len(replaces) == units  # each unit committed exactly once


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--units", "{plan}", "--strategy", "sort"], ["--strategy with --units"]),
        (["--units", "{plan}", "--dry-run"], ["--dry-run with --units"]),
        (["--units", "{plan}", "--plan"], ["--plan and --units"]),
        (["--all", "--unit", "1"], ["--all with --units or --unit"]),
        (["--units", "{missing}"], ["'--units'", "cannot read"]),
        (["--units", "{notjson}"], ["'--units'", "is not JSON", "--plan --json"]),
        (["--units", "{notunit}"], ["'--units'", "entry 1", "is not a compaction unit"]),
        (["--units", "{plan}", "--unit", "zz"], ["'--unit'", "zz is not a unit of"]),
        (["sales.other", "--units", "{plan}"], ["'--units'", "has no unit of sales.other"]),
    ],
)
def test_bad_unit_options_are_refused_naming_the_option_and_nothing_is_written(lake, tmp_path, args, words):
    files = {
        "plan": tmp_path / "plan.json",
        "missing": tmp_path / "nope.json",
        "notjson": tmp_path / "bad.txt",
        "notunit": tmp_path / "notunit.json",
    }
    files["plan"].write_text(json.dumps(_plan(lake)))
    files["notjson"].write_text("units, please")
    files["notunit"].write_text(json.dumps([{"table": "sales.events"}]))
    location = sqlite_catalog(lake).load_table("sales.events").metadata_location
    typed = [arg.format(**files) for arg in args]
    if not typed[0].startswith("sales."):
        typed = ["sales" if "--all" in typed else "sales.events", *typed]
    result = _invoke(lake, "maintain", "compact", *typed)
    assert result.exit_code == 2, result.output
    for word in words:
        assert word in result.stderr, result.stderr
    assert sqlite_catalog(lake).load_table("sales.events").metadata_location == location


def test_a_plan_of_every_table_exits_non_zero_when_one_table_fails(lake, monkeypatch):
    small_files_table(sqlite_catalog(lake), "sales.other", appends=2, rows=20)
    from iceberg_ops_provider.maintenance import compaction_units

    planned = compaction_units.plan_compaction_units

    def failing(table, **options):
        if table.name()[-1] == "other":
            raise RuntimeError("storage did not answer")
        return planned(table, **options)

    monkeypatch.setattr(compaction_units, "plan_compaction_units", failing)
    result = _invoke(lake, "--json", "maintain", "compact", "--all", "sales", "--plan")
    assert result.exit_code == 1, result.output
    documents = {document["table"]: document for document in json.loads(result.stdout)}
    assert documents["sales.events"]["units"] and "error" in json.dumps(documents["sales.other"])
