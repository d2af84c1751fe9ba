"""Benchmark: update_rows, backfill and delete_rows against the raw Parquet limit and PyIceberg's own.

On a table of at least 1 GiB (SQLite catalog, local files, several data files, about a tenth of each
file's rows matching the filter so every file matches partially), compares:

- ``update_rows``, ``backfill`` and ``delete_rows`` run through ``data_steps.run_step`` (*step*) and
  through a migration applied by ``MigrationRunner.upgrade`` (*runner*: the lock, the history, the
  intent and the restore point included);
- the **raw limit** (*raw*): every data file of the table read and written again by PyArrow with the
  table's writer settings, one thread per core, no Iceberg commit: the floor any rewrite of the table
  pays;
- what a user writes without this project (*pyiceberg*): for an update or a backfill, read the matching
  rows, compute, then ``Table.overwrite(rows, overwrite_filter)``; for a delete, ``Table.delete(filter)``.

The table is generated once into a cache folder outside the checkout and reused across runs: its catalog
file is kept as it was generated, and before each measurement the catalog file is restored and every
file the previous measurement wrote is deleted, so every measurement starts from the same table.

Every measurement runs in a fresh process after an idle pause and a full garbage collection, in
shuffled order, repeated; the report gives wall time, CPU time, peak RSS (the child's own, ``VmHWM``)
and, per round, each case's throughput against that round's raw limit and PyIceberg's.

    .venv/bin/python benchmarks/data_operations.py               # 1 GiB table, 3 rounds (10-15 minutes)
    .venv/bin/python benchmarks/data_operations.py --quick       # 64 MiB table, one round
    .venv/bin/python benchmarks/data_operations.py --profile step_update   # py-spy or cProfile of one case
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from peak_memory import memory, reset_peak

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # this checkout's package, whatever the environment's editable install points at

NAMESPACE = "bench"
TABLE = "events"
REGIONS = ("eu", "us", "apac", "latam", "mea", "ca", "uk", "jp", "in", "au")  # "eu": a tenth of every file
FILTER = "region = 'eu'"
BACKFILL_FILTER = "region = 'eu' and currency is null"
PAYLOAD_CHARS = 40
ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

MIGRATIONS = {
    "update": """import pyarrow.compute as pc

from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "double eu amounts"

    def upgrade(self, ctx):
        ctx.update_rows("events", {"amount": lambda batch: pc.multiply(batch["amount"], 2)}, where="region = 'eu'")
""",
    "backfill": """from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "eu currency"

    def upgrade(self, ctx):
        ctx.backfill("events", "currency", "EUR", where="region = 'eu'")
""",
    "delete": """from iceberg_ops_provider.migration import BaseMigration


class Migration(BaseMigration):
    description = "drop eu rows"

    def upgrade(self, ctx):
        ctx.delete_rows("events", "region = 'eu'")
""",
}

CASES = (
    "raw",
    "step_update",
    "runner_update",
    "pyiceberg_update",
    "step_backfill",
    "runner_backfill",
    "pyiceberg_backfill",
    "step_delete",
    "runner_delete",
    "pyiceberg_delete",
)


# --- the table, generated once ------------------------------------------------------------------------


def _catalog(cache: Path) -> Catalog:
    from iceberg_ops_provider.catalogs import CatalogFactory

    return CatalogFactory.build("sqlite", db_path=cache / "catalog.db", warehouse_dir=cache / "warehouse")


def _chunk(first_id: int, rows: int, rng: random.Random):
    """``rows`` rows: ids from ``first_id``, random regions (a tenth "eu"), amounts, times and payloads."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def uniform(kind: pa.DataType, width: int) -> pa.Array:
        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(rng.randbytes(rows * width))])

    # A random 16-bit value divided (integer division) by 6554 is 0..9, each about a tenth of the time.
    regions = pc.take(pa.array(REGIONS, pa.string()), pc.divide(uniform(pa.uint16(), 2), 6554))
    table = bytes(ALPHABET[b % len(ALPHABET)] for b in range(256))
    letters = rng.randbytes(rows * PAYLOAD_CHARS).translate(table)
    offsets = pa.array(range(0, (rows + 1) * PAYLOAD_CHARS, PAYLOAD_CHARS), pa.int32()).buffers()[1]
    payload = pa.StringArray.from_buffers(rows, offsets, pa.py_buffer(letters))
    amounts = pc.divide(pc.cast(uniform(pa.uint32(), 4), pa.float64()), 2**32 / 1000)
    times = pc.add(pc.multiply(pc.cast(uniform(pa.uint32(), 4), pa.int64()), 23), 1_600_000_000_000_000)
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + rows), pa.int64()),
            "region": regions,
            "amount": amounts,
            "ts": times.cast(pa.timestamp("us")),
            "payload": payload,
        }
    )


def generate(cache: Path, target_bytes: int, files: int) -> None:
    """Write the table once into ``cache``: ``files`` appends of one data file each, then ``currency`` added."""
    from pyiceberg.types import StringType

    if (cache / "ready.json").exists():
        return
    if cache.exists():
        shutil.rmtree(cache)
    cache.mkdir(parents=True)
    catalog = _catalog(cache)
    catalog.create_namespace(NAMESPACE)
    rng = random.Random(38)
    sample = _chunk(0, 100_000, rng)
    table = catalog.create_table(f"{NAMESPACE}.{TABLE}", sample.schema)
    # Rows per file from a measured sample file's bytes per row, written with the table's own settings.
    probe = cache / "probe.parquet"
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    pq.write_table(sample, probe, **_get_parquet_writer_kwargs(table.properties))
    bytes_per_row = probe.stat().st_size / sample.num_rows
    probe.unlink()
    rows_per_file = int(target_bytes / files / bytes_per_row * 1.1)  # larger files compress a little better
    for number in range(files):
        table.append(_chunk(number * rows_per_file, rows_per_file, rng))
        print(f"  generated file {number + 1} of {files}", flush=True)
    with table.update_schema() as update:
        update.add_column("currency", StringType())  # files without it: a backfill must read them all
    table = catalog.load_table(f"{NAMESPACE}.{TABLE}")
    data_files = [task.file for task in table.scan().plan_files()]
    size = sum(f.file_size_in_bytes for f in data_files)
    shutil.copyfile(cache / "catalog.db", cache / "catalog.db.pristine")
    pristine = sorted(str(p) for p in (cache / "warehouse").rglob("*") if p.is_file())
    (cache / "pristine.json").write_text(json.dumps(pristine))
    facts = _eu_facts(catalog)
    info = {"files": len(data_files), "bytes": size, "rows": sum(f.record_count for f in data_files), "facts": facts}
    (cache / "ready.json").write_text(json.dumps(info))


def restore(cache: Path) -> None:
    """Bring the table back to its generated state: the catalog file as generated, every later file deleted."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        (cache / f"catalog.db{suffix}").unlink(missing_ok=True)
    shutil.copyfile(cache / "catalog.db.pristine", cache / "catalog.db")
    keep = set(json.loads((cache / "pristine.json").read_text()))
    for path in (cache / "warehouse").rglob("*"):
        if path.is_file() and str(path) not in keep:
            path.unlink()


# --- the cases, each run in a fresh process -------------------------------------------------------------


def _raw(catalog: Catalog, cache: Path) -> dict[str, int]:
    """Read every data file of the table and write it again with the table's writer settings; no commit."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs
    from pyiceberg.table import TableProperties
    from pyiceberg.utils.properties import property_as_int

    table = catalog.load_table(f"{NAMESPACE}.{TABLE}")
    properties = table.properties
    kwargs = _get_parquet_writer_kwargs(properties)
    group_rows = property_as_int(
        properties, TableProperties.PARQUET_ROW_GROUP_LIMIT, TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT
    )
    paths = [task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()]
    out = cache / "warehouse" / "raw-copies"
    out.mkdir(exist_ok=True)

    def copy(path: str) -> int:
        source = pq.ParquetFile(path)
        target = out / Path(path).name
        with pq.ParquetWriter(target, source.schema_arrow, **kwargs) as writer:
            for group in range(source.num_row_groups):
                part = source.read_row_group(group, use_threads=False)
                writer.write_table(part, row_group_size=group_rows)
        return source.metadata.num_rows

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        rows = sum(pool.map(copy, paths))
    return {"rows": rows}


def _step(catalog: Catalog, op: str) -> dict[str, int]:
    import pyarrow.compute as pc

    from iceberg_ops_provider.data_steps import DataStep, run_step

    kinds = {
        "update": ("update_rows", FILTER, {"amount": lambda batch: pc.multiply(batch["amount"], 2)}),
        "backfill": ("backfill", FILTER, {"currency": "EUR"}),
        "delete": ("delete_rows", FILTER, {}),
    }
    kind, where, assignments = kinds[op]
    step = DataStep(f"bench/{op}", kind, (NAMESPACE, TABLE), where=where, assignments=assignments)
    result = run_step(catalog, step)
    return {"rows": result.rows_changed, "snapshots": len(result.snapshot_ids)}


def _runner(catalog: Catalog, op: str, workdir: Path) -> dict[str, int]:
    from iceberg_ops_provider.runner import MigrationRunner

    migrations = workdir / "migrations"
    migrations.mkdir()
    (migrations / "0001_data.py").write_text(MIGRATIONS[op])
    results = MigrationRunner(catalog, NAMESPACE, migrations).upgrade()
    assert len(results) == 1, results
    return {"snapshots": len(catalog.load_table(f"{NAMESPACE}.{TABLE}").snapshots())}


def _pyiceberg(catalog: Catalog, op: str) -> dict[str, int]:
    import pyarrow.compute as pc

    table = catalog.load_table(f"{NAMESPACE}.{TABLE}")
    if op == "delete":
        table.delete(FILTER)
        return {}
    where = FILTER if op == "update" else BACKFILL_FILTER
    rows = table.scan(row_filter=where).to_arrow()
    if op == "update":
        rows = rows.set_column(rows.schema.get_field_index("amount"), "amount", pc.multiply(rows["amount"], 2))
    else:
        field = rows.schema.field("currency")
        rows = rows.set_column(rows.schema.get_field_index("currency"), field, pc.fill_null(rows["currency"], "EUR"))
    table.overwrite(rows, overwrite_filter=where)
    return {"rows": rows.num_rows}


def _eu_facts(catalog: Catalog) -> dict[str, float]:
    """What the checks compare: all rows, "eu" rows, their amounts' sum and those with a currency."""
    import pyarrow.compute as pc

    table = catalog.load_table(f"{NAMESPACE}.{TABLE}")
    eu = table.scan(row_filter=FILTER, selected_fields=("amount", "currency")).to_arrow()
    snapshot = table.metadata.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return {
        "rows": int(snapshot.summary["total-records"]),
        "eu_rows": eu.num_rows,
        "eu_amount": pc.sum(eu["amount"]).as_py() or 0.0,
        "eu_currency": eu.num_rows - eu["currency"].null_count,
    }


def _check(case: str, before: dict[str, float], after: dict[str, float]) -> None:
    """Fail the sample unless the case changed the table as it should (a benchmark of a no-op is worthless)."""
    op = case.partition("_")[2]
    if op == "update":
        ok = (
            after["rows"] == before["rows"]
            and abs(after["eu_amount"] - 2 * before["eu_amount"]) < 1e-6 * before["eu_amount"]
        )
    elif op == "backfill":
        ok = after["rows"] == before["rows"] and after["eu_currency"] == before["eu_rows"]
    elif op == "delete":
        ok = after["rows"] == before["rows"] - before["eu_rows"] and after["eu_rows"] == 0
    else:
        ok = after == before
    if not ok:
        raise AssertionError(f"{case} left the table wrong: before {before}, after {after}")


def measure(case: str, cache: Path) -> dict[str, float]:
    """Run in a fresh process: restore the table, then time ``case`` alone, then check what it did."""
    # Everything any case imports is imported first: every case starts from the same process. The package
    # comes before PyArrow, as in the CLI and an Airflow task, so its allocator setting applies to every case.
    import iceberg_ops_provider.migration  # noqa: F401, I001
    import pyarrow.parquet  # noqa: F401
    import pyiceberg.io.pyarrow  # noqa: F401

    from iceberg_ops_provider.data_steps import run_step
    from iceberg_ops_provider.runner import MigrationRunner  # noqa: F401  (a lazy name: imports the runner)

    assert Path(run_step.__code__.co_filename).is_relative_to(ROOT), run_step.__code__.co_filename

    restore(cache)
    catalog = _catalog(cache)
    before = json.loads((cache / "ready.json").read_text())["facts"]
    with tempfile.TemporaryDirectory() as tmp:
        kind, _, op = case.partition("_")
        gc.collect()
        reset_peak()
        rss_before = memory()[0]
        started, cpu_started = time.perf_counter(), time.process_time()
        if kind == "raw":
            facts = _raw(catalog, cache)
        elif kind == "step":
            facts = _step(catalog, op)
        elif kind == "runner":
            facts = _runner(catalog, op, Path(tmp))
        else:
            facts = _pyiceberg(catalog, op)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    peak = memory()[1]
    _check(case, before, _eu_facts(catalog))
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "rss_before": rss_before, **facts}


# --- the parent: rounds, medians, ratios -----------------------------------------------------------------


def _child(case: str, cache: Path, prefix: list[str] | None = None) -> dict[str, float]:
    command = [*(prefix or []), sys.executable, __file__, "--cache", str(cache), "--measure", case]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def profile(case: str, cache: Path, out: Path) -> None:
    """Profile one case with py-spy when it is installed (native frames too), else cProfile."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if Path(spy).exists():
        prefix = [spy, "record", "--format", "raw", "--rate", "50", "--output", str(out), "--threads", "--"]
        command = [*prefix, sys.executable, __file__, "--cache", str(cache), "--measure", case]
        subprocess.run(command, check=True)
        print(f"py-spy folded stacks in {out}")
        return
    command = [sys.executable, "-m", "cProfile", "-o", str(out), __file__, "--cache", str(cache), "--measure", case]
    subprocess.run(command, check=True)
    print(f"cProfile stats in {out}")


def _paired(reference: list[dict[str, float]], samples: list[dict[str, float]], metric: str) -> float:
    """The reference's ``metric`` over the case's, per round (a shared machine's speed drifts between rounds)."""
    return statistics.median(r[metric] / s[metric] for r, s in zip(reference, samples, strict=True))


def report(results: dict[str, list[dict[str, float]]], info: dict[str, int], rounds: int) -> None:
    """Medians per case, and each case's throughput against the raw limit and PyIceberg, paired per round."""
    mib = info["bytes"] / 2**20
    print(f"\ntable: {info['files']} files, {mib:,.0f} MiB, {info['rows']:,} rows; median of {rounds} round(s)")
    columns = f"{'wall s':>9}{'cpu s':>9}{'MiB/s':>9}{'peak RSS MiB':>14}{'over start':>12}"
    ratios = f"{'raw':>9}{'raw cpu':>9}{'pyice':>9}{'pyice cpu':>10}"
    print(f"\n{'case':22}{columns}{ratios}")
    for case in CASES:
        samples = results.get(case)
        if not samples:
            continue
        wall = statistics.median(s["wall"] for s in samples)
        cpu = statistics.median(s["cpu"] for s in samples)
        peak = statistics.median(s["peak_rss"] for s in samples) / 2**20
        base = statistics.median(s["rss_before"] for s in samples) / 2**20
        op = case.partition("_")[2]
        ratios = [_paired(results["raw"], samples, metric) for metric in ("wall", "cpu")]
        baseline = results.get(f"pyiceberg_{op}") if case.startswith(("step", "runner")) else None
        ratios += [_paired(baseline, samples, metric) if baseline else None for metric in ("wall", "cpu")]
        shown = "".join(f"{r:9.2f}" if r is not None else f"{'':9}" for r in ratios)
        print(f"{case:22}{wall:9.2f}{cpu:9.2f}{mib / wall:9.1f}{peak:14.0f}{peak - base:12.0f}{shown}")
    print("\nraw, pyice: that round's raw (or PyIceberg's) wall time over the case's, median of the rounds (cpu: CPU")
    print("time); above 1 is faster. Peak RSS: the case's process's own peak (VmHWM, reset just before the timed")
    print("work, imports resident); over start: minus its RSS then (every case imports the same modules first).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 64 MiB table of 4 files, one round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gib", type=float, default=1.0, help="the table's size in GiB of Parquet")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--pause", type=float, default=5.0, help="idle seconds before each measurement")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--cache", type=Path, help="where the table is generated (default: a folder in the temp dir)")
    parser.add_argument("--profile", choices=CASES, help="profile one case (py-spy, else cProfile) and stop")
    parser.add_argument("--out", type=Path, help="also write every sample to this JSON file")
    parser.add_argument("--measure", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    gib, files, repeat = (1 / 16, 4, 1) if args.quick else (args.gib, args.files, args.repeat)
    cache = args.cache or Path(tempfile.gettempdir()) / f"iceberg-ops-bench-data-operations-{gib:g}gib-{files}files"
    if args.measure:
        print(json.dumps(measure(args.measure, cache)))
        return
    generate(cache, int(gib * 2**30), files)
    info = json.loads((cache / "ready.json").read_text())
    if args.profile:
        profile(args.profile, cache, cache.parent / f"{cache.name}-{args.profile}.profile")
        restore(cache)
        return
    cases = list(dict.fromkeys(["raw", *args.cases]))  # raw is every round's reference
    results: dict[str, list[dict[str, float]]] = {case: [] for case in cases}
    try:
        for _ in range(repeat):
            order = cases[:]
            random.shuffle(order)
            for case in order:
                time.sleep(args.pause)
                sample = _child(case, cache)
                results[case].append(sample)
                peak = sample["peak_rss"] / 2**20
                line = f"{sample['wall']:7.2f} s, cpu {sample['cpu']:7.2f} s, peak RSS {peak:6.0f} MiB"
                print(f"  {case:<20} {line}", flush=True)
    finally:
        restore(cache)
    if args.out:
        args.out.write_text(json.dumps({"table": info, "samples": results}, indent=1))
    report(results, info, repeat)


if __name__ == "__main__":
    main()
