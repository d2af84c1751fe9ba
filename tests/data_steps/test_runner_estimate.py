"""estimate_step's numbers against the table's files, from manifests alone (no data file opened)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from iceberg_ops_provider.data_steps import DataStep, estimate_step, run_step
from tests.data_steps.support import SCHEMA, make_table

TABLE = ("sales", "orders")


def _files(table, region: str | None = None):
    return [t.file for t in table.scan().plan_files() if region is None or t.file.partition[0] == region]


def test_an_update_counts_the_files_that_may_match(catalog):
    table = make_table(catalog)
    us = _files(table, "us")
    estimate = estimate_step(table, DataStep("e/1", "update_rows", TABLE, "region = 'us' and k > 2", {"v": 0.0}))
    assert (estimate.files, estimate.bytes, estimate.rows) == (
        3,
        sum(f.file_size_in_bytes for f in us),
        sum(f.record_count for f in us),
    )
    assert estimate.files_dropped == 0 and estimate.units == 1
    assert estimate.snapshot_id == table.metadata.current_snapshot_id


def test_a_delete_separates_files_dropped_whole(catalog, no_reads):
    table = make_table(catalog)
    eu = _files(table, "eu")
    estimate = estimate_step(table, DataStep("e/2", "delete_rows", TABLE, "region = 'eu' or id < 300"))
    assert (estimate.files_dropped, estimate.rows_dropped, estimate.bytes_dropped) == (
        3,
        600,
        sum(f.file_size_in_bytes for f in eu),
    )
    assert estimate.files == 1 and estimate.rows == 200  # the us file of ids 200-399 matches in part
    no_reads.undo()
    result = run_step(catalog, DataStep("e/2", "delete_rows", TABLE, "region = 'eu' or id < 300"))
    assert result.files_removed == 3 and result.files_rewritten == estimate.files


def test_files_whose_metrics_say_no_null_are_not_counted_by_a_backfill(catalog):
    table = make_table(catalog, files_per_region=2, rows=5)  # ids 0-19: k is null for ids 0, 7, 14
    estimate = estimate_step(table, DataStep("e/3", "backfill", TABLE, None, {"k": 0}))
    holding_nulls = [f for f in _files(table) if f.null_value_counts.get(3, 0) > 0]
    assert estimate.files == len(holding_nulls) < len(_files(table))


def test_an_empty_table_estimates_nothing(catalog):

    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", SCHEMA)
    estimate = estimate_step(table, DataStep("e/4", "delete_rows", TABLE, "k = 1"))
    assert estimate.snapshot_id is None and estimate.files == estimate.units == 0


@pytest.fixture(autouse=True)
def no_reads(monkeypatch):
    """Estimates read manifests only: opening a Parquet file fails the test (``undo()`` before a run)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a data file was opened")

    monkeypatch.setattr(pq, "ParquetFile", refuse)
    monkeypatch.setattr(pq, "read_table", refuse)
    return monkeypatch
