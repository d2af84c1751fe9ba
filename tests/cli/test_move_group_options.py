"""``move --json plan A B``: a flag typed between ``move`` and its subcommand belongs to the subcommand, as
``maintain --json health`` does; ``move A B`` still runs the default ``run``."""

from __future__ import annotations

import json

import pyarrow as pa
from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_catalog, sqlite_flags


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
