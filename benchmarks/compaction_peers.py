"""Benchmark: compaction of small files side by side with the peers a team would otherwise use.

Identical tables of small Parquet files (one unpartitioned, one with many partitions), in one SQL
catalog on PostgreSQL that every engine opens, compacted by:

- *iceberg-ops*: ``compact_small_files_streaming(table, min_input_files=2)``;
- *pyiceberg*: ``table.overwrite(table.scan().to_arrow())``, what a PyIceberg user writes without it;
- *spark*: Iceberg's Java ``CALL lake.system.rewrite_data_files(..., options => map('min-input-files','2'))``
  in Spark 3.5 ``local[2]`` (the peer of ``make spark-peer``); a warm-up call on a small table first, so
  the procedure's time and the JVM's warm-up are reported apart from the whole process's;
- *zamboni*: ``iceberg-zamboni`` 0.7 (DuckDB rewrite backend), in a virtualenv of its own (its pins
  differ from Airflow's), created on first use under ``~/.cache/iceberg-ops``.

Every measurement runs in a fresh process on a fresh copy of the table (the PostgreSQL database
cloned from a template, the warehouse folder copied back to where its metadata points), after an
idle pause, in shuffled order, repeated. After each one, untimed, the table is read back: the rows
must be those of the template (count and an order-free digest) and the number of data files is
reported. The report gives medians of the call's time, the whole process's time and peak memory
(the kernel's high-water mark of the process, and of the JVM for Spark), and per-round ratios
against iceberg-ops. A peer that cannot run here is skipped, saying why.

    .venv/bin/python benchmarks/compaction_peers.py            # full run (about 25 minutes)
    .venv/bin/python benchmarks/compaction_peers.py --quick    # small tables, one round (about 4 minutes)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from peak_memory import memory, reset_peak

ROOT = Path(__file__).resolve().parents[1]
CATALOG_NAME = "lake"
NAMESPACE = "bench"
WARMUP = "bench.warmup"
PG = os.environ.get("ICEBERG_OPS_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432")
RUN_DATABASE = "iceberg_ops_bench_run"
METHODS = ("iceberg-ops", "pyiceberg", "spark", "zamboni")
ZAMBONI = "iceberg-zamboni==0.7.0"
TARGET = 512 * 1024 * 1024


# --------------------------------------------------------------------------------------------------
# Memory and catalogs (every child)


def _catalog(database: str, warehouse: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(CATALOG_NAME, uri=f"{PG}/{database}", warehouse=warehouse.as_uri())


def _admin(statement: str) -> None:
    import psycopg

    url = PG.split("://", 1)[1]
    user_host = url.split("@")
    user, host_port = (user_host[0], user_host[1]) if len(user_host) == 2 else ("postgres", user_host[0])
    host, _, port = host_port.partition(":")
    with psycopg.connect(host=host, port=int(port or 5432), user=user, dbname="postgres", autocommit=True) as conn:
        conn.execute(statement)


# --------------------------------------------------------------------------------------------------
# Building the tables (a child of this project's venv)


def _random_ints(count: int, high: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.floor(pc.multiply(pc.random(count), high)), pa.int64())


def _rows(first_id: int, rows: int, category: str | None) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    words = pa.array([f"w{i:05d}" for i in range(5000)])
    ids = pa.array(range(first_id, first_id + rows), pa.int64())
    micros = pc.add(pc.multiply(ids, 1_000_000), 1_700_000_000_000_000)
    categories = pa.array([f"c{i:03d}" for i in range(100)])
    return pa.table(
        {
            "id": ids,
            "ts": pc.cast(micros, pa.timestamp("us", tz="UTC")),
            "customer": pc.binary_join_element_wise("customer-", pc.cast(_random_ints(rows, 100_000), pa.string()), ""),
            "category": pa.array([category] * rows) if category else pc.take(categories, _random_ints(rows, 100)),
            "amount": pc.multiply(pc.random(rows), 1000.0),
            "quantity": pc.cast(pc.add(_random_ints(rows, 99), 1), pa.int32()),
            "note": pc.binary_join_element_wise(
                pc.take(words, _random_ints(rows, 5000)), pc.take(words, _random_ints(rows, 5000)), " "
            ),
        }
    )


def build(database: str, warehouse: Path, name: str, files: int, rows: int, partitions: int) -> dict[str, Any]:
    """``name`` of ``files`` small files of ``rows`` rows (over ``partitions`` identity partitions, or none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import ParquetFormatModel, _to_requested_schema, parquet_file_to_data_file

    catalog = _catalog(database, warehouse)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    arrow_schema = _rows(0, 1, "c000").schema
    with catalog.create_table_transaction(name, arrow_schema) as transaction:
        if partitions:
            with transaction.update_spec() as spec:
                spec.add_identity("category")
    table = catalog.load_table(name)
    schema, locations = table.schema(), table.location_provider()
    paths, arrow_bytes = [], 0
    for number in range(files):
        category = f"c{number % partitions:03d}" if partitions else None
        data = _rows(number * rows, rows, category).combine_chunks()
        arrow_bytes += data.nbytes
        batch = _to_requested_schema(
            schema, schema, data.to_batches()[0], include_field_ids=True, format_model=ParquetFormatModel()
        )
        folder = f"category={category}/" if category else ""
        path = locations.new_data_location(f"{folder}00000-{number}-{uuid.uuid4()}.parquet")
        with table.io.new_output(path).create(overwrite=True) as stream:
            pq.write_table(pa.Table.from_batches([batch]), stream, compression="zstd")
        paths.append(path)
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        for path in paths:
            append.append_data_file(parquet_file_to_data_file(table.io, table.metadata, path))
    return {"files": files, "rows": files * rows, "arrow_bytes": arrow_bytes, "partitions": partitions}


def digest(database: str, warehouse: Path, name: str) -> dict[str, Any]:
    """Rows, an order-free digest of them, and the data files of ``name`` (read back after a run)."""
    from iceberg_ops_provider.data_migration.row_hash import row_hashes

    table = _catalog(database, warehouse).load_table(name)
    columns = [field.name for field in table.schema().fields]
    total, rows = 0, 0
    for batch in table.scan().to_arrow_batch_reader():
        rows += batch.num_rows
        total = (total + sum(row_hashes(batch, columns).to_pylist())) % 2**64
    return {"rows": rows, "digest": total, "files": len(table.inspect.files())}


# --------------------------------------------------------------------------------------------------
# The measurements (each a fresh child process)


def measure_ours(database: str, warehouse: Path, name: str) -> dict[str, Any]:
    """iceberg-ops: ``compact_small_files_streaming``."""
    from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming

    table = _catalog(database, warehouse).load_table(name)
    reset_peak()
    started = time.perf_counter()
    result = compact_small_files_streaming(table, min_input_files=2)
    assert result.failed_groups_count == 0
    return {"call_seconds": time.perf_counter() - started, "peak": memory()[1]}


def measure_pyiceberg(database: str, warehouse: Path, name: str) -> dict[str, Any]:
    """PyIceberg alone: read the whole table, overwrite it."""
    table = _catalog(database, warehouse).load_table(name)
    reset_peak()
    started = time.perf_counter()
    table.overwrite(table.scan().to_arrow())
    return {"call_seconds": time.perf_counter() - started, "peak": memory()[1]}


def measure_spark(database: str, warehouse: Path, name: str) -> dict[str, Any]:
    """Spark's ``rewrite_data_files``, after a warm-up call on a small table."""
    sys.path.insert(0, str(ROOT))
    from tests.interop.spark_peer import locate

    peer = locate()
    if isinstance(peer, str):
        raise RuntimeError(peer)
    sys.path.insert(0, str(peer.python_path))
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    host = PG.split("@")[-1]
    prefix = f"spark.sql.catalog.{CATALOG_NAME}"
    scratch = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("compaction-peers")
        .config("spark.jars", ",".join(str(jar) for jar in peer.jars))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.local.dir", str(scratch))
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "jdbc")
        .config(f"{prefix}.uri", f"jdbc:postgresql://{host}/{database}")
        .config(f"{prefix}.jdbc.user", PG.split("://", 1)[1].split("@")[0] or "postgres")
        .config(f"{prefix}.jdbc.schema-version", "V0")
        .config(f"{prefix}.warehouse", warehouse.as_uri())
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_seconds = time.perf_counter() - started

    def rewrite(table: str) -> float:
        began = time.perf_counter()
        spark.sql(
            f"CALL {CATALOG_NAME}.system.rewrite_data_files(table => '{table}', "
            f"options => map('min-input-files', '2', 'target-file-size-bytes', '{TARGET}'))"
        ).collect()
        return time.perf_counter() - began

    warmup_seconds = rewrite(WARMUP)
    call_seconds = rewrite(name)
    process = getattr(spark.sparkContext._gateway, "proc", None)  # the JVM pyspark launched
    jvm_peak = memory(process.pid)[1] if process is not None else 0
    spark.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "call_seconds": call_seconds,
        "warmup_seconds": warmup_seconds,
        "session_seconds": session_seconds,
        "peak": memory()[1] + jvm_peak,
    }


def measure_zamboni(database: str, warehouse: Path, name: str) -> dict[str, Any]:
    """iceberg-zamboni's ``TableCompactor`` (run by the zamboni virtualenv's Python)."""
    from zamboni.compactor import TableCompactor
    from zamboni.config import CompactionConfig
    from zamboni.session import CatalogSession

    catalog = _catalog(database, warehouse)
    reset_peak()
    started = time.perf_counter()
    session = CatalogSession.from_catalog(catalog, threads=2)
    config = CompactionConfig(target_file_size_bytes=TARGET, min_input_files=2, skip_partitions_newer_than_windows=None)
    TableCompactor(session, name, config).execute()
    return {"call_seconds": time.perf_counter() - started, "peak": memory()[1]}


MEASURES = {
    "iceberg-ops": measure_ours,
    "pyiceberg": measure_pyiceberg,
    "spark": measure_spark,
    "zamboni": measure_zamboni,
}


# --------------------------------------------------------------------------------------------------
# The parent: set-up, shuffled rounds, the report


def zamboni_python() -> Path | str:
    """The Python of a virtualenv with iceberg-zamboni (created on first use), or why there is none."""
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "iceberg-ops" / "zamboni-0.7.0"
    python = home / "bin" / "python"
    if not (home / ".installed").exists():
        shutil.rmtree(home, ignore_errors=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(home)], check=True, capture_output=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", ZAMBONI, "psycopg[binary]", "sqlalchemy"],
                check=True,
                capture_output=True,
                text=True,
            )
        except subprocess.CalledProcessError as exc:
            return f"installing {ZAMBONI} failed: {(exc.stderr or '')[-300:]}"
        (home / ".installed").touch()
    return python


def _child(python: Path | str, *arguments: str) -> dict[str, Any]:
    command = [str(python), __file__, "--child", *arguments]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    completed = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(arguments[:2])} failed:\n{completed.stderr[-3000:]}")
    output = json.loads(completed.stdout.strip().splitlines()[-1])
    output["process_seconds"] = time.perf_counter() - started
    return output


def _restore(shape: str, workdir: Path) -> Path:
    """A fresh copy of ``shape``: its database cloned from the template, its warehouse copied back."""
    warehouse = workdir / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    shutil.copytree(workdir / f"{shape}.template", warehouse, symlinks=True)
    _admin(f"DROP DATABASE IF EXISTS {RUN_DATABASE} WITH (FORCE)")
    _admin(f"CREATE DATABASE {RUN_DATABASE} TEMPLATE {_template_db(shape)}")
    return warehouse


def _template_db(shape: str) -> str:
    return f"iceberg_ops_bench_{shape}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the shapes, measure every method on fresh copies in shuffled rounds, verify, report."""
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="iceberg-ops-peers-"))
    shapes = {
        "flat": (args.files, args.rows, 0),
        "partitioned": (args.files, args.rows, args.partitions),
    }
    pythons: dict[str, Path | str] = {m: sys.executable for m in METHODS}
    skipped: dict[str, str] = {}
    sys.path.insert(0, str(ROOT))
    from tests.interop.spark_peer import locate

    if isinstance(located := locate(), str):
        skipped["spark"] = located
    zamboni = zamboni_python()
    if isinstance(zamboni, str):
        skipped["zamboni"] = zamboni
    else:
        pythons["zamboni"] = zamboni
    methods = [m for m in METHODS if m not in skipped and m in args.methods]
    built: dict[str, dict[str, Any]] = {}
    expected: dict[str, dict[str, Any]] = {}
    for shape, (files, rows, partitions) in shapes.items():
        print(f"building {shape}: {files} files of {rows:,} rows, {partitions or 'no'} partitions ...", flush=True)
        warehouse = workdir / "warehouse"
        shutil.rmtree(warehouse, ignore_errors=True)
        _admin(f"DROP DATABASE IF EXISTS {_template_db(shape)} WITH (FORCE)")
        _admin(f"CREATE DATABASE {_template_db(shape)}")
        database = _template_db(shape)
        built[shape] = _child(
            sys.executable, "build", database, str(warehouse), f"{NAMESPACE}.{shape}", *map(str, shapes[shape])
        )
        _child(sys.executable, "build", database, str(warehouse), WARMUP, "10", "1000", "0")
        expected[shape] = _child(sys.executable, "digest", database, str(warehouse), f"{NAMESPACE}.{shape}")
        shutil.copytree(warehouse, workdir / f"{shape}.template", symlinks=True)
    samples: dict[tuple[str, str], list[dict[str, Any]]] = {(m, s): [] for m in methods for s in shapes}
    for round_number in range(1, args.repeat + 1):
        order = list(samples)
        random.shuffle(order)
        for method, shape in order:
            warehouse = _restore(shape, workdir)
            time.sleep(args.pause)
            sample = _child(pythons[method], "measure", method, RUN_DATABASE, str(warehouse), f"{NAMESPACE}.{shape}")
            after = _child(sys.executable, "digest", RUN_DATABASE, str(warehouse), f"{NAMESPACE}.{shape}")
            assert (after["rows"], after["digest"]) == (expected[shape]["rows"], expected[shape]["digest"]), (
                method,
                shape,
                after,
                expected[shape],
            )
            sample["files_after"] = after["files"]
            samples[(method, shape)].append(sample)
            print(
                f"  round {round_number}: {method:<12} {shape:<12} call {sample['call_seconds']:6.1f} s  process "
                f"{sample['process_seconds']:6.1f} s  peak {sample['peak'] / 2**20:6.0f} MiB  -> "
                f"{after['files']} file(s), rows equal",
                flush=True,
            )
    with contextlib.suppress(Exception):
        for shape in shapes:
            _admin(f"DROP DATABASE IF EXISTS {_template_db(shape)} WITH (FORCE)")
        _admin(f"DROP DATABASE IF EXISTS {RUN_DATABASE} WITH (FORCE)")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(samples, built, skipped, methods, list(shapes))


def _report(samples, built, skipped, methods, shapes) -> dict[str, Any]:
    report: dict[str, Any] = {"shapes": built, "skipped": skipped, "median": {}, "ratios": {}}
    for (method, shape), values in samples.items():
        cell = {key: statistics.median(v[key] for v in values) for key in ("call_seconds", "process_seconds", "peak")}
        cell["files_after"] = values[0]["files_after"]
        if method == "spark":
            cell["warmup_seconds"] = statistics.median(v["warmup_seconds"] for v in values)
        cell["mib_per_second"] = built[shape]["arrow_bytes"] / cell["call_seconds"] / 2**20
        report["median"][f"{method}/{shape}"] = cell
    for shape in shapes:
        for method in methods:
            if method == "iceberg-ops":
                continue
            mine, theirs = samples[("iceberg-ops", shape)], samples[(method, shape)]
            for key in ("call_seconds", "process_seconds"):
                ratios = [t[key] / m[key] for m, t in zip(mine, theirs, strict=True)]
                report["ratios"][f"{method}/{shape}/{key}"] = statistics.median(ratios)
    print(f"\n{'median':<14}{'shape':<13}{'call s':>8}{'MiB/s':>8}{'process s':>11}{'peak MiB':>10}{'files':>7}")
    for shape in shapes:
        for method in methods:
            cell = report["median"][f"{method}/{shape}"]
            print(
                f"{method:<14}{shape:<13}{cell['call_seconds']:8.1f}{cell['mib_per_second']:8.1f}"
                f"{cell['process_seconds']:11.1f}{cell['peak'] / 2**20:10.0f}{cell['files_after']:7d}"
                + (f"   (warm-up call {cell['warmup_seconds']:.1f} s)" if method == "spark" else "")
            )
    print("\nmedian of per-round ratios, their time / iceberg-ops' time (above 1: iceberg-ops is faster)")
    for key, value in report["ratios"].items():
        method, shape, what = key.split("/")
        print(f"  {method:<12} {shape:<12} {what.replace('_seconds', ''):<8} {value:5.2f}x")
    for method, why in skipped.items():
        print(f"skipped {method}: {why}")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small tables, one round")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pause", type=float, default=3.0, help="idle seconds before each measurement")
    parser.add_argument("--files", type=int, default=400, help="small files in each table")
    parser.add_argument("--rows", type=int, default=25_000, help="rows per small file")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the partitioned table")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated, of: " + ", ".join(METHODS))
    parser.add_argument("--workdir", type=Path, default=None, help="where tables are built (default: a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "build":
            output = build(rest[0], Path(rest[1]), rest[2], int(rest[3]), int(rest[4]), int(rest[5]))
        elif kind == "digest":
            output = digest(rest[0], Path(rest[1]), rest[2])
        else:
            output = MEASURES[rest[0]](rest[1], Path(rest[2]), rest[3])
        print(json.dumps(output, default=str))
        return
    args.methods = args.methods.split(",")
    if args.quick:
        args.files, args.rows, args.repeat, args.pause, args.partitions = 100, 5000, 1, 0.5, 20
    report = run(args)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
