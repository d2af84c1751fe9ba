"""Maintenance respects every ref: expiry within each ref's retention, orphans, compaction of main, health."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyiceberg.table.refs import SnapshotRef

from iceberg_ops_provider.core.refs import commit_refs
from iceberg_ops_provider.maintenance import expire_snapshots
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.health import table_health_report
from iceberg_ops_provider.maintenance.orphans import normalize_location, remove_orphan_files
from tests.support.tables import batch, counted, rows, small_files_table

OLD = time.time() - 10 * 24 * 3600


def _chain(catalog, appends: int = 5):
    """``sales.events`` after ``appends`` appends of one small file each: a chain of as many snapshots."""
    return small_files_table(catalog, "sales.events", appends=appends, rows=10)


def _set_retention(table, name: str, **retention) -> None:
    """Give ref ``name`` retention fields (PyIceberg's branch writes drop them; set them after the writes)."""
    ref = table.refs()[name]
    updated = SnapshotRef(snapshot_id=ref.snapshot_id, snapshot_ref_type=ref.snapshot_ref_type, **retention)
    commit_refs(table, expected={name: ref.snapshot_id}, set_refs={name: updated})


def test_expiry_keeps_what_each_branch_retains_by_its_own_min_snapshots_and_max_snapshot_age(catalog):
    table = _chain(catalog)
    chain = [s.snapshot_id for s in table.snapshots()]  # s0..s4, oldest first
    head = chain[-1]
    table.manage_snapshots().create_branch(head, "by-count").commit()
    table.manage_snapshots().create_branch(head, "by-age").commit()
    _set_retention(table, "by-count", min_snapshots_to_keep=3)
    _set_retention(table, "by-age", max_snapshot_age_ms=3600 * 1000)
    table.overwrite(batch(100, 5))  # main moves on; its own retention keeps only its head
    reads = {name: rows(table, table.refs()[name].snapshot_id) for name in ("by-count", "by-age")}
    history = {snapshot_id: rows(table, snapshot_id) for snapshot_id in chain}

    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)

    kept = {s.snapshot_id for s in table.snapshots()}
    # by-age keeps its whole chain (younger than an hour); by-count alone would keep s2..s4.
    assert set(chain) <= kept and not set(result.expired_snapshot_ids) & set(chain)
    table.manage_snapshots().remove_branch("by-age").commit()
    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)
    kept = {s.snapshot_id for s in table.snapshots()}
    assert set(result.expired_snapshot_ids) == set(chain[:2]) and set(chain[2:]) <= kept  # s2..s4: three
    for snapshot_id in chain[2:]:
        assert rows(table, snapshot_id) == history[snapshot_id]  # their files are still there
    assert rows(table, table.refs()["by-count"].snapshot_id) == reads["by-count"]


def test_expiry_removes_refs_past_their_age_and_keeps_those_within_it(catalog):
    table = _chain(catalog, appends=3)
    first, second = table.snapshots()[0].snapshot_id, table.snapshots()[1].snapshot_id
    table.manage_snapshots().create_branch(first, "stale-branch", max_ref_age_ms=1).commit()
    table.manage_snapshots().create_tag(second, "kept-tag", max_ref_age_ms=3600 * 1000).commit()
    table.manage_snapshots().create_tag(first, "stale-tag", max_ref_age_ms=1).commit()
    table.overwrite(batch(100, 5))
    time.sleep(0.01)

    result = expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)

    assert sorted(result.removed_refs) == ["stale-branch", "stale-tag"]
    assert sorted(table.refs()) == ["kept-tag", "main"]
    assert first in result.expired_snapshot_ids and table.snapshot_by_id(second) is not None
    assert rows(table, second) == rows(table, table.refs()["kept-tag"].snapshot_id)


def _age_everything(root: Path) -> None:
    for directory, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(directory, name), (OLD, OLD))


def _data_files(table, snapshot_id: int) -> set[str]:
    return {normalize_location(task.file.file_path) for task in table.scan(snapshot_id=snapshot_id).plan_files()}


def test_orphan_removal_keeps_a_file_only_a_tag_or_only_a_branch_reaches(catalog, tmp_path: Path):
    table = _chain(catalog, appends=2)
    tagged = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_tag(tagged, "before-load").commit()
    table.overwrite(batch(100, 5))  # main no longer lists the tagged files
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "dev").commit()
    table.append(batch(200, 3), branch="dev")  # a file only dev lists
    expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1, delete_files=False)
    table.refresh()
    only_tag = _data_files(table, tagged) - _data_files(table, table.current_snapshot().snapshot_id)
    dev_head = table.refs()["dev"].snapshot_id
    only_branch = _data_files(table, dev_head) - _data_files(table, table.current_snapshot().snapshot_id)
    assert len(only_tag) == 2 and len(only_branch) == 1
    root = tmp_path / "warehouse" / "sales" / "events"
    planted = root / "data" / "left-by-a-crashed-writer.parquet"
    planted.write_bytes(b"orphan")
    _age_everything(root)
    reads = {"tag": rows(table, tagged), "dev": rows(table, dev_head)}

    result = remove_orphan_files(table)

    removed = {normalize_location(p) for p in result.orphan_file_locations}
    assert normalize_location(str(planted)) in removed and not planted.exists()
    assert not removed & (only_tag | only_branch)
    assert all(os.path.exists(path.removeprefix("file://")) for path in only_tag | only_branch)
    assert {"tag": rows(table, tagged), "dev": rows(table, dev_head)} == reads


def test_compaction_rewrites_main_only_and_a_branch_reads_its_rows_after_expiry_of_old_main(catalog):
    table = _chain(catalog, appends=6)
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "dev").commit()
    for number in range(3):
        table.append(batch(1000 + number * 10, 10), branch="dev")
    dev_head = table.refs()["dev"].snapshot_id
    dev_files, dev_rows = _data_files(table, dev_head), rows(table, dev_head)
    main_files, main_rows = _data_files(table, table.current_snapshot().snapshot_id), rows(table)

    result = compact_small_files_streaming(table, min_input_files=2)

    table.refresh()
    assert result.rewritten_data_files_count == 6  # main's six files, none of dev's three
    assert table.refs()["dev"].snapshot_id == dev_head and _data_files(table, dev_head) == dev_files
    new_main = _data_files(table, table.current_snapshot().snapshot_id)
    assert not new_main & main_files and rows(table) == main_rows
    expire_snapshots(table, older_than=datetime.now(UTC), retain_last=1)
    table.refresh()
    assert rows(table, table.refs()["dev"].snapshot_id) == dev_rows
    assert counted(table.scan().use_ref("dev").to_arrow()) == dev_rows
    assert all(os.path.exists(path.removeprefix("file://")) for path in dev_files)


def test_the_health_report_counts_refs_and_says_so(catalog):
    table = _chain(catalog, appends=2)
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "dev").commit()
    table.manage_snapshots().create_tag(table.snapshots()[0].snapshot_id, "before-load").commit()
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, "after-load").commit()

    report = table_health_report(table)

    assert (report.snapshots.branches, report.snapshots.tags) == (2, 2)
    assert report.to_json()["snapshots"]["branches"] == 2
    assert "refs: 2 branches, 2 tags" in report.summary()
    single = table_health_report(catalog.create_table("sales.empty", pa.schema([pa.field("id", pa.int64())])))
    assert "refs: 0 branches, 0 tags" in single.summary()
