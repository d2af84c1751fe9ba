"""What the runner reports, on a real SQLite catalog: a runner without migration files, broken files in
``status`` and ``check``, one duration per step, what a migration committed on its own did, an
irreversible rollback in a plan, a downgrade target that is not below the current version, and a
failed step's line."""

from __future__ import annotations

import re

import pytest

from iceberg_ops_provider.errors import MigrationDiscoveryError, MigrationError, MigrationTargetError
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.commands import check_namespace
from tests.support.migrations import write_migration


def test_a_runner_without_migration_files_reports_what_the_history_says(catalog, runner, three_migrations):
    runner.upgrade("0002")
    reader = MigrationRunner(catalog, "sales", None)

    status = reader.status()
    assert (status.current, status.files_compared, status.pending, status.missing) == ("0002", False, [], [])
    assert [row.version for row in status.applied] == ["0001", "0002"]
    assert status.to_json()["files_compared"] is False and status.to_json()["broken"] == []
    assert reader.current() == "0002" and [row.version for row in reader.history()] == ["0001", "0002"]
    assert reader.force_unlock() is None
    for needs_files in (reader.upgrade, reader.plan, reader.state):
        with pytest.raises(MigrationError, match=r"no migration files \(migrations_dir=None\)"):
            needs_files()
    assert runner.status().files_compared is True


def test_broken_files_are_reported_by_status_and_check_and_refused_by_runs(catalog, runner, three_migrations):
    runner.upgrade("0002")
    pending = three_migrations / "0003_owner.py"
    pending.write_text("x = (\n")
    applied = three_migrations / "0001_create_orders.py"
    applied.write_text("import pyarrow as pa\nraise RuntimeError('half written')\n")

    status = runner.status()
    assert [(file.version, file.line) for file in status.broken] == [("0001", 2), ("0003", 1)]
    assert status.broken[1].describe() == f"{pending}: syntax error on line 1: '(' was never closed."
    assert status.broken[0].error.startswith("importing it raised RuntimeError: half written")
    assert [(step.version, step.description) for step in status.pending] == [("0003", "owner")]
    assert status.missing == [] and status.current == "0002" and not status.is_clean

    report = check_namespace(runner)
    assert not report.ok and [step.version for step in report.pending] == ["0003"]
    assert [file.describe() for file in status.broken] == report.problems
    assert report.to_json()["broken"][1] == {
        "path": str(pending),
        "version": "0003",
        "line": 1,
        "error": "syntax error on line 1: '(' was never closed.",
    }
    for run in (runner.upgrade, lambda: runner.downgrade("-1"), runner.state):
        with pytest.raises(MigrationDiscoveryError) as refused:
            run()
        assert refused.value.path == str(applied) and refused.value.line == 2


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "per-table"])
def test_one_duration_per_step_in_the_result_the_history_the_event_and_the_progress_line(
    catalog, migrations_dir, atomic
):
    write_migration(
        migrations_dir,
        "0001_slow.py",
        'import time\ntime.sleep(0.05)\nctx.create_table("orders", pa.schema([("id", pa.int64())]))',
        'import time\ntime.sleep(0.03)\nctx.drop_table("orders")',
    )
    lines: list[str] = []
    runner = MigrationRunner(catalog, "sales", migrations_dir, on_event=lines.append, atomic_commits=atomic)

    for run, floor in ((runner.upgrade, 50), (lambda: runner.downgrade("base"), 30)):
        (result,) = run()
        (row,) = runner.history()
        event = [e for e in runner.events() if e.event == result.status][-1]
        assert result.duration_ms >= floor
        assert result.duration_ms == row.duration_ms == event.duration_ms
        assert result.duration == row.duration_ms / 1000 and result.to_json()["duration_ms"] == row.duration_ms
        assert f" in {row.duration_ms / 1000:.2f}s" in event.message
        assert f"0001 {result.status} in {row.duration_ms / 1000:.2f}s (" in lines[-1]


def test_a_migration_that_only_renames_says_what_it_did(catalog, migrations_dir):
    write_migration(migrations_dir, "0001_orders.py", 'ctx.create_table("orders", pa.schema([("id", pa.int64())]))')
    write_migration(migrations_dir, "0002_archive.py", 'ctx.rename_table("orders", "archive.orders")')
    runner = MigrationRunner(catalog, "sales", migrations_dir)

    moved = runner.upgrade()[1]

    assert (moved.atomic, moved.not_atomic_reason) == (
        False,
        "it renamed table sales.orders to archive.orders and created namespace archive: a rename and a new "
        "namespace each commit on their own, outside the all-or-nothing commit",
    )


def test_a_plan_labels_an_irreversible_rollback(runner, migrations_dir):
    write_migration(
        migrations_dir,
        "0001_orders.py",
        'ctx.create_table("orders", pa.schema([("id", pa.int64())]))',
        'ctx.drop_table("orders")',
    )
    write_migration(migrations_dir, "0002_keep.py", 'ctx.set_properties("orders", a="1")')  # no downgrade()
    runner.upgrade()

    blocked, below = runner.plan("base", inspect=True)

    assert (blocked.version, blocked.risk) == ("0002", "irreversible")
    assert blocked.operations == (
        {"operation": "Migration 0002 defines no downgrade(); it cannot be rolled back.", "risk": "irreversible"},
    )
    assert below.risk != "irreversible"


def test_a_downgrade_target_that_is_not_below_the_current_version(catalog, migrations_dir, three_migrations):
    lines: list[str] = []
    runner = MigrationRunner(catalog, "sales", migrations_dir, on_event=lines.append)
    runner.upgrade("0002")

    assert runner.downgrade("2") == []
    assert lines[-1] == (
        "sales: nothing to roll back: the target 2 is the current version 0002, and a downgrade keeps its target "
        "applied (a number is an absolute version; '-N' rolls back the last N). Did you mean '-2'? It rolls back "
        "the last 2 applied migration(s) (0002, 0001); '2' is version 0002."
    )
    assert runner.downgrade("0002") == [] and "Did you mean" not in lines[-1]  # written as a version on purpose
    with pytest.raises(MigrationTargetError, match=r"above the current version 0002.*'-N' is relative"):
        runner.downgrade("3")
    assert runner.current() == "0002"


def test_a_failed_steps_line_leaves_the_message_to_the_error(catalog, migrations_dir):
    lines: list[str] = []
    runner = MigrationRunner(catalog, "sales", migrations_dir, on_event=lines.append)
    write_migration(migrations_dir, "0001_boom.py", 'raise ValueError("a very particular reason")')

    with pytest.raises(MigrationError, match="a very particular reason"):
        runner.upgrade()

    failed = [line for line in lines if re.match(r"\[1/1\] 0001 FAILED", line)]
    assert failed == ["[1/1] 0001 FAILED: its upgrade() raised ValueError"]
