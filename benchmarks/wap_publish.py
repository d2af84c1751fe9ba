"""Benchmark: write-audit-publish's publish against copying the backfill's rows onto ``main`` (issue 39).

A target table on a SQLite catalog holds, on ``main``, a table of a given size (files and manifests
are what matter to a publish, so the files are small: 10,000 rows each, 10 files per commit, so
one manifest per 10 files). A ``DataMover(..., branch=...)`` moved a fixed backfill (20 source
files, one unit and one branch commit each) onto a branch, and a passing audit recorded its head.
That setup is not timed. Three cases are timed, for two states of ``main``:

- *publish*: ``mover.publish()``. With ``main`` still at the fork (*ff*) it fast-forwards ``main``;
  after another writer appended to ``main`` (*append*, done in the setup) it appends the move's
  files to ``main`` with a receipt. Metadata only: no data file is read or written.
- *copy*: what a user writes without this project (PyIceberg 0.12 has no fast-forward, so in both
  states it is a data copy): load the table, read the branch head's new rows with
  ``table.scan(snapshot_id=<branch head>, row_filter=<the backfill's ids>).to_arrow()``,
  ``table.append(rows)`` them to ``main``, and remove the branch.

The point: publish stays flat (well under a second) as ``main`` grows from the small to the large
size, and the copy pays for the backfill's rows (read and written again) plus planning over every
manifest of ``main``.

Every measurement runs in a fresh process after an idle pause and a full garbage collection, in
shuffled order, repeated. Before each, the child restores the size's catalog file to the state's
copy and deletes the files later measurements wrote, so every sample starts from the same table.
The report gives wall time (median, min, max), CPU time, and the ratio copy / publish per round. It
checks nothing: what each sample did (``how``, rows copied) is reported beside its time.

    .venv/bin/python benchmarks/wap_publish.py                 # 3 sizes up to 1,000 files, 3 rounds
    .venv/bin/python benchmarks/wap_publish.py --quick         # smaller sizes, one round
    .venv/bin/python benchmarks/wap_publish.py --json out.json # also every sample as JSON (- for stdout)
"""

from __future__ import annotations

import argparse
import gc
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's package, whatever the environment's editable install points at

ROWS_PER_FILE = 10_000
FILES_PER_COMMIT = 10
SIZES = {"small": 10, "medium": 100, "large": 1_000}  # files on main
QUICK_SIZES = {"small": 10, "large": 200}
BACKFILL_FILES = 20
BACKFILL_ROWS_PER_FILE = 100_000
QUICK_BACKFILL_ROWS_PER_FILE = 5_000
BACKFILL_START = 1_000_000_000  # the backfill's ids; main's are below, the other writer's between
OTHER_WRITER_START = 900_000_000
BRANCH = "backfill"
MOVE_ID = "bench-backfill"
TARGET, SOURCE = "bench.orders", "bench.staging_orders"
STATES = ("ff", "append")
CASES = ("publish", "copy")


def _rows(start: int, count: int):
    """``count`` orders with ids from ``start``: id, customer, day and amount."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(range(start, start + count), pa.int64())
    return pa.table(
        {
            "id": ids,
            "customer": pc.binary_join_element_wise("c-", pc.cast(pc.remainder(ids, 5_000), pa.string()), ""),
            "day": pc.cast(pc.add(pc.remainder(ids, 365), 19_000), pa.int32()).cast(pa.date32()),
            "amount": pc.divide(pc.cast(pc.remainder(ids, 10_007), pa.float64()), 100.0),
        }
    )


def _catalog(directory: Path):
    from iceberg_ops_provider.catalogs import CatalogFactory

    return CatalogFactory.build("sqlite", db_path=directory / "catalog.db", warehouse_dir=directory / "warehouse")


def _append_files(table, start: int, files: int, rows_per_file: int) -> None:
    """Append ``files`` files of ``rows_per_file`` rows in one commit (a file per record batch)."""
    import pyarrow as pa

    rows = _rows(start, files * rows_per_file)
    batches = rows.to_batches(max_chunksize=rows_per_file)
    size = max(batch.nbytes for batch in batches)
    with table.transaction() as transaction:  # one file per batch: the target size is one batch
        transaction.set_properties({"write.target-file-size-bytes": str(size)})
        transaction.append(pa.Table.from_batches(batches))
        transaction.remove_properties("write.target-file-size-bytes")


def build(directory: Path, main_files: int, backfill_rows_per_file: int) -> dict[str, Any]:
    """Build one size's tables in ``directory`` and save the catalog in both states (not timed).

    ``catalog-ff.db``: ``main`` at the fork, the branch audited. ``catalog-append.db``: the same plus
    another writer's append to ``main``. ``files.json``: every file of the warehouse then.
    """
    from iceberg_ops_provider.data_migration import DataMover

    directory.mkdir(parents=True)
    catalog = _catalog(directory)
    catalog.create_namespace("bench")
    schema = _rows(0, 1).schema
    target = catalog.create_table(TARGET, schema=schema)
    for start in range(0, main_files * ROWS_PER_FILE, FILES_PER_COMMIT * ROWS_PER_FILE):
        files = min(FILES_PER_COMMIT, main_files - start // ROWS_PER_FILE)
        _append_files(target, start, files, ROWS_PER_FILE)
    source = catalog.create_table(SOURCE, schema=schema)
    for number in range(BACKFILL_FILES):
        source.append(_rows(BACKFILL_START + number * backfill_rows_per_file, backfill_rows_per_file))
    mover = DataMover(catalog, SOURCE, TARGET, branch=BRANCH, move_id=MOVE_ID, commit_every_bytes=1)
    result = mover.run()
    backfill_rows = BACKFILL_FILES * backfill_rows_per_file
    report = mover.audit(not_null=["id"], min_rows=backfill_rows, max_rows=backfill_rows)
    target.refresh()
    main = target.metadata.current_snapshot()
    facts = {
        "main_files": int(main.summary["total-data-files"]),
        "main_rows": int(main.summary["total-records"]),
        "main_manifests": len(main.manifests(target.io)),
        "snapshots": len(target.metadata.snapshots),  # in the table's metadata, the branch's included
        "backfill_units": result.units_committed,
        "backfill_rows": backfill_rows,
        "audit_ok": report.ok,
    }
    shutil.copyfile(directory / "catalog.db", directory / "catalog-ff.db")
    target.append(_rows(OTHER_WRITER_START, 1_000))  # another writer, after the fork
    shutil.copyfile(directory / "catalog.db", directory / "catalog-append.db")
    files = sorted(str(p) for p in (directory / "warehouse").rglob("*") if p.is_file())
    (directory / "files.json").write_text(json.dumps(files))
    return facts


def _restore(directory: Path, state: str) -> None:
    """Put the catalog back to ``state`` and delete every file written since the build."""
    shutil.copyfile(directory / f"catalog-{state}.db", directory / "catalog.db")
    kept = set(json.loads((directory / "files.json").read_text()))
    for path in (directory / "warehouse").rglob("*"):
        if path.is_file() and str(path) not in kept:
            path.unlink()


def measure(directory: Path, case: str, state: str) -> dict[str, Any]:
    """Run in a fresh process: restore ``state``, then time one ``case`` (publish or copy)."""
    import pyarrow.dataset  # (imported by the copy's read: every case starts with it loaded)
    import pyarrow.parquet  # noqa: F401
    from pyiceberg.expressions import GreaterThanOrEqual
    from pyiceberg.io import pyarrow as _pyiceberg_arrow  # noqa: F401

    from iceberg_ops_provider.data_migration import DataMover

    _restore(directory, state)
    catalog = _catalog(directory)
    mover = DataMover(catalog, SOURCE, TARGET, branch=BRANCH, move_id=MOVE_ID, commit_every_bytes=1)
    catalog.load_table(TARGET)  # the SQLite connection opened, as a running process has it
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    if case == "publish":
        published = mover.publish()
        what = {"how": published.how, "files": published.files}
    else:
        table = catalog.load_table(TARGET)
        head = table.metadata.snapshot_by_name(BRANCH).snapshot_id
        rows = table.scan(snapshot_id=head, row_filter=GreaterThanOrEqual("id", BACKFILL_START)).to_arrow()
        table.append(rows)
        table.manage_snapshots().remove_branch(BRANCH).commit()
        what = {"how": "copy", "rows": rows.num_rows}
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"wall": wall, "cpu": cpu, **what}


def _summary(samples: list[dict[str, Any]], sizes: dict[str, int], repeat: int) -> dict[str, Any]:
    """Medians, extremes and per-round ratios copy / publish for each size and state."""
    rows = []
    for size in sizes:
        for state in STATES:
            row: dict[str, Any] = {"size": size, "state": state}
            for case in CASES:
                mine = [s for s in samples if (s["size"], s["state"], s["case"]) == (size, state, case)]
                walls = [s["wall"] for s in mine]
                row[case] = {
                    "wall_median": statistics.median(walls),
                    "wall_min": min(walls),
                    "wall_max": max(walls),
                    "cpu_median": statistics.median(s["cpu"] for s in mine),
                    "how": sorted({s["how"] for s in mine}),
                }
            by_round = {(s["round"], s["case"]): s["wall"] for s in samples if (s["size"], s["state"]) == (size, state)}
            ratios = [by_round[(r, "copy")] / by_round[(r, "publish")] for r in range(repeat)]
            row["copy_over_publish"] = statistics.median(ratios)
            rows.append(row)
    return {"rows": rows}


def _table(summary: dict[str, Any], facts: dict[str, dict[str, Any]], repeat: int) -> str:
    """The summary as a Markdown table."""
    backfill = next(iter(facts.values()))
    lines = [
        f"backfill: {backfill['backfill_units']} units, {backfill['backfill_rows']:,} rows; median of {repeat} "
        "round(s); wall seconds (min-max); copy / publish: median of each round's ratio",
        "",
        "| size | main files / rows / manifests | main | publish s | copy s | copy / publish | publish CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in summary["rows"]:
        fact = facts[row["size"]]
        shape = f"{fact['main_files']:,} / {fact['main_rows']:,} / {fact['main_manifests']}"
        cells = []
        for case in CASES:
            c = row[case]
            cells.append(f"{c['wall_median']:.3f} ({c['wall_min']:.3f}-{c['wall_max']:.3f})")
        how = "fast-forward" if row["state"] == "ff" else "moved (append)"
        lines.append(
            f"| {row['size']} | {shape} | {how} | {cells[0]} | {cells[1]} | {row['copy_over_publish']:.1f} "
            f"| {row['publish']['cpu_median']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Build each size, time every case in fresh processes, print the table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round, sizes of 10 and 200 files, a smaller backfill")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--pause", type=float, default=3.0, help="idle seconds before each measurement")
    parser.add_argument(
        "--backfill-rows-per-file", type=int, help=f"rows of each of the {BACKFILL_FILES} backfill files"
    )
    parser.add_argument("--json", nargs="?", const="-", metavar="PATH", help="write the samples and summary as JSON")
    parser.add_argument("--measure", nargs=3, metavar=("DIR", "CASE", "STATE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        directory, case, state = args.measure
        print(json.dumps(measure(Path(directory), case, state)))
        return
    repeat = 1 if args.quick else args.repeat
    sizes = QUICK_SIZES if args.quick else SIZES
    backfill_rows_per_file = args.backfill_rows_per_file or (
        QUICK_BACKFILL_ROWS_PER_FILE if args.quick else BACKFILL_ROWS_PER_FILE
    )
    log = sys.stderr if args.json == "-" else sys.stdout
    with tempfile.TemporaryDirectory(prefix="iceberg-ops-bench-wap-") as tmp:
        facts = {}
        for size, files in sizes.items():
            started = time.perf_counter()
            facts[size] = build(Path(tmp) / size, files, backfill_rows_per_file)
            print(f"built {size}: {facts[size]} in {time.perf_counter() - started:.0f} s", file=log, flush=True)
        samples = []
        cases = [(size, state, case) for size in sizes for state in STATES for case in CASES]
        for number in range(repeat):
            order = cases[:]
            random.shuffle(order)
            for size, state, case in order:
                time.sleep(args.pause)
                command = [sys.executable, __file__, "--measure", str(Path(tmp) / size), case, state]
                output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
                sample = {"round": number, "size": size, "state": state, "case": case}
                sample |= json.loads(output.strip().splitlines()[-1])
                samples.append(sample)
                detail = f"rows {sample['rows']:,}" if case == "copy" else f"{sample['how']}, files {sample['files']}"
                print(f"  {size:<6} {state:<6} {case:<7} {sample['wall']:7.3f} s  ({detail})", file=log, flush=True)
    summary = _summary(samples, sizes, repeat)
    print("\n" + _table(summary, facts, repeat), file=log)
    if args.json:
        document = json.dumps({"facts": facts, "samples": samples, **summary}, indent=2)
        if args.json == "-":
            print(document)
        else:
            Path(args.json).write_text(document)


if __name__ == "__main__":
    main()
