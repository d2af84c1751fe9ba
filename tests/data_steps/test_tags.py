"""Tags of a table and main set back to one: validation, the restore preview, the guarded restore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyiceberg.expressions import LessThan

from iceberg_ops_provider.data_steps.restore import restore_to, tag_restore_point
from iceberg_ops_provider.data_steps.state import STEP_KEY
from iceberg_ops_provider.data_steps.tags import (
    create_tag,
    drop_tag,
    list_refs,
    preview_restore,
    restore_to_tag,
)
from iceberg_ops_provider.errors import RefError, RefMovedError

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64())})


def _ids(table, **scan) -> list[int]:
    return sorted(table.scan(**scan).to_arrow().column("id").to_pylist())


@pytest.fixture
def table(catalog):
    catalog.create_namespace("sales")
    created = catalog.create_table("sales.events", SCHEMA)
    created.append(_rows(0, 5))
    created.append(_rows(5, 5))
    return created


def test_a_tag_is_created_listed_and_dropped_and_an_existing_name_is_refused(table):
    first, head = table.snapshots()[0].snapshot_id, table.current_snapshot().snapshot_id

    created = create_tag(table, "before-load", max_age="7d")
    assert created.created and created.tag.snapshot_id == head and created.tag.max_age_ms == 7 * 86400 * 1000
    assert create_tag(table, "first", snapshot_id=first).tag.max_age_ms is None

    with pytest.raises(RefError) as exists:
        create_tag(table, "first", snapshot_id=head)  # PyIceberg's create_tag would move it
    assert exists.value.reason == "exists" and exists.value.snapshot_id == first and str(first) in str(exists.value)
    assert table.refs()["first"].snapshot_id == first
    with pytest.raises(RefError, match="already has a branch 'main'"):
        create_tag(table, "main")

    listed = {ref.name: ref for ref in list_refs(table)}
    assert [ref.name for ref in list_refs(table)] == ["main", "before-load", "first"]
    assert listed["main"].kind == "branch" and listed["main"].expires_at is None
    assert listed["before-load"].kind == "tag" and not listed["before-load"].expires_soon
    assert listed["before-load"].expires_at == listed["before-load"].committed_at + timedelta(days=7)
    assert (
        listed["first"].to_json()["committed_at"]
        == datetime.fromtimestamp(table.snapshots()[0].timestamp_ms / 1000, UTC).isoformat()
    )

    assert drop_tag(table, "first").snapshot_id == first
    assert "first" not in catalog_refs(table)
    with pytest.raises(RefError) as missing:
        drop_tag(table, "first")
    assert missing.value.reason == "missing" and missing.value.tags == ["before-load"]
    assert "its tags: before-load" in str(missing.value)
    with pytest.raises(RefError, match="is a branch, not a tag"):
        drop_tag(table, "main")


def catalog_refs(table) -> dict:
    table.refresh()
    return table.refs()


def test_bad_input_is_refused_before_anything_commits(table):
    location = table.metadata_location
    head = table.current_snapshot().snapshot_id
    with pytest.raises(RefError) as unknown:
        create_tag(table, "t", snapshot_id=123)
    assert unknown.value.reason == "unknown_snapshot" and unknown.value.current_snapshot_id == head
    assert f"its current snapshot is {head}" in str(unknown.value) and "snapshot_id" in str(unknown.value)
    with pytest.raises(RefError, match="is not a tag name"):
        create_tag(table, " ")
    for bad in ("soon", "0", "-5m", 0):
        with pytest.raises(ValueError, match="is not an age"):
            create_tag(table, "t", max_age=bad)
    # Longer than a long: the metadata would hold a max-ref-age-ms no reader takes.
    for bad in ("99999999999999999999", "99999999999999999999d", 2**63):
        with pytest.raises(ValueError, match="longer than a table's metadata can hold"):
            create_tag(table, "t", max_age=bad)
    assert table.metadata_location == location
    assert "t" not in table.refs()


def test_a_tag_kept_longer_than_a_date_can_say_is_listed_as_never_expiring(table):
    with table.transaction() as transaction:  # Java's default, written out: Long.MAX_VALUE
        transaction.set_properties({"history.expire.max-ref-age-ms": str(2**63 - 1)})
    created = create_tag(table, "by-default")
    longest = create_tag(table, "own", max_age=2**63 - 1)
    assert created.tag.expires_at is None and longest.tag.expires_at is None
    listed = {ref.name: ref for ref in list_refs(table)}
    assert listed["by-default"].expires_at is None and not listed["by-default"].expires_soon
    assert listed["own"].max_age_ms == 2**63 - 1


def test_an_empty_table_has_nothing_to_tag(catalog):
    catalog.create_namespace("sales")
    empty = catalog.create_table("sales.empty", SCHEMA)
    with pytest.raises(RefError) as nothing:
        create_tag(empty, "t")
    assert nothing.value.reason == "no_snapshot"


def test_a_tag_past_its_age_limit_is_one_expiry_drops_soon(table):
    with table.transaction() as transaction:
        transaction.set_properties({"history.expire.max-ref-age-ms": str(3600 * 1000)})
    create_tag(table, "by-default")
    create_tag(table, "own", max_age="30d")
    listed = {ref.name: ref for ref in list_refs(table)}
    assert listed["by-default"].expires_soon and listed["by-default"].max_age_ms is None
    assert not listed["own"].expires_soon


def test_exist_ok_and_replace_are_what_a_retried_task_needs(table):
    first, head = table.snapshots()[0].snapshot_id, table.current_snapshot().snapshot_id
    create_tag(table, "t", snapshot_id=first)
    location = table.metadata_location

    again = create_tag(table, "t", snapshot_id=first, exist_ok=True)
    assert not again.created and table.metadata_location == location  # nothing committed
    with pytest.raises(RefError, match=f"on snapshot {first}"):
        create_tag(table, "t", exist_ok=True)  # main's head is another snapshot
    moved = create_tag(table, "t", exist_ok=True, replace=True)
    assert moved.created and moved.replaced == first and table.refs()["t"].snapshot_id == head


def test_a_tag_created_by_another_writer_meanwhile_is_not_overwritten(table, lake):
    stale = lake.catalog().load_table("sales.events")
    create_tag(table, "t", snapshot_id=table.snapshots()[0].snapshot_id)
    with pytest.raises(RefMovedError) as moved:
        create_tag(stale, "t")
    assert moved.value.ref == "t" and moved.value.expected is None
    assert catalog_refs(table)["t"].snapshot_id == table.snapshots()[0].snapshot_id


def test_a_restore_previews_the_commits_it_undoes_then_moves_main_only(table):
    tagged = table.current_snapshot().snapshot_id
    create_tag(table, "before-load")
    table.append(_rows(100, 3), snapshot_properties={STEP_KEY: "0004.backfill"})
    table.delete(LessThan("id", 5))  # a whole file: a delete
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "dev").commit()
    dev_head = table.refs()["dev"].snapshot_id
    snapshots_before = {s.snapshot_id for s in table.snapshots()}

    preview = preview_restore(table, "before-load")

    assert preview.descends and preview.changes and preview.tag_snapshot_id == tagged
    assert [c.operation for c in preview.undone] == ["delete", "append"]  # newest first
    append = preview.undone[1]
    assert append.committed_by == "data_step" and append.committed_by_id == "0004.backfill"
    assert append.counts["added_rows"] == 3 and preview.undone[0].committed_by is None
    assert preview.to_json()["undone"][1]["committed_by_id"] == "0004.backfill"

    done = restore_to_tag(table, preview)

    assert done.moved and done.undone == 2 and done.from_snapshot_id == preview.head_snapshot_id
    table.refresh()
    assert table.current_snapshot().snapshot_id == tagged and _ids(table) == list(range(10))
    assert table.refs()["dev"].snapshot_id == dev_head and "before-load" in table.refs()  # the tag stays
    assert {s.snapshot_id for s in table.snapshots()} == snapshots_before  # nothing deleted
    assert [entry.snapshot_id for entry in table.metadata.snapshot_log][-1] == tagged
    again = preview_restore(table, "before-load")
    assert not again.changes and again.undone == () and not restore_to_tag(table, again).moved


def test_a_commit_landing_after_the_preview_makes_the_restore_refuse_naming_it(table, lake):
    create_tag(table, "before-load")
    table.append(_rows(100, 3))
    preview = preview_restore(table, "before-load")
    other = lake.catalog().load_table("sales.events")
    other.append(_rows(200, 1))
    landed = other.current_snapshot().snapshot_id

    with pytest.raises(RefMovedError) as moved:
        restore_to_tag(table, preview)

    assert moved.value.ref == "main" and moved.value.found == landed
    assert moved.value.expected == preview.head_snapshot_id
    assert len(moved.value.commits) == 1 and moved.value.commits[0].startswith(f"{landed} (append, at ")
    assert str(landed) in str(moved.value)
    table.refresh()
    assert table.current_snapshot().snapshot_id == landed  # nothing changed


def test_main_keeps_its_retention_fields_through_a_restore(table):
    from pyiceberg.table.refs import SnapshotRef, SnapshotRefType

    from iceberg_ops_provider.core.refs import commit_refs

    head = table.current_snapshot().snapshot_id
    main = SnapshotRef(
        snapshot_id=head, snapshot_ref_type=SnapshotRefType.BRANCH, min_snapshots_to_keep=7, max_snapshot_age_ms=99999
    )
    commit_refs(table, expected={"main": head}, set_refs={"main": main})
    create_tag(table, "t", snapshot_id=table.snapshots()[0].snapshot_id)

    restore_to_tag(table, preview_restore(table, "t"))

    table.refresh()
    ref = table.refs()["main"]
    assert ref.snapshot_id == table.snapshots()[0].snapshot_id
    assert (ref.min_snapshots_to_keep, ref.max_snapshot_age_ms) == (7, 99999)


def test_a_sideways_restore_lists_what_main_has_that_the_tag_lacks(table):
    first = table.snapshots()[0].snapshot_id
    create_tag(table, "t", snapshot_id=first)
    table.manage_snapshots().rollback_to_snapshot(first).commit()
    table.append(_rows(50, 1))
    create_tag(table, "side")
    table.manage_snapshots().set_current_snapshot(snapshot_id=table.snapshots()[1].snapshot_id).commit()

    preview = preview_restore(table, "side")

    assert not preview.descends and [c.snapshot_id for c in preview.undone] == [table.snapshots()[1].snapshot_id]


def test_a_migration_restore_point_is_moved_back_to_with_the_same_guarded_move(table, lake):
    head = tag_restore_point(table, "iceberg-ops/sales/0001")
    table.append(_rows(100, 3), snapshot_properties={STEP_KEY: "0001.step"})
    stale = lake.catalog().load_table("sales.events")
    lake.catalog().load_table("sales.events").append(_rows(300, 1), snapshot_properties={STEP_KEY: "0001.step"})

    with pytest.raises(RefMovedError) as moved:  # checked on the stale handle, refused by the catalog
        restore_to(stale, "iceberg-ops/sales/0001", "0001")
    assert moved.value.ref == "main" and len(moved.value.commits) == 1

    table.refresh()
    restored = restore_to(table, "iceberg-ops/sales/0001", "0001")
    table.refresh()
    assert restored.to_snapshot_id == head == table.current_snapshot().snapshot_id
    assert "iceberg-ops/sales/0001" not in table.refs()
