"""One unit's commit when the catalog misbehaves: a lost answer of a commit that landed counts it once, a
failure whose outcome cannot be known keeps the unit's files, a commit that lost a race is tried again
against the new head (the concurrent append kept)."""

from __future__ import annotations

import pytest
from pyiceberg.table import Transaction

from iceberg_ops_provider.data_steps import DataStep, run_step, step_state
from iceberg_ops_provider.data_steps import unit_commit as unit_commit_module
from iceberg_ops_provider.data_steps.unit_commit import UnknownOutcome
from tests.data_steps.support import all_rows, make_table, read_rows, rows_of
from tests.support.tables import files_on_disk

TABLE = ("sales", "orders")
STEP = DataStep("c/1", "update_rows", TABLE, "k = 1", {"v": -1.0})


def _expected():
    rows = all_rows()
    for row in rows.values():
        if row["k"] == 1:
            row["v"] = -1.0
    return rows


def test_a_lost_answer_of_a_commit_that_landed_counts_the_unit_once(catalog, monkeypatch):
    table = make_table(catalog)
    real = Transaction.commit_transaction
    calls = []

    def answer_lost(self):
        real(self)
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("the answer was lost")
        return self._table

    monkeypatch.setattr(Transaction, "commit_transaction", answer_lost)
    result = run_step(catalog, STEP, unit_bytes=1)

    assert result.units == 6 and len(result.snapshot_ids) == 6
    assert read_rows(table) == _expected()


def test_an_unknown_outcome_keeps_the_units_files(lake, monkeypatch):
    catalog = lake.catalog()
    table = make_table(catalog)
    before = files_on_disk(lake.warehouse)

    def silent(self):
        raise ConnectionError("no answer")

    monkeypatch.setattr(Transaction, "commit_transaction", silent)
    monkeypatch.setattr(unit_commit_module, "_landed", lambda table, snapshot_id: None)
    with pytest.raises(UnknownOutcome):
        run_step(catalog, STEP, unit_bytes=1)
    monkeypatch.undo()

    kept = {path for path in files_on_disk(lake.warehouse) - before if path.endswith(".parquet")}
    assert kept, "the unit's data files were deleted although its commit may have landed"
    assert step_state(table.refresh(), "c/1") is None


def test_a_commit_that_failed_for_sure_deletes_the_units_files(lake, monkeypatch):
    catalog = lake.catalog()
    make_table(catalog)
    before = {p for p in files_on_disk(lake.warehouse) if p.endswith(".parquet")}

    def refused(self):
        raise ConnectionError("refused before sending")

    monkeypatch.setattr(Transaction, "commit_transaction", refused)
    with pytest.raises(ConnectionError):
        run_step(catalog, STEP, unit_bytes=1)
    monkeypatch.undo()
    assert {p for p in files_on_disk(lake.warehouse) if p.endswith(".parquet")} == before


def test_a_commit_that_lost_a_race_to_an_append_is_tried_again(lake, monkeypatch):
    catalog, other = lake.catalog(), lake.catalog()
    table = make_table(catalog)
    real = Transaction.commit_transaction
    appended = rows_of(70_000, 10, "eu")
    raced = []

    def race_once(self):
        if not raced and unit_commit_module.UNIT_KEY in str(self._updates):
            raced.append(1)
            other.load_table(TABLE).append(appended)  # lands between the state check and the commit
        return real(self)

    monkeypatch.setattr(Transaction, "commit_transaction", race_once)
    result = run_step(catalog, STEP, unit_bytes=1)

    expected = _expected()
    expected.update({row["id"]: row for row in appended.to_pylist()})
    assert raced and read_rows(table) == expected
    assert result.appended_meanwhile == 1 and len(result.snapshot_ids) == 6
