"""The partition check on a real SQLite catalog: certain and possible rows from manifests alone, delete files,
row filters the statistics cannot settle, data committed after a snapshot, and the partition values of every
transform (see ``iceberg_ops_provider.partitions.probe``)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.manifest import DataFile, DataFileContent
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from iceberg_ops_provider.core.polling import is_transient
from iceberg_ops_provider.partitions.probe import (
    PartitionProbe,
    SnapshotMark,
    parse_after_snapshot,
    partition_rows,
    probe_partition,
    snapshot_mark,
)
from tests.support.tables import (
    batch,
    commit_delete_files,
    equality_delete_file,
    position_delete_file,
    small_files_table,
)

UTC = dt.UTC

# -- partitions -----------------------------------------------------------------------------------


def _table(catalog, name: str, fields: list[NestedField], spec: list[tuple[int, object, str]]):
    catalog.create_namespace_if_not_exists(name.split(".")[0])
    partition_spec = PartitionSpec(
        *(PartitionField(source, 1000 + n, transform, field) for n, (source, transform, field) in enumerate(spec))
    )
    return catalog.create_table(name, Schema(*fields), partition_spec=partition_spec)


def _ts(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


EVENTS = [
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", TimestamptzType(), required=False),
    NestedField(3, "region", StringType(), required=False),
]
EVENTS_ARROW = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("region", pa.string())])


def _events(ids: range, ts: dt.datetime, region: str = "eu") -> pa.Table:
    return pa.table({"id": list(ids), "ts": [ts] * len(ids), "region": [region] * len(ids)}, schema=EVENTS_ARROW)


@pytest.fixture
def daily(catalog):
    """sales.events partitioned by day(ts) and region: 3 rows on Jan 2 (eu), 2 on Jan 2 (us), 4 on Jan 3 (eu)."""
    table = _table(catalog, "sales.events", EVENTS, [(2, DayTransform(), "day"), (3, IdentityTransform(), "region")])
    table.append(_events(range(3), _ts(2026, 1, 2, 5)))
    table.append(_events(range(3, 5), _ts(2026, 1, 2, 23, 59), "us"))
    table.append(_events(range(5, 9), _ts(2026, 1, 3, 0, 0)))
    return catalog.load_table("sales.events")


def test_day_partitions_from_a_date_a_timestamp_or_an_offset(daily):
    assert partition_rows(daily, {"day": "2026-01-02"}).rows == 5
    assert partition_rows(daily, {"day": "2026-01-02"}).files == 2
    assert partition_rows(daily, {"day": "2026-01-03"}).rows == 4
    assert partition_rows(daily, {"day": "2026-01-04"}).rows == 0
    assert partition_rows(daily, {"day": "2026-01-02T23:00:00+00:00"}).rows == 5
    assert partition_rows(daily, {"day": "2026-01-03T01:00:00+02:00"}).rows == 5  # Jan 2, 23:00 UTC
    assert partition_rows(daily, {"day": "2026-01-03T00:00:00Z"}).rows == 4
    assert partition_rows(daily, {"day": dt.date(2026, 1, 3)}).rows == 4


def test_several_fields_must_all_match(daily):
    probe = partition_rows(daily, {"day": "2026-01-02", "region": "eu"})
    assert (probe.rows, probe.files) == (3, 1)
    assert probe.snapshot_id == daily.current_snapshot().snapshot_id
    assert partition_rows(daily, {"day": "2026-01-03", "region": "us"}).rows == 0


def test_partition_values_coarser_than_the_field_are_refused(daily):
    with pytest.raises(ValueError, match="day partition needs at least a day, such as '2026-01-02'"):
        partition_rows(daily, {"day": "2026-01"})
    with pytest.raises(ValueError, match="cannot take 'yesterday'"):
        partition_rows(daily, {"day": "yesterday"})


def test_unknown_partition_keys_name_the_table_fields(daily, catalog):
    with pytest.raises(ValueError) as error:
        partition_rows(daily, {"dya": "2026-01-02", "region": "eu"})
    assert str(error.value) == (
        "'dya' is not a partition field of sales.events: its partition fields are day (day(ts)), "
        "region (identity(region))."
    )
    with pytest.raises(ValueError, match="'a', 'b' are not partition fields"):
        partition_rows(daily, {"a": "1", "b": "2"})
    plain = catalog.create_table("sales.plain", EVENTS_ARROW)
    with pytest.raises(ValueError, match="it is not partitioned"):
        partition_rows(plain, {"day": "2026-01-02"})
    with pytest.raises(ValueError, match="mapping"):
        partition_rows(daily, "day=2026-01-02")  # type: ignore[arg-type]


def test_partitions_are_read_from_metadata_only(daily, tmp_path):
    for data_file in (tmp_path / "warehouse").rglob("*.parquet"):
        data_file.unlink()  # no data file left to read
    assert partition_rows(daily, {"day": "2026-01-02"}).rows == 5
    assert partition_rows(daily, where="region = 'us'").rows == 2


def test_hour_partitions(catalog):
    fields = [NestedField(1, "id", LongType(), required=False), NestedField(2, "ts", TimestampType(), required=False)]
    table = _table(catalog, "sales.hourly", fields, [(2, HourTransform(), "ts_hour")])
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
    table.append(
        pa.table({"id": [1, 2], "ts": [dt.datetime(2026, 1, 2, 5, 10), dt.datetime(2026, 1, 2, 5, 50)]}, schema)
    )
    table.append(pa.table({"id": [3], "ts": [dt.datetime(2026, 1, 2, 6, 0)]}, schema))
    for value in ("2026-01-02-05", "2026-01-02T05", "2026-01-02 05", "2026-01-02T05:59:59"):
        assert partition_rows(table, {"ts_hour": value}).rows == 2, value
    assert partition_rows(table, {"ts_hour": "2026-01-02-06"}).rows == 1
    with pytest.raises(ValueError, match="an hour partition needs at least an hour"):
        partition_rows(table, {"ts_hour": "2026-01-02"})


def test_month_and_year_partitions(catalog):
    fields = [NestedField(1, "d", DateType(), required=False), NestedField(2, "ts", TimestamptzType(), required=False)]
    table = _table(
        catalog, "sales.monthly", fields, [(1, MonthTransform(), "d_month"), (2, YearTransform(), "ts_year")]
    )
    schema = pa.schema([("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])
    table.append(pa.table({"d": [dt.date(2026, 3, 1), dt.date(2026, 3, 31)], "ts": [_ts(2026, 6, 1)] * 2}, schema))
    table.append(pa.table({"d": [dt.date(2026, 4, 1)], "ts": [_ts(2025, 12, 31, 23)]}, schema))
    assert partition_rows(table, {"d_month": "2026-03"}).rows == 2
    assert partition_rows(table, {"d_month": "2026-03-15"}).rows == 2
    assert partition_rows(table, {"d_month": "2026-04"}).rows == 1
    assert partition_rows(table, {"ts_year": "2026"}).rows == 2
    assert partition_rows(table, {"ts_year": 2025}).rows == 1
    assert partition_rows(table, {"d_month": "2026-03", "ts_year": "2025"}).rows == 0


def test_bucket_partitions_take_a_source_value(catalog):
    fields = [
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "customer", StringType(), required=False),
    ]
    table = _table(catalog, "sales.buckets", fields, [(2, BucketTransform(8), "customer_bucket")])
    schema = pa.schema([("id", pa.int64()), ("customer", pa.string())])
    customers = [f"customer-{n}" for n in range(12)]
    table.append(pa.table({"id": range(12), "customer": customers}, schema))
    table = catalog.load_table("sales.buckets")
    # The reference is the writer's own bucketing (PyIceberg's Rust transforms): one file per bucket.
    rows_beside = {}
    for task in table.scan().plan_files():
        for customer in pq.read_table(task.file.file_path.removeprefix("file://")).column("customer").to_pylist():
            rows_beside[customer] = task.file.record_count
    assert len(set(rows_beside.values())) > 1  # customers spread over buckets of different sizes
    for customer in customers:
        probe = partition_rows(table, {"customer_bucket": customer})
        assert (probe.rows, probe.files) == (rows_beside[customer], 1), customer


def test_truncate_partitions_take_a_source_or_a_truncated_value(catalog):
    fields = [NestedField(1, "id", LongType(), required=False), NestedField(2, "sku", StringType(), required=False)]
    table = _table(
        catalog, "sales.truncated", fields, [(1, TruncateTransform(10), "id_trunc"), (2, TruncateTransform(3), "sku3")]
    )
    schema = pa.schema([("id", pa.int64()), ("sku", pa.string())])
    table.append(pa.table({"id": [10, 15, 19, 20], "sku": ["apple", "apricot", "apple", "banana"]}, schema))
    probe = partition_rows(table, {"id_trunc": "15"})  # 15 truncates to 10: ids 10, 15 and 19
    assert (probe.rows, probe.files) == (3, 2)  # in the partitions (10, "app") and (10, "apr")
    assert partition_rows(table, {"id_trunc": "10"}).rows == 3
    assert partition_rows(table, {"id_trunc": "20"}).rows == 1
    assert partition_rows(table, {"id_trunc": 10, "sku3": "apple"}).rows == 2
    assert partition_rows(table, {"sku3": "app"}).rows == 2
    assert partition_rows(table, {"sku3": "apricots"}).rows == 1
    with pytest.raises(ValueError, match=r"id_trunc.*cannot take 'ten'"):
        partition_rows(table, {"id_trunc": "ten"})


def test_identity_partitions_of_other_types_and_the_null_partition(catalog):
    fields = [
        NestedField(1, "n", LongType(), required=False),
        NestedField(2, "d", DateType(), required=False),
        NestedField(3, "amount", DecimalType(10, 2), required=False),
        NestedField(4, "flag", BooleanType(), required=False),
    ]
    spec = [
        (1, IdentityTransform(), "n"),
        (2, IdentityTransform(), "d"),
        (3, IdentityTransform(), "amount"),
        (4, IdentityTransform(), "flag"),
    ]
    table = _table(catalog, "sales.kinds", fields, spec)
    schema = pa.schema([("n", pa.int64()), ("d", pa.date32()), ("amount", pa.decimal128(10, 2)), ("flag", pa.bool_())])
    table.append(
        pa.table(
            {
                "n": [7, 7, None],
                "d": [dt.date(2026, 1, 2)] * 3,
                "amount": [Decimal("1.50")] * 3,
                "flag": [True, True, False],
            },
            schema,
        )
    )
    assert partition_rows(table, {"n": "7", "d": "2026-01-02", "amount": "1.5", "flag": "true"}).rows == 2
    assert partition_rows(table, {"n": 7, "amount": Decimal("1.50")}).rows == 2
    assert partition_rows(table, {"n": None}).rows == 1
    assert partition_rows(table, {"flag": "false"}).rows == 1
    assert partition_rows(table, {"n": "8"}).rows == 0
    with pytest.raises(ValueError, match="more than 2 decimal places"):
        partition_rows(table, {"amount": "1.505"})
    with pytest.raises(ValueError, match="'n'"):
        partition_rows(table, {"n": "seven"})


def test_identity_partitions_of_timestamps_take_an_instant_in_any_offset(catalog):
    table = _table(catalog, "sales.instants", EVENTS, [(2, IdentityTransform(), "ts")])
    table.append(_events(range(2), _ts(2026, 1, 2, 5, 30)))
    table.append(_events(range(2, 3), _ts(2026, 1, 2)))
    assert partition_rows(table, {"ts": "2026-01-02T05:30:00+00:00"}).rows == 2
    assert partition_rows(table, {"ts": "2026-01-02T07:30:00+02:00"}).rows == 2
    assert partition_rows(table, {"ts": "2026-01-02"}).rows == 1  # a date is its midnight
    with pytest.raises(ValueError, match="expected a timestamp"):
        partition_rows(table, {"ts": "2026"})


def test_where_filters_count_certain_rows_and_files_that_may_match_as_possible(catalog):
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.plain", EVENTS_ARROW)
    table.append(_events(range(0, 10), _ts(2026, 1, 2)))
    table.append(_events(range(100, 105), _ts(2026, 1, 3), "us"))
    assert partition_rows(table, where="id >= 100").rows == 5
    probe = partition_rows(table, where="id >= 5")  # the first file may hold ids 5-9, its statistics cannot tell
    assert (probe.rows, probe.possible_rows, probe.files, probe.files_unproven) == (5, 15, 2, 1)
    assert probe.describe().endswith("(1 the filter may match only in part)")
    assert partition_rows(table, where="region = 'us' and id < 50").possible_rows == 0
    assert partition_rows(table, where="ts >= '2026-01-03T00:00:00+00:00'").rows == 5
    assert partition_rows(table, where="id >= 0 and region in ('eu', 'us')").rows == 15  # proven for both files


def test_partition_and_where_together(daily):
    assert partition_rows(daily, {"day": "2026-01-02"}, where="region = 'us'").rows == 2
    assert partition_rows(daily, {"day": "2026-01-03"}, where="region = 'us'").rows == 0


def test_bad_where_filters_are_refused_clearly(daily):
    with pytest.raises(ValueError, match=r"where='id >> 3' is not a PyIceberg row filter; write it like"):
        partition_rows(daily, where="id >> 3")
    with pytest.raises(ValueError, match=r"does not fit sales\.events"):
        partition_rows(daily, where="nope = 1")


def test_after_snapshot_counts_only_what_was_committed_since(daily):
    before = daily.current_snapshot().snapshot_id
    assert partition_rows(daily, {"day": "2026-01-02"}, after_snapshot=before).rows == 0
    daily.append(_events(range(100, 107), _ts(2026, 1, 2, 8)))
    daily.append(_events(range(200, 210), _ts(2026, 1, 3, 8)))
    probe = partition_rows(daily, {"day": "2026-01-02"}, after_snapshot=before)
    assert (probe.rows, probe.files) == (7, 1)
    assert partition_rows(daily, {"day": "2026-01-02"}, after_snapshot=str(before)).rows == 7
    assert partition_rows(daily, where="id >= 0", after_snapshot=before).rows == 17
    assert partition_rows(daily, {"day": "2026-01-02"}, after_snapshot="None").rows == 12
    with pytest.raises(ValueError, match=r"after_snapshot 42 is not a snapshot of sales\.events"):
        partition_rows(daily, {"day": "2026-01-02"}, after_snapshot=42)
    with pytest.raises(ValueError, match="must be a snapshot id"):
        partition_rows(daily, {"day": "2026-01-02"}, after_snapshot="yesterday")


def test_spec_evolution_old_files_are_not_in_new_fields_and_renames_keep_matching(catalog):
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.evolving", EVENTS_ARROW)
    table.append(_events(range(3), _ts(2026, 1, 2)))  # unpartitioned file holding Jan 2
    with table.update_spec() as spec:
        spec.add_field("ts", DayTransform(), "ts_day")
    table.append(_events(range(3, 5), _ts(2026, 1, 2)))
    assert partition_rows(table, {"ts_day": "2026-01-02"}).rows == 2  # only the file written with the field
    assert partition_rows(table, where="ts >= '2026-01-02T00:00:00+00:00'").rows == 5
    with table.update_spec() as spec:
        spec.rename_field("ts_day", "day")
    assert partition_rows(table, {"day": "2026-01-02"}).rows == 2  # same field id, new name
    with pytest.raises(ValueError, match="its partition fields are day"):
        partition_rows(table, {"ts_day": "2026-01-02"})


def test_an_empty_table_has_no_rows_and_no_snapshot(catalog):
    table = _table(catalog, "sales.empty", EVENTS, [(2, DayTransform(), "day")])
    assert partition_rows(table, {"day": "2026-01-02"}) == PartitionProbe("sales.empty", None, 0, 0, 0)
    with pytest.raises(ValueError, match="not a partition field"):
        partition_rows(table, {"nope": "1"})  # keys are checked even before the first commit


def test_position_deletes_lower_the_certain_rows_and_leave_the_possible_ones(catalog):
    table = small_files_table(catalog, "sales.deleted", appends=2, rows=10, partitioned=True)
    a_file = next(task.file for task in table.scan().plan_files() if task.file.partition[0] == "a")
    commit_delete_files(table, [position_delete_file(table, {a_file.file_path: [0, 1]})])
    table = catalog.load_table("sales.deleted")
    probe = partition_rows(table, {"category": "a"})
    assert (probe.rows, probe.possible_rows, probe.files, probe.files_with_deletes) == (8, 10, 2, 1)
    assert table.scan(row_filter="category = 'a'").to_arrow().num_rows == 8
    assert probe.describe().endswith(
        "8 row(s) certain, up to 10 possible, in 2 data file(s) of sales.deleted at "
        f"snapshot {table.current_snapshot().snapshot_id} (1 with delete files)"
    )


def test_a_partition_whose_rows_were_all_deleted_is_not_ready(catalog):
    table = small_files_table(catalog, "sales.emptied", appends=1, rows=10, partitioned=True)
    a_file = next(task.file for task in table.scan().plan_files() if task.file.partition[0] == "a")
    commit_delete_files(table, [position_delete_file(table, {a_file.file_path: range(a_file.record_count)})])
    table = catalog.load_table("sales.emptied")
    assert table.scan(row_filter="category = 'a'").to_arrow().num_rows == 0
    probe = partition_rows(table, {"category": "a"})
    assert (probe.rows, probe.possible_rows, probe.files_with_deletes) == (0, 5, 1)
    assert not probe.enough(1)
    assert probe.enough(1, count_possible_rows=True)  # what a caller opting in to possible rows gets


def _partition_files(table, category: str) -> list:
    return sorted(
        (
            e.data_file
            for m in table.current_snapshot().manifests(table.io)
            for e in m.fetch_manifest_entry(table.io)
            if e.data_file.content == 0 and e.data_file.partition[0] == category
        ),
        key=lambda data_file: data_file.record_count,
    )


def _equality_delete(table, ids: list[int], category: str, *, bounds: bool = False) -> DataFile:
    """An equality delete file on ``id`` in partition ``category`` (with the id bounds Flink records, if asked)."""
    written = equality_delete_file(table, ids)
    id_field = table.schema().find_field("id").field_id
    metrics = {}
    if bounds:
        metrics = {
            "lower_bounds": {id_field: to_bytes(LongType(), min(ids))},
            "upper_bounds": {id_field: to_bytes(LongType(), max(ids))},
            "null_value_counts": {id_field: 0},
        }
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=written.file_path,
        file_format=written.file_format,
        partition=_partition_files(table, category)[0].partition,
        record_count=written.record_count,
        file_size_in_bytes=written.file_size_in_bytes,
        equality_ids=[id_field],
        spec_id=written.spec_id,
        **metrics,
    )
    delete_file.spec_id = written.spec_id
    return delete_file


def test_equality_deletes_are_counted_not_refused(catalog):
    # Flink upserts write equality deletes; PyIceberg's scan planning refuses them, the partition check does not.
    table = small_files_table(catalog, "sales.upserts", appends=2, rows=5, partitioned=True)
    commit_delete_files(table, [_equality_delete(table, [0, 1], "a")])
    table = catalog.load_table("sales.upserts")
    with pytest.raises(ValueError, match="does not yet support equality deletes"):
        list(table.scan().plan_files())
    probe = partition_rows(table, {"category": "a"})
    # Equality deletes may remove any number of rows of the older files of their partition: none is certain.
    assert (probe.rows, probe.possible_rows, probe.files, probe.files_with_deletes) == (0, 5, 2, 2)
    other = partition_rows(table, {"category": "b"})
    assert (other.rows, other.possible_rows, other.files_with_deletes) == (5, 5, 0)
    assert partition_rows(table, where="id >= 0").possible_rows == 10
    # Data appended after the delete is not touched by it.
    table.append(batch(100, 4, categories=("a",)))
    assert partition_rows(catalog.load_table("sales.upserts"), {"category": "a"}).rows == 4


def test_equality_deletes_whose_values_cannot_meet_a_file_do_not_apply_to_it(catalog):
    table = small_files_table(catalog, "sales.keys", appends=2, rows=5, partitioned=True)
    commit_delete_files(table, [_equality_delete(table, [6, 8], "a", bounds=True)])  # ids 6-8: the second append's
    probe = partition_rows(catalog.load_table("sales.keys"), {"category": "a"})
    assert (probe.files, probe.files_with_deletes) == (2, 1)
    first_ids = {0, 2, 4}  # the first append's 'a' rows, out of the delete's bounds: certain
    assert (probe.rows, probe.possible_rows) == (len(first_ids), 5)


def test_probe_loads_the_table_and_a_missing_table_is_permanent(catalog, daily):
    probe = probe_partition(catalog, "sales.events", {"day": "2026-01-03"})
    assert probe.to_json() == {
        "table": "sales.events",
        "snapshot_id": daily.current_snapshot().snapshot_id,
        "rows": 4,
        "possible_rows": 4,
        "files": 1,
        "files_with_deletes": 0,
    }
    with pytest.raises(NoSuchTableError) as error:
        probe_partition(catalog, "sales.nope", {"day": "2026-01-03"})
    assert not is_transient(error.value)


# -- after a snapshot ------------------------------------------------------------------------------


def test_after_snapshot_counts_rewritten_files_as_possible_only(catalog):
    table = small_files_table(catalog, "sales.cow", appends=1, rows=10, partitioned=True)
    before = table.current_snapshot().snapshot_id
    table.delete("id = 0")  # copy-on-write: the 'a' file is rewritten without id 0; no new row
    table = catalog.load_table("sales.cow")
    probe = partition_rows(table, {"category": "a"}, after_snapshot=before)
    assert (probe.rows, probe.possible_rows, probe.files_maybe_old) == (0, 4, 1)
    assert probe.describe().endswith(f"(1 rewritten since snapshot {before}, perhaps holding older rows)")
    assert not probe.enough(1)

    # PyIceberg's overwrite deletes, then appends: the appended rows are new.
    table.overwrite(batch(100, 2, categories=("a",)), overwrite_filter="category = 'a'")
    probe = partition_rows(catalog.load_table("sales.cow"), {"category": "a"}, after_snapshot=before)
    assert (probe.rows, probe.possible_rows) == (2, 2)


def test_the_mark_of_a_snapshot_outlives_its_expiry(catalog):
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    table.append(pa.table({"id": pa.array([2], pa.int64())}))
    before = table.current_snapshot()
    mark = snapshot_mark(table, before.snapshot_id)
    assert mark == SnapshotMark(before.snapshot_id, before.sequence_number, before.timestamp_ms)
    table.append(pa.table({"id": pa.array([3, 4], pa.int64())}))
    table.maintenance.expire_snapshots().by_id(before.snapshot_id).commit()  # a short retention
    table = catalog.load_table("shop.t")

    probe = partition_rows(table, where="id >= 0", after_snapshot=mark)
    assert (probe.rows, probe.files, probe.after) == (2, 1, mark)
    with pytest.raises(ValueError, match=f"after_snapshot {before.snapshot_id} is not a snapshot of shop.t"):
        partition_rows(table, where="id >= 0", after_snapshot=before.snapshot_id)


def test_after_snapshot_on_a_format_1_table_follows_the_snapshots(catalog):
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.v1", pa.schema([("id", pa.int64())]), properties={"format-version": "1"})
    assert table.metadata.format_version == 1
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    before = table.current_snapshot().snapshot_id
    assert partition_rows(table, where="id >= 0", after_snapshot=before).rows == 0
    table.append(pa.table({"id": pa.array([3], pa.int64())}))
    probe = partition_rows(catalog.load_table("shop.v1"), where="id >= 0", after_snapshot=before)
    assert (probe.rows, probe.files) == (1, 1)


def test_parse_after_snapshot():
    assert parse_after_snapshot("") is None and parse_after_snapshot("None") is None
    assert parse_after_snapshot(" 12 ") == 12 and parse_after_snapshot(2**63 - 1) == 2**63 - 1


# -- values of particular column types -------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "iceberg_type", "arrow_type"), [("f", FloatType(), pa.float32()), ("d", DoubleType(), pa.float64())]
)
def test_float_identity_partitions_match_values_a_32_bit_float_cannot_hold_exactly(
    catalog, column, iceberg_type, arrow_type
):
    fields = [NestedField(1, "id", LongType(), required=False), NestedField(2, column, iceberg_type, required=False)]
    table = _table(catalog, f"sales.t_{column}", fields, [(2, IdentityTransform(), column)])
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), column: pa.array([1.1, 2.5], arrow_type)}))
    table = catalog.load_table(f"sales.t_{column}")
    for value in ("1.1", 1.1, "2.5", 2.5):
        probe = partition_rows(table, {column: value})
        assert (probe.rows, probe.files) == (1, 1), value
    assert partition_rows(table, {column: "1.2"}).rows == 0


def test_an_offset_is_refused_for_a_timestamp_without_zone(catalog):
    fields = [NestedField(1, "id", LongType(), required=False), NestedField(2, "ts", TimestampType(), required=False)]
    table = _table(catalog, "sales.wallclock", fields, [(2, HourTransform(), "ts_hour")])
    table.append(
        pa.table(
            {"id": [1], "ts": [dt.datetime(2026, 1, 2, 5, 30)]},
            pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))]),
        )
    )
    with pytest.raises(
        ValueError, match=r"holds wall-clock values without a time zone, so a value with the UTC offset \+02:00"
    ):
        partition_rows(table, {"ts_hour": "2026-01-02T05:30:00+02:00"})
    assert partition_rows(table, {"ts_hour": "2026-01-02T05:30:00"}).rows == 1
    assert partition_rows(table, {"ts_hour": "2026-01-02T05:00:00+00:00"}).rows == 1  # as {{ data_interval_start }}
