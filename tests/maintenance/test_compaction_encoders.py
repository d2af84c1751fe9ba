"""Compaction's output files with row groups encoded side by side: byte for byte the files one encoder
writes, for binpack and sort, with PyIceberg's own statistics and split offsets, and the same rows."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table.sorting import NullOrder
from pyiceberg.transforms import IdentityTransform

from iceberg_ops_provider.core import parquet_output
from iceberg_ops_provider.maintenance import streaming
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.lake import Lake
from tests.support.tables import live_data_files, recomputed, rows, small_files_table

KIB = 1024
ENCODE_PART = parquet_output.encode_part


def _compacted(root: Path, monkeypatch, threads: int, strategy: str) -> tuple[list[tuple[bytes, object]], set[str]]:
    monkeypatch.setattr(streaming, "ENCODE_THREADS", threads)
    monkeypatch.setattr(parquet_output, "MIN_BYTES_PER_COLUMN", 0)  # these row groups are small
    encoded_on: set[str] = set()

    def noting_the_thread(*args, **kwargs):  # the real encoder; only which thread ran it is noted
        encoded_on.add(threading.current_thread().name.rsplit("_", 1)[0])
        return ENCODE_PART(*args, **kwargs)

    monkeypatch.setattr(parquet_output, "encode_part", noting_the_thread)
    catalog = Lake(root).catalog()
    try:
        table = catalog.load_table("sales.events")
        before = rows(table)
        result = compact_small_files_streaming(
            table, target_file_size_bytes=256 * KIB, min_input_files=5, strategy=strategy
        )
        assert result.failed_groups_count == 0 and rows(table) == before
        files = sorted(live_data_files(table), key=lambda data_file: data_file.record_count)
        for data_file in files:
            again = recomputed(table, data_file)
            for attribute in ("record_count", "value_counts", "null_value_counts", "lower_bounds", "upper_bounds"):
                assert getattr(data_file, attribute) == getattr(again, attribute), attribute
            assert data_file.split_offsets == again.split_offsets and len(data_file.split_offsets) > 3
        return [(Path(f.file_path.removeprefix("file://")).read_bytes(), f.split_offsets) for f in files], encoded_on
    finally:
        catalog.close()


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_files_encoded_side_by_side_are_those_one_encoder_writes(tmp_path: Path, monkeypatch, strategy: str) -> None:
    source = tmp_path / "source"
    catalog = Lake(source).catalog()
    table = small_files_table(catalog, "sales.events", appends=12, rows=400)
    with table.transaction() as transaction:
        # Many row groups per output file, so most are encoded on the encoder threads.
        transaction.set_properties({"write.parquet.row-group-limit": "300"})
        with transaction.update_sort_order() as order:
            order.desc("amount", IdentityTransform(), NullOrder.NULLS_FIRST)
    catalog.close()
    # The catalog's database and warehouse hold absolute paths: copy both to the same place for each run.
    copy = tmp_path / "source.copy"
    shutil.copytree(source, copy)

    alone, alone_threads = _compacted(source, monkeypatch, 1, strategy)
    shutil.rmtree(source)
    shutil.copytree(copy, source)
    side_by_side, threads = _compacted(source, monkeypatch, 3, strategy)

    assert not alone_threads  # one encoder: PyArrow's writer streams the file itself
    assert "iceberg-ops-parquet-encoder" in threads
    assert len(side_by_side) == len(alone) >= 1
    assert side_by_side == alone
    for data, _ in side_by_side:
        assert pq.read_metadata(pa.BufferReader(data)).num_row_groups > 3


@pytest.mark.backends
def test_files_of_many_row_groups_are_joined_on_s3(s3_catalog, monkeypatch) -> None:
    monkeypatch.setattr(parquet_output, "MIN_BYTES_PER_COLUMN", 0)  # these row groups are small
    catalog = s3_catalog.catalog
    table = small_files_table(catalog, "sales.events", appends=8, rows=500)
    with table.transaction() as transaction:
        transaction.set_properties({"write.parquet.row-group-limit": "250"})
    before = rows(table)

    result = compact_small_files_streaming(table, target_file_size_bytes=512 * KIB, min_input_files=5)

    assert result.failed_groups_count == 0 and rows(table) == before
    (data_file,) = live_data_files(table)
    again = recomputed(table, data_file)
    assert data_file.file_size_in_bytes == again.file_size_in_bytes
    assert data_file.split_offsets == again.split_offsets and len(data_file.split_offsets) == 16
    assert data_file.lower_bounds == again.lower_bounds and data_file.upper_bounds == again.upper_bounds
