"""The plan as a document (``plan_format`` 1): each step's table requirements and updates as the REST
specification names them, catalog operations apart, lint findings, the commit mode; the same from
the command line and the operator; and on a real REST catalog (SeaweedFS) exactly what the commit
then sends, captured from the requests the run makes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.history.intent import RECEIPT_PROPERTY
from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.plan_document import PLAN_FORMAT, plan_document
from tests.cli.ops_support import sqlite_flags
from tests.support.migrations import write_migration

CREATE = 'ctx.create_table("orders", pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())]))'
CHANGE = """\
ctx.add_column("orders", "email", "string")
ctx.rename_column("orders", "note", "comment")
ctx.add_partition_field("orders", "bucket(4, id)")
ctx.set_sort_order("orders", ["id"])
ctx.set_properties("orders", owner="sales")
ctx.create_table("audit.events", pa.schema([pa.field("id", pa.int64())]))
ctx.rename_table("scratch", "scratch_old")
"""


def _migrations(root: Path) -> Path:
    folder = root / "migrations"
    write_migration(
        folder, "0001_orders.py", CREATE + '\nctx.create_table("scratch", pa.schema([pa.field("id", pa.int64())]))'
    )
    write_migration(folder, "0002_change.py", CHANGE)
    return folder


def _actions(change: dict) -> list[str]:
    return [update["action"] for update in change["updates"]]


def test_the_document_lists_catalog_operations_apart_and_each_tables_updates(catalog, tmp_path):
    runner = MigrationRunner(catalog, "sales", _migrations(tmp_path))
    runner.upgrade("0001")
    document = plan_document(runner, runner.plan("head", inspect=True), "head")

    assert document["plan_format"] == PLAN_FORMAT == 1 and document["commit_mode"] == "all-or-nothing"
    (step,) = document["steps"]
    assert (step["version"], step["direction"], step["risk"], step["complete"]) == ("0002", "upgrade", "review", True)
    assert [c["operation"] for c in step["changes"]] == [
        "update-table",
        "create-namespace",
        "create-table",
        "rename-table",
    ]
    orders, namespace, created, renamed = step["changes"]
    # One schema for the add and the rename, then the spec, the order and the properties, the run's receipt last.
    assert _actions(orders) == [
        "add-schema",
        "set-current-schema",
        "add-spec",
        "set-default-spec",
        "add-sort-order",
        "set-default-sort-order",
        "set-properties",
        "set-properties",
    ]
    assert [f["name"] for f in orders["updates"][0]["schema"]["fields"]] == ["id", "comment", "email"]
    assert orders["updates"][-1] == {"action": "set-properties", "updates": {RECEIPT_PROPERTY: "<receipt>"}}
    assert [r["type"] for r in orders["requirements"]][-1] == "assert-table-uuid"
    assert "assert-current-schema-id" in [r["type"] for r in orders["requirements"]]
    assert namespace == {"operation": "create-namespace", "namespace": "audit"}
    assert created["table"] == "audit.events" and [f["name"] for f in created["schema"]["fields"]] == ["id"]
    assert renamed == {"operation": "rename-table", "source": "sales.scratch", "destination": "sales.scratch_old"}
    assert {f["rule"] for f in step["findings"]} == {"rename-column", "rename-table"}


def test_the_command_line_prints_it_with_sorted_keys_and_two_plans_are_identical(catalog, tmp_path):
    folder = _migrations(tmp_path)
    MigrationRunner(catalog, "sales", folder).upgrade("0001")
    flags = [*sqlite_flags(tmp_path), "--namespace", "sales", "--migrations-dir", str(folder), "--json", "plan"]
    first, second = CliRunner().invoke(cli, flags), CliRunner().invoke(cli, flags)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    document = json.loads(first.stdout)
    assert first.stdout == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert document["steps"][0]["changes"][0]["table"] == "sales.orders"


def test_an_irreversible_rollback_plans_no_changes(catalog, tmp_path):
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_orders.py", CREATE, downgrade='raise IrreversibleMigrationError("kept")')
    runner = MigrationRunner(catalog, "sales", folder)
    runner.upgrade()
    (step,) = plan_document(runner, runner.plan("base", inspect=True), "base")["steps"]
    assert step["risk"] == "irreversible" and step["changes"] == []
    assert [f["rule"] for f in step["findings"]] == ["irreversible-downgrade"]


@pytest.mark.backends
def test_on_a_rest_catalog_the_plan_is_what_the_commit_sends(seaweedfs, unique_name, tmp_path):
    seaweedfs.create_table_bucket(unique_name)
    catalog = seaweedfs.rest_catalog(unique_name)
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_orders.py", CREATE)
    write_migration(folder, "0002_change.py", "\n".join(CHANGE.splitlines()[:5]))  # table changes only
    runner = MigrationRunner(catalog, "sales", folder, meta_namespace="ops_meta")
    runner.upgrade("0001")
    (step,) = plan_document(runner, runner.plan("head", inspect=True), "head")["steps"]
    (planned,) = step["changes"]

    sent: list[dict] = []

    def record(response, *args, **kwargs):
        body = response.request.body
        if response.request.method == "POST" and body:
            data = json.loads(body)
            sent.extend(data.get("table-changes", [data] if "updates" in data else []))

    catalog._session.hooks["response"].append(record)
    runner.upgrade()

    (commit,) = [c for c in sent if c.get("identifier") == {"namespace": ["sales"], "name": "orders"}]
    receipt = commit["updates"][-1]["updates"][RECEIPT_PROPERTY]
    expected = json.loads(json.dumps(planned["updates"]).replace('"<receipt>"', json.dumps(receipt)))
    assert commit["updates"] == expected
    assert commit["requirements"] == planned["requirements"]
