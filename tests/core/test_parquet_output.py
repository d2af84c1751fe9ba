"""OutputFile with row groups encoded side by side: the same file and footer as one thread writes,
a size estimate while row groups are still encoding, and failures that surface and leave no thread."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from iceberg_ops_provider.core import parquet_output
from iceberg_ops_provider.core.parquet_output import OutputFile
from tests.core.parquet_samples import every_type_table, with_unknown_field


@pytest.fixture(autouse=True)
def row_groups_of_any_width_use_encoders(monkeypatch, request) -> None:
    """These tables are small: let every file use the encoders, except where a test checks the threshold."""
    if "threshold" not in request.node.name:
        monkeypatch.setattr(parquet_output, "MIN_BYTES_PER_COLUMN", 0)


class Encoders:
    """The real ``encode_part``, noting the threads it ran on, held back on them until ``release()``."""

    def __init__(self) -> None:
        self.threads: set[threading.Thread] = set()
        self._released = threading.Event()
        self._released.set()
        self._encode = parquet_output.encode_part

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def __call__(self, *args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            self.threads.add(threading.current_thread())
            self._released.wait(30)
        return self._encode(*args, **kwargs)

    def running(self) -> list[threading.Thread]:
        return [thread for thread in self.threads if thread.is_alive()]


@pytest.fixture
def encoders(monkeypatch) -> Encoders:
    noted = Encoders()
    monkeypatch.setattr(parquet_output, "encode_part", noted)
    return noted


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


def test_a_footer_the_joiner_does_not_know_falls_back_to_one_writer(tmp_path: Path) -> None:
    table = every_type_table(1200)
    _write(tmp_path / "alone.parquet", table, [(0, 500), (500, 700)], 1, write_page_index=True)
    metadata, _ = _write(tmp_path / "indexed.parquet", table, [(0, 500), (500, 700)], 2, write_page_index=True)
    assert metadata.num_row_groups == 4
    assert metadata.row_group(0).column(0).has_offset_index  # written by ParquetWriter itself
    assert (tmp_path / "indexed.parquet").read_bytes() == (tmp_path / "alone.parquet").read_bytes()


def test_a_field_of_a_newer_format_falls_back_and_the_file_is_still_right(tmp_path: Path, monkeypatch) -> None:
    encode = parquet_output.encode_part

    def newer(*args, **kwargs) -> bytes:  # the real part, with a column-metadata field this joiner never saw
        return with_unknown_field(bytes(encode(*args, **kwargs)), (4, 1, 3), 18)

    monkeypatch.setattr(parquet_output, "encode_part", newer)
    table = every_type_table(1200)
    _write(tmp_path / "alone.parquet", table, [(0, 1200)], 1)
    metadata, size = _write(tmp_path / "fallback.parquet", table, [(0, 1200)], 2)
    assert (tmp_path / "fallback.parquet").read_bytes() == (tmp_path / "alone.parquet").read_bytes()
    assert metadata.num_rows == 1200 and size == (tmp_path / "fallback.parquet").stat().st_size
    assert pq.read_table(tmp_path / "fallback.parquet").drop_columns(["ratio"]).equals(table.drop_columns(["ratio"]))


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


def test_an_encoding_failure_surfaces_and_abort_leaves_no_encoder_running(tmp_path: Path, encoders) -> None:
    table = every_type_table(2000)
    output = OutputFile(str(tmp_path / "f.parquet"), PyArrowFileIO(), table.schema, {}, encode_threads=2)
    output.write(table.slice(0, 500), 500)
    wrong = table.drop_columns(["id"])  # encoded on an encoder thread, where the writer refuses it
    with pytest.raises((ValueError, pa.ArrowException)):
        for _ in range(3):
            output.write(wrong, 500)
        output.close()
    output.abort()
    assert encoders.threads and not encoders.running()


def test_a_failure_surfacing_in_close_aborts_the_file(tmp_path: Path, encoders) -> None:
    table = every_type_table(2000)
    output = OutputFile(str(tmp_path / "f.parquet"), PyArrowFileIO(), table.schema, {}, encode_threads=3)
    output.write(table.slice(0, 500), 500)
    encoders.hold()  # the bad row group is still encoding when write returns, so its failure surfaces in close
    output.write(table.drop_columns(["id"]), 1000)  # stays with the encoders: at most two wait
    encoders.release()
    with pytest.raises(ValueError, match="schema"):
        output.close()
    assert encoders.threads and not encoders.running() and output._stream.closed
    with pytest.raises(ValueError, match="is closed"):
        output.write(table, 500)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_closed_file_refuses_rows_and_a_second_close(tmp_path: Path, threads: int, encoders) -> None:
    table = every_type_table(100)
    output = OutputFile(str(tmp_path / "f.parquet"), PyArrowFileIO(), table.schema, {}, encode_threads=threads)
    output.write(table, 50)
    output.close()
    with pytest.raises(ValueError, match=r"f\.parquet is closed: rows can no longer be written"):
        output.write(table, 50)
    with pytest.raises(ValueError, match="already closed"):
        output.close()
    assert len(encoders.threads) == threads - 1 and not encoders.running()


def test_writes_of_no_rows_write_nothing_whatever_the_threads(tmp_path: Path) -> None:
    table = every_type_table(1000)
    writes = [(0, 500), (500, 0), (500, 500)]
    alone, _ = _write(tmp_path / "alone.parquet", table, writes, 1)
    side, _ = _write(tmp_path / "side.parquet", table, writes, 2)
    assert (tmp_path / "side.parquet").read_bytes() == (tmp_path / "alone.parquet").read_bytes()
    # No empty row group, whose missing statistics would cost PyIceberg the file's bounds.
    assert [side.row_group(index).num_rows for index in range(side.num_row_groups)] == [400, 100, 400, 100]
    assert alone.num_row_groups == 4


def test_threshold_narrow_row_groups_of_wide_tables_are_written_by_one_writer(tmp_path: Path) -> None:
    wide = pa.table({f"c{index}": pa.array(range(2000), pa.int64()) for index in range(300)})
    output = OutputFile(str(tmp_path / "wide.parquet"), PyArrowFileIO(), wide.schema, {}, encode_threads=2)
    output.write(wide, 500)  # 4 KB per column a row group: reading each part's footer back would cost more
    assert output._writer is not None and output._joiner is None
    output.close()

    deep = pa.table({"c": pa.array(range(400_000), pa.int64())})  # 3.2 MB of one column a row group
    output = OutputFile(str(tmp_path / "deep.parquet"), PyArrowFileIO(), deep.schema, {}, encode_threads=2)
    output.write(deep, 200_000)
    assert output._joiner is not None and output._writer is None
    metadata, _ = output.close()
    assert metadata.num_row_groups == 2
