"""How each migration was committed, and the commit mode ``status`` shows, on real catalogs.

SQLite (all-or-nothing by default, or turned off), SeaweedFS's REST catalog (its multi-table
endpoint, and behind a loopback proxy that answers that endpoint with 404), and PyIceberg's Glue
catalog (no multi-table commit; built without a server, since asking needs none).
"""

from __future__ import annotations

import json

import pytest

from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration

TWO_TABLES = (
    'ctx.create_table("orders", pa.schema([("id", pa.int64())]))\n'
    'ctx.create_table("items", pa.schema([("id", pa.int64())]))\n'
    'ctx.create_table("old", pa.schema([("id", pa.int64())]))'
)


def _mixed_migrations(folder) -> None:
    write_migration(folder, "0001_tables.py", TWO_TABLES)
    write_migration(
        folder,
        "0002_mixed.py",
        'ctx.drop_table("old")\nctx.rename_table("items", "archive.items")\nctx.add_column("orders", "c2", "string")',
    )
    write_migration(
        folder,
        "0003_early.py",
        'ctx.add_column("orders", "c3", "string")\nctx.commit()\nctx.set_properties("orders", step="3")',
    )
    write_migration(folder, "0004_nothing.py", "pass")
    write_migration(folder, "0005_only_drop.py", 'ctx.drop_table("archive.items")')
    write_migration(folder, "0006_reads.py", 'ctx.load_table("orders").scan().to_arrow()')


def _how(results) -> list[tuple[str, bool, tuple[str, ...], str | None]]:
    return [(r.version, r.atomic, r.outside_atomic_commit, r.not_atomic_reason) for r in results]


def test_each_result_says_whether_it_was_all_or_nothing_and_what_fell_outside(catalog, migrations_dir):
    _mixed_migrations(migrations_dir)
    runner = MigrationRunner(catalog, "sales", migrations_dir)

    results = runner.upgrade()

    assert _how(results) == [
        ("0001", True, ("create namespace sales",), None),
        ("0002", True, ("sales.old (drop)", "sales.items (rename to archive.items)", "create namespace archive"), None),
        (
            "0003",
            False,
            ("sales.orders (commit)", "sales.orders (commit)"),
            "it committed before its body finished (ctx.commit())",
        ),
        ("0004", False, (), "it changes no table"),
        (
            "0005",
            False,
            ("archive.items (drop)",),
            "it dropped table archive.items: a drop commits on its own, outside the all-or-nothing commit",
        ),
        ("0006", False, ("sales.orders (reached directly)",), "it reached sales.orders directly"),
    ]
    as_json = json.loads(json.dumps([r.to_json() for r in results]))
    assert as_json[1]["atomic"] is True and as_json[1]["not_atomic_reason"] is None
    assert as_json[1]["outside_atomic_commit"][0] == "sales.old (drop)"
    assert as_json[2]["atomic"] is False and "ctx.commit()" in as_json[2]["not_atomic_reason"]
    assert {row.status for row in runner.history()} == {"applied"}


def test_with_atomic_commits_off_every_commit_is_its_own_and_says_why(catalog, migrations_dir):
    _mixed_migrations(migrations_dir)
    runner = MigrationRunner(catalog, "sales", migrations_dir, atomic_commits=False)

    results = runner.upgrade("0002")

    off = "all-or-nothing commits are turned off (atomic_commits=False)"
    assert _how(results) == [
        (
            "0001",
            False,
            ("sales.orders (create)", "sales.items (create)", "sales.old (create)", "create namespace sales"),
            off,
        ),
        (
            "0002",
            False,
            (
                "sales.old (drop)",
                "sales.items (rename to archive.items)",
                "sales.orders (commit)",
                "create namespace archive",
            ),
            off,
        ),
    ]
    # A downgrade reports the same way.
    write_migration(
        migrations_dir, "0007_prop.py", 'ctx.set_properties("orders", a="1")', 'ctx.remove_properties("orders", "a")'
    )
    runner.atomic_commits = True
    runner.upgrade()
    (rolled_back,) = runner.downgrade("-1")
    assert (rolled_back.version, rolled_back.status, rolled_back.atomic) == ("0007", "rolled_back", True)


def test_status_shows_the_commit_mode(catalog, migrations_dir):
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    status = MigrationRunner(catalog, "sales", migrations_dir).status()
    assert status.commit_mode == "atomic"
    assert status.commit_mode_reason.startswith("PyIceberg's SQL catalog: one database transaction")
    assert status.commit_mode_reason.endswith("(sql-transaction)")
    assert status.to_json()["commit_mode"] == "atomic"

    off = MigrationRunner(catalog, "sales", migrations_dir, atomic_commits=False).status()
    assert (off.commit_mode, off.commit_mode_reason) == (
        "per-table",
        "all-or-nothing commits are turned off (atomic_commits=False)",
    )
    assert off.to_json()["commit_mode_reason"] == off.commit_mode_reason


def test_a_catalog_without_a_multi_table_commit_reports_per_table(tmp_path):
    from pyiceberg.catalog.glue import GlueCatalog

    glue = GlueCatalog(
        "glue",
        **{
            "glue.endpoint": "http://127.0.0.1:9",
            "glue.region": "us-east-1",
            "glue.access-key-id": "x",
            "glue.secret-access-key": "y",
        },
    )
    runner = MigrationRunner(glue, "sales", tmp_path, meta_namespace="ops_meta")
    assert runner.commit_mode() == "per-table"
    assert runner.commit_mode_reason() == "GlueCatalog has no multi-table commit"


@pytest.mark.backends
def test_rest_catalogs_with_and_without_the_multi_table_endpoint(seaweedfs, unique_name, migrations_dir):
    from tests.core.atomic.test_rest import _open, proxy

    seaweedfs.create_table_bucket(unique_name)
    write_migration(migrations_dir, "0001_tables.py", TWO_TABLES)
    write_migration(
        migrations_dir,
        "0002_both.py",
        'ctx.add_column("orders", "c2", "string")\nctx.add_column("items", "c2", "string")',
    )
    with proxy(seaweedfs.iceberg_uri, "404") as (url, seen):
        behind = MigrationRunner(_open(seaweedfs, unique_name, uri=url), "sales", migrations_dir, meta_namespace="m")
        status = behind.status()
        assert status.commit_mode == "per-table" and seen == ["POST"]  # asked once, with an empty commit
        assert status.commit_mode_reason.startswith("the REST catalog does not serve POST http://127.0.0.1:")
        assert status.commit_mode_reason.endswith("/transactions/commit")
        results = behind.upgrade("0001")
        assert [(r.atomic, r.not_atomic_reason) for r in results] == [(False, status.commit_mode_reason)]
        assert seen == ["POST"]  # remembered

    direct = MigrationRunner(seaweedfs.rest_catalog(unique_name), "sales", migrations_dir, meta_namespace="m")
    status = direct.status()
    assert status.commit_mode == "atomic" and status.commit_mode_reason.endswith("(rest-transaction)")
    (result,) = direct.upgrade()
    assert (result.version, result.atomic, result.outside_atomic_commit) == ("0002", True, ())
