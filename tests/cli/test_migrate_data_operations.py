"""Data operations on the command line: ``plan`` shows each with its estimate, ``upgrade`` its progress.

The real ``iceberg-ops`` in a subprocess on a real SQLite catalog: ``plan`` labels a data operation
``data`` (a delete ``destructive``) with the files, bytes and rows it would rewrite, as words and in
``--json`` as numbers; ``upgrade`` prints a line per committed unit on stderr (rows, bytes, rate, ETA),
and with ``--json`` stdout stays one JSON document.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa

from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags
from tests.support.migrations import write_migration

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
FIX = """
ctx.add_column("orders", "score", "long")
ctx.backfill("orders", "score", 7)
ctx.delete_rows("orders", "id < 25")
ctx.rewrite_partitions("orders")
"""


def _lake(root: Path) -> None:
    """``sales.orders``: four files of 25 rows, each its own unit (a tiny unit size)."""
    catalog = sqlite_catalog(root)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", SCHEMA, properties={UNIT_BYTES_PROPERTY: "1"})
    for n in range(4):
        ids = list(range(n * 25, (n + 1) * 25))
        table.append(pa.table({"id": ids, "v": ids}, schema=SCHEMA))
    write_migration(root / "migrations", "0001_fix.py", FIX)


def _cli(root: Path, *args: str):
    options = [*sqlite_flags(root), "--namespace", "sales", "--migrations-dir", str(root / "migrations")]
    return run(root, *options, *args)


def _state(root: Path) -> dict[str, tuple[str, list[int]]]:
    """Every table's metadata location and snapshot ids."""
    catalog = sqlite_catalog(root)
    tables = [catalog.load_table(name) for ns in catalog.list_namespaces() for name in catalog.list_tables(ns)]
    return {str(t.name()): (t.metadata_location, [s.snapshot_id for s in t.snapshots()]) for t in tables}


def test_plan_shows_each_data_operation_with_its_estimate(tmp_path: Path):
    _lake(tmp_path)
    before = _state(tmp_path)

    result = _cli(tmp_path, "plan")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "upgrade 0001 fix  [destructive]"
    assert re.fullmatch(
        r"    \[data\] backfill score of orders where it is null \(estimate: rewrites 4 files, [\d.,]+ KiB, 100 rows; "
        r"4 commits\)",
        lines[2],
    ), lines[2]
    assert re.fullmatch(
        r"    \[destructive\] delete rows of orders where id < 25 \(estimate: removes 1 file whole, [\d.,]+ KiB, "
        r"25 rows; 1 commit\)",
        lines[3],
    ), lines[3]
    assert (
        lines[4]
        == "    [safe] rewrite the files of orders into its current partition spec and sort order (estimate: no file "
        "to rewrite)"
    )

    document = json.loads(_cli(tmp_path, "--json", "plan").stdout)
    _, backfill, delete, _ = document["steps"][0]["operations"]
    assert backfill["risk"] == "data" and delete["risk"] == "destructive"
    assert (backfill["estimate"]["files"], backfill["estimate"]["rows"], backfill["estimate"]["units"]) == (4, 100, 4)
    assert isinstance(backfill["estimate"]["bytes"], int) and backfill["estimate"]["bytes"] > 0
    assert (delete["estimate"]["files_dropped"], delete["estimate"]["rows_dropped"]) == (1, 25)
    assert _state(tmp_path) == before  # plan wrote nothing


def test_upgrade_prints_a_progress_line_per_unit_and_json_stays_json(tmp_path: Path):
    _lake(tmp_path)

    result = _cli(tmp_path, "--json", "upgrade")

    assert result.returncode == 0, result.stderr
    [applied] = json.loads(result.stdout)  # stdout holds the document alone
    assert applied["status"] == "applied" and len(applied["data_steps"]) == 3
    progress = [line for line in result.stderr.splitlines() if "backfill score of orders" in line]
    assert len(progress) == 4, result.stderr  # one per committed unit
    assert re.fullmatch(
        r"sales: 0001: backfill score of orders where it is null: unit 4/4, 100 rows written \(100 changed\), "
        r"[\d.,]+ KiB read, [\d.,]+ (?:[KMG]i)?B/s",
        progress[-1],
    ), progress[-1]
    assert re.search(r"unit 1/4, 25 rows written \(25 changed\), .*iB/s, ETA \d+s$", progress[0]), progress[0]
    # A unit that drops its one file whole reads nothing.
    dropped = "delete rows of orders where id < 25: unit 1/1, 0 rows written (25 changed), 0 B read, 0 B/s"
    assert dropped in result.stderr


def test_upgrade_without_json_prints_progress_on_stderr_and_the_table_on_stdout(tmp_path: Path):
    _lake(tmp_path)

    result = _cli(tmp_path, "upgrade")

    assert result.returncode == 0, result.stderr
    assert "unit" not in result.stdout and "0001" in result.stdout
    assert "sales: 0001: delete rows of orders where id < 25: unit 1/1" in result.stderr
