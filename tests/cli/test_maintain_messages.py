"""What ``iceberg-ops maintain`` says, in the command line's words: the health report's ``run:`` lines
are commands to type (and typing them works), refusals name options as typed (``--strategy binpack``,
``--min-input-files``), and ``--min-input-files`` and ``--threshold min_input_files=`` follow the one
rule of the engine. Subprocesses against a real SQLite catalog in ``tmp_path``; the Python API's
wording of the same errors is checked alongside."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from pyiceberg.transforms import IdentityTransform

from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.health import HealthThresholds
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import live_data_files, rows, small_files_table


@pytest.fixture
def lake(lake: Lake) -> Path:
    """``sales.orders`` (8 small files, sorted by ``id``), ``sales.events`` (8 small files, no sort order)."""
    catalog = lake.catalog()
    orders = small_files_table(catalog, "sales.orders", appends=8, rows=50)
    with orders.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    small_files_table(catalog, "sales.events", appends=8, rows=50)
    return lake.root


def _run_lines(stdout: str) -> list[str]:
    return [line.strip() for line in stdout.splitlines() if line.strip().startswith(("run: ", "advice: "))]


def test_the_health_report_prints_the_command_to_type_and_typing_it_compacts(lake: Path):
    report = run(lake, *sqlite_flags(lake), "maintain", "health", "sales.orders", "--target-file-size", "4MiB")

    assert report.returncode == 1, report.stderr
    (line,) = _run_lines(report.stdout)
    command = line.removeprefix("run: ")
    assert command == (
        f"iceberg-ops {shlex.join(sqlite_flags(lake))} maintain compact sales.orders --target-file-size 4MiB "
        "--min-input-files 5 --strategy sort"
    )
    assert "compact_small_files_streaming(" not in report.stdout and "536870912" not in report.stdout

    before = rows(sqlite_catalog(lake).load_table("sales.orders"))
    typed = run(lake, *shlex.split(command.removeprefix("iceberg-ops ")), "--no-progress")
    assert typed.returncode == 0, typed.stderr
    table = sqlite_catalog(lake).load_table("sales.orders")
    assert rows(table) == before and len(live_data_files(table)) == 1
    assert run(lake, *sqlite_flags(lake), "maintain", "health", "sales.orders").returncode == 0


def test_the_json_and_the_python_summary_keep_the_python_call(lake: Path):
    document = json.loads(run(lake, *sqlite_flags(lake), "--json", "maintain", "health", "sales.events").stdout)

    (recommendation,) = document["recommendations"]
    assert recommendation["call"] == (
        "compact_small_files_streaming(table, target_file_size_bytes=536870912, min_input_files=5, where=None, "
        "strategy='binpack')"
    )
    assert "iceberg-ops" not in json.dumps(document)

    from iceberg_ops_provider.maintenance.health import table_health_report

    summary = table_health_report(sqlite_catalog(lake).load_table("sales.events")).summary()
    assert "run: compact_small_files_streaming(table, target_file_size_bytes=536870912," in summary


def test_an_expiry_recommendation_is_the_expire_command_with_an_age(lake: Path):
    report = run(
        lake,
        *sqlite_flags(lake),
        "maintain",
        "health",
        "sales.events",
        "--threshold",
        "max_snapshots=2",
        "--threshold",
        "min_input_files=100",
    )

    (line,) = _run_lines(report.stdout)
    assert line == (
        f"run: iceberg-ops {shlex.join(sqlite_flags(lake))} maintain expire sales.events --older-than 0s "
        "--retain-last 2"
    ), line
    lines = report.stdout.splitlines()
    reason = lines[lines.index(f"  {line}") - 1]
    assert reason.startswith("expire_snapshots: ") and "snapshots exceed max_snapshots=2" in reason, reason


def test_sort_on_a_table_without_a_sort_order_says_what_to_do_from_the_command_line(lake: Path):
    result = run(lake, *sqlite_flags(lake), "maintain", "compact", "sales.events", "--strategy", "sort")

    assert result.returncode == 2
    text = " ".join(result.stderr.split())
    assert "Invalid value for '--strategy': --strategy sort sorts by the table's sort order" in text
    assert 'ctx.set_sort_order("events", ["<column>"])' in text
    assert '`iceberg-ops --namespace sales revision -m "sort order"`' in text
    assert "`iceberg-ops --namespace sales upgrade`" in text and "or use --strategy binpack." in text
    assert "strategy='" not in text and "update_sort_order" not in text

    with pytest.raises(ValueError) as raised:  # the same refusal in Python's words
        compact_small_files_streaming(sqlite_catalog(lake).load_table("sales.events"), strategy="sort")
    assert "strategy='sort' sorts by" in str(raised.value) and "use strategy='binpack'." in str(raised.value)
    assert "table.update_sort_order()" in str(raised.value) and "--strategy" not in str(raised.value)


def test_min_input_files_follows_one_rule_for_compact_and_the_health_threshold(lake: Path):
    too_few = run(lake, *sqlite_flags(lake), "maintain", "compact", "sales.events", "--min-input-files", "0")
    assert too_few.returncode == 2
    assert "Invalid value for '--min-input-files': --min-input-files must be an integer of at least 1, got 0" in (
        " ".join(too_few.stderr.split())
    )
    threshold = run(lake, *sqlite_flags(lake), "maintain", "health", "sales.events", "--threshold", "min_input_files=0")
    assert threshold.returncode == 2
    assert "'--threshold'" in threshold.stderr
    assert "min_input_files must be an integer of at least 1, got 0" in " ".join(threshold.stderr.split())

    # 1 is accepted by both: a lone small file is rewritten (here: sorted and rewritten into one file).
    catalog = sqlite_catalog(lake)
    lone = small_files_table(catalog, "sales.lone", appends=1, rows=50)
    with lone.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    health = run(lake, *sqlite_flags(lake), "maintain", "health", "sales.lone", "--threshold", "min_input_files=1")
    assert health.returncode == 1, health.stderr
    assert "maintain compact sales.lone --target-file-size 512MiB --min-input-files 1 --strategy sort" in health.stdout
    (before,) = live_data_files(catalog.load_table("sales.lone"))
    compact = run(
        lake, *sqlite_flags(lake), "--json", "maintain", "compact", "sales.lone", "--min-input-files", "1",
        "--strategy", "sort",
    )  # fmt: skip
    assert compact.returncode == 0, compact.stderr
    assert json.loads(compact.stdout)["rewritten_data_files_count"] == 1
    (after,) = live_data_files(catalog.load_table("sales.lone"))
    assert after.file_path != before.file_path and after.sort_order_id == 1

    # Python: the same rule, the same words, for the function and the thresholds.
    with pytest.raises(ValueError, match="min_input_files must be an integer of at least 1, got 0"):
        compact_small_files_streaming(catalog.load_table("sales.lone"), min_input_files=0)
    with pytest.raises(ValueError, match="min_input_files must be an integer of at least 1, got 0"):
        HealthThresholds(min_input_files=0)
    assert HealthThresholds(min_input_files=1).min_input_files == 1


def test_a_filter_that_does_not_fit_names_the_option_as_typed(lake: Path):
    result = run(lake, *sqlite_flags(lake), "maintain", "compact", "sales.events", "--where", "nope = 1")

    assert result.returncode == 2
    text = " ".join(result.stderr.split())
    assert "Invalid value for '--where': --where 'nope = 1' does not fit the schema of sales.events" in text
    assert "where=" not in text


def test_a_target_no_binary_unit_divides_is_written_in_bytes(lake: Path):
    report = run(lake, *sqlite_flags(lake), "maintain", "health", "sales.events", "--target-file-size", "1000000")

    (line,) = _run_lines(report.stdout)
    assert " --target-file-size 1000000 --min-input-files 5 --strategy binpack" in line and line.endswith("binpack")
