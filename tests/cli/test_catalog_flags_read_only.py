"""Commands that create no table refuse a catalog database that does not exist instead of creating it.

``status``, ``current``, ``history``, ``check``, ``plan``, ``repair``, ``unlock``, the ``maintain``
commands and ``move plan``/``move verify``, given a ``--db-path`` that does not exist, exit 2 naming
``--db-path`` (or the project file's ``db_path:``) and leave no file and no folder behind. A ``sql``
catalog read by them needs no ``--warehouse``; a command that may create tables still asks for it.
Real subprocesses on SQLite files in ``tmp_path`` and on a PostgreSQL database.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.ops_support import run

MIGRATION = """import pyarrow as pa

from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    version = "0001"
    description = "create orders"

    def upgrade(self, ctx):
        ctx.create_table("orders", pa.schema([pa.field("id", pa.int64())]))

    def downgrade(self, ctx):
        ctx.drop_table("orders")
"""

COMMANDS = {
    "status": ["--namespace", "sales", "status"],
    "current": ["--namespace", "sales", "current"],
    "history": ["--namespace", "sales", "history"],
    "check": ["--namespace", "sales", "--migrations-dir", "migrations", "check"],
    "plan": ["--namespace", "sales", "--migrations-dir", "migrations", "plan"],
    "repair": ["--namespace", "sales", "--migrations-dir", "migrations", "repair", "--yes"],
    "unlock": ["--namespace", "sales", "unlock"],
    "maintain health": ["maintain", "health", "sales.orders"],
    "maintain expire": ["maintain", "expire", "sales.orders", "--dry-run"],
    "move plan": ["move", "plan", "sales.orders", "archive.orders", "--create-target"],
    "move verify": ["move", "verify", "sales.orders", "archive.orders"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_missing_db_path_is_refused_naming_it_and_nothing_is_created(command: str, tmp_path: Path):
    (tmp_path / "migrations").mkdir()
    database = tmp_path / "typo" / "catalog.db"
    flags = ["--catalog", "sqlite", "--db-path", str(database), "--warehouse", str(tmp_path / "typo" / "warehouse")]

    result = run(tmp_path, *flags, "--json", *COMMANDS[command])

    assert result.returncode == 2, result.stderr
    error = " ".join(result.stderr.split())
    assert f"error: The SQLite catalog database {database} (--db-path) does not exist" in error
    assert "the catalog was opened without creating one, so nothing was created" in error
    assert "Check the path; `iceberg-ops upgrade` creates a new catalog there." in error
    assert "create=" not in error and "db_path)" not in error  # the command line's words, not Python's
    document = json.loads(result.stdout)
    assert (document["type"], document["exit_code"]) == ("CatalogNotFoundError", 2)
    assert not (tmp_path / "typo").exists()


def test_a_database_named_in_the_project_file_is_named_as_its_key(tmp_path: Path):
    config = tmp_path / "iceberg-ops.yaml"
    config.write_text("catalog:\n  kind: sqlite\n  db_path: data/catalog.db\nnamespace: sales\n")

    result = run(tmp_path, "status")

    assert result.returncode == 2
    error = " ".join(result.stderr.split())
    assert f"({'`db_path:`'} under `catalog:` in {config}) does not exist" in error
    assert not (tmp_path / "data").exists()


def test_the_projects_own_database_not_created_yet_reads_as_empty_and_is_not_created(tmp_path: Path):
    (tmp_path / "iceberg-ops.yaml").write_text("catalog:\n  kind: sqlite\nnamespace: sales\n")
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_create_orders.py").write_text(MIGRATION)

    for command in (["status"], ["plan"], ["history"], ["current"]):
        result = run(tmp_path, *command)
        assert result.returncode == 0, (command, result.stderr)
    assert "note:      namespace 'sales' does not exist yet" in run(tmp_path, "status").stdout
    assert run(tmp_path, "check").returncode == 1  # 0001 is pending
    assert not (tmp_path / "local_data").exists()  # a read created nothing; the first upgrade will
    assert run(tmp_path, "upgrade").returncode == 0
    assert (tmp_path / "local_data" / "iceberg_catalog.db").is_file()


def test_an_upgrade_still_creates_the_catalog_a_db_path_names(tmp_path: Path):
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_create_orders.py").write_text(MIGRATION)
    flags = ["--catalog", "sqlite", "--db-path", "new/catalog.db", "--namespace", "sales", "--migrations-dir"]

    assert run(tmp_path, *flags, "migrations", "upgrade").returncode == 0
    status = run(tmp_path, *flags, "migrations", "status")

    assert status.returncode == 0, status.stderr
    assert "current:   0001" in status.stdout and (tmp_path / "new" / "catalog.db").is_file()


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
@pytest.mark.postgres
def test_a_sql_catalog_is_read_without_a_warehouse(new_postgres_database: str, tmp_path: Path):
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_create_orders.py").write_text(MIGRATION)
    sql = ["--catalog", "sql", "--catalog-uri", new_postgres_database]
    project = [*sql, "--namespace", "sales", "--migrations-dir", "migrations"]

    refused = run(tmp_path, *project, "upgrade")  # may create tables: the warehouse is needed
    assert refused.returncode == 2
    assert (
        "error: The 'sql' catalog needs a place for its data files: --warehouse (a folder, created if missing, or "
        "a URI such as s3://bucket/warehouse)." in " ".join(refused.stderr.split())
    )
    assert run(tmp_path, *project, "--warehouse", str(tmp_path / "warehouse"), "upgrade").returncode == 0

    for command in (["status"], ["current"], ["history"], ["check"], ["plan", "base"]):
        result = run(tmp_path, *project, *command)
        assert result.returncode == 0, (command, result.stderr)
    assert "current:   0001" in run(tmp_path, *project, "status").stdout
    health = run(tmp_path, *sql, "maintain", "health", "sales.orders")
    assert health.returncode == 0 and "sales.orders: healthy" in health.stdout, health.stderr


def test_a_database_named_by_an_airflow_connection_is_named_as_its_extra(tmp_path: Path):
    connection = {"conn_type": "iceberg_ops", "extra": {"kind": "sqlite", "db_path": str(tmp_path / "typo.db")}}

    result = run(
        tmp_path,
        "--conn-id",
        "lake",
        "--namespace",
        "sales",
        "status",
        env={"AIRFLOW_CONN_LAKE": json.dumps(connection)},
    )

    assert result.returncode == 2
    error = " ".join(result.stderr.split())
    assert f"error: The SQLite catalog database {tmp_path / 'typo.db'} (the `db_path` extra of Airflow" in error
    assert "'lake') does not exist, and the catalog was opened without creating one" in error
    assert not (tmp_path / "typo.db").exists()
