"""A date in a ``where`` on a timestamp column is that day's midnight, as in Spark: midnight UTC on a
``timestamptz`` column, midnight on a ``timestamp`` column. Every filter the engine parses reads it so
(the data mover and its verification, compaction, the partition probe behind the sensors), from
Python and from the command line. Rows one microsecond either side of midnight prove which rows a
filter selects. Real SQLite catalogs in ``tmp_path``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions.parser import parse
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, TimestampType, TimestamptzType

from iceberg_ops_provider.core.filters import bind_filter
from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.errors import InvalidMoveError
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.partitions.probe import partition_rows
from tests.cli.ops_support import run, sqlite_catalog, sqlite_flags
from tests.support.lake import Lake

MOMENTS = [
    datetime(2026, 11, 2, 23, 59, 59, 999999),  # id 0: the last microsecond before the 3rd
    datetime(2026, 11, 3, 0, 0),  # id 1: midnight
    datetime(2026, 11, 3, 12, 0),  # id 2
    datetime(2026, 11, 4, 0, 0),  # id 3: midnight of the 4th
]
SCHEMA = pa.schema([("id", pa.int64()), ("tz", pa.timestamp("us", tz="UTC")), ("naive", pa.timestamp("us"))])


@pytest.fixture
def lake(lake: Lake) -> Path:
    """``sales.clicks``: one row (and one data file) per moment, in a ``timestamptz`` and a ``timestamp`` column."""
    catalog = lake.catalog()
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.clicks", SCHEMA)
    for number, moment in enumerate(MOMENTS):
        table.append(pa.table({"id": [number], "tz": [moment.replace(tzinfo=UTC)], "naive": [moment]}, schema=SCHEMA))
    return lake.root


def _ids(table) -> list[int]:
    return sorted(table.scan().to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("column", ["tz", "naive"])
def test_a_move_with_dates_on_a_timestamp_column_takes_the_rows_of_those_days(lake: Path, column: str):
    catalog = sqlite_catalog(lake)
    where = f"{column} >= '2026-11-03' and {column} < '2026-11-04'"

    result = DataMover(catalog, "sales.clicks", "archive.day", where=where, create_target=True, verify="checksum").run()

    assert result.rows == 2 and result.verify is not None and result.verify.ok
    assert _ids(catalog.load_table("archive.day")) == [1, 2]  # midnight in, the microsecond before and the 4th out
    mover = DataMover(catalog, "sales.clicks", "archive.day", where=where)
    assert mover.verify("count").ok and mover.plan().done == frozenset({0})


def test_an_overwrite_replaces_the_target_rows_of_the_days(lake: Path):
    catalog = sqlite_catalog(lake)
    DataMover(catalog, "sales.clicks", "archive.all", create_target=True).run()

    DataMover(catalog, "sales.clicks", "archive.all", where="tz >= '2026-11-03'", mode="overwrite").run()

    assert _ids(catalog.load_table("archive.all")) == [0, 1, 2, 3]  # rows 1-3 replaced by themselves, 0 kept


@pytest.mark.parametrize(("where", "files"), [("tz >= '2026-11-03'", 3), ("naive < '2026-11-03'", 1)])
def test_compaction_filters_on_dates_too(lake: Path, where: str, files: int):
    table = sqlite_catalog(lake).load_table("sales.clicks")

    planned = compact_small_files_streaming(table, where=where, min_input_files=1, dry_run=True)

    assert planned.rewritten_data_files_count == files


@pytest.mark.parametrize(
    ("where", "rows"),
    [
        ("tz >= '2026-11-03'", 3),
        ("naive >= '2026-11-03' and naive < '2026-11-04'", 2),
        ("tz = '2026-11-03'", 1),  # exactly midnight UTC
        ("tz >= '2026-11-03T01:00:00+01:00'", 3),  # a timestamp with its zone still works
    ],
)
def test_the_partition_probe_of_the_sensors_reads_dates_so(lake: Path, where: str, rows: int):
    probe = partition_rows(sqlite_catalog(lake).load_table("sales.clicks"), where=where)

    assert probe.rows == rows


def test_a_value_that_is_neither_a_date_nor_a_timestamp_says_what_to_write(lake: Path):
    with pytest.raises(InvalidMoveError) as raised:
        DataMover(
            sqlite_catalog(lake), "sales.clicks", "archive.x", where="tz >= 'yesterday'", create_target=True
        ).plan()

    text = str(raised.value)
    assert "'yesterday' is not a value of column 'tz', a timestamptz (with a zone)" in text
    assert "write a date, '2026-11-03' (midnight UTC), or an ISO 8601 timestamp" in text
    assert "such as '2026-11-03T10:30:00+00:00'" in text


def test_dates_are_rewritten_only_for_timestamp_columns():
    schema = Schema(
        NestedField(1, "tz", TimestamptzType()), NestedField(2, "naive", TimestampType()), NestedField(3, "s", "string")
    )

    bound = bind_filter(
        parse("tz >= '2026-11-03' and naive in ('2026-11-03', '2026-11-04') and s = '2026-11-03'"), schema
    )

    assert repr(bound) == repr(
        parse(
            "tz >= '2026-11-03T00:00:00+00:00' and naive in ('2026-11-03T00:00:00', '2026-11-04T00:00:00') "
            "and s = '2026-11-03'"
        )
    )


def test_the_command_line_moves_and_compacts_with_dates_on_timestamp_columns(lake: Path):
    moved = run(
        lake, *sqlite_flags(lake), "--json", "move", "sales.clicks", "archive.day", "--create-target",
        "--where", "tz >= '2026-11-03' and tz < '2026-11-04'", "--verify", "checksum", "--no-progress",
    )  # fmt: skip

    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["rows"] == 2
    assert _ids(sqlite_catalog(lake).load_table("archive.day")) == [1, 2]

    planned = run(
        lake, *sqlite_flags(lake), "--json", "maintain", "compact", "sales.clicks", "--where",
        "naive >= '2026-11-03'", "--min-input-files", "1", "--dry-run",
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["rewritten_data_files_count"] == 3
