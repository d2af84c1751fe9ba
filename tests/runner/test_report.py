"""The namespace report the pages, dashboards and scripts read: a version table and the audit trail a page at a time."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.report import audit_trail, origins, version_table
from tests.support.migrations import ORDERS, write_migration

CONTEXT = {"dag_id": "nightly", "run_id": "scheduled__1", "task_id": "migrate", "try_number": "1"}


@pytest.fixture
def migrated(catalog, migrations_dir):
    write_migration(migrations_dir, "0001_orders.py", ORDERS, 'ctx.drop_table("orders")', description="orders")
    write_migration(migrations_dir, "0002_noop.py", "pass", "pass", description="nothing")
    write_migration(migrations_dir, "0003_boom.py", "raise ValueError('boom')", "pass", description="fails")
    runner = MigrationRunner(catalog, "sales", migrations_dir, lock_context=CONTEXT)
    runner.upgrade("0002")
    with pytest.raises(Exception, match="boom"):
        runner.upgrade("head")
    return runner


def test_the_version_table_puts_files_and_history_side_by_side(migrated):
    status = migrated.status()
    rows = {row.version: row for row in version_table(status, migrated.history(), migrated.scripts(broken=[]))}
    assert [(v, rows[v].state) for v in sorted(rows)] == [("0001", "applied"), ("0002", "applied"), ("0003", "failed")]
    assert rows["0001"].recorded_checksum.startswith("ast1:") and rows["0001"].file_checksum is None
    assert rows["0003"].file_checksum.startswith("ast1:") and "boom" in rows["0003"].error
    assert rows["0002"].description == "nothing" and rows["0001"].duration_ms is not None
    assert version_table(status, migrated.history())[2].file_checksum is None  # without the files: unknown


def test_the_audit_trail_is_newest_first_paged_with_the_runs_origins(migrated):
    whole = audit_trail(migrated)
    assert [event.event for event in whole.events] == ["failed", "applied", "applied"]
    assert whole.total == 3 and not whole.has_newer and not whole.has_older
    page = audit_trail(migrated, offset=1, limit=1)
    assert [event.version for event in page.events] == ["0002"] and page.has_newer and page.has_older
    assert [origin.to_json()["context"] for origin in whole.origins] == [CONTEXT]
    assert whole.origins[0].events == 3
    assert whole.to_json()["events"][0]["event"] == "failed"


def test_origins_group_runs_of_one_task_and_leave_out_runs_without_context(migrated):
    events = migrated.events()
    other = [
        type(event)(**{**event.__dict__, "details": {"context": {**CONTEXT, "run_id": "manual__2", "try_number": "2"}}})
        for event in events[:1]
    ]
    bare = [type(event)(**{**event.__dict__, "details": {}}) for event in events[:1]]
    found = origins(events + other + bare)
    assert len(found) == 1 and found[0].events == 4  # one DAG task, whatever run or try


@pytest.mark.parametrize(("offset", "limit"), [(-1, 10), (0, 0), (0, 501), ("1", 10), (0, True)])
def test_a_bad_page_is_refused(migrated, offset, limit):
    with pytest.raises(ValueError, match=r"offset|limit"):
        audit_trail(migrated, offset=offset, limit=limit)
