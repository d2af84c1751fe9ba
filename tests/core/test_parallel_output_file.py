"""OutputFile with row groups encoded side by side: the same file and footer as one thread writes,
a size estimate while row groups are still encoding, and failures that surface and leave no thread."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from iceberg_ops_provider.core.parquet_output import OutputFile
from tests.core.parquet_samples import every_type_table


def _write(path: Path, table: pa.Table, writes: list[tuple[int, int]], threads: int, **options) -> tuple:
    output = OutputFile(
        str(path), PyArrowFileIO(), table.schema, {"compression": "zstd", **options}, encode_threads=threads
    )
    for start, length in writes:
        output.write(table.slice(start, length), 400)
    assert output.rows == sum(length for _, length in writes)
    return output.close()


@pytest.mark.parametrize("threads", [2, 3])
def test_side_by_side_the_file_and_its_footer_are_those_one_thread_writes(tmp_path: Path, threads: int) -> None:
    table = every_type_table(6000)
    # One write of many row groups, then writes of one row group, then a short one.
    writes = [(0, 2400), (2400, 400), (2800, 400), (3200, 400), (3600, 2000), (5600, 400)]

    alone, alone_size = _write(tmp_path / "alone.parquet", table, writes, 1)
    side_by_side, size = _write(tmp_path / "side.parquet", table, writes, threads)

    assert (tmp_path / "side.parquet").read_bytes() == (tmp_path / "alone.parquet").read_bytes()
    assert size == alone_size == (tmp_path / "side.parquet").stat().st_size
    # The writer's own footer object leaves its serialized size at 0; a footer read back counts it.
    assert {**side_by_side.to_dict(), "serialized_size": 0} == alone.to_dict()
    assert side_by_side.num_row_groups == 15


def test_options_that_cannot_be_joined_are_written_by_one_thread(tmp_path: Path) -> None:
    table = every_type_table(1200)
    metadata, _ = _write(tmp_path / "indexed.parquet", table, [(0, 1200)], 2, write_page_index=True)
    assert metadata.num_row_groups == 3
    assert metadata.row_group(0).column(0).has_offset_index  # written by ParquetWriter itself


def test_a_file_closed_before_any_row_holds_the_schema_alone(tmp_path: Path) -> None:
    table = every_type_table(10)
    empty, _ = _write(tmp_path / "empty.parquet", table, [], 2)
    _write(tmp_path / "alone.parquet", table, [], 1)
    assert (tmp_path / "empty.parquet").read_bytes() == (tmp_path / "alone.parquet").read_bytes()
    assert empty.num_rows == 0


def test_the_size_counts_row_groups_still_encoding_at_the_files_ratio(tmp_path: Path) -> None:
    table = every_type_table(4000)
    output = OutputFile(str(tmp_path / "f.parquet"), PyArrowFileIO(), table.schema, {}, encode_threads=4)
    output.write(table.slice(0, 1000), 1000)  # the first row group is written at once
    first = output.bytes_written
    assert first == output._stream.tell() > 0
    output.write(table.slice(1000, 3000), 1000)  # up to three more may still be encoding
    estimate = output.bytes_written
    _, size = output.close()
    assert first * 3 < estimate and abs(estimate - size) < size * 0.25


def test_an_encoding_failure_surfaces_and_abort_leaves_no_encoder_running(tmp_path: Path) -> None:
    table = every_type_table(2000)
    output = OutputFile(str(tmp_path / "f.parquet"), PyArrowFileIO(), table.schema, {}, encode_threads=2)
    output.write(table.slice(0, 500), 500)
    wrong = table.drop_columns(["id"])  # encoded on an encoder thread, where the writer refuses it
    with pytest.raises((ValueError, pa.ArrowException)):
        for _ in range(3):
            output.write(wrong, 500)
        output.close()
    output.abort()
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("iceberg-ops-parquet-encoder")]
