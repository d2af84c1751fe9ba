"""``iceberg-ops move ...`` run for real: subprocesses against SQLite catalogs (and SeaweedFS's S3 Tables
catalog), a move interrupted with SIGINT (once: it stops between units; twice: it abandons the unit
at once) and resumed by the same command, ending with exactly the source's rows."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.data_migration.results import MoveResult
from tests.cli.ops_support import run, seaweedfs_project, sqlite_catalog, sqlite_flags, start
from tests.support.lake import Lake
from tests.support.tables import files_on_disk, live_data_files, rows, small_files_table

SOURCE_FILES, ROWS_PER_FILE = 8, 50
SLOW_SOURCE_FILES = 40  # one unit each: a move long enough to interrupt


@pytest.fixture
def lake(lake: Lake) -> Path:
    """A SQLite catalog with ``sales.events``: 8 appends of 50 rows (one small file each)."""
    small_files_table(lake.catalog(), "sales.events", appends=SOURCE_FILES, rows=ROWS_PER_FILE)
    return lake.root


def _ids(table: Any) -> Counter[int]:
    table.refresh()
    return Counter(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def _target_snapshots(catalog: Any, name: str) -> int:
    try:
        return len(catalog.load_table(name).snapshots())
    except Exception:  # not created yet, or the database is busy with the move's commit
        return 0


def _interrupt(process: subprocess.Popen[str], catalog: Any, target: str, after: int, signals: int) -> tuple[str, str]:
    """Send ``signals`` SIGINTs once ``target`` has ``after`` snapshots; the process's stdout and stderr.

    The process must exit 130 (interrupted).
    """
    deadline = time.monotonic() + 90
    while _target_snapshots(catalog, target) < after:
        assert process.poll() is None, f"the move ended before it was interrupted: {process.communicate()}"
        assert time.monotonic() < deadline, "the move made no progress"
        time.sleep(0.02)
    for number in range(signals):
        if number:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, (stdout, stderr)
    return stdout, stderr


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_a_move_interrupted_by_ctrl_c_resumes_with_the_same_command_and_ends_with_exactly_the_source_rows(tmp_path):
    lake = tmp_path
    catalog = sqlite_catalog(lake)
    source = small_files_table(catalog, "sales.events", appends=SLOW_SOURCE_FILES, rows=ROWS_PER_FILE)
    command = [
        *sqlite_flags(lake),
        "--json",
        "move",
        "sales.events",
        "archive.events",
        "--create-target",
        "--commit-every-bytes",
        "1",  # one unit per source file
        "--parallelism",
        "1",
    ]

    # Ctrl-C once: the unit being committed finishes, the one copied ahead is discarded, exit 130.
    stdout, stderr = _interrupt(start(lake, *command), catalog, "archive.events", after=2, signals=1)
    partial = json.loads(stdout)
    assert partial["complete"] is False and 2 <= partial["units_committed"] < SLOW_SOURCE_FILES, stderr
    assert "Stopping once the unit being committed is in" in stderr
    assert f"Run the same command again to resume (or pass --move-id {partial['move_id']}" in stderr
    target = catalog.load_table("archive.events")
    assert sum(_ids(target).values()) == partial["units_committed"] * ROWS_PER_FILE  # whole units only
    folder = Path(target.location().removeprefix("file://"))
    data = {path for path in files_on_disk(folder) if path.endswith(".parquet")}
    assert data == {f.file_path.removeprefix("file://") for f in live_data_files(target)}  # nothing left behind

    # Ctrl-C twice: the unit in flight is abandoned at once; still whole units only.
    target.refresh()
    after = len(target.snapshots()) + 2
    stdout, stderr = _interrupt(start(lake, *command), catalog, "archive.events", after=after, signals=2)
    assert "interrupted: move sales.events-to-archive.events-" in stderr
    document = json.loads(stdout)  # the error, or what the run did when the first Ctrl-C was enough
    assert document.get("exit_code") == 130 or document.get("complete") is False
    moved = sum(_ids(target).values())
    assert moved % ROWS_PER_FILE == 0 and moved < SLOW_SOURCE_FILES * ROWS_PER_FILE

    # The same command again finishes the move: every source row exactly once.
    finished = run(lake, *command, "--verify", "checksum")
    assert finished.returncode == 0, finished.stderr
    result = json.loads(finished.stdout)
    assert result["complete"] is True and result["verify"]["ok"] is True
    assert _ids(target) == _ids(source) and rows(target) == rows(source)


def test_move_prints_the_result_on_stdout_progress_on_stderr_and_a_rerun_changes_nothing(lake):
    moved = run(
        lake,
        *sqlite_flags(lake),
        "--json",
        "move",
        "sales.events",
        "archive.events",
        "--create-target",
        "--commit-every-bytes",
        "5KiB",
        "--verify",
        "count",
    )

    assert moved.returncode == 0, moved.stderr
    result = json.loads(moved.stdout)
    assert set(result) == {
        *MoveResult("m", "s", "t", "append", None, 0, 0, 0, 0, 0, 0, 0, 0.0, True).to_json(),
        "notes",
    }
    assert result["complete"] and result["rows"] == SOURCE_FILES * ROWS_PER_FILE and result["verify"]["ok"]
    lines = moved.stderr.splitlines()
    assert lines and all(line.startswith("move sales.events -> archive.events: ") for line in lines), moved.stderr
    assert f"unit {result['units_total']} of {result['units_total']} done" in lines[-1]

    again = run(lake, *sqlite_flags(lake), "move", "sales.events", "archive.events", "--create-target", "--no-progress")
    assert again.returncode == 0 and again.stderr == ""
    assert ": complete" in again.stdout and "this run: 0 unit(s) committed" in again.stdout
    catalog = sqlite_catalog(lake)
    assert rows(catalog.load_table("archive.events")) == rows(catalog.load_table("sales.events"))


def test_a_new_move_whose_where_selects_no_row_in_the_target_only_notes_the_earlier_one(lake):
    flags = [*sqlite_flags(lake), "--json", "move", "sales.events", "archive.events", "--no-progress"]
    first = run(lake, *flags, "--create-target", "--where", "id < 100")
    assert first.returncode == 0, first.stderr

    second = run(lake, *flags, "--where", "id >= 100")

    assert second.returncode == 0, second.stderr
    (note,) = json.loads(second.stdout)["notes"]
    assert "none of the rows they select is there yet" in note and "warning" not in second.stderr
    moved = _ids(sqlite_catalog(lake).load_table("archive.events"))
    assert sorted(moved.values()) == [1] * SOURCE_FILES * ROWS_PER_FILE


def test_a_rerun_with_other_options_is_a_new_move_and_says_the_target_holds_the_earlier_one(lake):
    flags = sqlite_flags(lake)
    first = run(lake, *flags, "--json", "move", "sales.events", "archive.events", "--create-target", "--no-progress")
    assert first.returncode == 0, first.stderr
    first_id = json.loads(first.stdout)["move_id"]
    assert json.loads(first.stdout)["notes"] == []

    other = run(lake, *flags, "--json", "move", "sales.events", "archive.events", "--columns", "id", "--no-progress")
    assert other.returncode == 0, other.stderr
    result = json.loads(other.stdout)
    (note,) = result["notes"]
    assert result["move_id"] != first_id
    assert f"archive.events already holds rows of 1 other move(s) from sales.events: {first_id} (400 rows)" in note
    assert note.startswith("warning: ") and "400 of its rows already match what this move selects" in note
    assert "they will be there twice. To avoid duplicates" in note and "--move-id" in note
    assert note in other.stderr and f"note: {note}" not in other.stderr
    catalog = sqlite_catalog(lake)
    assert len(rows(catalog.load_table("archive.events"))) == 2 * SOURCE_FILES * ROWS_PER_FILE  # as the note says

    verified = run(lake, *flags, "move", "verify", "sales.events", "archive.events")
    assert verified.returncode == 0 and "400 source rows, 400 rows of this move in the target" in verified.stdout


def test_plan_changes_nothing_and_verify_exits_1_when_the_target_lost_rows(lake):
    flags = sqlite_flags(lake)
    planned = run(
        lake,
        *flags,
        "--json",
        "move",
        "plan",
        "sales.events",
        "archive.events",
        "--create-target",
        "--commit-every-bytes",
        "1",
    )
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert len(plan["units"]) == SOURCE_FILES and plan["done"] == [] and plan["target_exists"] is False
    catalog = sqlite_catalog(lake)
    assert not catalog.table_exists("archive.events")

    assert (
        run(lake, *flags, "move", "sales.events", "archive.events", "--create-target", "--no-progress").returncode == 0
    )
    verified = run(lake, *flags, "--json", "move", "verify", "sales.events", "archive.events", "--method", "checksum")
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True, verified.stderr

    catalog.load_table("archive.events").delete("id < 10")
    different = run(lake, *flags, "move", "verify", "sales.events", "archive.events")
    assert different.returncode == 1 and "verify (count): DIFFERENT" in different.stdout


def test_the_target_may_live_in_another_catalog(lake, tmp_path):
    other = tmp_path / "other"
    result = CliRunner().invoke(
        cli,
        [
            *sqlite_flags(lake),
            "move",
            "--where",  # options before the tables: still the move itself
            "id < 200",
            "sales.events",
            "sales.events",
            "--create-target",
            "--columns",
            "id,note",
            "--rename",
            "note=comment",
            "--target-db-path",
            str(other / "catalog.db"),
            "--target-warehouse",
            str(other / "warehouse"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    moved = sqlite_catalog(other).load_table("sales.events")
    assert moved.schema().column_names == ["id", "comment"]
    assert _ids(moved) == Counter(range(200))


def test_source_and_target_from_two_airflow_connections_keep_stdout_for_the_json(lake, tmp_path):
    def connection(root: Path) -> str:
        extra = Lake(root).extra
        return json.dumps({"conn_type": "iceberg_ops", "extra": extra})

    env = {
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW_CONN_LAKE": connection(lake),
        "AIRFLOW_CONN_ARCHIVE": connection(tmp_path / "archive"),
    }
    command = ["--conn-id", "lake", "--json", "move", "sales.events", "sales.events", "--target-conn-id", "archive"]

    moved = run(lake, *command, "--create-target", "--verify", "count", "--no-progress", env=env)

    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["verify"]["ok"] is True  # nothing of Airflow's logging on stdout
    archived = sqlite_catalog(tmp_path / "archive").load_table("sales.events")
    assert rows(archived) == rows(sqlite_catalog(lake).load_table("sales.events"))


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["sales.events", "archive.events"], "pass --create-target to create it"),
        (
            ["sales.events", "archive.events", "--rename", "note"],
            "Invalid value for --rename: 'note' is not NAME=VALUE",
        ),
        (["sales.events", "archive.events", "--where", "id >"], "Invalid value for '--where': 'id >' does not parse"),
        (["sales.events", "archive.events", "--create-target", "--where", "x = 1"], "--where 'x = 1' does not fit"),
        (["sales.events", "archive.events", "--commit-every-bytes", "0"], "'0' must be at least 1 byte"),
        (["sales.events", "archive.events", "--mode", "upsert"], "Invalid value for '--mode'"),
        (["sales.events", "sales.events"], "Source and target are the same table"),
        (
            ["sales.events", "archive.events", "--target-catalog-uri", "http://x"],
            "The target catalog: --target-catalog-uri",
        ),
        (["verify", "sales.events", "archive.events", "--create-target"], "has not finished"),
    ],
)
def test_bad_input_exits_2_with_a_message_naming_the_option(lake, arguments, expected):
    result = CliRunner().invoke(cli, [*sqlite_flags(lake), "move", *arguments])
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.stderr.split()), result.stderr
    assert not sqlite_catalog(lake).table_exists("archive.events")


@pytest.mark.backends
def test_move_on_seaweedfs_s3_tables(seaweedfs, unique_name, tmp_path):
    seaweedfs.create_table_bucket(unique_name)
    catalog = seaweedfs.rest_catalog(unique_name)
    source = small_files_table(catalog, f"{unique_name}.events", appends=4, rows=40)
    config = seaweedfs_project(tmp_path / "project", seaweedfs, unique_name)
    command = ["--config", str(config), "--json", "move", f"{unique_name}.events", f"{unique_name}.archive"]

    moved = run(tmp_path, *command, "--create-target", "--commit-every-bytes", "1", "--verify", "checksum")

    assert moved.returncode == 0, moved.stderr
    result = json.loads(moved.stdout)
    assert result["complete"] and result["units_committed"] == 4 and result["verify"]["ok"]
    target = catalog.load_table(f"{unique_name}.archive")
    assert rows(target) == rows(source)
    assert all(f.file_path.startswith("s3://") for f in live_data_files(target))


def test_count_and_sample_do_not_vouch_for_a_target_other_writers_changed_after_its_files_were_rewritten(lake):
    flags = sqlite_flags(lake)
    # The move and the JSON reports run the command in this process; the verdicts at the end come from
    # the real command (the tests above run every other step of a move as one).
    move = ["move", "sales.events", "archive.events", "--create-target", "--no-progress"]
    moved = CliRunner().invoke(cli, [*flags, *move])
    assert moved.exit_code == 0, moved.output
    target = sqlite_catalog(lake).load_table("archive.events")
    foreign = target.scan(row_filter="id >= 395").to_arrow()  # 5 rows of another writer: same shape, ids 1000+
    ids = pa.array(range(1000, 1005), pa.int64())
    target.append(foreign.set_column(0, foreign.schema.field("id"), ids))
    target.delete("id < 5")  # 5 moved rows gone: the target again holds 400 rows

    for method in ("count", "sample"):
        arguments = ["--json", "move", "verify", "sales.events", "archive.events", "--method", method]
        verified = CliRunner().invoke(cli, [*flags, *arguments])
        assert verified.exit_code == 1, verified.output
        report = json.loads(verified.stdout)
        assert report["ok"] is False and report["source_rows"] == report["target_rows"] == 400
        details = report["details"]
        if method == "count" or not details["missing_count"]:  # the sample may have picked a deleted row
            assert "run verify with method checksum" in details["untrusted"] and "(append)" in details["untrusted"]
    human = run(lake, *flags, "move", "verify", "sales.events", "archive.events")
    assert human.returncode == 1 and "verify (count): CANNOT TELL" in human.stdout
    checksum = run(lake, *flags, "move", "verify", "sales.events", "archive.events", "--method", "checksum")
    assert checksum.returncode == 1 and "verify (checksum): DIFFERENT" in checksum.stdout


def test_count_still_vouches_for_a_target_only_compacted_after_the_move(lake):
    flags = sqlite_flags(lake)
    moved = ["move", "sales.events", "archive.events", "--create-target", "--commit-every-bytes", "1"]
    assert run(lake, *flags, *moved, "--no-progress").returncode == 0
    assert run(lake, *flags, "maintain", "compact", "archive.events", "--no-progress").returncode == 0

    verified = run(lake, *flags, "--json", "move", "verify", "sales.events", "archive.events")
    report = json.loads(verified.stdout)
    assert verified.returncode == 0 and report["ok"] is True, verified.stdout
    assert report["details"]["scope"] == "table" and report["details"]["foreign_changes"] == []


def test_json_after_the_subcommand_and_ctrl_c_in_plan_or_verify_exit_130_with_the_json_error(lake, monkeypatch):
    planned = run(
        lake, *sqlite_flags(lake), "move", "plan", "sales.events", "archive.events", "--create-target", "--json"
    )
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["target_exists"] is False

    # Ctrl-C at a chosen moment cannot be timed in a subprocess: the interrupt is raised inside the engine call.
    from iceberg_ops_provider.data_migration import DataMover

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(DataMover, "plan", interrupted)
    monkeypatch.setattr(DataMover, "verify", interrupted)
    for command, said in (("plan", "plan changes nothing"), ("verify", "verify changes nothing")):
        arguments = ["move", command, "sales.events", "archive.events", "--create-target", "--json"]
        result = CliRunner().invoke(cli, [*sqlite_flags(lake), *arguments])
        assert result.exit_code == 130, result.output
        error = json.loads(result.stdout)
        assert error["type"] == "KeyboardInterrupt" and error["exit_code"] == 130 and said in error["error"]
        assert f"interrupted: stopped while {command}" in result.stderr and "Aborted!" not in result.stderr


# --- ``move --json plan A B``: a flag typed between ``move`` and its subcommand belongs to the subcommand, as
# ``maintain --json health`` does; ``move A B`` still runs the default ``run``.


def test_a_flag_before_the_subcommand_is_the_subcommands(tmp_path):
    catalog = sqlite_catalog(tmp_path)
    catalog.create_namespace("shop")
    source = catalog.create_table("shop.visits", pa.schema([pa.field("id", pa.int64())]))
    source.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    catalog.create_table("shop.copy", source.schema())

    before = CliRunner().invoke(cli, [*sqlite_flags(tmp_path), "move", "--json", "plan", "shop.visits", "shop.copy"])
    after = CliRunner().invoke(cli, [*sqlite_flags(tmp_path), "move", "plan", "shop.visits", "shop.copy", "--json"])
    assert before.exit_code == after.exit_code == 0, before.output
    assert json.loads(before.stdout)["units"] == json.loads(after.stdout)["units"]

    default = CliRunner().invoke(cli, [*sqlite_flags(tmp_path), "move", "shop.visits", "shop.copy", "--json"])
    assert default.exit_code == 0, default.output
    assert json.loads(default.stdout)["rows"] == 3
