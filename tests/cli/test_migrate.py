"""What a new user's first hour with the migration commands runs into, as real subprocesses on a real SQLite catalog.

Each test is one finding, as docs/cli.md states the behaviour: the read-only commands and ``unlock``
need no project file; a downgrade to a number that is not below the current version says that
``-1`` is relative; ``plan`` of an irreversible rollback says ``[irreversible]`` and exits 3; a
rollback that drops its table says so; one duration per step, shown the same everywhere; a broken
migration file is a problem ``status`` and ``check`` report while they show everything else; a
failed step's message once, and a refusal of changed files one file per line.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta

import pytest

from iceberg_ops_provider.history.lock import NamespaceLock
from tests.cli.ops_support import CREATE_ORDERS, CommandLake, run
from tests.support.lake import Lake
from tests.support.migrations import write_migration

pytestmark = pytest.mark.slow  # every check is a real iceberg-ops process


def _create(table: str) -> str:
    return f'ctx.create_table("{table}", pa.schema([pa.field("id", pa.int64())]))'


@pytest.fixture
def lake(lake: Lake) -> CommandLake:
    return CommandLake(lake.root)


def _ok(result: subprocess.CompletedProcess[str], code: int = 0) -> subprocess.CompletedProcess[str]:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    return result


def _error(result: subprocess.CompletedProcess[str]) -> str:
    """The ``error:`` text on stderr (it may span lines)."""
    assert "error: " in result.stderr, result.stderr
    return result.stderr[result.stderr.index("error: ") :]


# -- 1. No project file needed where the options name the catalog, the namespace (and the files) -----------------


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_read_only_commands_and_unlock_need_no_project_file(lake):
    write_migration(lake.migrations, "0001_create_orders.py", CREATE_ORDERS, 'ctx.drop_table("orders")')
    write_migration(lake.migrations, "0002_owner.py", 'ctx.set_properties("orders", owner="sales")')
    # The commands that run migrations read the files from --migrations-dir instead of the project file.
    _ok(lake.run("upgrade"))
    write_migration(lake.migrations, "0003_email.py", 'ctx.add_column("orders", "email", "string")')

    status = _ok(lake.run("status", files=False))
    assert "current:   0002" in status.stdout
    assert "files:     not compared (no project file and no --migrations-dir)" in status.stdout
    assert "pending:   not known" in status.stdout and "changed:" not in status.stdout
    as_json = json.loads(_ok(lake.run("--json", "status", files=False)).stdout)
    assert (as_json["current"], as_json["files_compared"], as_json["pending"], as_json["missing"]) == (
        "0002",
        False,
        None,
        None,
    )
    compared = _ok(lake.run("status"))  # with --migrations-dir it compares the files
    assert "files:" not in compared.stdout and re.search(r"^0003\s+email", compared.stdout, re.M), compared.stdout

    assert _ok(lake.run("current", files=False)).stdout.strip() == "0002"
    history = _ok(lake.run("history", files=False)).stdout
    assert re.search(r"^0001\s+applied", history, re.M) and re.search(r"^0002\s+applied", history, re.M)
    assert "The namespace was not locked." in _ok(lake.run("unlock", files=False)).stdout

    # What needs the files says so; the namespace is still asked for as before.
    upgrade = _ok(lake.run("upgrade", files=False), 2)
    assert "`iceberg-ops upgrade` needs the migration files: pass --migrations-dir DIR" in _error(upgrade)
    no_namespace = _ok(run(lake.cwd, *lake.flags, "status"), 2)
    assert "No namespace given: pass --namespace NS" in _error(no_namespace)
    nothing = _error(_ok(run(lake.cwd, "status"), 2))
    assert "iceberg-ops.yaml not found" in nothing and "--catalog KIND" in nothing and "--namespace NS" in nothing
    revision = _error(_ok(lake.run("revision", "-m", "x"), 2))
    assert "`iceberg-ops revision` needs the project file" in revision
    assert sorted(path.name for path in lake.migrations.glob("*.py")) == [
        "0001_create_orders.py",
        "0002_owner.py",
        "0003_email.py",
    ]


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_status_and_unlock_with_an_airflow_connection_and_no_project_file(lake):
    pytest.importorskip("airflow")
    write_migration(lake.migrations, "0001_create_orders.py", CREATE_ORDERS)
    _ok(lake.run("upgrade"))
    extra = {"kind": "sqlite", "db_path": str(lake.root / "catalog.db"), "warehouse_dir": str(lake.warehouse)}
    env = {
        "AIRFLOW_CONN_PG": json.dumps({"conn_type": "iceberg_ops", "extra": extra}),
        "AIRFLOW_HOME": tempfile.mkdtemp(prefix="iceberg_ops_trial_airflow_"),
    }
    status = _ok(run(lake.cwd, "--conn-id", "pg", "--namespace", "sales", "status", env=env))
    assert "current:   0001" in status.stdout
    unlock = _ok(run(lake.cwd, "--conn-id", "pg", "--namespace", "sales", "unlock", env=env))
    assert "The namespace was not locked." in unlock.stdout


# -- 7. `downgrade 1` for `downgrade -1` ----------------------------------------------------------------------------


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_a_downgrade_to_a_number_not_below_the_current_version_says_minus_n_is_relative(lake):
    for number in (1, 2, 3):
        write_migration(
            lake.migrations, f"000{number}_p{number}.py", _create(f"t{number}"), f'ctx.drop_table("t{number}")'
        )
    _ok(lake.run("upgrade", "0002"))

    same = _ok(lake.run("downgrade", "2"))  # the current version: nothing to roll back, and a hint
    assert same.stdout.strip() == "Nothing to roll back."
    assert "nothing to roll back: the target 2 is the current version 0002" in same.stderr
    assert "Did you mean '-2'? It rolls back the last 2 applied migration(s) (0002, 0001)" in same.stderr

    above = _ok(lake.run("downgrade", "3"), 2)  # above the current version: refused
    message = _error(above)
    assert "Version 0003 is above the current version 0002, so a downgrade cannot go there" in message
    assert "a target written as a number is an absolute version" in message and "'-N' is relative" in message
    assert "Nothing to roll back" not in above.stdout
    as_json = json.loads(_ok(lake.run("--json", "downgrade", "3"), 2).stdout)
    assert as_json["exit_code"] == 2 and as_json["type"] == "MigrationTargetError"

    rolled = _ok(lake.run("downgrade", "-1"))
    assert re.search(r"^0002\s+p2\s+rolled_back", rolled.stdout, re.M), rolled.stdout


# -- 9. plan of an irreversible rollback --------------------------------------------------------------------------


def test_plan_of_an_irreversible_rollback_says_irreversible_and_exits_3(lake):
    write_migration(lake.migrations, "0001_create_orders.py", CREATE_ORDERS, 'ctx.drop_table("orders")', "orders")
    write_migration(
        lake.migrations,
        "0002_email.py",
        'ctx.add_column("orders", "email", "string")',
        'raise IrreversibleMigrationError("0002 has no downgrade yet")',
        "add email",
    )
    write_migration(
        lake.migrations,
        "0003_owner.py",
        'ctx.set_properties("orders", owner="sales")',
        'ctx.remove_properties("orders", "owner")',
        "owner",
    )
    _ok(lake.run("upgrade"))

    plan = _ok(lake.run("plan", "-2"), 3)
    lines = plan.stdout.splitlines()
    assert "downgrade 0002 add email  [irreversible]" in lines
    assert "    [irreversible] 0002 has no downgrade yet" in lines
    assert "[unknown]" not in plan.stdout
    assert lines[-1] == (
        "irreversible: a downgrade to -2 stops at 0002 (add email), which cannot be rolled back: it would roll "
        "back 0003 first, then stop; 0002 and the versions below it stay applied."
    )
    steps = json.loads(_ok(lake.run("--json", "plan", "-2"), 3).stdout)["steps"]
    assert [(step["version"], step["risk"]) for step in steps] == [("0003", "safe"), ("0002", "irreversible")]
    assert steps[1]["operations"] == [{"operation": "0002 has no downgrade yet", "risk": "irreversible"}]
    _ok(lake.run("plan", "-1"))  # a rollback that can be done: exit 0


# -- 10. A rollback that drops its table says so -------------------------------------------------------------------


def test_a_rollback_that_drops_its_table_says_what_it_did(lake):
    write_migration(lake.migrations, "0001_create_orders.py", CREATE_ORDERS, 'ctx.drop_table("orders")')
    _ok(lake.run("upgrade"))
    reason = "it dropped table sales.orders: a drop commits on its own, outside the all-or-nothing commit"

    rolled_back = _ok(lake.run("--json", "downgrade", "-1", "--yes"))
    (result,) = json.loads(rolled_back.stdout)
    assert (result["status"], result["atomic"], result["not_atomic_reason"]) == ("rolled_back", False, reason)
    assert result["outside_atomic_commit"] == ["sales.orders (drop)"]
    assert f"(table by table: {reason})" in rolled_back.stderr
    assert "no table change" not in rolled_back.stderr


# -- 11. One duration per step -------------------------------------------------------------------------------------


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_one_duration_per_step_everywhere(lake):
    slow = "import time\ntime.sleep(0.06)\n" + CREATE_ORDERS
    write_migration(lake.migrations, "0001_create_orders.py", slow, description="create orders")
    write_migration(
        lake.migrations, "0002_owner.py", 'import time\ntime.sleep(0.04)\nctx.set_properties("orders", a="1")'
    )
    table = _ok(lake.run("upgrade", "0001"))
    in_table = re.search(r"^0001\s+create orders\s+applied\s+(\S+)s\s", table.stdout, re.M).group(1)
    in_progress = re.search(r"\[1/1\] 0001 applied in (\S+)s ", table.stderr).group(1)
    (result,) = json.loads(_ok(lake.run("--json", "upgrade")).stdout)  # 0002, with --json

    rows = {row["version"]: row for row in json.loads(_ok(lake.run("--json", "history")).stdout)}
    events = {e["version"]: e for e in json.loads(_ok(lake.run("--json", "history", "--events")).stdout)}
    human_events = _ok(lake.run("history", "--events")).stdout

    first_ms = rows["0001"]["duration_ms"]
    assert first_ms >= 60 and events["0001"]["duration_ms"] == first_ms
    assert in_table == in_progress == f"{first_ms / 1000:.2f}"
    assert f"applied 0001 create orders in {first_ms / 1000:.2f}s" in human_events
    second_ms = rows["0002"]["duration_ms"]
    assert second_ms >= 40 and result["duration_ms"] == second_ms == events["0002"]["duration_ms"]
    assert result["duration"] == second_ms / 1000


# -- 14. A broken migration file -----------------------------------------------------------------------------------


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_a_broken_file_is_a_problem_status_and_check_report_and_upgrade_refuses(lake):
    write_migration(lake.migrations, "0001_create_orders.py", CREATE_ORDERS, 'ctx.drop_table("orders")')
    write_migration(lake.migrations, "0002_owner.py", 'ctx.set_properties("orders", owner="sales")')
    _ok(lake.run("upgrade"))
    broken = lake.migrations / "0003_email.py"
    broken.write_text("from iceberg_ops_provider.migration import BaseMigration\n\n\nclass Migration(BaseMigration)\n")
    applied_broken = lake.migrations / "0002_owner.py"  # an applied file that now fails to import
    applied_broken.write_text("import no_such_module_here\n")
    syntax = f"{broken}: syntax error on line 4: expected ':'."

    status = _ok(lake.run("status"))  # exit 0: status reports, check gates
    assert "current:   0002" in status.stdout
    assert f"broken:    {syntax}" in status.stdout
    assert f"broken:    {applied_broken}: importing it raised ModuleNotFoundError" in status.stdout
    assert re.search(r"^0003\s+email\s+broken: its file cannot be loaded", status.stdout, re.M), status.stdout
    assert "missing" not in status.stdout  # an applied file that cannot be loaded is not missing
    document = json.loads(_ok(lake.run("--json", "status")).stdout)
    by_version = {file["version"]: file for file in document["broken"]}
    assert by_version["0003"] == {
        "path": str(broken),
        "version": "0003",
        "line": 4,
        "error": "syntax error on line 4: expected ':'.",
    }
    assert by_version["0002"]["line"] == 1 and document["missing"] == []

    check = _ok(lake.run("check"), 1)
    assert f"  problem: {syntax}" in check.stdout.splitlines()
    assert "  pending 0003 email" in check.stdout.splitlines()
    report = json.loads(_ok(lake.run("--json", "check"), 1).stdout)
    assert report["ok"] is False and {file["version"] for file in report["broken"]} == {"0002", "0003"}

    for command in (["upgrade"], ["downgrade", "-1", "--yes"]):
        refused = _ok(lake.run(*command), 2)
        assert str(applied_broken) in _error(refused) and "line 1" in _error(refused)
    applied_broken.write_text("")  # helpers-free, but no Migration class either: still refused
    refused = _error(_ok(lake.run("upgrade"), 2))
    assert f"{applied_broken}: defines no class named Migration" in refused
    applied_broken.unlink()
    refused = _ok(lake.run("upgrade", "--allow-missing"), 2)
    assert _error(refused).strip() == f"error: {syntax}"
    assert _ok(lake.run("current", files=False)).stdout.strip() == "0002"


# -- 16. Messages printed once; one file per line -----------------------------------------------------------------


def test_a_failed_step_prints_its_message_once(lake):
    write_migration(lake.migrations, "0001_boom.py", 'raise RuntimeError("the quick brown fox jumped over")')
    failed = _ok(lake.run("upgrade"), 1)
    assert failed.stderr.count("the quick brown fox jumped over") == 1, failed.stderr
    assert "[1/1] 0001 FAILED: its upgrade() raised RuntimeError\n" in failed.stderr
    assert failed.stderr.rstrip().splitlines()[-1].startswith("error: Migration 0001 failed during upgrade()")


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_the_refusal_of_changed_files_lists_one_file_per_line(lake):
    for number in (1, 2):
        write_migration(lake.migrations, f"000{number}_t{number}.py", _create(f"t{number}"))
    _ok(lake.run("upgrade"))
    for number in (1, 2):
        write_migration(lake.migrations, f"000{number}_t{number}.py", _create(f"u{number}"))
    write_migration(lake.migrations, "0003_t3.py", _create("t3"))

    refused = _ok(lake.run("upgrade"), 1)
    lines = _error(refused).rstrip().splitlines()
    assert lines == [
        "error: Refusing to migrate namespace 'sales': the migration files disagree with its history:",
        "  - 0001 was applied but its file has changed since (checksum differs): 0001_t1.py",
        "  - 0002 was applied but its file has changed since (checksum differs): 0002_t2.py",
        "Restore the files, or run again with --allow-changed to go ahead anyway. If the change to an applied file "
        "is intended (a reviewed edit), record the file as it is now with `iceberg-ops repair`.",
    ]
    (lake.migrations / "0002_t2.py").unlink()
    missing = _error(_ok(lake.run("downgrade", "-1"), 1)).rstrip().splitlines()
    assert missing[1:] == ["  - 0002 was applied but its file is missing ('t2')", "Restore the files."]
    document = json.loads(_ok(lake.run("--json", "upgrade"), 1).stdout)
    assert document["error"].splitlines()[1].startswith("  - 0001 was applied")


# --- ``iceberg-ops unlock`` of a lock whose run still looks alive releases it and warns what follows.


def test_unlocking_a_live_run_warns_and_a_dead_one_does_not(lake):
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    NamespaceLock(catalog, "_iceberg_ops", "sales").acquire("live-run")  # held by this test process, alive

    released = run(lake.root, *lake.flags, "--namespace", "sales", "unlock")
    assert released.returncode == 0, released.stderr
    assert "released the lock held by run live-run" in released.stdout
    assert "warning: that run did not look dead" in released.stderr
    assert "its process still runs on this host" in released.stderr and "LockLostError" in released.stderr

    earlier = NamespaceLock(catalog, "_iceberg_ops", "sales", stale_after=1)
    earlier.clock = lambda: datetime.now(UTC) - timedelta(seconds=1.5)
    earlier.acquire("dead-run")  # 1.5 s ago, with a lease of 1 s: it ran out, nobody renewed it
    again = run(lake.root, *lake.flags, "--namespace", "sales", "--json", "unlock")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["released"]["run_id"] == "dead-run" and "warning" not in again.stderr
