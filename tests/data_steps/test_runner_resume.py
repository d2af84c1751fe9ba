"""A data step interrupted after a unit, raced by a second run, or run next to other writers: no unit is
applied twice (a non-idempotent ``v = v * 2`` checked exactly), appended rows are kept, a rerun does nothing."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.types import StringType

from iceberg_ops_provider.data_steps import DataStep, run_step, step_state
from iceberg_ops_provider.data_steps.planning import plan_step
from iceberg_ops_provider.data_steps.runner import _StepRun
from iceberg_ops_provider.data_steps.state import StepState, find_step_state, property_key
from iceberg_ops_provider.errors import DataStepConflictError, DataStepStateError, InvalidDataStepError
from tests.data_steps.support import all_rows, make_table, read_rows, rows_of
from tests.support.tables import files_on_disk

TABLE = ("sales", "orders")


class Interrupted(Exception):
    """Raised by a progress callback to stop a run after a unit committed."""


def _doubling(step_id: str = "x/1") -> DataStep:
    return DataStep(step_id, "update_rows", TABLE, "k >= 5", {"v": lambda batch: pc.multiply(batch.column("v"), 2)})


def _doubled(rows: dict) -> dict:
    for row in rows.values():
        if row["k"] is not None and row["k"] >= 5 and row["v"] is not None:
            row["v"] *= 2
    return rows


def _stop_after(units: int):
    def progress(report):
        if report.units_done >= units:
            raise Interrupted()

    return progress


def test_a_resumed_step_applies_no_unit_twice(catalog):
    table = make_table(catalog)
    with pytest.raises(Interrupted):
        run_step(catalog, _doubling(), unit_bytes=1, progress=_stop_after(2))
    state = step_state(table.refresh(), "x/1")
    assert state is not None and state.units_done == 2 and not state.complete

    result = run_step(catalog, _doubling(), unit_bytes=10**9)  # the recorded unit size wins

    assert result.units == 6 and result.units_skipped == 2 and result.files_rewritten == 4
    assert read_rows(table) == _doubled(all_rows())
    assert step_state(table, "x/1").complete


def test_a_rerun_after_the_step_finished_does_nothing(catalog):
    table = make_table(catalog)
    run_step(catalog, _doubling(), unit_bytes=1)
    snapshots = len(table.refresh().metadata.snapshots)

    again = run_step(catalog, _doubling(), unit_bytes=1)

    assert again.units_skipped == again.units == 6 and again.rows_changed == 0 and again.files_added == 0
    assert len(table.refresh().metadata.snapshots) == snapshots
    assert read_rows(table) == _doubled(all_rows())


def test_rows_appended_between_units_are_kept_as_they_are(lake):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)
    appended = rows_of(50_000, 30, "us")

    def append_once(report):
        if report.units_done == 1:
            other.load_table(TABLE).append(appended)

    result = run_step(catalog, _doubling(), unit_bytes=1, progress=append_once)

    expected = _doubled(all_rows())
    expected.update({row["id"]: row for row in appended.to_pylist()})  # not doubled: after the plan snapshot
    assert read_rows(table) == expected
    assert result.appended_meanwhile == 1 and result.rows_appended_meanwhile == 30


def test_a_step_with_no_unit_records_itself_complete_after_losing_a_race_to_an_append(lake):
    # The SQL catalog refuses a commit when another lands between its read of the table and its write.
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)
    commit, refused = catalog.commit_table, []

    def append_first(target, requirements, updates):
        if not refused:
            other.load_table(TABLE).append(rows_of(50_000, 3, "us"))
            refused.append(True)
            raise CommitFailedException("Table has been updated by another process: sales.orders")
        return commit(target, requirements, updates)

    catalog.commit_table = append_first
    step = DataStep("n/1", "update_rows", TABLE, "v = 0.5", {"k": 1})  # no file can hold v = 0.5

    result = run_step(catalog, step)

    assert refused and result.units == 0
    assert step_state(table.refresh(), "n/1").complete


def test_a_unit_done_by_another_run_meanwhile_is_skipped_and_its_files_deleted(lake):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)
    results = []

    def race(report):
        if report.units_done == 1 and not results:
            results.append(run_step(other, _doubling(), unit_bytes=1))  # finishes the rest first

    result = run_step(catalog, _doubling(), unit_bytes=1, progress=race)

    assert read_rows(table) == _doubled(all_rows())
    assert results[0].units_skipped == 1 and results[0].files_rewritten == 5
    assert result.files_rewritten == 1 and result.units_skipped == 5
    live = {task.file.file_path for task in table.scan().plan_files()}
    written = {path for path in files_on_disk(lake.warehouse) if path.endswith(".parquet") and "/data/" in path}
    assert {p.removeprefix("file://") for p in live} <= written
    step_files = {p for p in written if "move-" in p.rsplit("/", 1)[-1]}
    assert len(step_files) >= 6
    assert step_files == {p.removeprefix("file://") for p in live if "move-" in p}  # no leftovers of the loser


def test_a_changed_step_under_a_recorded_id_is_refused(catalog):
    make_table(catalog)
    with pytest.raises(Interrupted):
        run_step(catalog, _doubling(), unit_bytes=1, progress=_stop_after(1))
    changed = DataStep("x/1", "update_rows", TABLE, "k >= 6", {"v": 0.0})
    with pytest.raises(DataStepStateError, match="another definition") as raised:
        run_step(catalog, changed)
    assert raised.value.step_id == "x/1"


def test_a_foreign_rewrite_of_a_units_files_stops_the_step(lake):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)

    def rewrite_foreign(report):
        if report.units_done == 1:
            other.load_table(TABLE).delete("id = 1000")  # rewrites one file of a later unit

    with pytest.raises(DataStepConflictError) as raised:
        run_step(catalog, _doubling(), unit_bytes=1, progress=rewrite_foreign)
    assert raised.value.unit >= 1 and raised.value.step_id == "x/1"
    assert raised.value.reason == "foreign_rewrite" and not raised.value.transient  # a retry cannot pass
    assert step_state(table.refresh(), "x/1").units_done >= 1


def test_the_state_outlives_the_expiry_of_every_step_snapshot(catalog):
    table = make_table(catalog)
    run_step(catalog, _doubling(), unit_bytes=1)
    table.refresh().append(rows_of(60_000, 5, "eu"))
    head = table.refresh().metadata.current_snapshot_id
    table.maintenance.expire_snapshots().by_ids(
        [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != head]
    ).commit()
    table.refresh()
    assert len(table.metadata.snapshots) == 1 and property_key("x/1") in table.properties

    state = step_state(table, "x/1")

    assert state is not None and state.complete and state.units_total == 6
    again = run_step(catalog, _doubling())
    assert again.units_skipped == 6 and again.rows_changed == 0


def test_a_run_that_planned_on_another_head_than_the_recorded_plan_stops_and_the_next_run_resumes(lake):

    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)
    step = _doubling()
    # This run plans first; another one appends, plans on the new head and commits a unit before it.
    plan = plan_step(table, step, table.metadata.current_snapshot_id, 1)
    initial = StepState(step.step_id, step.fingerprint(), plan.snapshot_id, plan.plan_id, len(plan.units), 1)
    other.load_table(TABLE).append(rows_of(80_000, 20, "eu"))
    with pytest.raises(Interrupted):
        run_step(other, step, unit_bytes=1, progress=_stop_after(1))

    with pytest.raises(DataStepStateError, match="another run") as raised:
        _StepRun(table.refresh(), step, plan, initial, None).run()
    assert raised.value.step_id == "x/1"

    run_step(catalog, step)
    expected = _doubled(all_rows())
    expected.update(_doubled({row["id"]: row for row in rows_of(80_000, 20, "eu").to_pylist()}))
    assert read_rows(table) == expected  # the recorded plan covers the appended rows, each once


def _step_files(warehouse) -> set[str]:
    """Data files on disk that a step wrote (named with the step's ``move-`` prefix)."""
    return {
        path
        for path in files_on_disk(warehouse)
        if path.endswith(".parquet") and "/data/" in path and path.rsplit("/", 1)[-1].startswith("move-")
    }


def _live_files(table) -> set[str]:
    return {task.file.file_path.removeprefix("file://") for task in table.refresh().scan().plan_files()}


def test_a_failure_after_a_unit_deletes_what_was_copied_ahead_and_keeps_what_committed(lake):
    catalog = lake.catalog()
    table = make_table(catalog)

    with pytest.raises(Interrupted):  # raised after unit 2 committed, with unit 3 copied ahead meanwhile
        run_step(catalog, _doubling(), unit_bytes=1, progress=_stop_after(2))

    step_files = _step_files(lake.warehouse)
    assert len(step_files) == 2 and step_files <= _live_files(table)
    run_step(catalog, _doubling(), unit_bytes=1)
    assert read_rows(table) == _doubled(all_rows())
    assert _step_files(lake.warehouse) == _step_files(lake.warehouse) & _live_files(table)


def test_a_schema_change_between_units_writes_the_units_copied_ahead_again_in_the_new_schema(lake):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)

    def add_column_once(report):
        if report.units_done == 1 and "note" not in other.load_table(TABLE).schema().column_names:
            with other.load_table(TABLE).update_schema() as update:
                update.add_column("note", StringType())

    result = run_step(catalog, _doubling(), unit_bytes=1, progress=add_column_once)

    assert result.units == 6 and result.units_skipped == 0 and result.files_rewritten == 6
    assert read_rows(table) == {key: {**row, "note": None} for key, row in _doubled(all_rows()).items()}
    live = _live_files(table)
    assert _step_files(lake.warehouse) == live  # the copy in the old schema was deleted, not left behind
    schema_id = table.metadata.current_schema_id
    later = [s for s in table.metadata.snapshots if s.summary.get("iceberg-ops.data-unit") not in (None, "0")]
    assert len(later) == 5 and all(s.schema_id == schema_id for s in later)


@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_an_interruption_right_after_a_unit_landed_keeps_its_files(catalog, monkeypatch, interruption):
    table = make_table(catalog)
    commit_table = catalog.commit_table

    def interrupted_once_unit_1_landed(target, requirements, updates):
        # Ctrl-C (or a signal handler's exit) arriving once the catalog recorded the unit's commit and
        # before the call returned: the unit is committed, and the run cannot tell.
        response = commit_table(target, requirements, updates)
        state = find_step_state(response.metadata, "x/1")
        if state is not None and state.done == {0, 1}:
            raise interruption()
        return response

    monkeypatch.setattr(catalog, "commit_table", interrupted_once_unit_1_landed)
    with pytest.raises(interruption):
        run_step(catalog, _doubling(), unit_bytes=1)
    monkeypatch.undo()

    assert step_state(table.refresh(), "x/1").units_done == 2
    assert sorted(read_rows(table)) == sorted(all_rows())  # every file of the committed snapshots is there
    run_step(catalog, _doubling(), unit_bytes=1)
    assert read_rows(table) == _doubled(all_rows())


def test_a_column_the_step_names_renamed_meanwhile_stops_it_naming_the_column(lake):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)

    def rename_v_once(report):
        if report.units_done == 1 and "v" in other.load_table(TABLE).schema().column_names:
            with other.load_table(TABLE).update_schema() as update:
                update.rename_column("v", "value")

    with pytest.raises(InvalidDataStepError, match="'v'") as raised:
        run_step(catalog, _doubling(), unit_bytes=1, progress=rename_v_once)
    assert raised.value.column == "v" and "value" in str(raised.value)  # the columns it has now
    assert step_state(table.refresh(), "x/1").units_done == 1  # the unit committed before stays
