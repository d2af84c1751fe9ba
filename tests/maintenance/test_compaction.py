"""compact_small_files_streaming on a real SQLite catalog and real Parquet files: what it rewrites, how
the new files look, and that the table reads the same rows before, after and back in time."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import StringType

from iceberg_ops_provider.maintenance import binpack
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.tables import (
    batch,
    files_on_disk,
    live_data_files,
    recomputed,
    rows,
    small_files_table,
)

KIB = 1024


def test_small_files_become_target_sized_files_with_the_same_rows_and_exact_statistics(catalog, tmp_path: Path):
    table = small_files_table(catalog, "sales.events", appends=24, rows=200, partitioned=True)
    before, old_snapshot = rows(table), table.current_snapshot().snapshot_id
    old_files = {f.file_path for f in live_data_files(table)}
    assert len(old_files) == 48

    result = compact_small_files_streaming(table, target_file_size_bytes=32 * KIB, min_input_files=5)

    assert rows(table) == before
    assert rows(table, snapshot_id=old_snapshot) == before  # time travel reads the old files, still there
    new_files = live_data_files(table)
    assert not {f.file_path for f in new_files} & old_files
    assert result.rewritten_data_files_count == 48 and result.added_data_files_count == len(new_files) < 10
    assert result.committed_groups_count == result.file_groups_count == 2 and result.failed_groups_count == 0
    assert result.rewritten_bytes_count == sum(group.bytes for group in result.groups)
    assert result.added_bytes_count == sum(f.file_size_in_bytes for f in new_files)
    spec = table.spec()
    for data_file in new_files:
        # Statistics and partition equal what PyIceberg derives from the file itself.
        again = recomputed(table, data_file)
        for attribute in ("record_count", "value_counts", "null_value_counts", "lower_bounds", "upper_bounds"):
            assert getattr(data_file, attribute) == getattr(again, attribute), attribute
        assert data_file.file_size_in_bytes == again.file_size_in_bytes
        assert data_file.partition == again.partition and data_file.spec_id == spec.spec_id
        assert data_file.file_path.startswith(f"{table.location()}/data/category={data_file.partition[0]}/")
        fields = pq.read_schema(data_file.file_path.removeprefix("file://"))
        assert [f.metadata[b"PARQUET:field_id"] for f in fields] == [b"1", b"2", b"3", b"4"]
    # Filtered reads prune by the new files' statistics: a wrong bound would lose rows here.
    for row_filter in ("id >= 4700", "id < 5 or amount is null", "note = 'note-002345'"):
        expected = rows(table, snapshot_id=old_snapshot, row_filter=row_filter)
        assert expected and rows(table, row_filter=row_filter) == expected, row_filter
    summaries = [s.summary for s in table.snapshots()[-2:]]
    assert all(summary.operation == Operation.REPLACE for summary in summaries)
    summary = summaries[-1]
    assert summary["iceberg-ops.operation"] == "compaction" and summary["iceberg-ops.compaction.group"] == "2/2"
    assert summary["deleted-data-files"] == "24" and summary["deleted-records"] == summary["added-records"] == "2400"
    assert int(summary["added-data-files"]) == len(result.groups[1].added_data_files)
    assert result.snapshot_ids == [s.snapshot_id for s in table.snapshots()[-2:]]
    assert "write.delete.isolation-level" not in table.properties  # nothing was changed on the table


def test_a_dry_run_reports_exactly_what_the_real_run_rewrites_and_writes_nothing(catalog, tmp_path: Path):
    table = small_files_table(catalog, "sales.events", appends=12, rows=100, partitioned=True)
    root = tmp_path / "warehouse"
    files, snapshots = files_on_disk(root), [s.snapshot_id for s in table.snapshots()]

    planned = compact_small_files_streaming(table, target_file_size_bytes=16 * KIB, min_input_files=3, dry_run=True)

    assert files_on_disk(root) == files and [s.snapshot_id for s in table.snapshots()] == snapshots
    assert planned.dry_run and planned.added_data_files_count == 0 and planned.committed_groups_count == 0
    done = compact_small_files_streaming(table, target_file_size_bytes=16 * KIB, min_input_files=3)
    for key in ("rewritten_data_files_count", "rewritten_bytes_count", "file_groups_count", "planned_snapshot_id"):
        assert getattr(planned, key) == getattr(done, key), key
    assert [(g.partition, sorted(g.data_files), g.bytes) for g in planned.groups] == [
        (g.partition, sorted(g.data_files), g.bytes) for g in done.groups
    ]
    assert {g.status for g in planned.groups} == {"planned"} and {g.status for g in done.groups} == {"committed"}
    json = planned.to_json()
    assert json["groups"][0]["data_files"] == 12 and isinstance(json["groups"][0]["data_files"], int)
    assert planned.to_json(include_files=True)["groups"][0]["data_files"] == planned.groups[0].data_files


def test_what_is_left_alone_and_a_rerun_that_finds_nothing_to_do(catalog):
    table = small_files_table(catalog, "sales.events", appends=4, rows=50, partitioned=True)
    assert compact_small_files_streaming(table, target_file_size_bytes=64 * KIB).file_groups_count == 0  # 4 < 5

    # Files at or above 75% of the target are not small: only the small ones count toward min_input_files.
    sizes = sorted(f.file_size_in_bytes for f in live_data_files(table))
    just_below = math.floor(sizes[0] / binpack.MIN_FILE_SIZE_RATIO)
    assert (
        compact_small_files_streaming(table, target_file_size_bytes=just_below, min_input_files=1).file_groups_count
        == 0
    )
    result = compact_small_files_streaming(table, target_file_size_bytes=64 * KIB, min_input_files=4)
    assert result.rewritten_data_files_count == 8 and result.committed_groups_count == 2
    again = compact_small_files_streaming(table, target_file_size_bytes=64 * KIB, min_input_files=2)
    assert again.file_groups_count == 0 and again.snapshot_ids == []  # one file per partition is left


def test_where_limits_compaction_to_the_files_that_may_match(catalog):
    table = small_files_table(catalog, "sales.events", appends=8, rows=50, partitioned=True)
    before = rows(table)
    b_files = {f.file_path for f in live_data_files(table) if f.partition[0] == "b"}

    result = compact_small_files_streaming(table, target_file_size_bytes=64 * KIB, where="category = 'a'")

    assert [g.partition for g in result.groups] == ["category=a"] and rows(table) == before
    assert b_files <= {f.file_path for f in live_data_files(table)}
    # Column statistics narrow it further (files are whole: never split by the filter).
    narrow = compact_small_files_streaming(
        table, target_file_size_bytes=64 * KIB, where=EqualTo("id", 10), min_input_files=1, dry_run=True
    )
    # id 10 may be in the compacted file of 'a' and in the first file of 'b' (ids 1..49): one group each.
    assert narrow.rewritten_data_files_count == 2 and narrow.file_groups_count == 2


def test_a_large_partition_is_compacted_in_groups_each_committed_on_its_own(catalog):
    table = small_files_table(catalog, "sales.events", appends=40, rows=100)
    before = rows(table)
    total = sum(f.file_size_in_bytes for f in live_data_files(table))
    target = total // 25  # 25 target sizes of small files: more than 10 per group, so 3 groups

    result = compact_small_files_streaming(table, target_file_size_bytes=target)

    assert result.file_groups_count == result.committed_groups_count == math.ceil(total / (10 * target)) == 3
    assert [s.summary["iceberg-ops.compaction.group"] for s in table.snapshots()[-3:]] == ["1/3", "2/3", "3/3"]
    assert rows(table) == before
    assert sum(len(g.data_files) for g in result.groups) == 40
    # Rewritten small files shrink; the file count follows the output size. Here each input batch is a
    # third of the target, so a group may end with one smaller file: never enough to be compacted again.
    sizes = {f.file_path: f.file_size_in_bytes for f in live_data_files(table)}
    assert len(sizes) == result.added_data_files_count <= sum(g.expected_output_files for g in result.groups)
    for group in result.groups:
        small = [p for p in group.added_data_files if sizes[p] < binpack.MIN_FILE_SIZE_RATIO * target]
        assert len(small) <= 1 and all(sizes[p] <= 1.8 * target for p in group.added_data_files)
    assert compact_small_files_streaming(table, target_file_size_bytes=target).file_groups_count == 0


def test_output_files_are_near_the_target_and_of_about_equal_size(catalog):
    table = small_files_table(catalog, "sales.events", appends=30, rows=2000)
    before = rows(table)
    target = 96 * KIB

    result = compact_small_files_streaming(table, target_file_size_bytes=target, min_input_files=2)

    sizes = [f.file_size_in_bytes for f in live_data_files(table)]
    assert len(sizes) == result.added_data_files_count >= 2
    assert all(binpack.MIN_FILE_SIZE_RATIO * target <= size <= 1.8 * target for size in sizes), sizes
    assert max(sizes) - min(sizes) <= 0.5 * max(sizes), sizes
    assert rows(table) == before


@pytest.mark.parametrize("strategy", ["binpack", "sort"])
def test_files_written_under_an_older_spec_are_rewritten_into_the_current_one(catalog, strategy: str):
    table = small_files_table(catalog, "sales.events", appends=6, rows=60)
    with table.update_spec() as spec:
        spec.add_identity("category")
    with table.update_sort_order() as order:
        order.desc("id", IdentityTransform())
    table.append(batch(10_000, 30))  # a file per partition under the new spec
    before = rows(table)

    result = compact_small_files_streaming(
        table, target_file_size_bytes=1024 * KIB, min_input_files=5, strategy=strategy
    )

    current = table.spec().spec_id
    files = live_data_files(table)
    assert {f.spec_id for f in files} == {current}, "every file is in the current spec now"
    assert rows(table) == before and len(files) == 4
    assert [(g.spec_id != current, g.partition) for g in result.groups] == [(True, "")]
    for data_file in files:  # rows were split by the new partition
        data = pq.read_table(data_file.file_path.removeprefix("file://"))
        assert data.column("category").unique().to_pylist() == [data_file.partition[0]]
        if strategy == "sort" and data_file.file_path in result.groups[0].added_data_files:
            assert data.column("id").to_pylist() == sorted(data.column("id").to_pylist(), reverse=True)
    assert sum(rows(table, row_filter="category = 'a'").values()) == sum(1 for r in before.elements() if r[1] == "a")


def test_files_from_older_schemas_read_the_same_after_compaction(catalog):
    table = small_files_table(catalog, "sales.events", appends=3, rows=20)
    with table.update_schema() as update:
        update.add_column("region", StringType())
        update.rename_column("note", "comment")
    data = batch(100, 20).rename_columns(["id", "category", "amount", "comment"])
    for _ in range(3):
        table.append(data.append_column("region", pa.array(["eu"] * 20)))
    before = rows(table)

    compact_small_files_streaming(table, target_file_size_bytes=1024 * KIB, min_input_files=5)

    assert rows(table) == before and len(live_data_files(table)) == 1
    assert pq.read_schema(live_data_files(table)[0].file_path.removeprefix("file://")).names == [
        "id",
        "category",
        "amount",
        "comment",
        "region",
    ]


def test_sort_strategy_sorts_each_output_file_by_the_sort_order(catalog):
    table = small_files_table(catalog, "sales.events", appends=10, rows=50)
    with table.update_sort_order() as order:
        order.desc("amount", IdentityTransform(), NullOrder.NULLS_FIRST)
        order.asc("id", IdentityTransform())
    before = rows(table)

    result = compact_small_files_streaming(table, target_file_size_bytes=8 * KIB, strategy="sort", min_input_files=5)

    assert rows(table) == before and result.added_data_files_count >= 2
    order_id = table.sort_order().order_id
    for data_file in live_data_files(table):
        assert data_file.sort_order_id == order_id
        data = pq.read_table(data_file.file_path.removeprefix("file://"))
        amounts, ids = data.column("amount").to_pylist(), data.column("id").to_pylist()
        nulls = amounts.count(None)
        assert amounts[:nulls] == [None] * nulls  # nulls first
        assert ids[:nulls] == sorted(ids[:nulls])
        assert amounts[nulls:] == sorted(amounts[nulls:], reverse=True)
    assert table.sort_order().fields[0].direction == SortDirection.DESC


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"target_file_size_bytes": 0}, ValueError, "target_file_size_bytes must be an integer of at least 1"),
        ({"target_file_size_bytes": "1GB"}, ValueError, "target_file_size_bytes must be an integer"),
        ({"min_input_files": 0}, ValueError, "min_input_files must be an integer of at least 1"),
        ({"strategy": "zorder"}, ValueError, "strategy must be one of 'binpack', 'sort'"),
        ({"strategy": "sort"}, ValueError, "has none. Set one"),
        ({"where": "id >>> 3"}, ValueError, "is not a filter PyIceberg can parse"),
        ({"where": "missing_column = 3"}, ValueError, "does not fit the schema of sales.events"),
        ({"where": 42}, ValueError, "where must be a filter string"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(catalog, tmp_path: Path, arguments, error, message):
    table = small_files_table(catalog, "sales.events", appends=6, rows=10)
    files = files_on_disk(tmp_path / "warehouse")
    with pytest.raises(error, match=message):
        compact_small_files_streaming(table, **arguments)
    assert files_on_disk(tmp_path / "warehouse") == files


def test_the_default_target_is_the_table_property(catalog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=10)
    assert compact_small_files_streaming(table, dry_run=True).target_file_size_bytes == 512 * 1024 * 1024
    with table.transaction() as transaction:
        transaction.set_properties({"write.target-file-size-bytes": "65536"})
    assert compact_small_files_streaming(table, dry_run=True).target_file_size_bytes == 65536
    with table.transaction() as transaction:
        transaction.set_properties({"write.target-file-size-bytes": "big"})
    with pytest.raises(ValueError, match=r"write\.target-file-size-bytes='big' is not a positive integer"):
        compact_small_files_streaming(table)
    with pytest.raises(TypeError, match="table must be a pyiceberg Table"):
        compact_small_files_streaming("sales.events")  # type: ignore[arg-type]


def test_an_empty_table_has_nothing_to_do_and_a_format_v1_table_compacts(catalog):
    catalog.create_namespace("sales")
    empty = catalog.create_table("sales.empty", batch(0, 1).schema)
    result = compact_small_files_streaming(empty)
    assert result.file_groups_count == 0 and result.planned_snapshot_id is None and result.snapshot_ids == []

    v1 = catalog.create_table("sales.v1", batch(0, 1).schema, properties={"format-version": "1"})
    for number in range(5):
        v1.append(batch(number * 10, 10))
    before = rows(v1)
    assert compact_small_files_streaming(v1, target_file_size_bytes=64 * KIB).committed_groups_count == 1
    assert rows(v1) == before and len(live_data_files(v1)) == 1 and v1.format_version == 1


def test_spark_rules_for_output_counts():
    target = 100  # one file per target size, plus one for a remainder over 75% of it
    sizes = (0, 10, 74, 76, 100, 174, 176, 1000)
    assert [binpack.expected_output_files(size, target) for size in sizes] == [1, 1, 1, 1, 1, 1, 2, 10]
    assert binpack.expected_output_files(100 * target + 80, target) == 101


def test_a_storage_failure_mid_group_deletes_what_the_group_wrote_and_keeps_earlier_groups(
    catalog, tmp_path: Path, caplog
):
    table = small_files_table(catalog, "sales.events", appends=10, rows=200, partitioned=True)
    plan = compact_small_files_streaming(table, target_file_size_bytes=8 * KIB, dry_run=True)
    damaged = plan.groups[1].data_files[-1]  # read last, after the group has written files
    Path(damaged.removeprefix("file://")).write_bytes(b"not a parquet file")  # storage returns garbage
    on_disk = files_on_disk(tmp_path / "warehouse")

    with caplog.at_level("INFO", logger="iceberg_ops_provider.maintenance"), pytest.raises(pa.ArrowInvalid):
        compact_small_files_streaming(table, target_file_size_bytes=8 * KIB)

    assert any("group 2/2: wrote" in message for message in caplog.messages), "group 2 had written files"
    table.refresh()
    assert [s.summary["iceberg-ops.compaction.group"] for s in table.snapshots()[-1:]] == ["1/2"]
    new = {p for p in files_on_disk(tmp_path / "warehouse") - on_disk if p.endswith(".parquet")}
    assert new == {f.file_path.removeprefix("file://") for f in live_data_files(table) if f.partition[0] == "a"}


def test_progress_is_logged_and_the_result_is_json(catalog, caplog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=50, partitioned=True)
    with caplog.at_level("INFO", logger="iceberg_ops_provider.maintenance"):
        result = compact_small_files_streaming(table, target_file_size_bytes=64 * KIB)
    text = "\n".join(caplog.messages)
    assert "2 group(s), 12 small file(s)" in text
    assert "group 1/2: 6 file(s)" in text and "group 2/2 committed;" in text and "iB/s" in text
    decoded = json.loads(json.dumps(result.to_json(include_files=True)))
    assert decoded["rewritten_data_files_count"] == 12 and len(decoded["groups"][1]["added_data_files"]) == 1


def test_files_without_field_ids_get_them_when_rewritten(catalog, tmp_path: Path):
    # Files written by other tools and registered with add_files carry no field ids (the table's
    # name mapping resolves them); the rewritten files must carry the ids.
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.imported", batch(0, 1).schema)
    paths = []
    for number in range(5):
        path = tmp_path / f"import-{number}.parquet"
        pq.write_table(batch(number * 30, 30), path)
        paths.append(f"file://{path}")
    table.add_files(paths)
    assert b"PARQUET:field_id" not in (pq.read_schema(paths[0].removeprefix("file://")).field("id").metadata or {})
    before = rows(table)

    compact_small_files_streaming(table, target_file_size_bytes=1024 * KIB)

    (data_file,) = live_data_files(table)
    schema = pq.read_schema(data_file.file_path.removeprefix("file://"))
    assert [schema.field(name).metadata[b"PARQUET:field_id"] for name in schema.names] == [b"1", b"2", b"3", b"4"]
    assert rows(table) == before
