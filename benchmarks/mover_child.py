"""The work ``benchmarks/mover.py`` runs in fresh processes: building the source tables and one copy each.

    python benchmarks/mover_child.py build CACHE_DIR TABLE ROWS FILE_MIB
    python benchmarks/mover_child.py calibrate
    python benchmarks/mover_child.py measure METHOD CACHE_DIR TABLE SCRATCH_DIR [JSON_OPTIONS]

Each command prints one JSON line. ``measure`` times only the copy: the target table is created,
and for the raw copy the worker processes are started and have imported PyArrow, before the clock
starts; the row count is checked after it stops. Memory is measured by each process on itself:
its peak resident size (``VmHWM``, reset just before the copy: ``peak_memory.py``) minus its resident
size then.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from peak_memory import memory, reset_peak

SOURCE_NAMESPACE, TARGET_NAMESPACE = "src", "dst"
TARGET_TABLE = f"{TARGET_NAMESPACE}.copy"
ROW_GROUP_LIMIT = 1024 * 1024  # PyIceberg's default write.parquet.row-group-limit
CHUNK_ROWS = ROW_GROUP_LIMIT  # one row group per chunk, as PyIceberg writes them
METHODS = ("raw", "naive", "mover", "rewrite")


def _arrow_schema() -> Any:
    """The source tables' columns: ints, a timestamp, strings, a decimal and a double."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("event_ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("user_id", pa.int64()),
            pa.field("quantity", pa.int32()),
            pa.field("country", pa.string()),
            pa.field("page", pa.string()),
            pa.field("price", pa.decimal128(12, 2)),
            pa.field("score", pa.float64()),
        ]
    )


def _random_ints(rows: int, high: int, seed: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.floor(pc.multiply(pc.random(rows, initializer=seed), high)), pa.int64())


def generate_chunk(start: int, rows: int, schema: Any) -> Any:
    """Rows ``start .. start + rows`` of the source data (deterministic: seeded by ``start``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    seed = start * 8
    ids = pa.array(range(start, start + rows), pa.int64())
    micros = pc.add(pc.add(pc.multiply(ids, 10_000), 1_750_000_000_000_000), _random_ints(rows, 10_000_000, seed))
    user_id = pc.if_else(
        pc.less(pc.random(rows, initializer=seed + 1), 0.02),
        pa.scalar(None, pa.int64()),
        _random_ints(rows, 5_000_000, seed + 2),
    )
    letters = "abcdefghijklmnopqrstuvwxyz"
    countries = pa.array([letters[i // 26] + letters[i % 26] for i in range(0, 26 * 26, 3)])
    items = pa.array([f"item-{i:05d}" for i in range(20_000)])
    sections = pa.array([f"section-{i:03d}" for i in range(300)])
    page = pc.binary_join_element_wise(
        "/catalog/",
        pc.take(sections, _random_ints(rows, 300, seed + 3)),
        "/",
        pc.take(items, _random_ints(rows, 20_000, seed + 4)),
        ".html",
        "",
    )
    price = pc.cast(pc.round(pc.multiply(pc.random(rows, initializer=seed + 5), 10_000.0), 2), pa.decimal128(12, 2))
    table = pa.table(
        {
            "id": ids,
            "event_ts": pc.cast(micros, pa.timestamp("us", tz="UTC")),
            "user_id": user_id,
            "quantity": pc.cast(pc.add(_random_ints(rows, 100, seed + 6), 1), pa.int32()),
            "country": pc.take(countries, _random_ints(rows, len(countries), seed + 7)),
            "page": page,
            "price": price,
            "score": pc.random(rows, initializer=seed + 8),
        }
    )
    return table.cast(schema).combine_chunks()


def _catalog(db_path: Path, warehouse: Path) -> Any:
    from iceberg_ops_provider.catalogs import CatalogFactory

    return CatalogFactory.build("sqlite", db_path=db_path, warehouse_dir=warehouse)


def calibrate() -> dict[str, float]:
    """Arrow and Parquet bytes per row of the generated data (written as PyIceberg writes it)."""
    rows = ROW_GROUP_LIMIT
    chunk = generate_chunk(10 * rows, rows, _arrow_schema())
    return {"arrow_bytes_per_row": chunk.nbytes / rows, "parquet_bytes_per_row": _parquet_bytes(rows) / rows}


def _parquet_bytes(rows: int) -> int:
    """Size of a Parquet file of ``rows`` generated rows, written as :func:`build` writes them."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    schema, sink = _arrow_schema(), pa.BufferOutputStream()
    with pq.ParquetWriter(sink, schema, store_decimal_as_integer=True, **_get_parquet_writer_kwargs({})) as writer:
        for start in range(0, rows, CHUNK_ROWS):
            writer.write_table(generate_chunk(start, min(CHUNK_ROWS, rows - start), schema))
    return sink.getvalue().size


def rows_per_file(file_bytes: int) -> int:
    """How many generated rows make a Parquet file of about ``file_bytes`` (smaller files compress less well)."""
    rows = max(1000, int(file_bytes / calibrate()["parquet_bytes_per_row"]))
    for _ in range(2):
        rows = max(1000, int(rows * file_bytes / _parquet_bytes(rows)))
    return rows


def build(cache: Path, name: str, rows: int, file_bytes: int) -> dict[str, Any]:
    """Create source table ``name`` of ``rows`` rows in Parquet files of about ``file_bytes`` each."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs, parquet_file_to_data_file

    catalog = _catalog(cache / "catalog.db", cache / "warehouse")
    for namespace in (SOURCE_NAMESPACE, TARGET_NAMESPACE):
        if (namespace,) not in catalog.list_namespaces():
            catalog.create_namespace(namespace)
    if catalog.table_exists(name):
        catalog.purge_table(name)
    base = _arrow_schema()
    table = catalog.create_table(name, base)
    ids = {field.name: field.field_id for field in table.schema().fields}
    schema = pa.schema(
        [field.with_metadata({b"PARQUET:field_id": str(ids[field.name]).encode()}) for field in base],
    )
    kwargs = _get_parquet_writer_kwargs(table.metadata.properties)
    files = max(1, round(rows / rows_per_file(file_bytes)))
    locations, arrow_bytes, paths, start = table.location_provider(), 0, [], 0
    for number in range(files):
        file_rows = rows // files + (1 if number < rows % files else 0)
        path = locations.new_data_location(f"{number:05d}-source.parquet")
        with (
            table.io.new_output(path).create(overwrite=True) as stream,
            pq.ParquetWriter(stream, schema, store_decimal_as_integer=True, **kwargs) as writer,
        ):
            written = 0
            while written < file_rows:
                chunk = generate_chunk(start + written, min(CHUNK_ROWS, file_rows - written), schema)
                arrow_bytes += chunk.nbytes
                writer.write_table(chunk)
                written += chunk.num_rows
        start += file_rows
        paths.append(path)
    with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
        for path in paths:
            append.append_data_file(parquet_file_to_data_file(table.io, table.metadata, path))
    sizes = [task.file.file_size_in_bytes for task in table.scan().plan_files()]
    return {
        "table": name,
        "rows": rows,
        "files": len(sizes),
        "arrow_bytes": arrow_bytes,
        "parquet_bytes": sum(sizes),
        "mean_file_bytes": sum(sizes) / len(sizes),
    }


def _rss_now() -> int:
    """The resident size now, the peak reset to it (the copy's peak is then its own)."""
    reset_peak()
    current = memory()[0]
    if not current:
        raise RuntimeError("VmRSS missing from /proc/self/status: this benchmark needs Linux")
    return current


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used since boot (steal included), from ``/proc/stat``."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _others_share(busy: float, own_cpu: float, seconds: float) -> float:
    """The share of the machine's CPU capacity other processes used while the copy ran."""
    return max(0.0, busy - own_cpu) / (seconds * (os.cpu_count() or 1))


def _peak_above(start_rss: int) -> int:
    return max(0, memory()[1] - start_rss)


def _raw_worker(paths: Any, results: Any, barrier: Any, out_dir: str, kwargs: dict[str, Any]) -> None:
    """One raw-copy process: after the start barrier, copy source files taken from ``paths`` until empty."""
    import pyarrow.parquet as pq

    start_rss = _rss_now()
    barrier.wait()
    cpu = time.process_time()
    rows = files = 0
    while (path := paths.get()) is not None:
        source = pq.ParquetFile(path)
        target = Path(out_dir) / f"{os.getpid()}-{files:05d}.parquet"
        with pq.ParquetWriter(target, source.schema_arrow, store_decimal_as_integer=True, **kwargs) as writer:
            for group in range(source.num_row_groups):
                batch = source.read_row_group(group, use_threads=False)
                rows += batch.num_rows
                writer.write_table(batch, row_group_size=ROW_GROUP_LIMIT)
        files += 1
    results.put(
        {"rows": rows, "files": files, "cpu_seconds": time.process_time() - cpu, "peak": _peak_above(start_rss)}
    )


def _raw_copy(source: Any, scratch: Path, processes: int) -> dict[str, Any]:
    """Copy the source's files with PyArrow alone, one process per core, files taken from a shared queue."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    out_dir = scratch / "raw"
    out_dir.mkdir()
    context = multiprocessing.get_context("spawn")
    paths, results, barrier = context.Queue(), context.Queue(), context.Barrier(processes + 1)
    for task in source.scan().plan_files():
        paths.put(task.file.file_path.removeprefix("file://"))
    for _ in range(processes):
        paths.put(None)
    kwargs = _get_parquet_writer_kwargs(source.metadata.properties)
    workers = [
        context.Process(target=_raw_worker, args=(paths, results, barrier, str(out_dir), kwargs))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    barrier.wait(timeout=120)
    busy, own = machine_busy_seconds(), time.process_time()
    started = time.perf_counter()
    done = [results.get() for _ in workers]
    seconds = time.perf_counter() - started
    busy, own = machine_busy_seconds() - busy, time.process_time() - own
    cpu = sum(item["cpu_seconds"] for item in done)
    for worker in workers:
        worker.join()
    written = sum(pq.ParquetFile(path).metadata.num_rows for path in out_dir.iterdir())
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "others_share": _others_share(busy, cpu + own, seconds),
        "peak_above_start": max(item["peak"] for item in done),
        "peak_per_process": [item["peak"] for item in done],
        "rows_copied": written,
        "files_written": sum(item["files"] for item in done),
    }


def measure(method: str, cache: Path, name: str, scratch: Path, options: dict[str, Any]) -> dict[str, Any]:
    """Copy source table ``name`` one way into a fresh target; time and memory of the copy alone."""
    if method not in METHODS:
        raise SystemExit(f"unknown method {method!r}; use one of {', '.join(METHODS)}")
    # A private copy of the catalog: targets never touch the cached one, and the scratch folder holds all output.
    shutil.copyfile(cache / "catalog.db", scratch / "catalog.db")
    catalog = _catalog(scratch / "catalog.db", scratch / "warehouse")
    source = catalog.load_table(name)
    rows = int(source.current_snapshot().summary["total-records"])
    if method == "raw":
        return {**_raw_copy(source, scratch, int(options.get("processes") or os.cpu_count() or 2)), "rows": rows}
    target = catalog.create_table(TARGET_TABLE, source.schema(), location=(scratch / "target").as_uri())
    mover = None
    if method in ("mover", "rewrite"):
        from iceberg_ops_provider.data_migration import DataMover

        mover_options = {"create_target": False, **options.get("mover", {}), "rewrite": method == "rewrite"}
    start_rss = _rss_now()
    busy, cpu = machine_busy_seconds(), time.process_time()
    started = time.perf_counter()
    if method == "naive":
        target.append(source.scan().to_arrow())
    else:
        mover = DataMover(catalog, name, TARGET_TABLE, **mover_options).run()
    seconds = time.perf_counter() - started
    busy, cpu = machine_busy_seconds() - busy, time.process_time() - cpu
    peak = _peak_above(start_rss)
    target = catalog.load_table(TARGET_TABLE)
    tasks = target.scan().plan_files()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "others_share": _others_share(busy, cpu, seconds),
        "peak_above_start": peak,
        "rows": rows,
        "rows_copied": sum(task.file.record_count for task in tasks),
        "files_written": len(tasks),
        "result": mover.to_json() if mover is not None else None,
    }


def main() -> None:
    """Run one command (see the module docstring) and print its JSON result."""
    command, *rest = sys.argv[1:] or ["?"]
    if command == "calibrate":
        output: dict[str, Any] = calibrate()
    elif command == "build":
        output = build(Path(rest[0]), rest[1], int(rest[2]), int(float(rest[3]) * 2**20))
    elif command == "measure":
        options = json.loads(rest[4]) if len(rest) > 4 else {}
        output = measure(rest[0], Path(rest[1]), rest[2], Path(rest[3]), options)
    else:
        raise SystemExit(__doc__)
    print(json.dumps(output, default=str))


if __name__ == "__main__":
    main()
