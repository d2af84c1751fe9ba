"""Misspelt names on the command line get the names there are and the closest one.

A namespace (``--namespace`` of ``unlock``, a namespace with ``--all``, the namespace part of a
table), a table of ``maintain`` and ``move``, a ``--threshold`` name, and a model of ``revision
--target-table``. Real subprocesses on a SQLite catalog in ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake
from tests.support.tables import small_files_table


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``sales.events`` and ``sales.orders``."""
    root = (shared := Lake(tmp_path_factory.mktemp("lake"))).root
    small_files_table(shared.catalog(), "sales.events", appends=1, rows=10)
    small_files_table(shared.catalog(), "sales.orders", appends=1, rows=10)
    return root


def _said(result) -> str:
    assert result.returncode == 2, result.stderr
    return " ".join(result.stderr.split())


def test_a_misspelt_namespace_of_unlock(lake: Path):
    text = _said(run(lake, *sqlite_flags(lake), "--namespace", "salse", "unlock"))

    assert "Namespace 'salse' does not exist in the catalog and has no migration history." in text
    assert "Check --namespace (existing: sales). Did you mean 'sales'?" in text


def test_a_misspelt_namespace_with_all(lake: Path):
    text = _said(run(lake, *sqlite_flags(lake), "maintain", "health", "--all", "salse"))

    assert "Error: Invalid value for 'TABLE': namespace 'salse' does not exist in the catalog" in text
    assert "(existing namespaces: sales). Did you mean 'sales'?" in text


@pytest.mark.parametrize(
    ("table", "detail", "guess"),
    [
        ("sales.evnts", "(tables of sales: events, orders; with --all, sales means every one of them)", "sales.events"),
        ("salse.orders", "(namespace 'salse' does not exist either; existing namespaces: sales)", "sales.orders"),
    ],
)
def test_a_misspelt_table_of_maintain(lake: Path, table: str, detail: str, guess: str):
    text = _said(run(lake, *sqlite_flags(lake), "maintain", "health", table))

    assert f"Error: Invalid value for 'TABLE': table '{table}' does not exist in the catalog {detail}." in text
    assert text.endswith(f"Did you mean '{guess}'?")


def test_a_misspelt_source_and_target_of_move(lake: Path):
    source = _said(run(lake, *sqlite_flags(lake), "move", "sales.evnts", "archive.events", "--create-target"))
    assert (
        "error: The source table sales.evnts does not exist (tables of sales: events, orders). "
        "Did you mean 'sales.events'?" in source
    )

    target = _said(run(lake, *sqlite_flags(lake), "move", "sales.events", "sales.ordrs"))
    assert "The target table sales.ordrs does not exist (tables of sales: events, orders). Did you mean" in target
    assert "Did you mean 'sales.orders'? Create it first, or pass --create-target to create it" in target


def test_a_misspelt_threshold(lake: Path):
    text = _said(run(lake, *sqlite_flags(lake), "maintain", "health", "sales.events", "--threshold", "max_snapshot=3"))

    assert "Error: Invalid value for '--threshold': Unknown health threshold(s) ['max_snapshot']" in text
    assert text.endswith("Did you mean 'max_snapshots'?")


def test_a_misspelt_model(tmp_path: Path):
    (tmp_path / "models").mkdir()
    (tmp_path / "migrations").mkdir()
    (tmp_path / "models" / "orders.yaml").write_text("name: orders\ncolumns:\n  - {name: id, type: long}\n")
    (tmp_path / "iceberg-ops.yaml").write_text("catalog:\n  kind: sqlite\nnamespace: sales\n")

    text = _said(run(tmp_path, "revision", "-m", "x", "--autogenerate", "--target-table", "ordrs"))

    assert f"No model for table 'ordrs' in {tmp_path / 'models'} (its models: orders). Did you mean 'orders'?" in text


def test_a_model_whose_name_is_close_to_a_live_table_without_a_model(tmp_path: Path):
    small_files_table(sqlite_catalog(tmp_path), "sales.orders", appends=1, rows=1)
    (tmp_path / "models").mkdir()
    (tmp_path / "migrations").mkdir()
    (tmp_path / "models" / "orders.yaml").write_text("name: ordrs\ncolumns:\n  - {name: id, type: long}\n")
    flags = [*sqlite_flags(tmp_path), "--namespace", "sales", "--migrations-dir", str(tmp_path / "migrations")]
    (tmp_path / "iceberg-ops.yaml").write_text("namespace: sales\n")

    result = run(tmp_path, *flags, "revision", "-m", "x", "--autogenerate")

    assert result.returncode == 0, result.stderr
    assert "note: the model of ordrs creates a new table; orders exists and has no model." in result.stdout


@pytest.mark.parametrize(("kind", "guess"), [("postgres", "sql"), ("postgresql", "sql"), ("sqlit", "sqlite")])
def test_a_database_or_a_misspelling_as_the_catalog_kind(tmp_path: Path, kind: str, guess: str):
    text = _said(run(tmp_path, "--catalog", kind, "--namespace", "sales", "status"))

    assert f"Unknown catalog kind '{kind}' (--catalog)." in text and f"Did you mean '{guess}'?" in text
