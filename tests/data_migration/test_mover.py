"""The data mover end to end on a real SQLite catalog: exactly-once units, resume, modes, reconciliation, bad input.

The tests of workers racing on one move run on PostgreSQL as well (``catalog_backend``)."""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import DateType, DecimalType, IntegerType, LongType, NestedField, StringType, TimestamptzType

from iceberg_ops_provider.data_migration import DataMover, MoveUnit
from iceberg_ops_provider.data_migration.pipeline import CopyPipeline
from iceberg_ops_provider.data_migration.state import MOVE_ID_KEY, MoveState, find_state, property_key
from iceberg_ops_provider.data_migration.unit_commit import commit_unit
from iceberg_ops_provider.errors import (
    InvalidMoveError,
    MoveConflictError,
    MoveStateError,
    ReconciliationError,
    VerificationFailedError,
)
from iceberg_ops_provider.maintenance import compact_small_files_streaming, expire_snapshots
from tests.data_migration.support import orders, row_multiset, source_table

SMALL_UNITS = 1  # every source file is a unit of its own


def move_snapshot_count(table, move_id: str) -> int:
    table.refresh()
    return sum(
        1 for s in table.snapshots() if s.summary and s.summary.additional_properties.get(MOVE_ID_KEY) == move_id
    )


def test_moves_every_row_exactly_once_into_a_created_target(catalog):
    source = source_table(catalog, files=5)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS)

    plan = mover.plan()
    assert not plan.target_exists and len(plan.units) == 5 and plan.pending == plan.units
    result = mover.run()

    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == row_multiset(source)
    assert result.complete and result.units_committed == 5 and result.rows == 2500
    assert len(result.target_snapshot_ids) == 5
    assert move_snapshot_count(target, mover.move_id) == 5
    assert target.schema().find_field("id").required


def test_a_finished_move_run_again_changes_nothing(catalog):
    source_table(catalog, files=3)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS)
    mover.run()
    target = catalog.load_table("archive.orders")
    snapshots = len(target.snapshots())

    again = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS)
    result = again.run()

    assert again.move_id == mover.move_id  # the default id is derived from the call: the same call resumes
    assert result.complete and result.units_committed == 0 and result.rows == 0
    target.refresh()
    assert len(target.snapshots()) == snapshots
    assert again.plan().complete


def test_units_run_apart_then_the_rest(catalog):
    source = source_table(catalog, files=4)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS)
    units = [unit.to_json() for unit in mover.plan().units]

    first = mover.run(units=[units[1], units[3]])
    assert first.units_committed == 2 and not first.complete
    assert mover.plan().done == frozenset({1, 3})
    again = mover.run(units=[MoveUnit.from_json(units[1])])
    assert again.units_committed == 0 and again.units_skipped == 1
    rest = mover.run()

    assert rest.units_committed == 2 and rest.complete
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_the_same_unit_on_two_workers_at_once_commits_once(catalog_backend):
    catalog = catalog_backend.build()
    source = source_table(catalog, files=4)
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS).plan()
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=source.schema())
    errors: list[BaseException] = []

    def work(handle):
        try:
            DataMover(handle, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS).run()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(catalog_backend.build(),)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == row_multiset(source)
    state, _ = find_state(target.metadata, DataMover(catalog, "sales.orders", "archive.orders").move_id, "main")
    assert state is not None and state.complete and state.rows == 2000


def test_a_commit_made_meanwhile_is_caught_by_the_commit_itself_not_rebased_over(catalog_backend):
    """The check is inside the commit: when another worker commits the unit between this worker's check
    and its commit, the commit fails its requirement and the state is checked again."""
    catalog = catalog_backend.build()
    source = source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS)
    mover.run(units=[0])
    worker = catalog_backend.build().load_table("archive.orders")
    state_seen: list[object] = []

    def decide(state):
        state_seen.append(state)
        if len(state_seen) == 1:
            mover.run(units=[1])  # the other worker commits the same unit now
        return None if 1 in state.done else state.with_unit(1, 500)

    outcome = commit_unit(worker, [], move_id=mover.move_id, branch="main", decide=decide, unit_label="2/2")

    assert not outcome.committed and outcome.attempts == 1
    assert len(state_seen) == 2 and 1 not in state_seen[0].done and 1 in state_seen[1].done
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_a_target_schema_change_while_a_unit_is_copied_fails_its_commit(catalog, monkeypatch):
    source = source_table(catalog, files=2)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=source.schema())
    mover = DataMover(catalog, "sales.orders", "archive.orders", commit_every_bytes=SMALL_UNITS)
    next_unit = CopyPipeline.next_unit

    def copy_then_evolve(self, **kwargs):
        copied = next_unit(self, **kwargs)
        with catalog.load_table("archive.orders").update_schema() as update:
            update.delete_column("customer")
        with catalog.load_table("archive.orders").update_schema() as update:
            update.add_column("customer", StringType())  # same name, new field id
        return copied

    with monkeypatch.context() as patched:
        patched.setattr(CopyPipeline, "next_unit", copy_then_evolve)
        with pytest.raises(MoveConflictError, match="customer"):
            mover.run()
    assert catalog.load_table("archive.orders").current_snapshot() is None
    assert mover.run().complete  # a rerun maps the columns to the new schema
    assert row_multiset(catalog.load_table("archive.orders"), ["id", "amount"]) == row_multiset(
        source, ["id", "amount"]
    )


def test_columns_are_matched_by_name_renamed_and_filled(catalog):
    source_table(catalog, files=2)
    catalog.create_namespace("archive")
    # Field ids in another order than the source's, a renamed column and a column the source lacks.
    target_schema = Schema(
        NestedField(1, "note", StringType(), required=False),
        NestedField(2, "day", DateType(), required=False),
        NestedField(3, "created_at", TimestamptzType(), required=False),
        NestedField(4, "amount", DecimalType(14, 2), required=False),
        NestedField(5, "customer", StringType(), required=False),
        NestedField(6, "order_id", LongType(), required=True),
    )
    catalog.create_table("archive.orders", schema=target_schema)

    DataMover(catalog, "sales.orders", "archive.orders", rename={"id": "order_id", "ts": "created_at"}).run()

    target = catalog.load_table("archive.orders").scan().to_arrow().sort_by("order_id")
    expected = pa.concat_tables([orders(0, 500), orders(500, 500)]).sort_by("id")
    assert target.column("order_id").to_pylist() == expected.column("id").to_pylist()
    assert target.column("customer").to_pylist() == expected.column("customer").to_pylist()
    assert target.column("created_at").to_pylist() == expected.column("ts").to_pylist()
    assert target.column("amount").to_pylist() == expected.column("amount").to_pylist()
    assert target.column("note").null_count == len(target)


def test_a_required_target_column_without_a_source_is_refused_before_writing(catalog):
    source_table(catalog, files=1)
    catalog.create_namespace("archive")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "region", StringType(), required=True)
    )
    target = catalog.create_table("archive.orders", schema=schema)

    with pytest.raises(ReconciliationError, match="region"):
        DataMover(catalog, "sales.orders", "archive.orders", columns=["id"]).run()
    target.refresh()
    assert target.current_snapshot() is None


def test_rows_are_routed_to_the_targets_partitions(catalog):
    source = source_table(catalog, files=3)
    catalog.create_namespace("archive")
    spec = PartitionSpec(PartitionField(source_id=4, field_id=1000, transform=DayTransform(), name="ts_day"))
    catalog.create_table("archive.orders", schema=source.schema(), partition_spec=spec)

    DataMover(catalog, "sales.orders", "archive.orders").run()

    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == row_multiset(source)
    for task in target.scan().plan_files():
        days = {
            ts.date() for ts in pa.parquet.read_table(task.file.file_path[len("file://") :]).column("ts").to_pylist()
        }
        assert len(days) == 1  # one partition value per file


def test_create_target_keeps_the_partition_spec_and_renames_its_column(catalog):
    spec = PartitionSpec(PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="day"))
    source = source_table(catalog, files=2, partition_spec=spec)

    DataMover(catalog, "sales.orders", "archive.orders", create_target=True, rename={"day": "order_day"}).run()

    target = catalog.load_table("archive.orders")
    field = target.spec().fields[0]
    assert target.schema().find_column_name(field.source_id) == "order_day"
    assert sum(row_multiset(target).values()) == sum(row_multiset(source).values())


def test_where_moves_only_matching_rows(catalog):
    source = source_table(catalog, files=3)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, where="id < 700")
    mover.run()
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == only(row_multiset(source), lambda row: row[0] < 700)
    assert mover.verify("checksum").ok


def only(counter: Counter, keep) -> Counter:
    return Counter({row: n for row, n in counter.items() if keep(row)})


def test_an_empty_selection_is_recorded_as_finished(catalog):
    source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, where="id < 0")
    result = mover.run()
    assert result.complete and result.rows == 0
    assert mover.verify("count").ok
    assert mover.run().target_snapshot_ids == ()


def test_incremental_moves_only_what_was_appended(catalog):
    source = source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental")
    mover.run()
    assert mover.run().units_committed == 0  # nothing new

    source.append(orders(5000, 300))
    source.append(orders(6000, 200))
    result = mover.run()

    assert result.rows == 500 and result.complete
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == row_multiset(source)
    assert mover.verify("checksum").ok


def test_incremental_refuses_deleted_rows(catalog):
    source = source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental")
    mover.run()
    source.delete("id < 10")
    with pytest.raises(MoveStateError, match=r"delete|overwrite"):
        mover.run()


def test_append_mode_refuses_a_new_source_snapshot_under_a_finished_move(catalog):
    source = source_table(catalog, files=1)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True)
    mover.run()
    source.append(orders(9000, 10))
    with pytest.raises(MoveStateError, match="incremental"):
        mover.run()
    assert sum(row_multiset(catalog.load_table("archive.orders")).values()) == 500


def test_a_finished_overwrite_move_points_to_another_overwrite_not_to_incremental(catalog):
    source = source_table(catalog, files=1)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="overwrite")
    mover.run()
    source.append(orders(9000, 10))
    with pytest.raises(MoveStateError, match="run mode='overwrite' again under another move_id") as refused:
        mover.run()
    assert "incremental" not in str(refused.value)  # it would start another move and copy every row again
    DataMover(catalog, "sales.orders", "archive.orders", mode="overwrite", move_id="again").run()
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(catalog.load_table("sales.orders"))


def test_overwrite_replaces_the_matching_rows_at_the_end(catalog):
    source = source_table(catalog, files=3)
    catalog.create_namespace("archive")
    target = catalog.create_table("archive.orders", schema=source.schema())
    target.append(orders(0, 100))  # stale copies of rows the move brings again
    target.append(orders(100_000, 50))  # rows outside the filter: kept
    mover = DataMover(
        catalog, "sales.orders", "archive.orders", mode="overwrite", where="id < 1000", commit_every_bytes=SMALL_UNITS
    )

    mover.run(units=[0])
    partial = row_multiset(target)
    assert sum(partial.values()) == 150  # staged units are not visible on main
    result = mover.run()

    assert result.complete
    moved = row_multiset(catalog.load_table("archive.orders"))
    assert moved == only(row_multiset(source), lambda row: row[0] < 1000) + only(partial, lambda row: row[0] >= 100_000)
    assert mover.branch not in catalog.load_table("archive.orders").metadata.refs
    assert mover.verify("sample").ok


def test_verification_failure_fails_the_run(catalog):
    source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True)
    mover.run()
    catalog.load_table("archive.orders").delete("id = 7")

    report = mover.verify("checksum")
    assert not report.ok
    with pytest.raises(VerificationFailedError) as failure:
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, verify="count").run()
    assert failure.value.report.source_rows == failure.value.report.target_rows + 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"mode": "merge"}, InvalidMoveError, "mode"),
        ({"verify": "hash"}, InvalidMoveError, "verify"),
        ({"commit_every_bytes": 0}, InvalidMoveError, "commit_every_bytes"),
        ({"where": "id <<< 3"}, InvalidMoveError, "where"),
        ({"columns": "id"}, InvalidMoveError, "columns"),
        ({"rename": {"qty": ""}}, InvalidMoveError, "non-empty target column names"),
        ({"where": 3}, InvalidMoveError, "where"),
        ({"sample_size": 0}, InvalidMoveError, "sample_size"),
    ],
)
def test_bad_arguments_are_refused_up_front(catalog, kwargs, error, match):
    source_table(catalog, files=1)
    with pytest.raises(error, match=match):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, **kwargs)


@pytest.mark.parametrize(
    ("columns", "match"),
    [(["id", "nope"], "names `nope`"), ([], "is empty"), (["ts.nested"], "top-level columns")],
)
def test_unknown_empty_or_nested_columns_are_refused_before_writing(catalog, columns, match):
    source_table(catalog, files=1)
    with pytest.raises(ReconciliationError, match=match):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, columns=columns).plan()
    assert ("archive",) not in catalog.list_namespaces()


def test_bad_tables_and_filters_are_refused_before_writing(catalog):
    source_table(catalog, files=1)
    with pytest.raises(InvalidMoveError, match="does not exist"):
        DataMover(catalog, "sales.missing", "archive.orders", create_target=True).plan()
    with pytest.raises(InvalidMoveError, match="create_target"):
        DataMover(catalog, "sales.orders", "archive.orders").plan()
    with pytest.raises(InvalidMoveError, match="nope"):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, where="nope = 1").plan()
    assert ("archive",) not in catalog.list_namespaces()


def test_a_table_cannot_be_moved_into_itself(catalog):
    source_table(catalog, files=1)
    with pytest.raises(InvalidMoveError, match="same table"):
        DataMover(catalog, "sales.orders", "sales.orders")


def test_incremental_skips_a_compaction_of_rows_already_moved_and_refuses_one_of_new_rows(catalog):
    source = source_table(catalog, files=4, rows_per_file=100)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental")
    mover.run()
    compacted = compact_small_files_streaming(source, min_input_files=2)
    assert compacted.rewritten_data_files_count == 4
    source.append(orders(7000, 30))

    result = mover.run()
    assert result.rows == 30
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)

    source.append(orders(8000, 30))
    source.append(orders(9000, 30))
    compact_small_files_streaming(source, min_input_files=2)  # folds the two new files into one
    with pytest.raises(MoveStateError, match="rewrote files appended"):
        mover.run()


def test_a_unit_of_another_move_is_refused(catalog):
    source_table(catalog, files=1)
    unit = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, move_id="a").plan().units[0]
    with pytest.raises(InvalidMoveError, match="move_id='a'"):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, move_id="b").run(units=[unit])


def test_another_definition_under_the_same_move_id_is_refused(catalog):
    source_table(catalog, files=2)
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True, move_id="m").run(units=[0])
    with pytest.raises(MoveStateError, match="another filter"):
        DataMover(catalog, "sales.orders", "archive.orders", move_id="m", where="id > 3").run()


def test_progress_is_reported_and_logged(catalog, caplog):
    source_table(catalog, files=3)
    seen = []
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider")
    DataMover(
        catalog,
        "sales.orders",
        "archive.orders",
        create_target=True,
        commit_every_bytes=SMALL_UNITS,
        on_progress=seen.append,
    ).run()
    assert seen and seen[-1].rows == 1500 and seen[-1].units_done == 3
    assert seen[-1].bytes == seen[-1].total_bytes
    assert any("rows/s" in record.getMessage() for record in caplog.records)


def _lanes_alive() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("iceberg-ops-copy-")]


def _files_on_disk(table) -> set[str]:
    root = table.location().removeprefix("file://") + "/data"
    return {f"{folder}/{name}" for folder, _, names in os.walk(root) for name in names}


def _committed_files(table) -> set[str]:
    return {task.file.file_path.removeprefix("file://") for task in table.refresh().scan().plan_files()}


def test_progress_reaches_the_callback_on_the_thread_that_runs_the_move(catalog):
    source_table(catalog, files=4)
    threads = []
    mover = DataMover(
        catalog,
        "sales.orders",
        "archive.orders",
        create_target=True,
        commit_every_bytes=SMALL_UNITS,
        parallelism=2,
        on_progress=lambda progress: threads.append(threading.current_thread()),
    )
    assert mover.run().complete
    assert threads and set(threads) == {threading.current_thread()}  # never a lane's


class _Refused(Exception):
    pass


def test_a_progress_callback_that_raises_stops_the_move_on_its_thread(catalog):
    source_table(catalog, files=6)
    calls, raised = [], []

    def refuse(progress) -> None:
        calls.append(threading.current_thread())
        if progress.units_done == 2 and not raised:
            raised.append(progress)
            raise _Refused("the caller says stop")

    mover = DataMover(
        catalog,
        "sales.orders",
        "archive.orders",
        create_target=True,
        commit_every_bytes=SMALL_UNITS,
        parallelism=2,
        on_progress=refuse,
    )
    with pytest.raises(_Refused):
        mover.run()
    assert raised and set(calls) == {threading.current_thread()}
    assert _lanes_alive() == []
    target = catalog.load_table("archive.orders")
    assert sum(row_multiset(target).values()) == 1000  # the two units committed, nothing more
    assert _files_on_disk(target) == _committed_files(target)  # the unit copied ahead left no file
    assert mover.run().complete  # and the move resumes
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(catalog.load_table("sales.orders"))


def test_units_planned_before_a_source_commit_run_on_their_snapshot(catalog):
    source = source_table(catalog, files=2)
    before = row_multiset(source)
    units = [
        unit.to_json() for unit in DataMover(catalog, "sales.orders", "archive.orders", create_target=True).plan().units
    ]
    source.append(orders(9000, 10))  # lands between the planning task and the move tasks

    result = DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run(units=units)

    assert result.complete
    assert row_multiset(catalog.load_table("archive.orders")) == before


def test_something_that_is_not_a_unit_is_refused(catalog):
    source_table(catalog, files=1)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True)
    with pytest.raises(InvalidMoveError, match="not a unit"):
        mover.run(units=[{"index": 0}])
    with pytest.raises(InvalidMoveError, match="does not exist"):
        mover.run(units=[5])


def test_overwrite_into_a_new_empty_target(catalog):
    source = source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="overwrite")
    assert mover.run().complete
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)
    assert mover.verify("checksum").ok


def test_incremental_whose_first_run_found_an_empty_source_moves_everything_later(catalog):
    catalog.create_namespace("sales")
    source = catalog.create_table("sales.orders", schema=orders(0, 1).schema)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental")
    assert mover.run().complete
    source.append(orders(0, 40))

    result = mover.run()

    assert result.rows == 40
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)
    assert mover.verify("checksum").ok


def test_an_overwrite_filter_on_a_column_not_moved_is_refused_before_writing(catalog):
    source_table(catalog, files=1)
    with pytest.raises(ReconciliationError, match="customer"):
        DataMover(
            catalog,
            "sales.orders",
            "archive.orders",
            create_target=True,
            mode="overwrite",
            where="customer = 'x'",
            columns=["id", "ts"],
        ).run()
    assert ("archive",) not in catalog.list_namespaces()


def test_a_finished_move_whose_snapshots_were_expired_is_not_copied_again(catalog):
    source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True)
    mover.run()
    target = catalog.load_table("archive.orders")
    target.append(orders(100_000, 5))  # another writer; then the move's snapshots expire
    expire_snapshots(target, older_than=datetime.now(UTC) + timedelta(seconds=1), retain_last=1)

    assert mover.run().units_committed == 0  # the table property keeps the state expiry removed
    assert sum(row_multiset(catalog.load_table("archive.orders")).values()) == 1005
    assert mover.verify("count").details["scope"] == "table"

    with catalog.load_table("archive.orders").transaction() as transaction:
        transaction.remove_properties(property_key(mover.move_id))
    with pytest.raises(MoveStateError, match="expired"):  # its files still carry the move's key
        mover.run()
    assert sum(row_multiset(catalog.load_table("archive.orders")).values()) == 1005


def test_an_incremental_rerun_after_compaction_and_expiry_of_the_target_moves_only_new_rows(catalog):
    """The backfill DAG beside the maintenance DAG: the target compacted and expired, then a range run again."""
    source = source_table(catalog, files=4, rows_per_file=100)
    mover = DataMover(
        catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental", verify="checksum"
    )
    mover.run()
    target = catalog.load_table("archive.orders")
    compact_small_files_streaming(target, min_input_files=2)
    expire_snapshots(target, older_than=datetime.now(UTC) + timedelta(seconds=1), retain_last=1)
    source.append(orders(60_000, 7))

    result = mover.run()

    assert result.rows == 7 and result.verify.ok and result.verify.details["scope"] == "table"
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_a_resumed_move_reads_its_pinned_snapshot_with_that_snapshots_schema(catalog):
    source = source_table(catalog, files=3)
    pinned = row_multiset(source)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=SMALL_UNITS)
    mover.run(units=[0])
    with source.update_schema() as update:
        update.delete_column("customer")

    assert mover.run().complete

    assert row_multiset(catalog.load_table("archive.orders")) == pinned
    assert mover.verify("checksum").ok


def test_a_created_target_gets_values_by_name_although_the_catalog_numbers_its_columns_afresh(catalog):
    source = source_table(catalog, files=2)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, columns=["amount", "day"])
    mover.run()
    target = catalog.load_table("archive.orders")
    assert [field.field_id for field in target.schema().fields] == [1, 2]  # the source's are 3 and 5
    assert row_multiset(target) == row_multiset(source, ["amount", "day"])
    assert mover.verify("checksum").ok


def test_a_filter_that_leaves_out_the_values_that_do_not_fit_lets_the_move_run(catalog):
    catalog.create_namespace("sales")
    source = catalog.create_table(
        "sales.t", schema=pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    )
    source.append(pa.table({"id": pa.array([1, 2, 3_000_000_000], pa.int64()), "name": ["a", None, "c"]}))
    catalog.create_namespace("archive")
    narrow = Schema(
        NestedField(1, "id", IntegerType(), required=False), NestedField(2, "name", StringType(), required=True)
    )
    catalog.create_table("archive.t", schema=narrow)

    with pytest.raises(ReconciliationError, match="3000000000"):
        DataMover(catalog, "sales.t", "archive.t", where="name is not null").plan()
    with pytest.raises(ReconciliationError, match="required"):
        DataMover(catalog, "sales.t", "archive.t", where="id < 1000").plan()
    DataMover(catalog, "sales.t", "archive.t", where="id < 1000 and name is not null").run()

    assert row_multiset(catalog.load_table("archive.t")) == Counter({(1, "a"): 1})


def test_a_unit_of_an_earlier_incremental_run_is_skipped_as_settled(catalog):
    source = source_table(catalog, files=2)
    first = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental")
    old_units = [unit.to_json() for unit in first.plan().units]
    first.run(units=old_units)
    source.append(orders(50_000, 20))
    first.run()  # the second run, complete

    retried = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental")
    result = retried.run(units=old_units[:1])  # an Airflow retry of a task of the first run

    assert result.units_committed == 0 and result.units_skipped == 1
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_a_commit_on_main_after_another_move_committed_to_its_staging_branch_reads_again(catalog_backend):
    """A branch commit advances the table's sequence number without moving main: the catalog refuses a
    commit built on older metadata with a ValueError, which the unit's commit treats as a lost race."""
    catalog = catalog_backend.build()
    source = source_table(catalog, files=2)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=source.schema()).append(orders(90_000, 3))
    stale = catalog_backend.build().load_table("archive.orders")
    overwrite = DataMover(catalog, "sales.orders", "archive.orders", mode="overwrite", commit_every_bytes=SMALL_UNITS)
    state = MoveState("other", "sales.orders", "uuid", "def", None, "plan", 1, 1)
    calls: list[int] = []

    def decide(_state):
        calls.append(1)
        if len(calls) == 1:
            overwrite.run(units=[0])  # staged on its branch, between this commit's read and its commit
        return state.with_unit(0, 0)

    outcome = commit_unit(stale, [], move_id="other", branch="main", decide=decide, unit_label="1/1")

    assert outcome.committed and outcome.attempts == 2


def test_a_finished_append_move_continues_incrementally_as_its_error_advises(catalog):
    source = source_table(catalog, files=2)
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run()
    source.append(orders(70_000, 10))
    with pytest.raises(MoveStateError, match="incremental"):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True).run()

    result = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, mode="incremental").run()

    assert result.rows == 10
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)


def test_plan_refuses_a_created_target_whose_partition_column_is_not_moved(catalog):
    spec = PartitionSpec(PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="day"))
    source_table(catalog, files=1, partition_spec=spec)
    with pytest.raises(ReconciliationError, match="day"):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, columns=["id", "amount"]).plan()


def test_the_default_move_id_is_a_stable_format(catalog):
    """Default move ids name moves recorded in targets: a release that changed them would restart moves."""
    assert DataMover(catalog, "a.s", "b.t").move_id == "a.s-to-b.t-f76061c52cbe9185"
    assert DataMover(catalog, "a.s", "b.t", mode="incremental").move_id == "a.s-to-b.t-f76061c52cbe9185"
    assert DataMover(catalog, "a.s", "b.t", mode="overwrite").move_id != "a.s-to-b.t-f76061c52cbe9185"


def test_a_blank_filter_moves_every_row(catalog):
    source = source_table(catalog, files=1)
    DataMover(catalog, "sales.orders", "archive.orders", create_target=True, where="  ").run()
    assert row_multiset(catalog.load_table("archive.orders")) == row_multiset(source)
