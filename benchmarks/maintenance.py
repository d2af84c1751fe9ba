"""Benchmark: compaction of many small files, and scan planning before/after a manifest rewrite.

Compaction: a table of small Parquet files (one per streaming-ingest micro-batch, as a writer
that commits every few seconds leaves them) at two sizes 4x apart, compacted three ways:

- *compact*: ``compact_small_files_streaming(table)`` (default target: 512 MiB);
- *naive*: ``table.overwrite(table.scan().to_arrow())``, what a PyIceberg user writes today;
- *raw*: the same files read with PyArrow alone and written as one stream of 512 MiB Parquet files
  (a reader thread, a writer with the table's Parquet settings; no Iceberg, no commit): the
  machine's limit for this job.

Each measurement runs in a fresh process on a fresh copy of the table, after an idle pause, in
shuffled order, repeated; the report gives medians of throughput (Arrow MiB of table data per
second), of peak memory above the process's memory before the call (the kernel's high-water mark,
reset right before it), and of the ratios between methods.

Scan planning: a table after 1,000 single-row commits (one manifest each), timed planning a full
scan in a fresh process, before and after ``rewrite_manifests``.

    .venv/bin/python benchmarks/maintenance.py              # full run (about 20 minutes)
    .venv/bin/python benchmarks/maintenance.py --quick      # small smoke run (about 1 minute)
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
import threading
import time
import uuid
from pathlib import Path
from queue import Queue
from typing import Any

from peak_memory import memory, reset_peak

NAMESPACE, TABLE = "bench", "bench.events"
TARGET = 512 * 1024 * 1024
METHODS = ("compact", "naive", "raw")


def _catalog(root: Path) -> Any:
    from iceberg_ops_provider.catalogs import CatalogFactory

    return CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")


def _random_ints(count: int, high: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.floor(pc.multiply(pc.random(count), high)), pa.int64())


def build_table(root: Path, files: int, rows: int) -> dict[str, Any]:
    """A table of ``files`` small Parquet files of ``rows`` rows each, committed in one append."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import ParquetFormatModel, _to_requested_schema, parquet_file_to_data_file

    catalog = _catalog(root)
    catalog.create_namespace(NAMESPACE)
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("customer", pa.string()),
            pa.field("category", pa.string()),
            pa.field("amount", pa.float64()),
            pa.field("quantity", pa.int32()),
            pa.field("note", pa.string()),
        ]
    )
    table = catalog.create_table(TABLE, schema)
    iceberg_schema, locations = table.schema(), table.location_provider()
    categories = pa.array([f"category-{i}" for i in range(50)])
    words = pa.array([f"w{i:05d}" for i in range(5000)])
    arrow_bytes, paths = 0, []
    for number in range(files):
        ids = pa.array(range(number * rows, (number + 1) * rows), pa.int64())
        micros = pc.add(pc.add(pc.multiply(ids, 1_000_000), 1_700_000_000_000_000), _random_ints(rows, 1_000_000))
        data = pa.table(
            {
                "id": ids,
                "ts": pc.cast(micros, pa.timestamp("us", tz="UTC")),
                "customer": pc.binary_join_element_wise(
                    "customer-", pc.cast(_random_ints(rows, 100_000), pa.string()), ""
                ),
                "category": pc.take(categories, _random_ints(rows, 50)),
                "amount": pc.multiply(pc.random(rows), 1000.0),
                "quantity": pc.cast(pc.add(_random_ints(rows, 99), 1), pa.int32()),
                "note": pc.binary_join_element_wise(
                    pc.take(words, _random_ints(rows, 5000)), pc.take(words, _random_ints(rows, 5000)), " "
                ),
            },
            schema=schema,
        ).combine_chunks()
        arrow_bytes += data.nbytes
        batch = _to_requested_schema(
            iceberg_schema,
            iceberg_schema,
            data.to_batches()[0],
            include_field_ids=True,
            format_model=ParquetFormatModel(),
        )
        path = locations.new_data_location(f"00000-{number}-{uuid.uuid4()}.parquet")
        with table.io.new_output(path).create(overwrite=True) as stream:
            pq.write_table(pa.Table.from_batches([batch]), stream, compression="zstd")
        paths.append(path)
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        for path in paths:
            append.append_data_file(parquet_file_to_data_file(table.io, table.metadata, path))
    parquet_bytes = sum(task.file.file_size_in_bytes for task in table.scan().plan_files())
    return {"files": files, "rows": files * rows, "arrow_bytes": arrow_bytes, "parquet_bytes": parquet_bytes}


def _raw_copy(table: Any, paths: list[str], out_dir: Path) -> int:
    """Read ``paths`` with PyArrow in a thread; write them as one stream of target-sized files."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    kwargs = _get_parquet_writer_kwargs(table.metadata.properties)
    queue: Queue[Any] = Queue(maxsize=16)

    def read() -> None:
        for path in paths:
            parquet = pq.ParquetFile(path.removeprefix("file://"), pre_buffer=True)
            for batch in parquet.iter_batches(batch_size=128 * 1024, use_threads=False):
                queue.put(batch)
        queue.put(None)

    reader = threading.Thread(target=read)
    reader.start()
    writer, stream, pending, pending_bytes, files = None, None, [], 0, 0
    while True:
        batch = queue.get()
        if batch is not None:
            pending.append(batch)
            pending_bytes += batch.nbytes
        if pending and (batch is None or pending_bytes >= 64 * 1024 * 1024):
            if writer is None:
                stream = pa.OSFile(str(out_dir / f"raw-{files}.parquet"), "wb")
                writer = pq.ParquetWriter(stream, pending[0].schema, store_decimal_as_integer=True, **kwargs)
                files += 1
            writer.write_table(pa.Table.from_batches(pending))
            pending, pending_bytes = [], 0
            if stream.tell() >= TARGET or batch is None:
                writer.close()
                stream.close()
                writer = None
        if batch is None:
            break
    reader.join()
    return files


def measure(method: str, root: Path) -> dict[str, float]:
    """Run in a fresh process: compact the table at ``root`` one way; time and memory of that call only."""
    # The package comes before PyArrow, as in the CLI and an Airflow task, so its allocator setting
    # (freed memory returned at once) applies to every method alike.
    import iceberg_ops_provider  # noqa: F401, I001
    import pyarrow  # noqa: F401

    from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming

    table = _catalog(root).load_table(TABLE)
    records = int(table.current_snapshot().summary["total-records"])
    paths = [task.file.file_path for task in table.scan().plan_files()] if method == "raw" else []
    before, _ = memory()
    reset_peak()
    cpu = time.process_time()
    started = time.perf_counter()
    if method == "compact":
        result = compact_small_files_streaming(table)
        assert result.failed_groups_count == 0
    elif method == "naive":
        table.overwrite(table.scan().to_arrow())
    else:
        _raw_copy(table, paths, root)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    _, peak = memory()
    if method != "raw":
        table.refresh()
        assert int(table.current_snapshot().summary["total-records"]) == records
    files = len(table.inspect.files()) if method != "raw" else len(list(root.glob("raw-*.parquet")))
    return {"seconds": elapsed, "cpu_seconds": cpu, "peak_above_start": max(0, peak - before), "files_after": files}


def plan_scan(root: Path) -> dict[str, float]:
    """Run in a fresh process: time planning a full scan (reads the manifest list and every manifest)."""
    table = _catalog(root).load_table(TABLE)
    started = time.perf_counter()
    tasks = len(table.scan().plan_files())
    return {
        "seconds": time.perf_counter() - started,
        "tasks": tasks,
        "manifests": len(table.current_snapshot().manifests(table.io)),
    }


def build_history(root: Path, commits: int) -> dict[str, Any]:
    """A table after ``commits`` single-row appends: one small manifest per commit."""
    import pyarrow as pa

    catalog = _catalog(root)
    catalog.create_namespace(NAMESPACE)
    table = catalog.create_table(TABLE, pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]))
    for number in range(commits):
        table.append(pa.table({"id": pa.array([number], pa.int64()), "name": [f"row-{number}"]}))
    return {"commits": commits}


def rewrite(root: Path) -> dict[str, Any]:
    """Rewrite the table's manifests (``rewrite_manifests`` with its defaults)."""
    from iceberg_ops_provider.maintenance.manifests import rewrite_manifests

    started = time.perf_counter()
    result = rewrite_manifests(_catalog(root).load_table(TABLE))
    return {"seconds": time.perf_counter() - started, **result.to_json()}


def _child(*arguments: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", *arguments]
    completed = subprocess.run(command, check=False, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(arguments)} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _restore(template: Path, work: Path) -> None:
    """Put a fresh copy of the table at the path its metadata names."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(template, work, symlinks=True)


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def compaction_benchmark(workdir: Path, sizes: dict[str, tuple[int, int]], repeat: int, pause: float) -> dict[str, Any]:
    """Build each size once, then measure every method on fresh copies; returns the medians."""
    shapes: dict[str, dict[str, Any]] = {}
    for label, (files, rows) in sizes.items():
        work, template = workdir / label, workdir / f"{label}.template"
        print(f"building {label}: {files:,} files of {rows:,} rows ...", flush=True)
        work.mkdir(parents=True)
        shapes[label] = _child("build", str(work), str(files), str(rows))
        shutil.copytree(work, template, symlinks=True)
        print(
            f"  {shapes[label]['arrow_bytes'] / 2**30:.2f} GiB of Arrow data, "
            f"{shapes[label]['parquet_bytes'] / 2**20:,.0f} MiB of Parquet",
            flush=True,
        )
    samples: dict[tuple[str, str], list[dict[str, float]]] = {(m, s): [] for m in METHODS for s in sizes}
    for round_number in range(1, repeat + 1):
        order = list(samples)
        random.shuffle(order)
        for method, label in order:
            _restore(workdir / f"{label}.template", workdir / label)
            time.sleep(pause)
            sample = _child("measure", method, str(workdir / label))
            samples[(method, label)].append(sample)
            rate = shapes[label]["arrow_bytes"] / sample["seconds"] / 2**20
            print(
                f"  round {round_number}: {method:<8} {label:<6} {sample['seconds']:7.1f} s  {rate:6.1f} MiB/s  "
                f"peak +{_mib(sample['peak_above_start'])} MiB  -> {sample['files_after']:.0f} file(s)",
                flush=True,
            )
    report: dict[str, Any] = {"shapes": shapes, "median": {}, "round_ratios": {}, "round_peak_ratios": {}}
    # Ratios within each round (measured minutes apart) are steadier than ratios of medians on a shared VM.
    for label in sizes:
        for other in ("naive", "raw"):
            pairs = list(zip(samples[("compact", label)], samples[(other, label)], strict=True))
            ratios = [theirs["seconds"] / mine["seconds"] for mine, theirs in pairs]
            report["round_ratios"][f"compact/{other}/{label}"] = statistics.median(ratios)
            peaks = [mine["peak_above_start"] / max(1, theirs["peak_above_start"]) for mine, theirs in pairs]
            report["round_peak_ratios"][f"compact/{other}/{label}"] = statistics.median(peaks)
    for (method, label), values in samples.items():
        seconds = statistics.median(v["seconds"] for v in values)
        report["median"][f"{method}/{label}"] = {
            "seconds": seconds,
            "mib_per_second": shapes[label]["arrow_bytes"] / seconds / 2**20,
            "peak_above_start_mib": statistics.median(v["peak_above_start"] for v in values) / 2**20,
            "cpu_seconds": statistics.median(v["cpu_seconds"] for v in values),
        }
    return report


def planning_benchmark(workdir: Path, commits: int, repeat: int, pause: float) -> dict[str, Any]:
    """Planning time after ``commits`` commits, before and after ``rewrite_manifests``."""
    work, template = workdir / "history", workdir / "history.template"
    print(f"building a table with {commits:,} commits ...", flush=True)
    work.mkdir(parents=True)
    _child("history", str(work), str(commits))
    shutil.copytree(work, template, symlinks=True)
    rewritten = workdir / "history.rewritten"
    rewrite_result = _child("rewrite", str(work))
    shutil.copytree(work, rewritten, symlinks=True)
    samples: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(repeat):
        for state in random.sample(list(samples), 2):
            _restore(template if state == "before" else rewritten, work)
            time.sleep(pause)
            samples[state].append(_child("plan", str(work)))
    report = {
        state: {
            "seconds": statistics.median(v["seconds"] for v in values),
            "manifests": values[0]["manifests"],
            "tasks": values[0]["tasks"],
        }
        for state, values in samples.items()
    }
    report["rewrite_seconds"] = rewrite_result["seconds"]
    for state in ("before", "after"):
        print(
            f"  {state:<6} rewrite_manifests: {report[state]['manifests']:>5} manifest(s), planning "
            f"{report[state]['seconds'] * 1000:7.1f} ms ({report[state]['tasks']} files)",
            flush=True,
        )
    return report


def _print_compaction(report: dict[str, Any], sizes: list[str]) -> None:
    median = report["median"]
    small, large = sizes[0], sizes[-1]
    print(f"\n{'median':<28}" + "".join(f"{label:>22}" for label in sizes))
    for method in METHODS:
        cells = []
        for label in sizes:
            cell = median[f"{method}/{label}"]
            cells.append(f"{cell['mib_per_second']:7.1f} MiB/s +{cell['peak_above_start_mib']:5.0f} MiB")
        print(f"{method:<28}" + "".join(f"{cell:>22}" for cell in cells))
    checks = []
    for label in sizes:
        compact, naive, raw = (median[f"{m}/{label}"] for m in METHODS)
        checks.append(
            (f"throughput vs naive ({label})", compact["mib_per_second"] / naive["mib_per_second"], 1.5, ">=")
        )
        checks.append((f"throughput vs raw ({label})", compact["mib_per_second"] / raw["mib_per_second"], 0.7, ">="))
    checks.append(
        (
            f"peak memory vs naive ({large})",
            median[f"compact/{large}"]["peak_above_start_mib"] / median[f"naive/{large}"]["peak_above_start_mib"],
            1 / 3,
            "<=",
        )
    )
    if large != small:
        checks.append(
            (
                f"peak memory {large} / {small}",
                median[f"compact/{large}"]["peak_above_start_mib"] / median[f"compact/{small}"]["peak_above_start_mib"],
                1.1,
                "<=",
            )
        )
    print()
    for key, value in report["round_ratios"].items():
        method, other, label = key.split("/")
        peak = report["round_peak_ratios"][key]
        print(
            f"{'median of per-round ratios':<28}{method} / {other} ({label}): throughput {value:.2f}, "
            f"peak memory {peak:.2f}"
        )
    print()
    for name, value, bound, sense in checks:
        met = value >= bound if sense == ">=" else value <= bound
        print(f"{name:<36} {value:6.2f}  (target {sense} {bound:.2f})  {'met' if met else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small tables, one repetition, 100 commits")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pause", type=float, default=3.0, help="idle seconds before each measurement")
    parser.add_argument("--files", type=int, default=1024, help="small files in the smaller table (4x in the larger)")
    parser.add_argument("--rows", type=int, default=4000, help="rows per small file")
    parser.add_argument("--commits", type=int, default=1000, help="commits before the manifest rewrite")
    parser.add_argument("--workdir", type=Path, default=None, help="where tables are built (default: a temp dir)")
    parser.add_argument("--skip-planning", action="store_true", help="only the compaction benchmark")
    parser.add_argument("--one-size", action="store_true", help="only the smaller table (--files files)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "build":
            output = build_table(Path(rest[0]), int(rest[1]), int(rest[2]))
        elif kind == "measure":
            output = measure(rest[0], Path(rest[1]))
        elif kind == "history":
            output = build_history(Path(rest[0]), int(rest[1]))
        elif kind == "rewrite":
            output = rewrite(Path(rest[0]))
        else:
            output = plan_scan(Path(rest[0]))
        print(json.dumps(output, default=str))
        return
    files, rows, repeat, commits, pause = args.files, args.rows, args.repeat, args.commits, args.pause
    if args.quick:
        files, rows, repeat, commits, pause = 100, 2000, 1, 100, 0.5
    sizes = {"small": (files, rows)} if args.one_size else {"small": (files, rows), "large": (4 * files, rows)}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="iceberg-ops-bench-"))
    try:
        report = {"compaction": compaction_benchmark(workdir, sizes, repeat, pause)}
        _print_compaction(report["compaction"], list(sizes))
        if not args.skip_planning:
            print()
            report["planning"] = planning_benchmark(workdir, commits, max(repeat, 3), pause)
            before, after = report["planning"]["before"]["seconds"], report["planning"]["after"]["seconds"]
            print(f"planning after / before rewrite_manifests: {after / before:.2f}")
        if args.json:
            args.json.write_text(json.dumps(report, indent=2))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
