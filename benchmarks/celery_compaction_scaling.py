"""Benchmark: one large partitioned table's fanned-out compaction under the CeleryExecutor, one and two workers.

The maintenance DAG (``dags_examples/table_maintenance.py``) plans a table's compaction as units, one
a partition, and maps one ``compact`` task per unit, so Celery workers share even one table's work.
Each measurement starts a fresh deployment (``tests/deployment/cluster.py``: api-server, scheduler,
dag-processor, triggerer and N ``airflow celery worker`` processes, PostgreSQL metadata database,
Redis broker, a ``sql`` catalog on PostgreSQL), registers a fresh copy of the same cached table in
its catalog as the only table of its namespace, triggers ``table_maintenance`` for that namespace
through the REST API and reads the task instances' start and end times and hostnames from it.

The table: ``--partitions`` identity partitions, each of ``--files`` small files of
``--rows-per-file`` rows (default 64 x 8 x 25,000), written once into a cache folder. Its
``history.expire.max-snapshot-age-ms`` is ten years, so however old the cache, the health report
asks for compaction only (no snapshot expiry; its few manifests need no rewrite); orphan removal,
which runs on every table, only lists the table's folder. What is timed is the compact tasks' wall
time: from the first mapped ``compact`` task's start to the last one's end; throughput is the input
Parquet bytes (and rows) over it. Each measurement works on a copy: the pristine table's folder
hard-linked (copied where links cannot be made) back to where its metadata points, so compaction,
expiry and orphan removal never touch the cache. Concurrent runs of this script must therefore use
different ``--cache`` folders. After each run, untimed, the table is read back: the row count must
be unchanged and the table must hold one data file a partition (every unit committed, none skipped).

Every measurement gets an idle pause and a wait for the machine to be quiet once its deployment is
up, the order of one and two workers is shuffled in each round, and the report gives medians over
the rounds and the median of the per-round ratios (two workers' MiB/s over one worker's). Each
worker has ``--concurrency`` task slots (default 1). The report says which worker ran how many
compact tasks, and the slot use: the compact tasks' summed durations over wall time x slots.

    .venv/bin/python benchmarks/celery_compaction_scaling.py --output results.md     # 3 rounds, 64 x 8 files
    .venv/bin/python benchmarks/celery_compaction_scaling.py --rounds 2              # about 25 minutes on 2 cores
    .venv/bin/python benchmarks/celery_compaction_scaling.py --partitions 128        # more units
    .venv/bin/python benchmarks/celery_compaction_scaling.py --quick                 # smoke run, a few minutes

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
from collections import Counter
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

DAG_ID = "table_maintenance"
NAMESPACE = "bench"
TABLE = f"{NAMESPACE}.visits"
PARTITION_COLUMN = "region"
DATA_VERSION = 1  # bump when the generated data changes, so stale caches are rebuilt
MIN_FILES = 5  # the health report's min_input_files: partitions with fewer small files are not compacted
TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000


# --------------------------------------------------------------------------------------------------
# The table


def table_folder(cache: Path, partitions: int, files: int, rows_per_file: int) -> Path:
    """The cache folder of one table shape."""
    return cache / f"v{DATA_VERSION}-{partitions}p-{files}f-{rows_per_file}r"


def build_table(cache: Path, partitions: int, files: int, rows_per_file: int) -> dict[str, Any]:
    """The cached table (generated on first use): its metadata file, folders, rows, bytes and data files.

    The table lives in ``<folder>/live`` (where its metadata points) and is kept in ``<folder>/pristine``;
    :func:`restore` puts the pristine copy back before each measurement. ``files`` appends, each
    writing one file into every partition: ``id``, ``region`` (the partition), ``user_id``,
    ``country``, ``page``, ``amount``.
    """
    from iceberg_ops_provider.catalogs import CatalogFactory

    folder = table_folder(cache, partitions, files, rows_per_file)
    done = folder / "table.json"
    if done.exists():
        return json.loads(done.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    live, pristine = folder / "live", folder / "pristine"
    catalog = CatalogFactory.build("sqlite", db_path=folder / "catalog.db", warehouse_dir=folder / "warehouse")
    catalog.create_namespace(NAMESPACE)
    print(f"generating {partitions} partitions x {files} files x {rows_per_file:,} rows into {folder} ...", flush=True)
    properties = {"history.expire.max-snapshot-age-ms": str(TEN_YEARS_MS)}
    schema = _rows(0, partitions, 1).schema
    with (
        catalog.create_table_transaction(TABLE, schema, location=str(live), properties=properties) as transaction,
        transaction.update_spec() as spec,
    ):
        spec.add_identity(PARTITION_COLUMN)
    table = catalog.load_table(TABLE)
    for number in range(files):
        table.append(_rows(number * partitions * rows_per_file, partitions, rows_per_file))
    table = table.refresh()
    data_files = table.inspect.files()
    found = {
        "metadata_location": table.metadata_location,
        "live": str(live),
        "pristine": str(pristine),
        "partitions": partitions,
        "files_per_partition": files,
        "rows_per_file": rows_per_file,
        "rows": sum(data_files["record_count"].to_pylist()),
        "bytes": sum(data_files["file_size_in_bytes"].to_pylist()),
        "data_files": data_files.num_rows,
    }
    catalog.close()
    if found["data_files"] != partitions * files or found["rows"] != partitions * files * rows_per_file:
        raise RuntimeError(f"the generated table is not {partitions} x {files} files: {found}")
    shutil.copytree(live, pristine)
    done.write_text(json.dumps(found))
    return found


def _rows(first_id: int, partitions: int, rows_per_partition: int) -> Any:
    """``rows_per_partition`` rows in each of ``partitions`` regions, ids from ``first_id``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = partitions * rows_per_partition
    regions = pa.array([f"r{n:03d}" for n in range(partitions)])
    countries = pa.array([f"country-{n:03d}" for n in range(200)])
    pages = pa.array([f"/catalog/item/{n:05d}/details?ref=campaign-{n % 37}" for n in range(5000)])

    def indexes(size: int) -> Any:
        return pc.cast(pc.floor(pc.multiply(pc.random(count), size)), pa.int32())

    region_of_row = pa.array([n // rows_per_partition for n in range(count)], pa.int32())
    return pa.table(
        {
            "id": pa.array(range(first_id, first_id + count), pa.int64()),
            PARTITION_COLUMN: pc.take(regions, region_of_row),
            "user_id": pc.cast(pc.floor(pc.multiply(pc.random(count), 1_000_000)), pa.int64()),
            "country": pc.take(countries, indexes(len(countries))),
            "page": pc.take(pages, indexes(len(pages))),
            "amount": pc.round(pc.multiply(pc.random(count), 500.0), 2),
        }
    )


def _link_or_copy(source: str, destination: str) -> str:
    """A hard link (the files are never rewritten in place: Iceberg writes new ones), else a copy."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
    return destination


def restore(table: dict[str, Any]) -> None:
    """Put the pristine table back where its metadata points, dropping what an earlier run wrote there."""
    shutil.rmtree(table["live"], ignore_errors=True)
    shutil.copytree(table["pristine"], table["live"], copy_function=_link_or_copy)


# --------------------------------------------------------------------------------------------------
# One measurement


def _duration(ti: dict[str, Any]) -> float:
    return seconds_between(ti["start_date"], ti["end_date"])


def measure(workers: int, args: argparse.Namespace, table: dict[str, Any]) -> dict[str, Any]:
    """One maintenance run on a fresh deployment with ``workers`` workers; the compact tasks' throughput."""
    root = Path(tempfile.mkdtemp(prefix=f"celery-compaction-{workers}w-", dir=args.scratch))
    try:
        restore(table)
        with AirflowCluster(root, workers=workers, worker_concurrency=args.concurrency) as cluster:
            catalog = cluster.catalog()
            catalog.create_namespace(NAMESPACE)
            catalog.register_table(TABLE, table["metadata_location"])
            cluster.wait_for_dag(DAG_ID)
            waited = wait_for_quiet(args.pause, args.quiet, args.max_wait)
            load = os.getloadavg()[0]
            run, machine_share = timed_run(cluster, DAG_ID, {"namespace": NAMESPACE, "dry_run": False}, args.timeout)
            if run.state != "success":
                raise RuntimeError(cluster.failure_report(run))
            compacts = run.of("compact")
            results = [cluster.xcom(DAG_ID, run.run_id, "compact", ti["map_index"]) for ti in compacts]
            after = catalog.load_table(TABLE)
            _check(table, compacts, results, rows=after.scan().count(), data_files=len(after.inspect.files()))
            details = cluster.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run.run_id}")
            (plan,) = run.of("plan_compaction")
            window = task_window(compacts)
            first_compact = min(ti["start_date"] for ti in compacts)
            split = Counter(ti["hostname"] for ti in compacts)
            task_seconds = [_duration(ti) for ti in compacts]
            return {
                "workers": workers,
                "compact_tasks": len(compacts),
                "rows": table["rows"],
                "bytes_read": sum(result["rewritten_bytes_count"] for result in results),
                "bytes_written": sum(result["added_bytes_count"] for result in results),
                "compact_window_s": window,
                "mib_per_s": table["bytes"] / 2**20 / window,
                "rows_per_s": table["rows"] / window,
                "compact_task_s": statistics.median(task_seconds),
                "engine_s": statistics.median(result["duration_seconds"] for result in results),
                "slot_use": sum(task_seconds) / (window * workers * args.concurrency),
                "plan_s": _duration(plan),
                "before_compact_s": seconds_between(details["start_date"], first_compact),
                "run_s": seconds_between(details["start_date"], details["end_date"]),
                "hosts": dict(sorted(split.items())),
                "waited_s": waited,
                "load_before": load,
                "machine_cpu_share": machine_share,
            }
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(table["live"], ignore_errors=True)


def _check(
    table: dict[str, Any], compacts: list[dict[str, Any]], results: list[dict[str, Any]], rows: int, data_files: int
) -> None:
    """Every partition was one compact task's unit, committed once; the rows are all there, in one file a partition.

    Raises:
        RuntimeError: Saying what differs.
    """
    partitions = table["partitions"]
    problems = []
    if len(compacts) != partitions:
        problems.append(f"{len(compacts)} compact tasks for {partitions} partitions")
    if [ti["state"] for ti in compacts] != ["success"] * len(compacts):
        problems.append(f"compact task states {Counter(ti['state'] for ti in compacts)}")
    committed = sum(result["committed_groups_count"] for result in results)
    others = sum(result["skipped_groups_count"] + result["failed_groups_count"] for result in results)
    if committed != partitions or others:
        problems.append(f"{committed} unit(s) committed, {others} skipped or failed, of {partitions}")
    rewritten = sum(result["rewritten_bytes_count"] for result in results)
    if rewritten != table["bytes"]:
        problems.append(f"{rewritten:,} bytes rewritten of {table['bytes']:,}")
    if rows != table["rows"]:
        problems.append(f"{rows:,} rows after the run, {table['rows']:,} before")
    if data_files != partitions:
        problems.append(f"{data_files} data files after the run for {partitions} partitions")
    if problems:
        raise RuntimeError("compaction did not do what it should: " + "; ".join(problems))


# --------------------------------------------------------------------------------------------------
# Report


def _split(sample: dict[str, Any]) -> str:
    return ", ".join(f"{host} {count}" for host, count in sample["hosts"].items())


def report(samples: list[dict[str, Any]], args: argparse.Namespace, table: dict[str, Any]) -> str:
    """The markdown report: medians per worker count and the two-to-one ratios."""
    by = {n: [s for s in samples if s["workers"] == n] for n in (1, 2)}
    rounds = sorted({s["round"] for s in samples})

    def med(n: int, key: str) -> float:
        return statistics.median(s[key] for s in by[n])

    lines = [
        f"Maintenance DAG `{DAG_ID}` on one table of {table['partitions']} partitions x "
        f"{table['files_per_partition']} files x {table['rows_per_file']:,} rows ({table['rows']:,} rows, "
        f"{table['bytes'] / 2**20:,.0f} MiB of Parquet in {table['data_files']} files): {table['partitions']} "
        f"compact tasks, one partition each; {args.concurrency} task slot(s) per worker; medians of "
        f"{len(rounds)} round(s); {os.cpu_count()} cores, Python {platform.python_version()}, {dt.date.today()}.",
        "",
        "| workers | compact tasks' wall time | MiB/s | rows/s | one compact task | compaction in it | slot use "
        "| run start to first compact | DAG run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in (1, 2):
        if by[n]:
            lines.append(
                f"| {n} | {med(n, 'compact_window_s'):.1f} s | {med(n, 'mib_per_s'):,.2f} "
                f"| {med(n, 'rows_per_s'):,.0f} | {med(n, 'compact_task_s'):.1f} s | {med(n, 'engine_s'):.2f} s "
                f"| {med(n, 'slot_use'):.0%} | {med(n, 'before_compact_s'):.1f} s | {med(n, 'run_s'):.1f} s |"
            )
    lines += ratio_lines(per_round_ratios(samples, "mib_per_s"))
    lines += [
        "",
        "Per measurement (round, workers: MiB/s, compact wall time, compact tasks per worker, machine CPU use "
        "during the run, load before):",
        "",
    ]
    for s in sorted(samples, key=lambda s: (s["round"], s["workers"])):
        lines.append(
            f"- round {s['round']}, {s['workers']} worker(s): {s['mib_per_s']:,.2f} MiB/s, "
            f"{s['compact_window_s']:.1f} s, tasks {_split(s)}, CPU {s['machine_cpu_share']:.0%}, "
            f"load {s['load_before']:.1f}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None, help="measurements of each worker count (default 3)")
    parser.add_argument("--partitions", type=int, default=64, help="partitions of the table: one compact task each")
    parser.add_argument("--files", type=int, default=8, help=f"small files in each partition (at least {MIN_FILES})")
    parser.add_argument("--rows-per-file", type=int, default=25_000, help="rows of each small file")
    add_run_options(parser)
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 partitions x 5 files x 10,000 rows, 1 round")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "iceberg-ops-celery-compaction")
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the deployments (default: temp)")
    parser.add_argument("--output", type=Path, help="write the markdown report here")
    parser.add_argument("--json", type=Path, help="write every measurement here")
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.files, args.rows_per_file = 8, 5, 10_000
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    if args.files < MIN_FILES:
        parser.error(f"--files {args.files}: the health report compacts partitions of at least {MIN_FILES} files")
    if args.partitions < 1 or args.rows_per_file < 1:
        parser.error("--partitions and --rows-per-file must be at least 1")
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    table = build_table(args.cache, args.partitions, args.files, args.rows_per_file)
    print(
        f"table: {table['rows']:,} rows, {table['bytes'] / 2**20:,.1f} MiB in {table['data_files']} files, "
        f"{table['partitions']} partitions",
        flush=True,
    )
    samples = run_rounds(
        args.rounds,
        args.seed,
        lambda workers: measure(workers, args, table),
        lambda sample: (
            f"{sample['mib_per_s']:.2f} MiB/s over {sample['compact_window_s']:.1f} s of compact tasks (run "
            f"{sample['run_s']:.1f} s, first compact after {sample['before_compact_s']:.1f} s, slot use "
            f"{sample['slot_use']:.0%}, tasks {_split(sample)})"
        ),
    )
    text = report(samples, args, table)
    print("\n" + text)
    if args.output:
        args.output.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(samples, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
