"""The history table: layout, self-maintenance, time travel and the last line of defence."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import ConcurrentMigrationError
from iceberg_ops_provider.history import HISTORY_SCHEMA, HistoryRow, HistoryStore
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration


def _row(version: str, status: str = "applied", namespace: str = "sales") -> HistoryRow:
    return HistoryRow(version, namespace, f"migration {version}", datetime.now(UTC), status)  # type: ignore[arg-type]


def test_history_table_has_the_specified_columns_and_is_created_by_the_first_write(catalog):
    store = HistoryStore(catalog)
    assert store.rows("sales") == [] and store.table() is None
    assert catalog.list_namespaces() == []
    store.record("sales", [_row("0001")], {"0001": None})
    table = catalog.load_table("_iceberg_ops.migration_history")
    names = table.schema().column_names
    assert names[:6] == ["version", "namespace", "description", "applied_at", "status", "error"]
    assert set(names) == set(HISTORY_SCHEMA.names)
    assert [f.name for f in table.spec().fields] == ["namespace"]


def test_rows_read_back_column_by_column_equal_the_rows_written():
    from dataclasses import fields

    from iceberg_ops_provider.history.records import rows_to_arrow

    assert [f.name for f in fields(HistoryRow)] == HISTORY_SCHEMA.names  # from_arrow builds rows by position
    written = [replace(_row("0001"), error="boom", duration_ms=12, source_sha256="ab"), _row("0002", "failed")]
    naive = rows_to_arrow(written).set_column(
        3, "applied_at", pa.array([r.applied_at.replace(tzinfo=None) for r in written])
    )
    assert HistoryRow.from_arrow(rows_to_arrow(written)) == written
    assert HistoryRow.from_arrow(naive) == written


def test_history_maintains_itself_snapshots_bounded_files_few(catalog, migrations_dir):
    for number in range(1, 41):
        write_migration(
            migrations_dir, f"{number:04d}_step.py", f'ctx.catalog.create_namespace_if_not_exists("n{number}")'
        )
    runner = MigrationRunner(catalog, "sales", migrations_dir, keep_history_snapshots=6)
    runner.upgrade()
    table = catalog.load_table("_iceberg_ops.migration_history")
    assert len(table.snapshots()) <= 6 + 10  # the window plus the expiry batch slack
    assert len(table.inspect.files()) <= runner.history_store.compact_after_files  # appends, compacted
    assert len(table.metadata.metadata_log) <= 10
    assert len(runner.history()) == 40


def test_earlier_states_are_readable_by_time_travel(catalog, runner, three_migrations):
    runner.upgrade()
    between = datetime.now(UTC)
    runner.downgrade("base")
    then = runner.history_store.rows("sales", as_of=between)
    assert {row.version: row.status for row in then} == {"0001": "applied", "0002": "applied", "0003": "applied"}
    assert {row.status for row in runner.history()} == {"rolled_back"}


def test_history_written_by_someone_else_under_a_run_raises(catalog):
    store = HistoryStore(catalog)
    store.record("sales", [_row("0001")], {"0001": None})
    # A second writer that believes 0001 has no row (it read before the first one wrote) is refused.
    with pytest.raises(ConcurrentMigrationError, match=r"version 0001 is now applied.*expected no row"):
        store.record("sales", [_row("0001")], {"0001": None})
    assert [row.version for row in store.rows("sales")] == ["0001"]


def test_other_namespaces_rows_are_untouched_by_a_write(catalog):
    store = HistoryStore(catalog)
    store.record("sales", [_row("0001"), _row("0002")], {"0001": None, "0002": None})
    store.record("finance", [_row("0001", namespace="finance")], {"0001": None})
    store.record("sales", [_row("0002", "rolled_back")], {"0002": "applied"})
    assert [(r.version, r.status) for r in store.rows("sales")] == [("0001", "applied"), ("0002", "rolled_back")]
    assert [(r.version, r.status) for r in store.rows("finance")] == [("0001", "applied")]


def test_keep_snapshots_must_be_positive(catalog):
    with pytest.raises(ValueError, match="at least 1"):
        HistoryStore(catalog, keep_snapshots=0)


def test_a_write_starting_from_an_older_read_keeps_what_another_writer_added(catalog):
    mine, other = HistoryStore(catalog), HistoryStore(catalog)
    mine.record("sales", [_row("0001")], {"0001": None})
    other.record("sales", [_row("0002")], {"0002": None})  # after ``mine`` last read the namespace
    mine.record("sales", [_row("0001", "rolled_back")], {"0001": "applied"})
    assert [(r.version, r.status) for r in mine.rows("sales")] == [("0002", "applied"), ("0001", "rolled_back")]


def test_a_write_starting_from_an_older_read_still_catches_a_change_of_its_versions(catalog):
    mine, other = HistoryStore(catalog), HistoryStore(catalog)
    mine.record("sales", [_row("0001")], {"0001": None})
    other.record("sales", [_row("0001", "rolled_back")], {"0001": "applied"})
    with pytest.raises(ConcurrentMigrationError, match=r"version 0001 is now rolled_back.*expected applied"):
        mine.record("sales", [_row("0001", "failed")], {"0001": "applied"})
    assert [(r.version, r.status) for r in other.rows("sales")] == [("0001", "rolled_back")]


def test_a_run_reads_the_history_once_and_survives_a_write_by_another_namespace_under_it(
    catalog, migrations_dir, monkeypatch
):
    catalog.create_namespace("sales")
    catalog.create_table("sales.events", pa.schema([pa.field("id", pa.int64())]))
    for number in (1, 2, 3, 4):
        write_migration(migrations_dir, f"{number:04d}_step.py", f'ctx.set_properties("events", step="{number}")')
    runner = MigrationRunner(catalog, "sales", migrations_dir)
    runner.upgrade("+1")
    reads, others = [], []
    real_read, real_stage = HistoryStore._read_files, HistoryStore.stage

    def counted_read(table, namespace):
        reads.append(namespace)
        return real_read(table, namespace)

    def stage_after_another_writer(self, namespace, updates, expected):
        if not others:  # another namespace's run records a step just before this run's first one
            others.append(HistoryStore(catalog).record("finance", [_row("0001", namespace="finance")], {"0001": None}))
        return real_stage(self, namespace, updates, expected)

    monkeypatch.setattr(HistoryStore, "_read_files", staticmethod(counted_read))
    monkeypatch.setattr(HistoryStore, "stage", stage_after_another_writer)
    [result] = runner.upgrade("+1")
    # The run starts from the rows its runner's last write left (the table has not moved since: no
    # scan); its commit, staged on the table as read, is refused and staged again.
    assert reads == ["finance", "sales"] and result.atomic
    reads.clear()
    fresh = MigrationRunner(catalog, "sales", migrations_dir)
    assert [result.atomic for result in fresh.upgrade()] == [True, True]
    assert reads == ["sales"]  # two steps, one read
    assert [(r.version, r.status) for r in runner.history()] == [(f"{n:04d}", "applied") for n in range(1, 5)]
    assert [r.version for r in HistoryStore(catalog).rows("finance")] == ["0001"]


def test_a_history_table_of_an_earlier_release_reads_and_gains_the_new_column_on_the_next_write(catalog):
    from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
    from iceberg_ops_provider.history.store import create_meta_table

    earlier = pa.schema([field for field in HISTORY_SCHEMA if field.name != "source_sha256"])
    table = create_meta_table(catalog, ("_iceberg_ops", "migration_history"), arrow_to_iceberg_schema(earlier))
    old = {**_row("0001").to_dict(), "checksum": "ast1:" + "0" * 64}
    del old["source_sha256"]
    table.append(pa.Table.from_pylist([old], schema=earlier))
    store = HistoryStore(catalog)
    [row] = store.rows("sales")
    assert (row.version, row.checksum, row.source_sha256) == ("0001", old["checksum"], None)
    store.record("sales", [replace(_row("0002"), source_sha256="f" * 64)], {"0002": None})
    assert "source_sha256" in catalog.load_table("_iceberg_ops.migration_history").schema().column_names
    assert [(r.version, r.source_sha256) for r in HistoryStore(catalog).rows("sales")] == [
        ("0001", None),
        ("0002", "f" * 64),
    ]


def test_staged_writes_of_new_versions_append_until_the_namespace_holds_enough_files_then_compact(catalog):
    from iceberg_ops_provider.core.atomic.commit import commit_atomically

    store = HistoryStore(catalog)
    store.compact_after_files = 3
    store.record("finance", [_row("0001", namespace="finance")], {"0001": None})
    files = []
    for number in range(1, 8):
        version = f"{number:04d}"
        staged = store.stage("sales", [_row(version)], {version: None})
        staged.committed(commit_atomically(catalog, [staged.change]))
        table = catalog.load_table("_iceberg_ops.migration_history")
        partitions = table.inspect.files().column("partition").to_pylist()
        files.append(sum(partition["namespace"] == "sales" for partition in partitions))
    assert files == [1, 2, 3, 1, 2, 3, 1]  # each append adds a file; the write after the third rewrites them
    assert [r.version for r in HistoryStore(catalog).rows("sales")] == [f"{n:04d}" for n in range(1, 8)]
    assert [r.version for r in HistoryStore(catalog).rows("finance")] == ["0001"]


def test_a_staged_append_on_a_stale_read_is_refused_and_the_next_stage_sees_the_other_writer(catalog):
    from pyiceberg.exceptions import CommitFailedException

    from iceberg_ops_provider.core.atomic.commit import commit_atomically

    mine, other = HistoryStore(catalog), HistoryStore(catalog)
    mine.record("sales", [_row("0001")], {"0001": None})
    other.record("sales", [_row("0002")], {"0002": None})  # after ``mine`` last read the namespace
    staged = mine.stage("sales", [_row("0002")], {"0002": None})  # starts from its own, stale rows
    with pytest.raises(CommitFailedException):
        commit_atomically(catalog, [staged.change])
    staged.discard()
    with pytest.raises(ConcurrentMigrationError, match=r"version 0002 is now applied.*expected no row"):
        mine.stage("sales", [_row("0002")], {"0002": None})
    assert [r.version for r in HistoryStore(catalog).rows("sales")] == ["0001", "0002"]


def test_the_expiry_of_a_meta_table_deletes_what_a_killed_writer_left_once_it_is_old(catalog, tmp_path):
    import os
    import time

    from iceberg_ops_provider.history.store import ORPHAN_AGE, trim_table

    store = HistoryStore(catalog)
    store.record("sales", [_row("0001")], {"0001": None})
    folder = tmp_path / "warehouse" / "_iceberg_ops" / "migration_history" / "data" / "namespace=sales"
    old, new = folder / "00000-0-killed.parquet", folder / "00000-0-in-flight.parquet"
    for path in (old, new):
        path.write_bytes(b"PAR1")
    stamp = time.time() - ORPHAN_AGE.total_seconds() - 60
    os.utime(old, (stamp, stamp))
    trim_table(catalog.load_table("_iceberg_ops.migration_history"), 10)
    assert not old.exists() and new.exists()  # a write in flight keeps its file
    assert [r.version for r in HistoryStore(catalog).rows("sales")] == ["0001"]


def test_a_write_whose_cached_snapshot_another_writer_expired_reads_afresh_and_lands(catalog):
    # ``mine`` last read the namespace in a snapshot whose files ``other``'s expiry then deleted:
    # staging from it fails to read them, and the write must start again from the table as it is.
    mine, other = HistoryStore(catalog, keep_snapshots=1), HistoryStore(catalog, keep_snapshots=1)
    mine.record("sales", [_row("0001")], {"0001": None})
    stale = mine._last.table.current_snapshot()
    for n in range(2, 16):  # other writes until its expiry removed the snapshot ``mine`` starts from
        other.record("finance", [_row(f"{n:04d}", namespace="finance")], {f"{n:04d}": None})
    assert all(s.snapshot_id != stale.snapshot_id for s in catalog.load_table(mine.identifier).snapshots())
    with pytest.raises(FileNotFoundError):
        mine.stage("sales", [_row("0002")], {"0002": None})
    staged = mine.stage("sales", [_row("0002")], {"0002": None})  # read afresh after the lost race
    staged.discard()
    mine.record("sales", [_row("0003")], {"0003": None})
    assert [r.version for r in HistoryStore(catalog).rows("sales")] == ["0001", "0003"]
