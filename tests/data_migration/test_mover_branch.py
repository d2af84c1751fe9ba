"""Write-audit-publish with the data mover on a real SQLite catalog: a move on a branch of its own, its audit,
its publish (fast-forward, or an append after others' commits) exactly once, its discard, and bad input."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import StringType

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.data_migration import publish as publishing
from iceberg_ops_provider.data_migration.audit_branch import RECORD_PREFIX, check_branch_name
from iceberg_ops_provider.data_migration.progress_report import moves_into
from iceberg_ops_provider.data_migration.publish import PUBLISHED_KEY
from iceberg_ops_provider.data_migration.state import find_state
from iceberg_ops_provider.data_steps.tags import create_tag, preview_restore, restore_to_tag
from iceberg_ops_provider.errors import InvalidMoveError, MoveStateError, PublishRefusedError
from iceberg_ops_provider.maintenance.expire import expire_snapshots
from tests.data_migration.support import ORDERS_SCHEMA, orders, row_multiset, source_table

SMALL_UNITS = 1  # every source file is a unit of its own


@pytest.fixture
def tables(catalog):
    """A source of 3 files of 500 orders, and a target holding 10 orders of its own (ids from 100,000)."""
    source = source_table(catalog, files=3)
    catalog.create_namespace("archive")
    target = catalog.create_table("archive.orders", schema=ORDERS_SCHEMA)
    target.append(orders(100_000, 10))
    return source, target


def _mover(catalog, **kwargs) -> DataMover:
    return DataMover(
        catalog, "sales.orders", "archive.orders", branch="backfill", commit_every_bytes=SMALL_UNITS, **kwargs
    )


def test_units_commit_to_the_branch_and_main_moves_to_the_audited_snapshot_once(catalog, tables):
    source, target = tables
    before = row_multiset(target)
    fork = target.metadata.current_snapshot_id
    mover = _mover(catalog)

    result = mover.run()

    target.refresh()
    assert result.complete and result.units_committed == 3
    assert target.metadata.current_snapshot_id == fork and row_multiset(target) == before  # main sees nothing
    branch_head = target.metadata.snapshot_by_name("backfill")
    assert row_multiset(target, snapshot_id=branch_head.snapshot_id) == before + row_multiset(source)
    state, _ = find_state(target.metadata, mover.move_id, "backfill")
    assert state.fork_snapshot_id == fork and state.complete
    assert mover.verify("checksum").details["branch"] == "backfill"
    assert mover.verify("checksum").ok

    report = mover.audit(not_null=["id"], unique=["id"], min_rows=1500, max_rows=1500)
    assert report.ok and report.rows == 1500 and report.snapshot_id == branch_head.snapshot_id
    published = mover.publish()

    target.refresh()
    assert published.how == "fast_forward" and published.main_before == fork
    assert target.metadata.current_snapshot_id == branch_head.snapshot_id
    assert row_multiset(target) == before + row_multiset(source)
    assert "backfill" not in target.metadata.refs and RECORD_PREFIX + "backfill" not in target.properties
    log_length = len(target.metadata.snapshot_log)

    assert mover.publish().how == "already_published"
    assert mover.run().units_committed == 0
    target.refresh()
    assert len(target.metadata.snapshot_log) == log_length and row_multiset(target) == before + row_multiset(source)
    assert "backfill" not in target.metadata.refs


def _landing_once(catalog, rows):
    """A function that appends ``rows`` to main the first time it is called: another writer's commit."""
    landed = []

    def land(*args, **kwargs) -> None:
        if not landed:
            landed.append(catalog.load_table("archive.orders").append(rows))

    land.landed = landed
    return land


def test_appends_to_main_during_the_move_and_the_publish_end_on_main_once(catalog, tables, monkeypatch):
    source, target = tables
    before = row_multiset(target)
    during_move = _landing_once(catalog, orders(200_000, 7))
    mover = _mover(catalog, on_progress=during_move)
    mover.run()
    assert mover.audit(not_null=["id"]).ok
    during_publish = _landing_once(catalog, orders(300_000, 3))
    real_conflicts = publishing._conflicts

    def conflicts_then_append(*args):  # checked against main, then another writer commits before the publish does
        real_conflicts(*args)
        during_publish()

    monkeypatch.setattr(publishing, "_conflicts", conflicts_then_append)
    published = mover.publish()

    target = catalog.load_table("archive.orders")
    assert during_move.landed and during_publish.landed
    assert published.how == "append" and published.files == 3
    expected = before + row_multiset(source) + row_multiset_of(orders(200_000, 7)) + row_multiset_of(orders(300_000, 3))
    assert row_multiset(target) == expected
    head = target.metadata.current_snapshot()
    assert head.summary[PUBLISHED_KEY] == f"backfill@{published.snapshot_id}"
    assert "backfill" not in target.metadata.refs
    assert find_state(target.metadata, mover.move_id, "main")[0].complete
    assert mover.publish().how == "already_published"
    assert row_multiset(catalog.load_table("archive.orders")) == expected
    assert mover.verify("checksum").ok


def test_an_append_to_main_while_a_fast_forward_commits_makes_it_an_append(catalog, tables, monkeypatch):
    source, target = tables
    before = row_multiset(target)
    mover = _mover(catalog)
    mover.run()
    mover.audit()
    during_publish = _landing_once(catalog, orders(300_000, 3))
    real_commit_refs = publishing.commit_refs

    def append_then_commit(table, **kwargs):
        during_publish()
        return real_commit_refs(table, **kwargs)

    monkeypatch.setattr(publishing, "commit_refs", append_then_commit)
    published = mover.publish()

    expected = before + row_multiset(source) + row_multiset_of(orders(300_000, 3))
    assert during_publish.landed and published.how == "append"
    assert row_multiset(catalog.load_table("archive.orders")) == expected


def row_multiset_of(rows) -> Counter:
    """The rows of an Arrow table, counted as ``row_multiset`` counts a table's."""
    return Counter(zip(*(rows.column(name).to_pylist() for name in rows.column_names), strict=True))


def test_a_publish_that_stopped_before_removing_the_branch_commits_nothing_again(catalog, tables, monkeypatch):
    _, target = tables
    mover = _mover(catalog)
    mover.run()
    mover.audit()
    target = catalog.load_table("archive.orders")  # a fresh handle: the move's commits advanced the table
    target.append(orders(200_000, 5))
    monkeypatch.setattr(publishing, "_drop", lambda *args: None)  # the process died right after the commit
    first = mover.publish()
    monkeypatch.undo()
    rows = row_multiset(catalog.load_table("archive.orders"))
    assert first.how == "append" and "backfill" in catalog.load_table("archive.orders").metadata.refs

    again = mover.publish()

    target = catalog.load_table("archive.orders")
    assert again.how == "already_published" and row_multiset(target) == rows
    assert target.metadata.current_snapshot_id == first.main_after and "backfill" not in target.metadata.refs


def test_a_discard_after_a_publish_that_left_its_branch_refuses_saying_main_holds_the_rows(
    catalog, tables, monkeypatch
):
    mover = _mover(catalog)
    mover.run()
    mover.audit()
    catalog.load_table("archive.orders").append(orders(200_000, 5))
    monkeypatch.setattr(publishing, "_drop", lambda *args: None)  # the publish died right after its commit
    assert mover.publish().how == "append"
    monkeypatch.undo()
    location = catalog.load_table("archive.orders").metadata_location

    with pytest.raises(MoveStateError, match=r"published to main of archive\.orders already") as refused:
        mover.discard()

    assert refused.value.reason == "published" and "Publish again to remove the branch" in str(refused.value)
    assert catalog.load_table("archive.orders").metadata_location == location  # nothing changed
    assert mover.publish().how == "already_published"
    assert "backfill" not in catalog.load_table("archive.orders").metadata.refs


def test_the_audit_reads_what_other_commits_on_the_branch_added_as_a_fast_forward_publishes_them(catalog, tables):
    mover = _mover(catalog)
    mover.run()
    assert mover.audit(no_rows_where="id < 100").checks[0].failed_rows == 100
    catalog.load_table("archive.orders").delete("id < 100", branch="backfill")  # the data fixed on the branch
    catalog.load_table("archive.orders").append(orders(900_000, 3), branch="backfill")  # another writer's rows
    on_branch = catalog.load_table("archive.orders").scan().use_ref("backfill").to_arrow().num_rows

    report = mover.audit(no_rows_where="id < 100", unique=["id"])

    assert report.ok and report.rows == on_branch - 10 == 1403  # every row the publish brings, none of main's
    with pytest.raises(PublishRefusedError) as refused:  # what a delete removed shows only to a branch audit
        mover.publish()
    assert refused.value.reason == "audit_scope"
    assert mover.audit(no_rows_where="id < 100", unique=["id"], scope="branch").ok
    assert mover.publish().how == "fast_forward"


def test_an_audit_failing_after_another_passed_meanwhile_withdraws_that_pass(catalog, tables):
    mover = _mover(catalog)
    mover.run()
    other = _mover(catalog)  # another process auditing the same branch

    def fails_after_another_audit_passed(batch):
        if not passed:
            passed.append(other.audit().ok)
        return batch.num_rows

    passed: list[bool] = []
    report = mover.audit(checks={"nothing allowed": fails_after_another_audit_passed})

    assert passed == [True] and not report.ok
    with pytest.raises(PublishRefusedError) as refused:  # the latest audit failed
        mover.publish()
    assert refused.value.reason == "not_audited"


@pytest.fixture
def by_day(catalog):
    """A source of 4 files, and a target partitioned by day holding orders of every day."""
    source = source_table(catalog, files=4)
    catalog.create_namespace("archive")
    spec = PartitionSpec(PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="day"))
    target = catalog.create_table("archive.orders", schema=ORDERS_SCHEMA, partition_spec=spec)
    target.append(orders(100_000, 40))
    return source, target


def test_publish_refuses_a_delete_on_main_in_the_moves_partitions_and_keeps_the_branch(catalog, by_day):
    _, target = by_day
    mover = _mover(catalog, where="day <= '2026-11-02'")
    mover.run()
    mover.audit()
    target = catalog.load_table("archive.orders")
    target.delete("day = '2026-11-02'")
    deleting = target.metadata.current_snapshot_id
    before = row_multiset(target)

    with pytest.raises(PublishRefusedError) as refused:
        mover.publish()

    error = refused.value
    assert error.reason == "main_changed" and error.branch == "backfill" and error.table == "archive.orders"
    assert len(error.snapshots) == 1 and error.snapshots[0].startswith(f"{deleting} (delete, touching partitions")
    assert str(deleting) in str(error)
    target.refresh()
    assert row_multiset(target) == before and "backfill" in target.metadata.refs


def test_publish_appends_after_a_delete_on_main_in_other_partitions(catalog, by_day):
    source, target = by_day
    mover = _mover(catalog, where="day <= '2026-11-02'")
    mover.run()
    mover.audit()
    target = catalog.load_table("archive.orders")
    target.delete("day = '2026-11-04'")
    before = row_multiset(target)

    assert mover.publish().how == "append"

    moved = {row: n for row, n in row_multiset(source).items() if str(row[4]) <= "2026-11-02"}
    assert row_multiset(catalog.load_table("archive.orders")) == before + Counter(moved)


def test_publish_refuses_a_schema_change_since_the_audit(catalog, tables):
    _, target = tables
    mover = _mover(catalog)
    mover.run()
    mover.audit()
    target = catalog.load_table("archive.orders")  # a fresh handle: the move's commits advanced the table
    target.append(orders(200_000, 5))
    with target.update_schema() as update:
        update.add_column("note", StringType())

    with pytest.raises(PublishRefusedError, match="schema") as refused:
        mover.publish()
    assert refused.value.reason == "schema_changed"


def test_publish_needs_a_passing_audit_of_the_branch_head(catalog, tables):
    _, target = tables
    main = target.metadata.current_snapshot_id
    mover = _mover(catalog)
    with pytest.raises(PublishRefusedError, match="does not exist") as refused:
        mover.publish()
    assert refused.value.reason == "no_branch"
    mover.run()

    with pytest.raises(PublishRefusedError, match="no audit passed") as refused:
        mover.publish()
    assert refused.value.reason == "not_audited"
    assert mover.audit(not_null=["id"]).ok
    failed = mover.audit(not_null=["customer"], no_rows_where="amount >= 4")
    assert not failed.ok and [c.name for c in failed.failed] == ["not_null(customer)", "no_rows_where(amount >= 4)"]
    with pytest.raises(PublishRefusedError) as refused:  # the failed audit withdrew the passing one
        mover.publish()
    assert refused.value.reason == "not_audited"

    assert mover.audit().ok
    catalog.load_table("archive.orders").append(orders(500_000, 2), branch="backfill")  # after the audit
    with pytest.raises(PublishRefusedError, match="audit it again") as refused:
        mover.publish()
    assert refused.value.reason == "audit_stale" and len(refused.value.snapshots) == 1
    target.refresh()
    assert target.metadata.current_snapshot_id == main and "backfill" in target.metadata.refs


def test_a_fast_forward_never_carries_a_delete_of_another_writer_that_the_audit_did_not_read(catalog, tables):
    _, target = tables
    main = target.metadata.current_snapshot_id
    mover = _mover(catalog)
    mover.run()
    catalog.load_table("archive.orders").append(orders(500_000, 2), branch="backfill")  # read by a move audit
    catalog.load_table("archive.orders").delete("id = 100000", branch="backfill")  # one of main's rows
    report = mover.audit(unique=["id"])
    # Scope move: what the branch gained (the move's 1,500 rows, the 2 appended, main's 9 other rows in the file
    # the delete rewrote), not what it lost.
    assert report.ok and report.rows == 1511

    with pytest.raises(PublishRefusedError, match="would carry their rows unaudited") as refused:
        mover.publish()
    assert refused.value.reason == "audit_scope" and len(refused.value.snapshots) == 1
    assert "scope='branch'" in str(refused.value)
    target.refresh()
    assert target.metadata.current_snapshot_id == main and "backfill" in target.metadata.refs

    assert mover.audit(unique=["id"], scope="branch").ok  # every row of the branch read: it may be fast-forwarded
    published = mover.publish()
    assert published.how == "fast_forward"
    ids = set(catalog.load_table("archive.orders").scan().to_arrow().column("id").to_pylist())
    assert 500_000 in ids and 100_000 not in ids


def test_a_move_run_again_after_main_was_restored_past_its_fast_forward_is_refused_before_cutting_a_branch(
    catalog, tables
):
    _, target = tables
    create_tag(target, "before")
    mover = _mover(catalog)
    mover.run()
    assert mover.audit().ok
    assert mover.publish().how == "fast_forward"
    target = catalog.load_table("archive.orders")
    restore_to_tag(target, preview_restore(target, "before"))  # the published rows are undone on main
    refs = set(catalog.load_table("archive.orders").metadata.refs)

    with pytest.raises(MoveStateError, match="no longer in the history of main"):
        _mover(catalog).run()
    assert set(catalog.load_table("archive.orders").metadata.refs) == refs  # no branch was cut for it


def test_the_audit_reports_each_check_with_samples_and_reads_the_new_rows_or_the_whole_branch(catalog, tables):
    source, _ = tables
    mover = _mover(catalog)
    mover.run()

    def negative(batch) -> int:
        return sum(1 for value in batch.column("amount").to_pylist() if value is not None and value < 0)

    report = mover.audit(
        not_null=["customer", "id"],
        unique=["id", ["customer", "day"]],
        no_rows_where="id >= 1490",
        min_rows=1600,
        max_rows=2000,
        checks={"no negative amount": negative},
        sample_size=2,
    )

    checks = {check.name: check for check in report.checks}
    customers = sum(1 for row in row_multiset(source, ["customer"]) if row[0] is None)
    assert not report.ok and report.rows == 1500 and report.scope == "move"
    nulls = sum(n for row, n in row_multiset(source, ["customer"]).items() if row[0] is None)
    assert customers and checks["not_null(customer)"].failed_rows == nulls
    assert len(checks["not_null(customer)"].sample) == 2 and checks["not_null(customer)"].sample[0]["customer"] is None
    assert checks["not_null(id)"].ok and checks["unique(id)"].ok and checks["no negative amount"].ok
    pairs = row_multiset(source, ["customer", "day"])
    assert checks["unique(customer, day)"].failed_rows == sum(n - 1 for (c, _), n in pairs.items() if c is not None)
    assert checks["no_rows_where(id >= 1490)"].failed_rows == 10
    assert checks["min_rows(1600)"].failed_rows == 100 and checks["max_rows(2000)"].ok
    assert report.to_json()["checks"][0]["sample"][0]["amount"] == str(checks["not_null(customer)"].sample[0]["amount"])

    whole = mover.audit(min_rows=1510, max_rows=1510, scope="branch")
    assert whole.ok and whole.rows == 1510


def test_discard_drops_the_branch_and_leaves_main_and_a_new_run_starts_afresh(catalog, tables):
    source, target = tables
    before = row_multiset(target)
    mover = _mover(catalog)
    mover.run(units=[0])

    discarded = mover.discard()

    target.refresh()
    assert discarded.dropped and "backfill" not in target.metadata.refs
    assert not [key for key in target.properties if "backfill" in target.properties[key] or key.endswith("backfill")]
    assert row_multiset(target) == before
    assert mover.discard().dropped is False
    mover.run()
    mover.audit()
    mover.publish()
    assert row_multiset(catalog.load_table("archive.orders")) == before + row_multiset(source)


def test_a_branch_removed_while_a_unit_is_copied_fails_the_unit_instead_of_creating_a_parentless_branch(
    catalog, tables
):
    _, target = tables
    discarder = _mover(catalog)
    removed = []

    def discard_once(progress) -> None:
        if not removed and progress.units_done >= 1:
            removed.append(discarder.discard())

    mover = _mover(catalog, on_progress=discard_once)
    with pytest.raises(MoveStateError, match="was removed"):
        mover.run()
    target.refresh()
    assert removed and "backfill" not in target.metadata.refs


def test_an_incremental_move_publishes_each_run_once(catalog, tables):
    source, target = tables
    before = row_multiset(target)
    mover = _mover(catalog, mode="incremental")
    mover.run()
    mover.audit()
    assert mover.publish().how == "fast_forward"
    source.append(orders(10_000, 20))

    mover.run()
    assert mover.audit().rows == 20
    assert mover.publish().how == "fast_forward"

    assert row_multiset(catalog.load_table("archive.orders")) == before + row_multiset(source)


def test_an_incremental_run_with_nothing_new_under_its_filter_cuts_no_branch(catalog, tables):
    source, target = tables
    mover = _mover(catalog, mode="incremental", where="id < 10000")
    mover.run()
    mover.audit()
    mover.publish()
    main = catalog.load_table("archive.orders").metadata.current_snapshot_id
    source.append(orders(20_000, 5))  # rows the filter leaves out

    result = mover.run()

    target = catalog.load_table("archive.orders")
    assert result.complete and result.units_total == 0 and result.target_snapshot_ids == ()
    assert "backfill" not in target.metadata.refs and target.metadata.current_snapshot_id == main
    with pytest.raises(MoveStateError) as published:  # as after any publish: nothing on a branch to audit
        mover.audit()
    assert published.value.reason == "published"
    assert mover.publish().how == "already_published"

    source.append(orders(5_000, 3))  # rows it selects: the next run moves them, from the published run on
    mover.run()
    assert mover.audit().rows == 3
    assert mover.publish().how == "fast_forward"
    ids = catalog.load_table("archive.orders").scan().to_arrow().column("id").to_pylist()
    assert sorted(i for i in ids if 5_000 <= i < 30_000) == [5_000, 5_001, 5_002]


@pytest.mark.parametrize(
    ("branch", "match"),
    [
        ("main", "cannot be main"),
        ("", "non-empty"),
        ("has space", "not a valid ref name"),
        ("a..b", "not a valid ref name"),
        ("/lead", "not a valid ref name"),
        ("iceberg-ops-move-x", "staging branches"),
        (3, "non-empty branch name"),
    ],
)
def test_bad_branch_names_are_refused_up_front(catalog, branch, match):
    source_table(catalog, files=1)
    with pytest.raises(InvalidMoveError, match=match):
        DataMover(catalog, "sales.orders", "archive.orders", create_target=True, branch=branch)


def test_a_good_branch_name_passes():
    assert check_branch_name("audit/2026-12-07_backfill") == "audit/2026-12-07_backfill"


def test_a_branch_with_overwrite_and_verbs_without_a_branch_are_refused(catalog, tables):
    with pytest.raises(InvalidMoveError, match="overwrite already stages"):
        DataMover(catalog, "sales.orders", "archive.orders", mode="overwrite", branch="backfill")
    plain = DataMover(catalog, "sales.orders", "archive.orders")
    for verb in (plain.audit, plain.publish, plain.discard):
        with pytest.raises(InvalidMoveError, match="branch of its own"):
            verb()


def test_a_tag_a_foreign_branch_or_another_moves_branch_is_not_taken(catalog, tables):
    _, target = tables
    head = target.metadata.current_snapshot_id
    target.manage_snapshots().create_tag(head, "release").create_branch(head, "mine").commit()
    with pytest.raises(MoveStateError, match="has a tag named 'release'"):
        DataMover(catalog, "sales.orders", "archive.orders", branch="release").run()
    with pytest.raises(MoveStateError, match="that no move cut"):
        DataMover(catalog, "sales.orders", "archive.orders", branch="mine").run()
    first = _mover(catalog, move_id="first")
    first.run(units=[0])
    second = _mover(catalog, move_id="second")
    for verb in (second.run, second.audit, second.publish, second.discard):
        with pytest.raises(MoveStateError, match="belongs to move 'first'"):
            verb()
    target.refresh()
    assert target.metadata.refs["mine"].snapshot_id == head


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"not_null": ["custmer"]}, "Did you mean 'customer'"),
        ({"not_null": "id"}, "list of column names"),
        ({"unique": [[]]}, "lists of column names"),
        ({"no_rows_where": "id <<< 3"}, "does not parse"),
        ({"no_rows_where": "nope = 1"}, "does not fit"),
        ({"no_rows_where": "customer > 3"}, "compared with a column of another type"),
        ({"no_rows_where": " "}, "is empty"),
        ({"min_rows": 5, "max_rows": 2}, "no row count can pass"),
        ({"min_rows": -1}, "number of rows"),
        ({"checks": [3]}, "not a function"),
        ({"checks": [lambda batch: "many"]}, "not a number of offending rows"),
        ({"checks": {"ratio": lambda batch: 1 // 0}}, "The check 'ratio' raised ZeroDivisionError"),
        ({"scope": "all"}, "scope"),
    ],
)
def test_bad_audit_arguments_are_refused(catalog, tables, kwargs, match):
    mover = _mover(catalog)
    mover.run()
    target = catalog.load_table(mover.target)
    location = target.metadata_location
    with pytest.raises(InvalidMoveError, match=match):
        mover.audit(**kwargs)
    target.refresh()
    assert target.metadata_location == location  # nothing committed


def test_an_unfinished_or_published_move_is_not_audited(catalog, tables):
    mover = _mover(catalog)
    with pytest.raises(MoveStateError, match="has not started") as not_started:
        mover.audit()
    assert not_started.value.reason == ""
    mover.run(units=[0])
    with pytest.raises(MoveStateError, match="1 of 3 units"):
        mover.audit()
    with pytest.raises(PublishRefusedError, match="1 of 3"):
        mover.publish()
    mover.run()
    mover.audit()
    mover.publish()
    with pytest.raises(MoveStateError, match="published to main already") as published:
        mover.audit()
    assert published.value.reason == "published"  # the fact an audit task skips on


def test_a_branch_whose_history_was_expired_is_audited_whole_and_not_appended_to_main(catalog, tables):
    _, target = tables
    mover = _mover(catalog)
    mover.run()
    target = catalog.load_table("archive.orders")
    first_unit = target.metadata.snapshot_by_name("backfill").parent_snapshot_id
    first_unit = target.metadata.snapshot_by_id(first_unit).parent_snapshot_id
    target.maintenance.expire_snapshots().by_id(first_unit).commit()  # an ancestor: PyIceberg expires it

    with pytest.raises(MoveStateError, match="no longer reaches back") as refused:
        mover.audit()
    assert "scope='branch'" in str(refused.value)
    assert mover.audit(scope="branch").ok
    catalog.load_table("archive.orders").append(orders(200_000, 5))
    with pytest.raises(MoveStateError, match="no longer reaches back"):
        mover.publish()
    assert "backfill" in catalog.load_table("archive.orders").metadata.refs


def test_snapshot_expiry_keeps_an_open_branch_and_mains_history_back_to_the_fork(catalog, tables):
    source, target = tables
    mover = _mover(catalog)
    mover.run()
    for first in (200_000, 300_000):  # main moves on: the publish will append and look back to the fork
        catalog.load_table("archive.orders").append(orders(first, 5))
    rows = row_multiset(catalog.load_table("archive.orders"))

    expired = expire_snapshots(catalog.load_table("archive.orders"), older_than="0s")

    target = catalog.load_table("archive.orders")
    fork = find_state(target.metadata, mover.move_id, "backfill")[0].fork_snapshot_id
    assert target.metadata.snapshot_by_id(fork) is not None and expired.deleted_data_files_count == 0
    assert mover.audit(unique=["id"]).ok  # scope "move": the branch still reaches back to the fork
    assert mover.publish().how == "append"
    assert row_multiset(catalog.load_table("archive.orders")) == rows + row_multiset(source)
    # Published, the branch no longer holds anything back.
    expire_snapshots(catalog.load_table("archive.orders"), older_than="0s")
    assert len(catalog.load_table("archive.orders").metadata.snapshots) == 1


def test_a_moves_progress_is_read_on_its_branch_until_it_is_published(catalog, tables):
    mover = _mover(catalog)
    mover.run(units=[0])

    (progress,) = moves_into(catalog.load_table("archive.orders"))
    assert (progress.branch, progress.units_committed, progress.units_planned, progress.error) == (
        "backfill",
        1,
        3,
        None,
    )
    mover.run()
    mover.audit()
    mover.publish()
    (progress,) = moves_into(catalog.load_table("archive.orders"))
    assert (progress.branch, progress.complete, progress.rows) == ("main", True, 1500)


def test_workers_of_one_move_cut_its_branch_once_and_commit_each_unit_once(catalog_backend):
    catalog = catalog_backend.build()
    source = source_table(catalog, files=4)
    catalog.create_namespace("archive")
    catalog.create_table("archive.orders", schema=ORDERS_SCHEMA).append(orders(100_000, 10))
    errors: list[BaseException] = []

    def work(handle) -> None:
        try:
            DataMover(handle, "sales.orders", "archive.orders", branch="backfill", commit_every_bytes=SMALL_UNITS).run()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(catalog_backend.build(),)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    mover = _mover(catalog)
    assert mover.audit(unique=["id"], min_rows=2000, max_rows=2000).ok
    assert mover.publish().how == "fast_forward"
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == row_multiset(source) + row_multiset_of(orders(100_000, 10))


def test_a_branch_cut_for_a_new_incremental_run_is_not_audited_or_published_before_its_units(catalog, tables):
    source, _ = tables
    mover = _mover(catalog, mode="incremental")
    mover.run()
    mover.audit()
    mover.publish()
    source.append(orders(10_000, 20))
    mover.run(units=[])  # cuts the branch, commits no unit (as a run killed right after the cut)

    assert "backfill" in catalog.load_table("archive.orders").metadata.refs
    with pytest.raises(MoveStateError, match="none of its units"):
        mover.audit()
    with pytest.raises(PublishRefusedError, match="none of its units") as refused:
        mover.publish()
    assert refused.value.reason == "incomplete"


def _fast_forward_main_outside_the_move(catalog, branch: str = "backfill") -> int:
    """What Spark's ``CALL system.fast_forward(table, 'main', branch)`` commits: main moved to the branch head,
    the branch and its record left in place. The head's id."""
    from iceberg_ops_provider.core.refs import commit_refs

    target = catalog.load_table("archive.orders")
    head = target.metadata.refs[branch].snapshot_id
    commit_refs(target, expected={"main": target.metadata.current_snapshot_id}, move={"main": head})
    return head


def test_after_another_engine_fast_forwarded_main_publish_finds_it_done(catalog, tables, caplog):
    source, target = tables
    before = row_multiset(target)
    mover = _mover(catalog)
    mover.run()
    audited = mover.audit().snapshot_id
    _fast_forward_main_outside_the_move(catalog)

    published = mover.publish()

    target = catalog.load_table("archive.orders")
    assert published.how == "already_published" and published.snapshot_id == audited
    assert "backfill" not in target.metadata.refs and RECORD_PREFIX + "backfill" not in target.properties
    assert target.metadata.current_snapshot_id == audited
    assert row_multiset(target) == before + row_multiset(source)
    assert "no passing audit read" not in caplog.text


def test_a_branch_head_another_engine_published_unaudited_is_reported_and_the_branch_removed(catalog, tables, caplog):
    mover = _mover(catalog)
    mover.run()
    mover.audit()
    catalog.load_table("archive.orders").append(orders(500_000, 4), branch="backfill")  # after the audit
    head = _fast_forward_main_outside_the_move(catalog)

    published = mover.publish()

    assert published.how == "already_published" and published.snapshot_id == head
    assert f"snapshot {head}, which no passing audit read" in caplog.text
    assert "backfill" not in catalog.load_table("archive.orders").metadata.refs


@pytest.mark.parametrize("main_moves", [False, True], ids=["main-still-there", "main-appended-to"])
def test_an_incremental_run_after_another_engine_fast_forwarded_main_publishes_only_its_new_rows(
    catalog, tables, main_moves
):
    """The next run commits to the branch main was fast-forwarded onto: its audit and publish take the rows
    since that snapshot, not since the fork (which main already holds), and main gets each row once."""
    source, target = tables
    before = row_multiset(target)
    mover = _mover(catalog, mode="incremental")
    mover.run()
    mover.audit()
    forwarded = _fast_forward_main_outside_the_move(catalog)
    source.append(orders(10_000, 20))
    expected = before + row_multiset(source)
    if main_moves:
        catalog.load_table("archive.orders").append(orders(300_000, 3))
        expected += row_multiset_of(orders(300_000, 3))
    assert mover.run().units_committed == 1

    report = mover.audit(unique=["id"], max_rows=20)
    published = mover.publish()

    assert report.ok and report.rows == 20, report.to_json()
    assert published.how == ("append" if main_moves else "fast_forward"), published
    assert published.files == (1 if main_moves else 0) and published.snapshot_id == report.snapshot_id
    assert published.main_before != forwarded if main_moves else published.main_before == forwarded
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == expected
    assert "backfill" not in target.metadata.refs
    assert mover.publish().how == "already_published"
    assert row_multiset(catalog.load_table("archive.orders")) == expected


@pytest.mark.parametrize("meanwhile", ["discard", "failing_audit"])
def test_a_discard_or_failing_audit_while_an_append_publish_reads_the_branch_publishes_nothing(
    catalog, tables, monkeypatch, meanwhile
):
    _, target = tables
    mover = _mover(catalog)
    mover.run()
    assert mover.audit().ok
    catalog.load_table("archive.orders").append(orders(200_000, 5))  # main moved: the publish appends
    rows = row_multiset(catalog.load_table("archive.orders"))
    other = _mover(catalog)  # another process acting on the same move
    acted = []
    if meanwhile == "discard":  # just before the publish's commit: its requirement on the branch refuses it
        real_conflicts = publishing._conflicts

        def conflicts_then_discard(*args):
            real_conflicts(*args)
            if not acted:
                acted.append(other.discard())

        monkeypatch.setattr(publishing, "_conflicts", conflicts_then_discard)
    else:  # while the publish reads the move's manifests: its check before committing refuses it
        real_added = publishing.added_since_fork

        def read_then_fail(*args):
            found = real_added(*args)
            acted.append(other.audit(max_rows=1))
            return found

        monkeypatch.setattr(publishing, "added_since_fork", read_then_fail)
    with pytest.raises(PublishRefusedError) as refused:
        mover.publish()

    assert refused.value.reason == ("no_branch" if meanwhile == "discard" else "not_audited")
    assert acted and (acted[0].dropped if meanwhile == "discard" else not acted[0].ok)
    target = catalog.load_table("archive.orders")
    assert row_multiset(target) == rows  # main untouched
    assert PUBLISHED_KEY not in (target.metadata.current_snapshot().summary or {}).additional_properties
