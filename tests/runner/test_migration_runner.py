"""MigrationRunner end to end on a real SQLite catalog: targets, stamp, plan, namespaces, failures."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.cli.wording import cli_message
from iceberg_ops_provider.errors import (
    IrreversibleMigrationError,
    MigrationFailedError,
    MigrationTargetError,
    PartialMigrationError,
)
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration


def _statuses(runner: MigrationRunner) -> dict[str, str]:
    return {row.version: row.status for row in runner.history()}


def test_upgrade_head_applies_everything_in_order(catalog, runner, three_migrations):
    results = runner.upgrade()
    assert [(r.version, r.status, r.direction) for r in results] == [
        ("0001", "applied", "upgrade"),
        ("0002", "applied", "upgrade"),
        ("0003", "applied", "upgrade"),
    ]
    assert all(r.duration >= 0 for r in results)
    assert results[0].description == "create orders"
    table = catalog.load_table("sales.orders")
    assert "email" in table.schema().column_names and table.properties["owner"] == "sales"
    assert runner.current() == "0003"
    assert runner.upgrade() == []  # nothing pending: a no-op
    row = runner.history()[0]
    assert row.checksum and row.run_id and "@" in row.executed_by and row.duration_ms is not None
    assert row.operation == "upgrade" and row.error is None


@pytest.mark.parametrize(
    ("target", "expected_current"),
    [("+1", "0001"), ("+2", "0002"), ("0002", "0002"), ("2", "0002"), ("head", "0003")],
)
def test_upgrade_targets(runner, three_migrations, target, expected_current):
    runner.upgrade(target)
    assert runner.current() == expected_current


@pytest.mark.parametrize(
    ("target", "expected_current"), [("-1", "0002"), ("-3", None), ("0001", "0001"), ("base", None)]
)
def test_downgrade_targets(catalog, runner, three_migrations, target, expected_current):
    runner.upgrade()
    results = runner.downgrade(target)
    assert all(r.status == "rolled_back" and r.direction == "downgrade" for r in results)
    assert [r.version for r in results] == sorted((r.version for r in results), reverse=True)
    assert runner.current() == expected_current
    assert catalog.table_exists("sales.orders") == (expected_current is not None)


@pytest.mark.parametrize(
    ("method", "target", "message"),
    [
        ("upgrade", "-1", "points down; use downgrade"),
        ("upgrade", "base", "points down"),
        ("upgrade", "+4", "asks for 4 migrations but 1 are pending"),
        ("upgrade", "0009", "Unknown target version '0009'"),
        ("upgrade", "latest", "is not valid"),
        ("upgrade", "0001", "below the current version 0002; use downgrade"),
        ("downgrade", "head", "points up; use upgrade"),
        ("downgrade", "+1", "points up"),
        ("downgrade", "-3", "asks for 3 rollbacks but 2 are applied"),
        ("downgrade", "-0", "N of at least 1"),
    ],
)
def test_bad_targets_change_nothing(runner, three_migrations, method, target, message):
    runner.upgrade("0002")
    history_before = runner.history()
    with pytest.raises(MigrationTargetError, match=message):
        getattr(runner, method)(target)
    assert runner.history() == history_before
    assert runner.lock.info() is None  # released after the refusal


def test_plan_writes_nothing_and_infers_direction(catalog, runner, three_migrations):
    steps = runner.plan()
    assert [(s.direction, s.version, s.description) for s in steps] == [
        ("upgrade", "0001", "create orders"),
        ("upgrade", "0002", "add email"),
        ("upgrade", "0003", "set owner"),
    ]
    assert catalog.list_namespaces() == []  # not even the meta-namespace
    assert runner.status().pending and runner.history() == []
    assert catalog.list_namespaces() == []
    runner.upgrade()
    assert [(s.direction, s.version) for s in runner.plan("0001")] == [("downgrade", "0003"), ("downgrade", "0002")]
    assert [s.version for s in runner.plan("-1")] == ["0003"]
    assert runner.plan("head") == []
    assert runner.plan("base")[0].to_json() == {
        "direction": "downgrade",
        "version": "0003",
        "description": "set owner",
    }


def test_stamp_records_without_running(catalog, runner, three_migrations):
    results = runner.stamp("0002")
    assert [(r.version, r.status, r.direction) for r in results] == [
        ("0001", "applied", "stamp"),
        ("0002", "applied", "stamp"),
    ]
    assert not catalog.table_exists("sales.orders")  # nothing ran
    assert runner.current() == "0002"
    runner.stamp("0001")
    assert _statuses(runner) == {"0001": "applied", "0002": "rolled_back"}
    runner.stamp("base")
    assert runner.current() is None
    runner.stamp("head")
    assert runner.current() == "0003"
    with pytest.raises(MigrationTargetError, match="not a relative target"):
        runner.stamp("+1")


def test_two_namespaces_share_one_history_table(catalog, migrations_dir, three_migrations):
    sales = MigrationRunner(catalog, "sales", migrations_dir)
    finance = MigrationRunner(catalog, "finance", migrations_dir)
    sales.upgrade()
    finance.upgrade("+1")
    assert catalog.table_exists("sales.orders") and catalog.table_exists("finance.orders")
    assert sales.current() == "0003" and finance.current() == "0001"
    assert [s.version for s in finance.status().pending] == ["0002", "0003"]
    finance.downgrade("base")
    assert sales.current() == "0003" and finance.current() is None
    assert sorted(name for _, name in catalog.list_tables("_iceberg_ops")) == [
        "migration_events",
        "migration_history",
        "migration_lock_finance",
        "migration_lock_sales",
    ]
    history = catalog.load_table("_iceberg_ops.migration_history").scan().to_arrow()
    assert sorted(set(history.column("namespace").to_pylist())) == ["finance", "sales"]
    assert history.num_rows == 4  # one row per (version, namespace)


def test_per_namespace_folder_is_used_instead_of_the_flat_layout(catalog, migrations_dir, three_migrations):
    write_migration(
        migrations_dir / "finance", "0001_ledger.py", 'ctx.create_table("ledger", pa.schema([("n", pa.int64())]))'
    )
    finance = MigrationRunner(catalog, "finance", migrations_dir)
    assert finance.folder == migrations_dir / "finance"
    finance.upgrade()
    assert catalog.table_exists("finance.ledger") and not catalog.table_exists("finance.orders")
    assert MigrationRunner(catalog, "sales", migrations_dir).folder == migrations_dir


def test_custom_meta_namespace(catalog, migrations_dir, three_migrations):
    runner = MigrationRunner(catalog, "sales", migrations_dir, meta_namespace="ops_meta")
    runner.upgrade("+1")
    assert catalog.table_exists("ops_meta.migration_history")
    assert not catalog.namespace_exists("_iceberg_ops")


def test_failed_upgrade_is_recorded_stops_the_run_and_is_retried(catalog, runner, migrations_dir, three_migrations):
    broken = write_migration(
        migrations_dir,
        "0004_broken.py",
        'ctx.add_column("orders", "note", "string")\nraise RuntimeError("disk on fire")',
        description="broken",
    )
    write_migration(migrations_dir, "0005_after.py", 'ctx.set_properties("orders", after="yes")')
    with pytest.raises(
        MigrationFailedError, match="Migration 0004 failed during upgrade\\(\\): RuntimeError: disk on fire"
    ) as info:
        runner.upgrade()
    error = info.value
    assert isinstance(error.cause, RuntimeError) and error.__cause__ is error.cause
    assert [r.version for r in error.completed] == ["0001", "0002", "0003"]
    statuses = _statuses(runner)
    assert statuses["0004"] == "failed" and "0005" not in statuses
    failed_row = next(row for row in runner.history() if row.version == "0004")
    assert failed_row.error == "RuntimeError: disk on fire"
    table = catalog.load_table("sales.orders")
    assert "note" not in table.schema().column_names  # the staged change was discarded
    status = runner.status()
    assert status.failed == ["0004"] and [s.version for s in status.pending] == ["0004", "0005"]
    assert runner.lock.info() is None
    # Fix the file and run again: the failed migration is retried, then the rest.
    broken.write_text(broken.read_text().replace('raise RuntimeError("disk on fire")', "pass"))
    assert [r.version for r in runner.upgrade(allow_changed=True)] == ["0004", "0005"]
    assert _statuses(runner)["0004"] == "applied"


def test_irreversible_downgrade_stops_and_keeps_the_version_applied(catalog, runner, migrations_dir, three_migrations):
    write_migration(migrations_dir, "0004_one_way.py", 'ctx.drop_column("orders", "email")')  # default downgrade
    runner.upgrade()
    with pytest.raises(IrreversibleMigrationError, match=r"Cannot roll back 'sales' past 0004.*stays applied"):
        runner.downgrade("base")
    assert runner.current() == "0004"
    assert _statuses(runner)["0004"] == "applied"
    assert runner.lock.info() is None


def test_explicit_irreversible_error_in_the_middle_of_a_downgrade(catalog, runner, migrations_dir, three_migrations):
    write_migration(
        migrations_dir,
        "0004_one_way.py",
        'ctx.set_properties("orders", x="1")',
        'raise IrreversibleMigrationError("the old values are gone")',
    )
    runner.upgrade()
    runner.downgrade("0004")  # nothing to do
    with pytest.raises(IrreversibleMigrationError, match="the old values are gone"):
        runner.downgrade("0002")
    assert runner.current() == "0004"
    refused = runner.events()[-1]  # the audit trail keeps the refusal, though nothing was committed
    assert (refused.event, refused.version, refused.error) == ("rollback_refused", "0004", "the old values are gone")


def test_failed_downgrade_keeps_the_version_applied(catalog, runner, migrations_dir, three_migrations):
    write_migration(migrations_dir, "0004_bad_down.py", "pass", 'ctx.drop_column("orders", "no_such_column")')
    runner.upgrade()
    with pytest.raises(MigrationFailedError, match=r"during downgrade.*stays applied"):
        runner.downgrade("-1")
    row = next(r for r in runner.history() if r.version == "0004")
    assert row.status == "applied" and row.error.startswith("downgrade failed: InvalidOperationError")


def test_progress_events_and_logging(catalog, migrations_dir, three_migrations, caplog):
    events: list[str] = []
    runner = MigrationRunner(catalog, "sales", migrations_dir, on_event=events.append)
    with caplog.at_level("INFO", logger="iceberg_ops_provider.runner"):
        runner.upgrade()
    assert events[0] == "sales: 3 migration(s) to apply (current: base)"
    assert "[1/3] applying 0001 create orders" in events
    assert any(e.startswith("[3/3] 0003 applied in") for e in events)
    assert [r.getMessage() for r in caplog.records] == events


def test_runner_argument_errors(catalog, migrations_dir):
    for bad in ("", "sales.", ".sales", "a..b", "  x", None):
        with pytest.raises(ValueError, match="is not a valid namespace"):
            MigrationRunner(catalog, bad, migrations_dir)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="meta_namespace '' is not a valid namespace"):
        MigrationRunner(catalog, "sales", migrations_dir, meta_namespace="")
    with pytest.raises(ValueError, match="meta-namespace"):
        MigrationRunner(catalog, "_iceberg_ops", migrations_dir)


def test_migration_file_with_create_partitions_and_sort(catalog, runner, migrations_dir):
    create = """
ctx.create_table(
    "orders",
    schema=pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.timestamp("us", tz="UTC"))]),
    partition_by=["day(ts)"],
    sort_by=["ts desc"],
    properties={"owner": "sales"},
)
"""
    write_migration(migrations_dir, "0001_orders.py", create)
    runner.upgrade()
    table = catalog.load_table("sales.orders")
    assert [f.name for f in table.spec().fields] == ["ts_day"] and table.properties["owner"] == "sales"


def test_committed_but_unrecorded_migration_stops_and_the_next_run_records_it(
    catalog, migrations_dir, three_migrations, monkeypatch
):
    """Per-table commits (catalogs without a multi-table commit): the history write comes after them."""
    from iceberg_ops_provider.errors import MigrationNotRecordedError

    runner = MigrationRunner(catalog, "sales", migrations_dir, atomic_commits=False)
    runner.upgrade()
    write_migration(migrations_dir, "0004_extra.py", 'ctx.create_table("extra", pa.schema([("n", pa.int64())]))')
    # A history write that fails after the migration committed cannot be staged with a real catalog
    # short of breaking the history table (which migrations may not touch): the write is made to fail once.
    record = runner.history_store.record

    def failing_once(*args, **kwargs):
        monkeypatch.setattr(runner.history_store, "record", record)
        raise OSError("history unreachable")

    monkeypatch.setattr(runner.history_store, "record", failing_once)
    with pytest.raises(MigrationNotRecordedError, match=r"0004 ran its upgrade\(\) and its changes were committed"):
        runner.upgrade()
    assert catalog.table_exists("sales.extra")
    assert runner.lock.info() is None and runner.status().interrupted.version == "0004"
    assert runner.upgrade() == []  # recorded from the receipts, not run again (it would fail: the table exists)
    assert _statuses(runner)["0004"] == "applied"


def test_a_history_record_that_cannot_be_staged_leaves_the_all_or_nothing_migration_uncommitted(
    catalog, runner, migrations_dir, three_migrations, monkeypatch
):
    runner.upgrade()
    write_migration(migrations_dir, "0004_extra.py", 'ctx.create_table("extra", pa.schema([("n", pa.int64())]))')
    # The history row is part of the migration's one commit: when it cannot be staged, nothing is committed.
    stage = runner.history_store.stage

    def failing_once(*args, **kwargs):
        monkeypatch.setattr(runner.history_store, "stage", stage)
        raise OSError("history unreachable")

    monkeypatch.setattr(runner.history_store, "stage", failing_once)
    with pytest.raises(MigrationFailedError, match="None of its changes were committed"):
        runner.upgrade()
    assert not catalog.table_exists("sales.extra")
    assert _statuses(runner)["0004"] == "failed" and runner.status().interrupted is None
    assert [(r.version, r.atomic) for r in runner.upgrade()] == [("0004", True)]  # simply runs again
    assert catalog.table_exists("sales.extra") and _statuses(runner)["0004"] == "applied"


def test_partially_committed_migration_names_the_committed_tables(catalog, runner, migrations_dir, three_migrations):
    runner.upgrade()
    write_migration(
        migrations_dir,
        "0004_two_tables.py",
        'ctx.set_properties("orders", touched="yes")\n'
        'ctx.create_table("late", pa.schema([("n", pa.int64())]))\n'
        # Someone else creates the same table before this migration commits.
        'ctx.catalog.create_table("sales.late", pa.schema([("n", pa.int64())]))',
    )
    with pytest.raises(PartialMigrationError, match=r"committed: sales\.orders \(commit\); not committed: sales\.late"):
        runner.upgrade()
    assert catalog.load_table("sales.orders").properties["touched"] == "yes"
    assert _statuses(runner)["0004"] == "failed"
    # Nothing more runs until a person settles it: the next run stops before running the body again.
    with pytest.raises(
        PartialMigrationError, match=r"record the migration as applied with MigrationRunner\.stamp\('0004'\)"
    ) as again:
        runner.upgrade()
    assert "`iceberg-ops stamp 0004`" in cli_message(again.value) and "MigrationRunner" not in cli_message(again.value)
    assert runner.status().interrupted.version == "0004"
    catalog.drop_table("sales.late")  # the person finishes it by hand ...
    catalog.create_table("sales.late", pa.schema([("n", pa.int64())]))
    runner.stamp("0004")  # ... and records it
    assert _statuses(runner)["0004"] == "applied"
    assert runner.status().interrupted is None and runner.lock.intent() is None
    trail = [(event.event, event.version) for event in runner.events() if event.version == "0004"]
    assert trail == [("failed", "0004"), ("recovery_partial", "0004"), ("intent_cleared", "0004"), ("stamped", "0004")]


def test_failed_downgrade_keeps_a_changed_file_visible(catalog, runner, migrations_dir, three_migrations):
    write_migration(migrations_dir, "0004_bad_down.py", "pass", 'ctx.drop_column("orders", "nope")')
    runner.upgrade()
    path = migrations_dir / "0004_bad_down.py"
    path.write_text(path.read_text() + "EDITED = True\n")
    assert runner.status().changed == ["0004"]
    with pytest.raises(MigrationFailedError):
        runner.downgrade("-1", allow_changed=True)
    assert runner.status().changed == ["0004"]


def test_more_target_and_argument_checks(catalog, runner, three_migrations):
    runner.upgrade("0001")
    with pytest.raises(MigrationTargetError, match=r"above the current version 0001, .* use upgrade"):
        runner.downgrade("0003")
    with pytest.raises(ValueError, match="direction must be 'upgrade' or 'downgrade'"):
        runner.plan("head", direction="sideways")  # type: ignore[arg-type]
    with pytest.raises(MigrationTargetError, match="is not valid"):
        runner.plan("²")


def test_repair_re_records_changed_files_and_clears_failed_attempts(catalog, runner, migrations_dir, three_migrations):
    write_migration(migrations_dir, "0004_boom.py", 'raise RuntimeError("boom")')
    runner.upgrade("0003")
    with pytest.raises(MigrationFailedError):
        runner.upgrade()
    path = migrations_dir / "0002_add_email.py"
    path.write_text(path.read_text().replace('"email"', '"email"  ') + "EDITED = True\n")
    assert runner.status().changed == ["0002"] and runner.status().failed == ["0004"]
    planned = runner.repair(dry_run=True)
    assert (planned.rechecked, planned.cleared) == (["0002"], ["0004"])
    assert runner.status().changed == ["0002"]  # a dry run writes nothing
    done = runner.repair()
    status = runner.status()
    assert status.changed == [] and status.failed == [] and [s.version for s in status.pending] == ["0004"]
    assert "0004" not in {row.version for row in runner.history()}
    assert _statuses(runner)["0002"] == "applied"
    assert done.describe().startswith("re-recorded the checksum of changed file 0002")
    assert planned.describe().startswith("re-record the checksum of changed file 0002")
    trail = [(event.event, event.version) for event in runner.events()]
    assert trail == [*[("applied", f"000{n}") for n in (1, 2, 3)], ("failed", "0004"), ("repair", None)]
    assert not runner.repair().changes
