"""Each kind of data step on a partitioned table of several files: exactly the rows SQL semantics say,
nulls kept where ``where`` is null, whole-file deletes without reading, and the snapshots' labels."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import StringType

from iceberg_ops_provider.data_steps import DataStep, run_step, step_state
from iceberg_ops_provider.data_steps.state import STEP_KEY, UNIT_KEY
from tests.data_steps.support import ARROW, SCHEMA, all_rows, make_table, read_rows

TABLE = ("sales", "orders")


def _step_snapshots(table, step_id: str):
    table.refresh()
    return [s for s in table.metadata.snapshots if s.summary.additional_properties.get(STEP_KEY) == step_id]


def test_delete_rows_keeps_rows_where_the_filter_is_null(catalog):
    table = make_table(catalog)
    result = run_step(catalog, DataStep("d/1", "delete_rows", TABLE, "k != 5"), unit_bytes=1)

    expected = {i: row for i, row in all_rows().items() if not (row["k"] is not None and row["k"] != 5)}
    assert read_rows(table) == expected
    assert any(row["k"] is None for row in expected.values())  # null k: the filter is null, the row stays
    assert result.rows_changed == 1200 - len(expected)
    assert result.units == 6 and result.units_skipped == 0 and result.files_rewritten == 6
    assert result.files_removed == 0  # every file holds nulls in k: no whole-file verdict is trusted
    assert {s.summary.operation.value for s in _step_snapshots(table, "d/1")} == {"overwrite"}
    state = step_state(table, "d/1")
    assert state is not None and state.complete and state.rows == result.rows_changed


def test_delete_rows_drops_wholly_matching_files_without_reading_them(catalog):
    table = make_table(catalog)
    result = run_step(catalog, DataStep("d/2", "delete_rows", TABLE, "region = 'eu'"), unit_bytes=1)

    assert read_rows(table) == {i: row for i, row in all_rows().items() if row["region"] != "eu"}
    assert result.files_removed == 3 and result.files_rewritten == 0 and result.files_added == 0
    assert result.bytes_read == 0 and result.rows_changed == 600
    snapshots = _step_snapshots(table, "d/2")
    assert [s.summary.operation.value for s in snapshots] == ["delete"]
    assert snapshots[0].summary.additional_properties[UNIT_KEY] == "0"


def test_update_rows_with_a_literal_and_a_function(catalog):
    table = make_table(catalog)
    step = DataStep(
        "u/1",
        "update_rows",
        TABLE,
        "k < 3 and region = 'us'",
        {"v": lambda batch: pc.multiply(batch.column("v"), 2), "k": 99},
    )
    result = run_step(catalog, step, unit_bytes=1)

    expected = all_rows()
    changed = 0
    for row in expected.values():
        if row["region"] == "us" and row["k"] is not None and row["k"] < 3:
            row["v"] = row["v"] * 2 if row["v"] is not None else None
            row["k"] = 99
            changed += 1
    assert read_rows(table) == expected
    assert result.rows_changed == changed
    # Only the 'us' files may match: the 'eu' ones are not read.
    assert result.files_rewritten == 3 and result.units == 3
    assert {s.summary.operation.value for s in _step_snapshots(table, "u/1")} == {"overwrite"}


def test_update_rows_that_match_no_row_leave_the_files_alone(catalog):
    table = make_table(catalog)
    before = {task.file.file_path for task in table.scan().plan_files()}
    # 100.5 lies within the bounds of the first 'eu' file, which holds no such value.
    result = run_step(catalog, DataStep("u/2", "update_rows", TABLE, "v = 100.5", {"k": 1}), unit_bytes=1)

    assert read_rows(table) == all_rows()
    assert result.units == 1 and result.rows_changed == 0 and result.files_added == 0
    assert [s.summary.operation.value for s in _step_snapshots(table, "u/2")] == ["replace"]
    assert {task.file.file_path for task in table.scan().plan_files()} == before
    assert step_state(table, "u/2").complete


def test_a_step_matching_no_file_is_recorded_complete_without_a_snapshot(catalog):
    table = make_table(catalog)
    snapshots = len(table.metadata.snapshots)
    result = run_step(catalog, DataStep("u/3", "update_rows", TABLE, "v = 0.5", {"k": 1}))

    assert result.units == 0 and result.rows_changed == 0
    table.refresh()
    assert len(table.metadata.snapshots) == snapshots
    assert step_state(table, "u/3").complete
    table.append(table.scan(limit=1).to_arrow().set_column(3, "v", pa.array([0.5])))
    again = run_step(catalog, DataStep("u/3", "update_rows", TABLE, "v = 0.5", {"k": 1}))
    assert again.units_skipped == 0 and again.rows_changed == 0 and again.appended_meanwhile == 1


def test_backfill_fills_only_nulls_where_the_filter_holds(catalog):
    table = make_table(catalog)
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table.append(
        pa.table(
            {"id": [10_000], "region": ["eu"], "k": [1], "v": [1.0], "note": ["kept"]},
            schema=table.schema().as_arrow(),
        )
    )
    step = DataStep("b/1", "backfill", TABLE, "region = 'eu'", {"note": lambda b: pc.cast(b.column("id"), pa.string())})
    result = run_step(catalog, step, unit_bytes=1)

    expected = all_rows()
    for row in expected.values():
        row["note"] = str(row["id"]) if row["region"] == "eu" else None
    expected[10_000] = {"id": 10_000, "region": "eu", "k": 1, "v": 1.0, "note": "kept"}
    assert read_rows(table) == expected
    assert result.rows_changed == 600


def test_backfill_of_an_existing_column_keeps_its_values(catalog):
    table = make_table(catalog)
    result = run_step(catalog, DataStep("b/2", "backfill", TABLE, None, {"k": -1}), unit_bytes=1)

    expected = all_rows()
    for row in expected.values():
        row["k"] = -1 if row["k"] is None else row["k"]
    assert read_rows(table) == expected
    assert result.rows_changed == sum(1 for i in range(1200) if i % 7 == 0)


def test_a_file_of_nulls_and_non_matching_values_is_not_dropped_whole(catalog):
    # Strict metrics say "every row matches k != 5" for a file holding only 7 and null: the nulls must stay.
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", SCHEMA)
    table.append(pa.table({"id": [1, 2, 3], "region": ["eu"] * 3, "k": [7, None, 7], "v": [1.0, 2.0, 3.0]}, ARROW))
    table.append(pa.table({"id": [4, 5], "region": ["eu"] * 2, "k": [None, None], "v": [4.0, 5.0]}, ARROW))

    result = run_step(catalog, DataStep("n/1", "delete_rows", TABLE, "k != 5"))

    assert sorted(read_rows(table)) == [2, 4, 5]
    assert result.files_removed == 0 and result.rows_changed == 2


def test_a_date_compared_with_a_timestamp_column_is_that_days_midnight(catalog):
    catalog.create_namespace("sales")
    arrow = pa.schema([pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us", tz="UTC"))])
    table = catalog.create_table("sales.orders", arrow)
    day = [datetime(2024, 1, d, 12, tzinfo=UTC) for d in (1, 2, 3)]
    table.append(pa.table({"id": [1, 2, 3], "ts": day}, arrow))

    result = run_step(catalog, DataStep("t/1", "delete_rows", TABLE, "ts >= '2024-01-02'"))

    assert result.rows_changed == 2 and sorted(read_rows(table)) == [1]
