"""Tables with merge-on-read deletes: position deletes are applied while a step reads and their files removed
once every data file they touch is rewritten; equality deletes are refused before anything is committed."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.data_steps import DataStep, estimate_step, run_step
from iceberg_ops_provider.errors import DataStepConflictError, UnsupportedDeleteFilesError
from tests.data_steps.support import all_rows, make_table, read_rows
from tests.support.tables import commit_delete_files, equality_delete_file, position_delete_file

TABLE = ("sales", "orders")


def _eu_files(table):
    return sorted((t.file for t in table.scan().plan_files() if t.file.partition[0] == "eu"), key=lambda f: f.file_path)


def _live_deletes(table):
    return {d.file_path for task in table.refresh().scan().plan_files() for d in task.delete_files}


def test_position_deletes_are_applied_and_removed_with_their_data_files(catalog):
    table = make_table(catalog)
    first, second, _third = _eu_files(table)
    single = position_delete_file(table, {first.file_path: [0, 1]})  # ids 0 and 1
    spanning = position_delete_file(table, {first.file_path: [2], second.file_path: [0]}, with_bounds=False)
    commit_delete_files(table, [single, spanning])
    expected = read_rows(table)  # as PyIceberg applies the deletes
    assert len(expected) == 1196 and set(expected) < set(all_rows())
    assert estimate_step(table, DataStep("p/1", "update_rows", TABLE, "region = 'eu'", {"k": 1})).delete_files == 2

    # One file per unit: the spanning delete file goes with the second unit, the single one with the first.
    result = run_step(catalog, DataStep("p/1", "update_rows", TABLE, "region = 'eu'", {"k": 1}), unit_bytes=1)

    for row in expected.values():
        if row["region"] == "eu":
            row["k"] = 1
    assert read_rows(table) == expected
    assert _live_deletes(table) == set()
    assert result.delete_files_removed == 2 and result.files_rewritten == 3


def test_a_delete_step_on_files_with_position_deletes(catalog):
    table = make_table(catalog)
    first = _eu_files(table)[0]
    commit_delete_files(table, [position_delete_file(table, {first.file_path: [3]})])
    result = run_step(catalog, DataStep("p/2", "delete_rows", TABLE, "region = 'eu'"), unit_bytes=1)
    # The file with deletes is read (its deleted row is not counted again), the two others dropped whole.
    assert result.files_removed == 2 and result.files_rewritten == 1 and result.rows_changed == 599
    assert read_rows(table) == {i: row for i, row in all_rows().items() if row["region"] == "us"}
    assert _live_deletes(table) == set()


def test_equality_deletes_are_refused_before_anything_is_committed(catalog):
    table = make_table(catalog)
    commit_delete_files(table, [equality_delete_file(table, [5, 6])])
    snapshots = len(table.refresh().metadata.snapshots)
    with pytest.raises(UnsupportedDeleteFilesError, match="equality delete"):
        run_step(catalog, DataStep("p/3", "delete_rows", TABLE, "k = 1"))
    assert len(table.refresh().metadata.snapshots) == snapshots


def test_a_position_delete_added_after_the_plan_on_a_units_file_stops_that_unit(lake):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)
    last_eu = _eu_files(table)[-1]

    def delete_foreign(report):
        if report.units_done == 1:
            foreign = other.load_table(TABLE)
            commit_delete_files(foreign, [position_delete_file(foreign, {last_eu.file_path: [0]})])

    step = DataStep("p/4", "update_rows", TABLE, "region = 'eu'", {"k": 1})
    with pytest.raises(DataStepConflictError, match="added delete file") as raised:
        run_step(catalog, step, unit_bytes=1, progress=delete_foreign)
    assert raised.value.unit == 2  # units follow file locations; the last eu file is the third
