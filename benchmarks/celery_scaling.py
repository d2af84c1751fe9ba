"""Benchmark: the backfill DAG's move throughput under the CeleryExecutor with one and with two workers.

Each measurement starts a fresh deployment (``tests/deployment/cluster.py``: api-server, scheduler,
dag-processor, triggerer and N ``airflow celery worker`` processes, PostgreSQL metadata database,
Redis broker, a ``sql`` catalog on PostgreSQL), registers the same cached source table in its
catalog, triggers ``backfill_with_mover`` through the REST API for every week of the source (one
range, one plan, one move task and one verify task a week) and reads the move tasks' start and end
times from the REST API. Throughput is the rows and source bytes the move tasks moved over the move
tasks' wall time: from the first move task's start to the last one's end. The source is generated
once into a cache folder; every measurement moves it into a fresh target.

Every measurement gets an idle pause and a wait for the machine to be quiet once its deployment is
up, the order of one and two workers is shuffled in each round, and the report gives medians over
the rounds and the median of the per-round ratios. Each worker has ``--concurrency`` task slots
(default 1), so two workers run twice as many move tasks at once as one.

    .venv/bin/python benchmarks/celery_scaling.py --output results.md           # 3 rounds, 8 weeks
    .venv/bin/python benchmarks/celery_scaling.py --rounds 5 --weeks 12         # more rounds, more data
    .venv/bin/python benchmarks/celery_scaling.py --quick                       # smoke run, ~5 minutes

Needs PostgreSQL and Redis on loopback (as the deployment tests) and ``pip install -e '.[dev]'``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from celery_support import (
    AirflowCluster,
    add_run_options,
    per_round_ratios,
    ratio_lines,
    run_rounds,
    seconds_between,
    task_window,
    timed_run,
    unavailable_reason,
    wait_for_quiet,
)

DAG_ID = "backfill_with_mover"
SOURCE, TARGET = "bench.events", "bench.events_v2"
FIRST_DAY = dt.date(2026, 11, 2)  # a Monday: the DAG's weeks start on Mondays
DATA_VERSION = 1  # bump when the generated data changes, so stale caches are rebuilt


# --------------------------------------------------------------------------------------------------
# Source data


def source_table(cache: Path, weeks: int, rows_per_day: int) -> tuple[str, int, int]:
    """The cached source table (generated on first use): its metadata file, rows and data bytes.

    One Parquet file a day: ``id``, ``day``, ``user_id``, ``country``, ``page``, ``amount``.
    """
    from iceberg_ops_provider.catalogs import CatalogFactory

    folder = cache / f"v{DATA_VERSION}-{weeks}w-{rows_per_day}r"
    done = folder / "source.json"
    if done.exists():
        found = json.loads(done.read_text())
        return found["metadata_location"], found["rows"], found["bytes"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    catalog = CatalogFactory.build("sqlite", db_path=folder / "catalog.db", warehouse_dir=folder / "warehouse")
    catalog.create_namespace("bench")
    print(f"generating {weeks} weeks x 7 days x {rows_per_day:,} rows into {folder} ...", flush=True)
    table = None
    for n in range(weeks * 7):
        day = _day(FIRST_DAY + dt.timedelta(days=n), n * rows_per_day, rows_per_day)
        if table is None:
            table = catalog.create_table(SOURCE, day.schema)
        table.append(day)
    assert table is not None
    table = table.refresh()
    rows = sum(task.file.record_count for task in table.scan().plan_files())
    size = sum(task.file.file_size_in_bytes for task in table.scan().plan_files())
    done.write_text(json.dumps({"metadata_location": table.metadata_location, "rows": rows, "bytes": size}))
    catalog.close()
    return table.metadata_location, rows, size


def _day(day: dt.date, first_id: int, rows: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    countries = pa.array([f"country-{n:03d}" for n in range(200)])
    pages = pa.array([f"/catalog/item/{n:05d}/details?ref=campaign-{n % 37}" for n in range(5000)])

    def indexes(count: int) -> Any:
        return pc.cast(pc.floor(pc.multiply(pc.random(rows), count)), pa.int32())

    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + rows), pa.int64()),
            "day": pa.array([day] * rows, pa.date32()),
            "user_id": pc.cast(pc.floor(pc.multiply(pc.random(rows), 1_000_000)), pa.int64()),
            "country": pc.take(countries, indexes(len(countries))),
            "page": pc.take(pages, indexes(len(pages))),
            "amount": pc.round(pc.multiply(pc.random(rows), 500.0), 2),
        }
    )


# --------------------------------------------------------------------------------------------------
# One measurement


def measure(workers: int, args: argparse.Namespace, metadata_location: str, rows: int) -> dict[str, Any]:
    """One backfill run on a fresh deployment with ``workers`` workers; the move tasks' throughput."""
    root = Path(tempfile.mkdtemp(prefix=f"celery-{workers}w-", dir=args.scratch))
    try:
        with AirflowCluster(root, workers=workers, worker_concurrency=args.concurrency) as cluster:
            catalog = cluster.catalog()
            catalog.create_namespace("bench")
            catalog.register_table(SOURCE, metadata_location)
            cluster.wait_for_dag(DAG_ID)
            waited = wait_for_quiet(args.pause, args.quiet, args.max_wait)
            load = os.getloadavg()[0]
            last_day = FIRST_DAY + dt.timedelta(days=args.weeks * 7 - 1)
            conf = {"source": SOURCE, "target": TARGET, "start": str(FIRST_DAY), "end": str(last_day), "days": 7}
            run, machine_share = timed_run(cluster, DAG_ID, conf, args.timeout)
            if run.state != "success":
                raise RuntimeError(cluster.failure_report(run))
            moves = run.of("move")
            results = [cluster.xcom(DAG_ID, run.run_id, "move", ti["map_index"]) for ti in moves]
            moved_rows = sum(result["rows"] for result in results)
            if moved_rows != rows or catalog.load_table(TARGET).scan().count() != rows:
                raise RuntimeError(f"moved {moved_rows:,} rows of {rows:,}")
            window = task_window(moves)
            details = cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run.run_id}")
            source_bytes = sum(result["bytes_read"] for result in results)
            return {
                "workers": workers,
                "move_tasks": len(moves),
                "rows": moved_rows,
                "bytes_read": source_bytes,
                "bytes_written": sum(result["bytes_written"] for result in results),
                "move_window_s": window,
                "rows_per_s": moved_rows / window,
                "mib_per_s": source_bytes / 2**20 / window,
                "run_s": seconds_between(details["start_date"], details["end_date"]),
                "move_task_s": statistics.median(seconds_between(ti["start_date"], ti["end_date"]) for ti in moves),
                "engine_s": statistics.median(result["seconds"] for result in results),
                "hosts": sorted({ti["hostname"] for ti in moves}),
                "waited_s": waited,
                "load_before": load,
                "machine_cpu_share": machine_share,
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Report


def report(samples: list[dict[str, Any]], args: argparse.Namespace, rows: int, size: int) -> str:
    """The markdown report: medians per worker count and the two-to-one ratios."""
    by = {n: [s for s in samples if s["workers"] == n] for n in (1, 2)}
    rounds = sorted({s["round"] for s in samples})
    ratios = per_round_ratios(samples, "rows_per_s")

    def med(n: int, key: str) -> float:
        return statistics.median(s[key] for s in by[n])

    lines = [
        f"Backfill DAG, {args.weeks} weeks ({args.weeks} move tasks), {rows:,} rows, {size / 2**20:,.0f} MiB of "
        f"Parquet; {args.concurrency} task slot(s) per worker; medians of {len(rounds)} round(s); "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {dt.date.today()}.",
        "",
        "| workers | rows/s | MiB/s | move tasks' wall time | one move task | mover engine in it | DAG run |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in (1, 2):
        if by[n]:
            lines.append(
                f"| {n} | {med(n, 'rows_per_s'):,.0f} | {med(n, 'mib_per_s'):,.1f} | {med(n, 'move_window_s'):.1f} s "
                f"| {med(n, 'move_task_s'):.1f} s | {med(n, 'engine_s'):.2f} s | {med(n, 'run_s'):.1f} s |"
            )
    lines += ratio_lines(ratios)
    lines += [
        "",
        "Per measurement (round, workers: rows/s, move window, machine CPU use during the run, load before):",
        "",
    ]
    for s in sorted(samples, key=lambda s: (s["round"], s["workers"])):
        lines.append(
            f"- round {s['round']}, {s['workers']} worker(s) on {', '.join(s['hosts'])}: "
            f"{s['rows_per_s']:,.0f} rows/s, {s['move_window_s']:.1f} s, CPU {s['machine_cpu_share']:.0%}, "
            f"load {s['load_before']:.1f}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None, help="measurements of each worker count (default 3)")
    parser.add_argument("--weeks", type=int, default=8, help="weeks of source data: one move task each")
    parser.add_argument("--rows-per-day", type=int, default=200_000, help="source rows a day (one file a day)")
    add_run_options(parser)
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 weeks of 20,000 rows a day, 2 rounds")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "iceberg-ops-celery-bench")
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the deployments (default: temp)")
    parser.add_argument("--output", type=Path, help="write the markdown report here")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args(argv)
    if args.quick:
        args.weeks, args.rows_per_day = 4, 20_000
    if args.rounds is None:
        args.rounds = 2 if args.quick else 3
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    metadata_location, rows, size = source_table(args.cache, args.weeks, args.rows_per_day)
    print(f"source: {rows:,} rows, {size / 2**20:,.1f} MiB in {args.weeks * 7} files", flush=True)
    samples = run_rounds(
        args.rounds,
        args.seed,
        lambda workers: measure(workers, args, metadata_location, rows),
        lambda sample: (
            f"{sample['rows_per_s']:,.0f} rows/s, {sample['mib_per_s']:.1f} MiB/s over {sample['move_window_s']:.1f} s "
            f"(run {sample['run_s']:.1f} s, hosts {', '.join(sample['hosts'])})"
        ),
    )
    text = report(samples, args, rows, size)
    print("\n" + text)
    if args.output:
        args.output.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(samples, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
