"""Benchmark: the table page of the Iceberg pages for a table of 10,000 data files and 1,000 snapshots.

The table ``big.wide`` of a SQLite catalog is partitioned by identity on ``p``: one append writes 9,000
files (one per partition), then 1,000 appends of one file each (committed 50 to a transaction, to build
quickly) leave 1,001 snapshots, each with its manifest list, and 1,001 manifests in the current snapshot.
A tag and a branch point into the history. Two measurements of ``GET /c/bench/ns/big/t/wide`` through the
plugin's FastAPI application (its routes, every part of the page read, HTML rendered):

- *cold*: the first request of a fresh process (the catalog opened, nothing of the table cached: every
  manifest list and manifest of the table's metadata read, the metadata log's files sized);
- *warm*: the same page once the reads the page keeps for ``[iceberg_ops] ui_cache_seconds`` have run out
  (set to 0 here), the metadata location unchanged: the table is loaded again, and what was computed from
  that metadata is taken from the application's cache per metadata location.

Each measurement runs in a fresh process (imports and application set-up not timed), after an idle
pause, repeated; the report gives the median and range of each. The page's authentication is left out
(the dependencies are overridden, and ``ui_maintenance_dag`` is empty, so no user's right to trigger it
is asked): it is Airflow's, per request, and the same whatever the page.

    .venv/bin/python benchmarks/ui_table_page.py              # 5 repetitions
    .venv/bin/python benchmarks/ui_table_page.py --quick      # 1 repetition, 2,000 files and 200 snapshots
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ui_support import UNCHECKED_APP, airflow_db, airflow_environment

REPOSITORY = Path(__file__).resolve().parents[1]
PER_TRANSACTION = 50


def _environment(root: Path) -> dict[str, str]:
    return airflow_environment(root, ui_cache_seconds="0", ui_maintenance_dag="")


def build(root: Path, files: int, snapshots: int) -> None:
    """The catalog: ``big.wide`` with ``files`` data files, the last ``snapshots`` of them one per snapshot."""
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    from iceberg_ops_provider.catalogs import CatalogFactory

    catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
    catalog.create_namespace("big")
    schema = Schema(
        NestedField(1, "p", LongType(), required=False, doc="the partition"),
        NestedField(2, "v", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="p"))
    table = catalog.create_table("big.wide", schema=schema, partition_spec=spec)
    arrow = pa.schema([pa.field("p", pa.int64()), pa.field("v", pa.string())])
    bulk = files - snapshots
    table.append(pa.table({"p": list(range(bulk)), "v": ["x"] * bulk}, schema=arrow))
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, "bulk-loaded").commit()
    for start in range(0, snapshots, PER_TRANSACTION):
        with table.transaction() as transaction:
            for n in range(start, min(snapshots, start + PER_TRANSACTION)):
                transaction.append(pa.table({"p": [n % 100], "v": ["y" * (1 + n % 50)]}, schema=arrow))
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "audit").commit()
    airflow_db(_environment(root))


# No trigger link: ui_maintenance_dag is empty.
PAGE = (
    UNCHECKED_APP
    + """
import json, sys, time
from iceberg_ops_provider.ui.app import READS
path = "/c/bench/ns/big/t/wide"
started = time.perf_counter(); first = client.get(path); cold = time.perf_counter() - started
computed = READS.metadata.computed
time.sleep(0.2)
started = time.perf_counter(); second = client.get(path); warm = time.perf_counter() - started
assert first.status_code == 200 and second.status_code == 200, first.text[:2000]
assert "Could not read" not in first.text and "Could not read" not in second.text, first.text
assert READS.metadata.computed == computed, "the warm page computed again"
print("RESULT " + json.dumps({"cold": cold, "warm": warm, "bytes": len(first.text)}))
"""
)


def describe(root: Path) -> str:
    """The table's files, snapshots and manifests as built (a kept folder may hold another size)."""
    from iceberg_ops_provider.catalogs import CatalogFactory

    catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
    table = catalog.load_table("big.wide")
    snapshot = table.current_snapshot()
    manifests = len(snapshot.manifests(table.io))
    return (
        f"{snapshot.summary['total-data-files']} data files, {len(table.metadata.snapshots)} snapshots, "
        f"{manifests} manifests in the current snapshot"
    )


def measure(root: Path) -> dict[str, float]:
    """One cold and one warm request in a fresh process."""
    run = subprocess.run(
        [sys.executable, "-c", PAGE], env=_environment(root), capture_output=True, text=True, timeout=600
    )
    line = next((line for line in run.stdout.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the page failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return json.loads(line.removeprefix("RESULT "))


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s (range {min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000, help="data files in the table (default 10,000)")
    parser.add_argument("--snapshots", type=int, default=1_000, help="one-file appends after the first (1,000)")
    parser.add_argument("--repeat", type=int, default=5, help="measurements (default 5)")
    parser.add_argument("--pause", type=float, default=2.0, help="idle seconds before each measurement")
    parser.add_argument("--quick", action="store_true", help="1 repetition of 2,000 files and 200 snapshots")
    parser.add_argument("--keep", type=Path, help="build the catalog here (or reuse it) instead of a temporary folder")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.files, arguments.snapshots, arguments.repeat = 2_000, 200, 1
    root = arguments.keep or Path(tempfile.mkdtemp(prefix="ui-table-bench-"))
    try:
        if not (root / "catalog.db").exists():
            root.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            build(root, arguments.files, arguments.snapshots)
            print(
                f"built {arguments.files} files, {arguments.snapshots + 1} snapshots in "
                f"{time.perf_counter() - started:.0f}s at {root}",
                flush=True,
            )
        if not (root / "airflow" / "airflow.db").exists():
            airflow_db(_environment(root))
        print(f"table: {describe(root)}", flush=True)
        results = []
        for _ in range(arguments.repeat):
            time.sleep(arguments.pause)
            result = measure(root)
            results.append(result)
            print(f"  {json.dumps({k: round(v, 3) for k, v in result.items()})}", flush=True)
        print(f"\ntable of {arguments.files} files and {arguments.snapshots + 1} snapshots, {len(results)} run(s)")
        print(f"  cold (first request of a fresh process)   {_stats([r['cold'] for r in results])}")
        print(f"  warm (reads expired, metadata unchanged)  {_stats([r['warm'] for r in results])}")
    finally:
        if arguments.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
