"""Readiness checks on a real SQLite catalog: migration versions from the history, partitions from metadata."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.exceptions import NoSuchTableError
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
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)

from iceberg_ops_provider.errors import CatalogUnavailableError, MigrationFailedError
from iceberg_ops_provider.readiness import (
    NamespaceVersion,
    PartitionProbe,
    check_wanted_version,
    describe_partition_wait,
    describe_version_wait,
    is_transient,
    namespace_version,
    parse_after_snapshot,
    partition_rows,
    probe_partition,
    resolve_version,
    timeout_message,
    version_reached,
)
from iceberg_ops_provider.runner import MigrationRunner
from tests.maintenance.test_compaction_support import commit_delete_files, position_delete_file, small_files_table
from tests.migration.conftest import ORDERS, write_migration

UTC = dt.UTC

# -- migrations ---------------------------------------------------------------------------------


@pytest.fixture
def migrations(tmp_path: Path) -> Path:
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_create_orders.py", ORDERS, 'ctx.drop_table("orders")')
    write_migration(
        folder, "0002_add_email.py", 'ctx.add_column("orders", "email", "string")', 'ctx.drop_column("orders", "email")'
    )
    write_migration(
        folder, "0003_owner.py", 'ctx.set_properties("orders", owner="x")', 'ctx.remove_properties("orders", "owner")'
    )
    return folder


def test_a_namespace_never_migrated_is_at_base_and_reading_creates_nothing(catalog):
    catalog.create_namespace("sales")
    seen = namespace_version(catalog, "sales")
    assert seen == NamespaceVersion("sales", None, ())
    assert not version_reached(seen.current, "0001")
    assert version_reached(seen.current, None)  # base is always reached
    assert catalog.list_namespaces() == [("sales",)]  # no meta-namespace, no history table
    assert "at base" in seen.describe()


def test_versions_are_reached_numerically_as_the_runner_orders_them(catalog, migrations):
    catalog.create_namespace("sales")
    runner = MigrationRunner(catalog, "sales", migrations)
    runner.upgrade("0002")

    seen = namespace_version(catalog, "sales")
    assert seen.current == "0002"
    assert [version_reached(seen.current, v) for v in ("0001", "0002", "2", "00002", "0003", "10")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]
    assert resolve_version("head", migrations, "sales") == "0003"
    assert resolve_version("0002", None, "sales") == "0002"  # an explicit version needs no folder

    runner.upgrade()
    assert version_reached(namespace_version(catalog, "sales").current, "0003")
    runner.downgrade("base")
    assert namespace_version(catalog, "sales").current is None


def test_reading_the_version_neither_takes_nor_waits_for_the_lock(catalog, migrations):
    catalog.create_namespace("sales")
    runner = MigrationRunner(catalog, "sales", migrations)
    runner.upgrade("0001")
    runner.lock.acquire_run("another-run")  # a migration in progress elsewhere

    assert namespace_version(catalog, "sales").current == "0001"
    holder, _ = runner.lock.read()
    assert holder is not None and holder.run_id == "another-run"


def test_a_failed_attempt_is_reported_and_not_counted(catalog, tmp_path):
    catalog.create_namespace("sales")
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_create_orders.py", ORDERS)
    write_migration(folder, "0002_broken.py", 'raise RuntimeError("boom")')
    with pytest.raises(MigrationFailedError):
        MigrationRunner(catalog, "sales", folder).upgrade()

    seen = namespace_version(catalog, "sales")
    assert (seen.current, seen.failed) == ("0001", ("0002",))
    assert not version_reached(seen.current, "0002")
    assert "0002 failed" in seen.describe()
    assert seen.to_json() == {"namespace": "sales", "version": "0001", "failed": ["0002"]}


def test_a_history_in_another_meta_namespace(catalog, migrations):
    catalog.create_namespace("sales")
    MigrationRunner(catalog, "sales", migrations, meta_namespace="ops_meta").upgrade("0001")
    assert namespace_version(catalog, "sales", "ops_meta").current == "0001"
    assert namespace_version(catalog, "sales").current is None  # the default meta-namespace has nothing


def test_head_reads_the_namespace_folder_and_an_empty_folder_is_base(tmp_path):
    root = tmp_path / "migrations"
    write_migration(root, "0001_flat.py")
    write_migration(root / "sales", "0007_nested.py")
    assert resolve_version("head", root, "sales") == "0007"
    assert resolve_version("head", root, "other") == "0001"
    (tmp_path / "empty").mkdir()
    assert resolve_version("head", tmp_path / "empty", "sales") is None


@pytest.mark.parametrize("bad", ["latest", "+1", "-1", "", " 3", "v3", None, -1, True, 1.5])
def test_malformed_versions_are_refused(bad):
    with pytest.raises(ValueError, match="'head' or a migration version"):
        check_wanted_version(bad)


def test_head_without_a_folder_is_refused():
    with pytest.raises(ValueError, match="needs migrations_dir"):
        resolve_version("head", None, "sales")


def test_a_malformed_namespace_is_refused(catalog):
    with pytest.raises(ValueError, match="not a valid namespace"):
        namespace_version(catalog, "sales/2026")


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


def test_where_filters_count_the_files_that_may_hold_matching_rows(catalog):
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.plain", EVENTS_ARROW)
    table.append(_events(range(0, 10), _ts(2026, 1, 2)))
    table.append(_events(range(100, 105), _ts(2026, 1, 3), "us"))
    assert partition_rows(table, where="id >= 100").rows == 5
    assert partition_rows(table, where="id >= 5").rows == 15  # the first file may hold ids 5-9: it counts whole
    assert partition_rows(table, where="region = 'us' and id < 50").rows == 0
    assert partition_rows(table, where="ts >= '2026-01-03T00:00:00+00:00'").rows == 5


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


def test_delete_files_make_the_row_count_an_upper_bound(catalog):
    table = small_files_table(catalog, "sales.deleted", appends=2, rows=10, partitioned=True)
    a_file = next(task.file for task in table.scan().plan_files() if task.file.partition[0] == "a")
    commit_delete_files(table, [position_delete_file(table, {a_file.file_path: [0, 1]})])
    table = catalog.load_table("sales.deleted")
    probe = partition_rows(table, {"category": "a"})
    assert (probe.rows, probe.files, probe.files_with_deletes) == (10, 2, 1)
    assert table.scan(row_filter="category = 'a'").to_arrow().num_rows == 8
    assert "1 with delete files" in probe.describe()


def test_probe_loads_the_table_and_a_missing_table_is_permanent(catalog, daily):
    probe = probe_partition(catalog, "sales.events", {"day": "2026-01-03"})
    assert probe.to_json() == {
        "table": "sales.events",
        "snapshot_id": daily.current_snapshot().snapshot_id,
        "rows": 4,
        "files": 1,
        "files_with_deletes": 0,
    }
    with pytest.raises(NoSuchTableError) as error:
        probe_partition(catalog, "sales.nope", {"day": "2026-01-03"})
    assert not is_transient(error.value)


# -- waiting --------------------------------------------------------------------------------------


def test_transient_and_permanent_errors():
    assert is_transient(CatalogUnavailableError("no answer"))
    assert is_transient(ConnectionRefusedError()) and is_transient(TimeoutError()) and is_transient(OSError("io"))
    assert is_transient(FileNotFoundError("manifest gone"))
    assert not is_transient(PermissionError("denied"))
    assert not is_transient(ValueError("bad key")) and not is_transient(RuntimeError("?"))


def test_messages_say_what_was_awaited_and_seen():
    waiting = describe_partition_wait("sales.events", {"day": "2026-01-02"}, "region = 'eu'", 10, "123")
    assert waiting == (
        "at least 10 row(s) in partition day='2026-01-02' and rows matching \"region = 'eu'\" of sales.events, "
        "committed after snapshot 123"
    )
    seen = PartitionProbe("sales.events", 5, 3, 1).describe()
    assert timeout_message(waiting, 2.5, seen, "CatalogUnavailableError: no answer") == (
        f"Timed out after 2.5 s waiting for {waiting}; last seen: 3 row(s) in 1 data file(s) of sales.events at "
        "snapshot 5; last error: CatalogUnavailableError: no answer."
    )
    assert describe_version_wait("sales", "0003") == "namespace 'sales' to reach migration version 0003"
    assert "nothing (no check succeeded)" in timeout_message("x", 1, None)
    assert parse_after_snapshot("") is None and parse_after_snapshot(" 12 ") == 12
