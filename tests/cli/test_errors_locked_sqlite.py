"""A SQLite catalog database another process keeps locked: the command says so, naming the file, not the driver's text.

A real lock: this test process holds an exclusive transaction on the catalog's database file while the
command line runs in a subprocess, which waits SQLite's busy time and then gives up.
"""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags


def test_a_locked_catalog_database_is_named_and_called_locked(tmp_path: Path):
    catalog = sqlite_catalog(tmp_path)
    catalog.create_namespace("sales")
    catalog.close()
    database = tmp_path / "catalog.db"
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with ThreadPoolExecutor(2) as both:  # each waits SQLite's busy time: side by side, they wait it once
            text_run = both.submit(run, tmp_path, *sqlite_flags(tmp_path), "--namespace", "sales", "status")
            json_run = both.submit(run, tmp_path, *sqlite_flags(tmp_path), "--namespace", "sales", "--json", "status")
            text, as_json = text_run.result(), json_run.result()
    finally:
        holder.rollback()
        holder.close()
    assert text.returncode not in (0, 2), text.stderr
    assert str(database) in text.stderr and "locked by another process" in text.stderr, text.stderr
    assert "OperationalError" not in text.stderr and "sqlalche.me" not in text.stderr
    error = json.loads(as_json.stdout)
    assert error["type"] == "CatalogUnavailableError" and "locked by another process" in error["error"]
    after = run(tmp_path, *sqlite_flags(tmp_path), "--namespace", "sales", "status")
    assert after.returncode == 0, after.stderr
