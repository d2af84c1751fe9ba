"""Benchmark: the namespace page of the Iceberg pages for a namespace of 200 tables, against reading the same
metadata the naive way.

The namespace ``big`` of a SQLite catalog holds 200 tables of two appends each, and the example
migrations applied (their history and audit trail). Three ways to learn what the page shows:

- *page, first view*: ``GET /c/bench/ns/big`` of the plugin's application (FastAPI, through its
  routes, HTML rendered) right after the catalog page (``/c/bench/``), the way a user reaches it:
  nothing of the namespace is cached; the status, history, audit trail and the 200 tables'
  metadata are read (the tables 8 at a time, the three parts side by side), and the manifests of
  the first page's 50 tables (their health), each part bounded by the connection's timeout;
- *page, first request*: the same as the very first request of a fresh api-server process (the
  connections listed and the catalog opened on the way, and Airflow's ORM mappers configured, which
  in a running api-server the first request of any page of Airflow does);
- *page (within the cache)*: the same request again a moment later, answered from the reads the
  page keeps for ``[iceberg_ops] ui_cache_seconds``;
- *naive*: what a user would otherwise run to see the same: with the catalog open, ``status()``,
  ``history()`` and ``events()`` of a ``MigrationRunner``, then ``load_table`` and the current
  snapshot's summary of each table, one after the other.

Each measurement runs in a fresh process (imports and application set-up not timed; the time is
the request, or the naive reads), after an idle pause, in shuffled order, repeated; the report
gives each method's median and range, and the ratios of the medians. The page's authentication is
left out (the dependency is overridden in the benchmark's process): it is Airflow's, per request,
and the same whatever the page.

    .venv/bin/python benchmarks/ui_namespace.py              # 5 repetitions (about 3 minutes)
    .venv/bin/python benchmarks/ui_namespace.py --quick      # 1 repetition, 50 tables
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ui_support import UNCHECKED_APP, airflow_db, airflow_environment

REPOSITORY = Path(__file__).resolve().parents[1]
MIGRATIONS = REPOSITORY / "dags_examples" / "migrations"
NAMESPACE = "big"
METHODS = ("page", "page-first-request", "naive")


def _environment(root: Path) -> dict[str, str]:
    return airflow_environment(root, ui_migrations_dir=str(MIGRATIONS))


def build(root: Path, tables: int) -> None:
    """The catalog: ``tables`` tables of two appends each in ``big``, the example migrations applied."""
    import pyarrow as pa

    from iceberg_ops_provider.catalogs import CatalogFactory
    from iceberg_ops_provider.runner import MigrationRunner

    catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
    MigrationRunner(catalog, NAMESPACE, MIGRATIONS).upgrade("head")  # creates big.orders
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    for n in range(tables - 1):
        table = catalog.create_table(f"{NAMESPACE}.t{n:03d}", schema=schema)
        for batch in range(2):
            table.append(pa.table({"id": [batch], "v": ["x"]}, schema=schema))
    airflow_db(_environment(root))


PAGE = (
    UNCHECKED_APP
    + """
import json, sys, time
if sys.argv[3] == "after-catalog-page":  # how a user gets there: Iceberg, the catalog, then the namespace
    assert client.get("/c/bench/").status_code == 200
path = "/c/bench/ns/big"
started = time.perf_counter(); first = client.get(path); cold = time.perf_counter() - started
time.sleep(0.2)
started = time.perf_counter(); second = client.get(path); warm = time.perf_counter() - started
assert first.status_code == 200 and second.status_code == 200, first.text[:2000]
assert "Could not read" not in first.text, first.text
import re
listed = int(re.search(r"(\\d+) table\\(s\\)", first.text).group(1))
print("RESULT " + json.dumps({"cold": cold, "warm": warm, "tables": listed, "shown": first.text.count("/ns/big/t/")}))
"""
)

NAIVE = """
import json, sys, time
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner
root = sys.argv[1]
catalog = CatalogFactory.build("sqlite", db_path=root + "/catalog.db", warehouse_dir=root + "/warehouse")
catalog.list_namespaces()  # opened, as the page's catalog is once a user reached the namespace through it
started = time.perf_counter()
runner = MigrationRunner(catalog, "big", sys.argv[2])
status, history, events = runner.status(), runner.history(), runner.events()
facts = []
for identifier in sorted(catalog.list_tables("big")):
    table = catalog.load_table(identifier)
    snapshot = table.current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot else {}
    facts.append((identifier, len(table.metadata.snapshots), summary))
took = time.perf_counter() - started
print("RESULT " + json.dumps({"cold": took, "tables": len(facts)}))
"""


def measure(method: str, root: Path) -> dict[str, float]:
    """One measurement in a fresh process."""
    code = NAIVE if method == "naive" else PAGE
    mode = "after-catalog-page" if method == "page" else "first-request"
    run = subprocess.run(
        [sys.executable, "-c", code, str(root), str(MIGRATIONS), mode],
        env=_environment(root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next((line for line in run.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{method} failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return json.loads(line.removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=200, help="tables in the namespace (default 200)")
    parser.add_argument("--repeat", type=int, default=5, help="measurements of each method (default 5)")
    parser.add_argument("--pause", type=float, default=2.0, help="idle seconds before each measurement")
    parser.add_argument("--quick", action="store_true", help="1 repetition of 50 tables")
    parser.add_argument("--keep", type=Path, help="build the catalog here (or reuse it) instead of a temporary folder")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.tables, arguments.repeat = 50, 1
    root = arguments.keep or Path(tempfile.mkdtemp(prefix="ui-bench-"))
    try:
        if not (root / "catalog.db").exists():
            root.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            build(root, arguments.tables)
            print(f"built {arguments.tables} tables in {time.perf_counter() - started:.0f}s at {root}")
        order = [method for method in METHODS for _ in range(arguments.repeat)]
        random.shuffle(order)
        results: dict[str, list[dict[str, float]]] = {method: [] for method in METHODS}
        for method in order:
            time.sleep(arguments.pause)
            result = measure(method, root)
            results[method].append(result)
            print(f"  {method}: {json.dumps({k: round(v, 3) for k, v in result.items()})}", flush=True)
        report(results, arguments.tables)
    finally:
        if arguments.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s (range {min(values):.3f}-{max(values):.3f})"


def report(results: dict[str, list[dict[str, Any]]], tables: int) -> None:
    """Medians, ranges and ratios."""
    cold = [r["cold"] for r in results["page"]]
    warm = [r["warm"] for r in results["page"]]
    fresh = [r["cold"] for r in results["page-first-request"]]
    naive = [r["cold"] for r in results["naive"]]
    assert {r["tables"] for r in results["page"]} == {tables}, "the page did not count every table"
    assert {r["shown"] for r in results["page"]} == {min(tables, 50)}, "the page did not show its first page"
    print(f"\nnamespace of {tables} tables, {len(cold)} measurement(s) each, fresh processes, shuffled")
    print(f"  page, first view (after the catalog page)  {_stats(cold)}")
    print(f"  page, within the cache                     {_stats(warm)}")
    print(f"  page, first request of the process         {_stats(fresh)}")
    print(f"  naive sequential reads                     {_stats(naive)}")
    median = statistics.median
    print(f"  naive / page first view:   {median(naive) / median(cold):.2f}x")
    print(f"  naive / page from cache:   {median(naive) / median(warm):.1f}x")
    print(f"  naive / page first request: {median(naive) / median(fresh):.2f}x")


if __name__ == "__main__":
    main()
