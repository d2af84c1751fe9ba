"""``IcebergMigrateOperator(action="plan")`` pushes the plan document of ``iceberg-ops --json plan``."""

from __future__ import annotations

import json

from click.testing import CliRunner

from iceberg_ops_provider.cli import cli
from tests.cli.ops_support import sqlite_flags
from tests.support.migrations import write_migration


def test_the_plan_task_pushes_the_same_document_as_the_command_line(iceberg_connection):
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    folder = iceberg_connection / "migrations"
    write_migration(folder, "0001_orders.py", 'ctx.create_table("orders", pa.schema([pa.field("id", pa.int64())]))')
    write_migration(folder, "0002_email.py", 'ctx.add_column("orders", "email", "string")')
    flags = [*sqlite_flags(iceberg_connection), "--namespace", "sales", "--migrations-dir", str(folder)]
    assert CliRunner().invoke(cli, [*flags, "upgrade", "0001"]).exit_code == 0

    pushed = IcebergMigrateOperator(
        task_id="plan", action="plan", namespace="sales", migrations_dir=str(folder)
    ).execute({})

    printed = json.loads(CliRunner().invoke(cli, [*flags, "--json", "plan"]).stdout)
    assert pushed["plan"] == printed and pushed["plan"]["plan_format"] == 1
    assert [step["version"] for step in pushed["migrations"]] == ["0002"]
    assert pushed["version_after"] == "0001"  # nothing ran


def test_a_plan_whose_dry_run_raises_fails_the_task_naming_the_step(iceberg_connection):
    import pytest

    from iceberg_ops_provider.hooks.version_compat import AirflowException
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    folder = iceberg_connection / "migrations"
    write_migration(folder, "0001_orders.py", 'ctx.create_table("orders", pa.schema([pa.field("id", pa.int64())]))')
    write_migration(folder, "0002_broken.py", 'raise RuntimeError("no such partner table")')
    operator = IcebergMigrateOperator(task_id="plan", action="plan", namespace="sales", migrations_dir=str(folder))

    with pytest.raises(AirflowException) as raised:
        operator.execute({})

    text = str(raised.value)
    assert "0002: failed: a dry run of its body raised RuntimeError: no such partner table" in text
    assert "Fix the migration file" in text
