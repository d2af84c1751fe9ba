"""A plan whose first step creates a table that a later step changes: two plans are the same text (the
later step's ``assert-table-uuid`` carries a UUID derived from the table's name, not a random one),
and neither planning nor upgrading warns about the in-memory placeholder of the new table."""

from __future__ import annotations

import uuid
import warnings

from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from iceberg_ops_provider.runner import MigrationRunner
from tests.cli.ops_support import sqlite_flags
from tests.support.migrations import write_migration


def _folder(tmp_path):
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_create.py", 'ctx.create_table("orders", pa.schema([pa.field("id", pa.int64())]))')
    write_migration(folder, "0002_widen.py", 'ctx.add_column("orders", "note", "string")')
    return folder


def test_two_plans_over_a_table_the_plan_creates_are_the_same_text(catalog, tmp_path):
    folder = _folder(tmp_path)  # the catalog exists (the fixture made it) and holds no table yet
    flags = [*sqlite_flags(tmp_path), "--namespace", "sales", "--migrations-dir", str(folder), "--json", "plan"]
    first, second = CliRunner().invoke(cli, flags), CliRunner().invoke(cli, flags)
    assert first.exit_code == 0, first.output
    assert '"assert-table-uuid"' in first.stdout
    assert first.stdout == second.stdout


def test_the_new_tables_placeholder_brings_no_warning_and_the_real_table_its_own_uuid(catalog, tmp_path):
    folder = _folder(tmp_path)
    runner = MigrationRunner(catalog, "sales", folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.plan("head", inspect=True)
        runner.upgrade()
    assert not [w for w in caught if "No preferred file implementation" in str(w.message)]
    placeholder = uuid.uuid5(uuid.NAMESPACE_URL, "iceberg-ops:placeholder:sales.orders")
    assert catalog.load_table("sales.orders").metadata.table_uuid != placeholder
