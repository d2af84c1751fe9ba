"""Read batches sized in Arrow bytes: narrow rows come in larger batches, wide rows in smaller ones."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan

from iceberg_ops_provider.data_migration.source_pieces import projected_row_groups
from iceberg_ops_provider.data_steps import DataStep, run_step
from iceberg_ops_provider.maintenance.streaming import (
    MAX_READ_BATCH_ROWS,
    READ_BATCH_BYTES,
    READ_BATCH_ROWS,
    BatchSizer,
)


def test_the_first_batch_has_the_default_rows_then_the_size_follows_the_bytes_per_row() -> None:
    sizer = BatchSizer()
    assert sizer.rows() == READ_BATCH_ROWS

    narrow = pa.record_batch({"a": pa.array(range(1000), pa.int64())})  # 8 bytes a row
    sizer.saw(narrow)
    assert sizer.rows() == min(MAX_READ_BATCH_ROWS, READ_BATCH_BYTES // 8)

    wide = BatchSizer()
    wide.saw(pa.record_batch({"s": pa.array(["x" * 4096] * 100)}))
    per_row = wide._bytes / wide._rows
    assert wide.rows() == int(READ_BATCH_BYTES / per_row) < 10_000

    huge = BatchSizer()
    huge.saw(pa.record_batch({"s": pa.array(["x" * (READ_BATCH_BYTES + 1)])}))
    assert huge.rows() == 1, "a row larger than the aim is read one at a time, never zero"


def test_saw_returns_the_batch_and_sums_every_batch_seen() -> None:
    sizer = BatchSizer()
    first = pa.record_batch({"a": pa.array(range(100), pa.int64())})
    second = pa.record_batch({"a": pa.array(["y" * 100] * 100)})
    assert sizer.saw(first) is first and sizer.saw(second) is second
    assert sizer.rows() == int(READ_BATCH_BYTES / ((first.nbytes + second.nbytes) / 200))


def _table_of_row_groups(lake, name: str, data: pa.Table, group_rows: int):
    catalog = lake.catalog()
    catalog.create_namespace_if_not_exists("b")
    table = catalog.create_table(
        f"b.{name}", data.schema, properties={"write.parquet.row-group-limit": str(group_rows)}
    )
    table.append(data)
    return catalog, catalog.load_table(f"b.{name}")


def _batch_rows(table) -> list[int]:
    (task,) = table.scan().plan_files()
    scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
    with table.io.new_input(task.file.file_path).open() as stream:
        return [batch.num_rows for batch in projected_row_groups(scan, task, stream, None)]


def test_a_file_of_narrow_rows_is_read_in_larger_batches_after_its_first(lake) -> None:
    rows = 3 * 400_000
    data = pa.table(
        {"k": pa.array(range(rows), pa.int64()), "v": pc.cast(pa.array(range(rows)), pa.int8(), safe=False)}
    )
    _, table = _table_of_row_groups(lake, "narrow", data, 400_000)

    sizes = _batch_rows(table)

    assert sum(sizes) == rows
    assert sizes[0] == READ_BATCH_ROWS, "the first batch, before any row was measured"
    # 9 bytes a row: after the first batch every row group comes in one batch of its 400,000 rows.
    assert sizes[-2:] == [400_000, 400_000], sizes


def test_a_file_of_wide_rows_is_read_in_smaller_batches_after_its_first(lake) -> None:
    rows = 3 * 20_000
    data = pa.table({"k": pa.array(range(rows), pa.int64()), "s": pa.array(["w" * 2000] * rows)})
    _, table = _table_of_row_groups(lake, "wide", data, 20_000)

    sizes = _batch_rows(table)

    assert sum(sizes) == rows
    assert sizes[0] == 20_000, "the first row group's rows, fewer than READ_BATCH_ROWS"
    later = sizes[1:]
    expected = READ_BATCH_BYTES / (data.slice(0, 20_000).nbytes / 20_000)  # about 2,012 bytes a row
    assert abs(max(later) - expected) < expected / 100, later
    assert max(later) < 20_000, later


def test_a_data_step_over_larger_batches_changes_every_matching_row_once(lake) -> None:
    rows = 3 * 300_000
    data = pa.table({"k": pa.array(range(rows), pa.int64()), "v": pa.array([1.0] * rows)})
    catalog, _ = _table_of_row_groups(lake, "step", data, 300_000)

    # The matching rows end in the middle of the second row group, read in a larger batch than the first.
    result = run_step(catalog, DataStep("b/1", "update_rows", ("b", "step"), "k < 450000", {"v": 2.0}))

    after = catalog.load_table("b.step").scan().to_arrow().sort_by("k")
    assert result.rows_changed == 450_000
    assert after.column("k").to_pylist() == list(range(rows))
    assert pc.equal(after.column("v"), 2.0).to_pylist() == [k < 450_000 for k in range(rows)]
