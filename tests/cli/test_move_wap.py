"""``iceberg-ops move --branch``, ``move audit``, ``move publish`` and ``move discard``: real processes on a
SQLite catalog (and one flow on PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from tests.cli.ops_support import run
from tests.support.lake import Lake

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("customer", pa.string()), pa.field("amount", pa.int64())])
MOVE = ("staging.orders", "sales.orders", "--branch", "backfill")


def _rows(ids: range, customer: str | None = "c", amount: int = 1) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "customer": pa.array([customer] * len(ids), pa.string()),
            "amount": pa.array([amount] * len(ids), pa.int64()),
        }
    )


@pytest.fixture
def tables(lake: Lake):
    """``staging.orders`` with 10 rows to move, ``sales.orders`` with 3 rows on main."""
    catalog = lake.catalog()
    catalog.create_namespace("staging")
    catalog.create_namespace("sales")
    catalog.create_table("staging.orders", SCHEMA).append(_rows(range(10)))
    target = catalog.create_table("sales.orders", SCHEMA)
    target.append(_rows(range(100, 103)))
    return catalog.load_table("staging.orders"), target


def _ops(lake: Lake, *args: str) -> subprocess.CompletedProcess[str]:
    return run(lake.root, *lake.flags, *args)


def _main_ids(lake: Lake) -> list[int]:
    table = lake.catalog().load_table("sales.orders")
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_move_to_a_branch_audit_and_publish_leave_main_alone_until_published(lake, tables):
    moved = _ops(lake, "move", *MOVE)
    assert moved.returncode == 0, moved.stderr
    assert "move staging.orders -> sales.orders on branch backfill (append, move id" in moved.stdout
    assert "main of sales.orders is unchanged until the branch is audited and published" in moved.stdout
    assert _main_ids(lake) == [100, 101, 102]  # main sees nothing of the move yet
    assert "backfill" in lake.catalog().load_table("sales.orders").metadata.refs

    unaudited = _ops(lake, "move", "publish", *MOVE)
    assert unaudited.returncode == 1
    assert "cannot publish branch 'backfill'" in unaudited.stderr
    assert "audit it first. To audit it: `iceberg-ops" in unaudited.stderr
    assert "move audit staging.orders sales.orders --branch backfill --not-null COL --unique COL ...`" in (
        unaudited.stderr
    )

    failing = _ops(lake, "move", "audit", *MOVE, "--no-rows-where", "id >= 8", "--not-null", "customer")
    assert failing.returncode == 1, failing.stderr
    assert "FAILED (1 of 2 checks)" in failing.stdout and "10 rows read (scope move)" in failing.stdout
    assert "  ok      not_null(customer)" in failing.stdout
    assert "{'id': 8," in failing.stdout  # a sample of the offending rows
    assert "or discard it: `iceberg-ops " in failing.stdout
    assert failing.stdout.rstrip().endswith("move discard staging.orders sales.orders --branch backfill`")
    report = json.loads(_ops(lake, "move", "audit", *MOVE, "--no-rows-where", "id >= 8", "--json").stdout)
    assert report["ok"] is False and report["rows"] == 10
    assert [(c["name"], c["failed_rows"]) for c in report["checks"]] == [("no_rows_where(id >= 8)", 2)]
    assert _ops(lake, "move", "publish", *MOVE).returncode == 1  # a failing audit publishes nothing

    passing = _ops(
        lake,
        "move",
        "audit",
        *MOVE,
        "--not-null",
        "id",
        "--unique",
        "id",
        "--unique",
        "customer,id",
        "--min-rows",
        "10",
        "--max-rows",
        "10",
        "--json",
    )
    assert passing.returncode == 0, passing.stderr
    names = [c["name"] for c in json.loads(passing.stdout)["checks"]]
    assert len(names) == 5 and all("customer" in n or "id" in n or "rows" in n for n in names)
    assert _main_ids(lake) == [100, 101, 102]

    hinted = _ops(lake, "move", "audit", *MOVE, "--not-null", "id")
    assert hinted.stdout.rstrip().endswith("move publish staging.orders sales.orders --branch backfill`")
    published = _ops(lake, "move", "publish", *MOVE)
    assert published.returncode == 0, published.stderr
    assert "published: main fast-forwarded from snapshot" in published.stdout
    assert _main_ids(lake) == [*range(10), 100, 101, 102]
    again = _ops(lake, "move", "publish", *MOVE, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["how"] == "already_published"
    assert _main_ids(lake) == [*range(10), 100, 101, 102]


def test_publish_after_appends_on_main_appends_the_files_and_discard_drops_a_branch(lake, tables):
    assert _ops(lake, "move", *MOVE).returncode == 0
    assert _ops(lake, "move", "audit", *MOVE, "--unique", "id").returncode == 0
    lake.catalog().load_table("sales.orders").append(_rows(range(200, 202)))  # another writer appends to main meanwhile
    published = _ops(lake, "move", "publish", *MOVE)
    assert published.returncode == 0, published.stderr
    assert "published: 1 data file(s) of the audited snapshot" in published.stdout
    assert "appended to main" in published.stdout
    assert _main_ids(lake) == [*range(10), 100, 101, 102, 200, 201]

    lake.catalog().load_table("staging.orders").append(_rows(range(10, 12)))
    other = ("staging.orders", "sales.orders", "--mode", "incremental", "--branch", "more")
    assert _ops(lake, "move", *other).returncode == 0
    discarded = _ops(lake, "move", "discard", *other)
    assert discarded.returncode == 0, discarded.stderr
    assert "branch more of sales.orders discarded" in discarded.stdout and "main is untouched" in discarded.stdout
    assert "more" not in lake.catalog().load_table("sales.orders").metadata.refs
    assert _main_ids(lake) == [*range(10), 100, 101, 102, 200, 201]
    assert json.loads(_ops(lake, "move", "discard", *other, "--json").stdout)["dropped"] is False


def test_a_publish_refusing_other_writers_deletes_the_audit_did_not_read_names_the_scope_option(lake, tables):
    assert _ops(lake, "move", *MOVE).returncode == 0
    lake.catalog().load_table("sales.orders").delete("id = 100", branch="backfill")  # one of main's rows
    assert _ops(lake, "move", "audit", *MOVE, "--unique", "id").returncode == 0  # scope move: what the branch gained

    refused = _ops(lake, "move", "publish", *MOVE)
    assert refused.returncode == 1
    assert "would carry their rows unaudited" in refused.stderr and "(--scope branch)" in refused.stderr
    assert "scope=" not in refused.stderr  # worded for the command line, not the Python API
    assert "move audit staging.orders sales.orders --branch backfill --scope branch --not-null COL" in refused.stderr
    assert _main_ids(lake) == [100, 101, 102]

    assert _ops(lake, "move", "audit", *MOVE, "--unique", "id", "--scope", "branch").returncode == 0
    assert _ops(lake, "move", "publish", *MOVE).returncode == 0
    assert _main_ids(lake) == [*range(10), 101, 102]


def test_a_branch_of_another_move_is_refused_naming_the_move_id_that_acts_on_it(lake, tables):
    assert _ops(lake, "move", *MOVE).returncode == 0
    owner = json.loads(_ops(lake, "move", "plan", *MOVE, "--json").stdout)["move_id"]
    other = _ops(lake, "move", "discard", *MOVE, "--where", "id >= 5")  # another definition: another move id
    assert other.returncode == 2
    assert f"pass --move-id {owner} with the arguments it was defined with" in other.stderr, other.stderr
    assert "choose another --branch." in other.stderr
    discarded = _ops(lake, "move", "discard", *MOVE, "--where", "id >= 5", "--move-id", owner)
    assert discarded.returncode == 0, discarded.stderr
    assert "backfill" not in lake.catalog().load_table("sales.orders").metadata.refs


def test_an_incremental_move_with_nothing_new_says_no_branch_was_cut(lake, tables):
    move = ("staging.orders", "sales.orders", "--mode", "incremental", "--where", "id < 50", "--branch", "inc")
    assert _ops(lake, "move", *move).returncode == 0
    assert _ops(lake, "move", "audit", *move).returncode == 0
    assert _ops(lake, "move", "publish", *move).returncode == 0
    lake.catalog().load_table("staging.orders").append(_rows(range(60, 62)))  # not under the filter

    again = _ops(lake, "move", *move)
    assert again.returncode == 0, again.stderr
    assert "nothing new to move since the published run: no branch was cut" in again.stdout
    assert "inc" not in lake.catalog().load_table("sales.orders").metadata.refs
    assert _main_ids(lake) == [*range(10), 100, 101, 102]


def test_bad_audit_input_is_refused_with_the_option_named(lake, tables):
    assert _ops(lake, "move", *MOVE).returncode == 0
    empty = _ops(lake, "move", "audit", *MOVE, "--unique", "id,")
    assert empty.returncode == 2 and "Invalid value for '--unique': 'id,' has an empty column name" in empty.stderr
    bad = _ops(lake, "move", "audit", *MOVE, "--no-rows-where", "id >>")
    assert bad.returncode == 2 and "Invalid value for '--no-rows-where'" in bad.stderr
    no_branch = _ops(lake, "move", "audit", "staging.orders", "sales.orders")
    assert no_branch.returncode == 2 and "--branch NAME" in no_branch.stderr, no_branch.stderr
    main = _ops(lake, "move", "staging.orders", "sales.orders", "--branch", "main")
    assert main.returncode == 2 and "main" in main.stderr


@pytest.mark.postgres
def test_the_flow_on_a_postgresql_catalog(new_postgres_database: str, tmp_path: Path):
    warehouse = tmp_path / "warehouse"
    catalog = CatalogFactory.build("sql", uri=new_postgres_database, warehouse_dir=warehouse)
    catalog.create_namespace("staging")
    catalog.create_namespace("sales")
    catalog.create_table("staging.orders", SCHEMA).append(_rows(range(10)))
    catalog.create_table("sales.orders", SCHEMA).append(_rows(range(100, 103)))
    flags = ("--catalog", "sql", "--catalog-uri", new_postgres_database, "--warehouse", str(warehouse))
    for verb in ((), ("audit", "--unique", "id"), ("publish",)):
        done = run(tmp_path, *flags, "move", *verb[:1], *MOVE, *verb[1:])
        assert done.returncode == 0, done.stderr
    ids = catalog.load_table("sales.orders").scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [*range(10), 100, 101, 102]
