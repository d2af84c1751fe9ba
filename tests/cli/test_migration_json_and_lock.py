"""The migration commands' ``--json`` and the held lock, as docs/cli.md states them.

``--json`` is taken after a migration command as well as before it; ``status --json`` says
``null`` for what it does not know (``pending``, ``changed``, ``missing``, ``out_of_order`` when the
files were not compared), also for a namespace that does not exist yet; a lock held by another run
is refused naming the command that releases it, ``iceberg-ops unlock``, and no Python call. Real
subprocesses on a SQLite catalog in ``tmp_path``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from iceberg_ops_provider.errors import ConcurrentMigrationError
from iceberg_ops_provider.history import NamespaceLock
from iceberg_ops_provider.runner import MigrationRunner
from tests.cli.ops_support import run, sqlite_catalog
from tests.cli.test_catalog_flags_read_only import MIGRATION

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project file on a SQLite catalog in ``tmp_path``, namespace ``sales``, one migration."""
    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_create_orders.py").write_text(MIGRATION)
    (tmp_path / "iceberg-ops.yaml").write_text(
        f"catalog:\n  kind: sqlite\n  db_path: {tmp_path / 'catalog.db'}\n  warehouse_dir: {tmp_path / 'warehouse'}\n"
        "namespace: sales\n"
    )
    sqlite_catalog(tmp_path)  # the catalog exists (empty), as after a first command
    return tmp_path


COMMANDS = [["status"], ["current"], ["history"], ["history", "--events"], ["plan"], ["check"], ["unlock"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_json_after_a_migration_command_is_the_same_as_before_it(project: Path, command: list[str]):
    before = run(project, "--json", *command)
    after = run(project, *command, "--json")

    assert after.returncode == before.returncode, after.stderr
    assert json.loads(after.stdout) == json.loads(before.stdout)


def test_json_after_upgrade_and_after_a_refused_downgrade(project: Path):
    upgraded = run(project, "upgrade", "--json")
    assert upgraded.returncode == 0, upgraded.stderr
    assert [row["version"] for row in json.loads(upgraded.stdout)] == ["0001"]

    refused = run(project, "downgrade", "5", "--json")
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["exit_code"] == 2


def test_status_json_says_null_for_what_it_does_not_know(tmp_path: Path):
    sqlite_catalog(tmp_path)
    flags = ["--catalog", "sqlite", "--db-path", str(tmp_path / "catalog.db"), "--namespace", "nowhere"]

    unknown = json.loads(run(tmp_path, *flags, "status", "--json").stdout)  # no files, no such namespace

    assert unknown["files_compared"] is False
    assert [unknown[key] for key in ("pending", "changed", "missing", "out_of_order")] == [None] * 4
    assert (unknown["current"], unknown["applied"], unknown["failed"], unknown["broken"]) == (None, [], [], [])

    (tmp_path / "migrations").mkdir()
    (tmp_path / "migrations" / "0001_create_orders.py").write_text(MIGRATION)
    compared = json.loads(run(tmp_path, *flags, "--migrations-dir", "migrations", "status", "--json").stdout)
    assert compared["files_compared"] is True
    assert [step["version"] for step in compared["pending"]] == ["0001"]
    assert (compared["changed"], compared["missing"], compared["out_of_order"]) == ([], [], [])


def test_the_docs_state_the_null_shape():
    text = " ".join(DOCS.read_text().split())
    assert "`pending`, `changed`, `missing` and `out_of_order` are `null`" in text


def test_a_held_lock_names_the_unlock_command_on_the_command_line_and_the_call_in_python(project: Path):
    catalog = sqlite_catalog(project)
    NamespaceLock(catalog, "_iceberg_ops", "sales").acquire("other-run")  # held by this live process

    refused = run(project, "upgrade")

    assert refused.returncode == 1
    text = " ".join(refused.stderr.split())
    assert "error: Namespace 'sales' is being migrated by run other-run" in text
    assert text.endswith("To release it at once (only if that run is really gone): `iceberg-ops unlock`.")
    assert "force_unlock" not in text

    with pytest.raises(ConcurrentMigrationError) as raised:
        MigrationRunner(catalog, "sales", project / "migrations").upgrade()
    python = "(only if that run is really gone): runner.force_unlock() or `iceberg-ops unlock`."
    assert str(raised.value).endswith(python)

    assert "released the lock held by run other-run" in run(project, "unlock").stdout
    assert run(project, "upgrade").returncode == 0
