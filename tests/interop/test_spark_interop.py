"""Spark 3.5 with Iceberg 1.10.2 (Java) and iceberg-ops on one catalog: each reads, writes, maintains the other's
tables.

Spark and PyIceberg share one JDBC/SQL catalog named ``lake`` on a PostgreSQL database of this test
run (``conftest.py``). Every test starts from tables Spark created and filled, runs iceberg-ops'
verbs on them, and has Spark read every row back (an order-free digest of the rows) and keep writing.
All tests are in this one file so that ``make test-all`` (pytest-xdist, ``--dist loadfile``) runs
them in one worker, with one Spark session. docs/spark.md describes the suite and what it found.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from iceberg_ops_provider.maintenance import (
    HealthThresholds,
    compact_small_files_streaming,
    expire_snapshots,
    remove_orphan_files,
    rewrite_manifests,
    table_health_report,
)
from tests.interop.support import (
    SHAPES,
    Rows,
    assert_files_sorted_as_spark_sorts,
    assert_same_rows,
    assert_summary_totals,
    filtered_counts,
    live_file_paths,
    our_rows,
    read_metadata_tables,
    scalar,
    spark_rows,
    sql,
)

pytestmark = [pytest.mark.interop, pytest.mark.long, pytest.mark.postgres, pytest.mark.slow]

KIB = 1024
# Spark's INSERTs of 30 rows write files of 2-4 KiB: a 1 MiB target makes every one of them small.
TARGET = 1024 * KIB


def _plant_orphan(table: Any) -> Path:
    """A Parquet-named file under the table's data folder that no metadata references, dated three days back."""
    location = table.location().removeprefix("file:").lstrip("/")
    path = Path("/" + location) / "data" / "orphan-planted-by-the-test.parquet"
    path.write_bytes(b"not referenced by anything")
    old = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    os.utime(path, (old, old))
    return path


def _assert_spark_reads(spark, name: str, before: Rows, counts: dict[str, int], step: str, pruned: bool) -> None:
    """Spark reads every row as before; with ``pruned``, its filtered reads count the same too.

    A filtered read prunes files by their partition values and column bounds, and manifests by their
    partition summaries: checked after the steps that write data files or manifests.
    """
    assert_same_rows(before, spark_rows(spark, name), f"Spark reads after {step}")
    if pruned:
        assert filtered_counts(spark, name) == counts, f"Spark's filtered reads after {step}"


@pytest.mark.parametrize("shape", list(SHAPES))
def test_spark_table_through_our_maintenance_reads_the_same_in_spark(spark, lake, ns, shape):
    name = f"{ns}.events"
    SHAPES[shape](spark, name)
    before = spark_rows(spark, name)
    counts = filtered_counts(spark, name)
    assert len(before) > 0 and counts
    assert_same_rows(before, our_rows(lake, name), "PyIceberg reads what Spark wrote")
    table = lake.load_table(name)
    spark_files = live_file_paths(table)
    thresholds = HealthThresholds(target_file_size_bytes=TARGET, min_input_files=2)

    # The health report sees Spark's small files (and its position deletes).
    report = table_health_report(table, thresholds)
    assert "compact" in report.needs, report.summary()
    if shape == "v2-bucket-truncate-position-deletes":
        assert report.delete_files.position_delete_files > 0, report.summary()

    planned = table.current_snapshot().snapshot_id
    strategy = "sort" if table.sort_order().fields else "binpack"
    compacted = compact_small_files_streaming(
        table, target_file_size_bytes=TARGET, min_input_files=2, strategy=strategy
    )
    assert compacted.committed_groups_count >= 1 and compacted.failed_groups_count == 0, compacted.to_json()
    _assert_spark_reads(spark, name, before, counts, f"{strategy} compaction", pruned=True)
    if strategy == "sort":
        written = [path for group in compacted.groups for path in group.added_data_files]
        assert assert_files_sorted_as_spark_sorts(spark, table, name, written) == len(written) > 0
    assert_summary_totals(table, f"{strategy} compaction")
    if shape == "v2-bucket-truncate-position-deletes":
        assert compacted.removed_delete_files_count > 0, compacted.to_json()
    if shape == "v2-schema-and-spec-changed-by-spark":
        # Files of the older spec are rewritten into the current spec's partitions beside the small files of
        # that spec compacted in the same run (as Spark's rewrite_data_files does): a second run merges them.
        again = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2)
        assert again.committed_groups_count >= 1, again.to_json()
        _assert_spark_reads(spark, name, before, counts, "the second compaction", pruned=True)
    # Spark's time travel reads the snapshot before ours, and its incremental read skips our `replace` commits.
    assert_same_rows(
        before,
        Rows.of(before.columns, spark.sql(f"SELECT * FROM lake.{name} VERSION AS OF {planned}").collect()),
        "Spark's time travel to the snapshot before compaction",
    )
    assert spark.read.format("iceberg").option("start-snapshot-id", planned).load(f"lake.{name}").count() == 0

    rewritten = rewrite_manifests(table)
    assert rewritten.added_manifests_count >= 1, rewritten.to_json()
    _assert_spark_reads(spark, name, before, counts, "rewrite_manifests", pruned=False)
    assert_summary_totals(table, "rewrite_manifests")

    expired = expire_snapshots(table, older_than=datetime.now(UTC) + timedelta(seconds=1), retain_last=1)
    assert expired.expired_snapshot_ids and not expired.failed_deletes, expired.to_json()
    table.refresh()
    assert len(table.metadata.snapshots) == 1
    _assert_spark_reads(spark, name, before, counts, "expire_snapshots", pruned=False)
    for path in spark_files - live_file_paths(table):  # Spark's files that compaction replaced are gone
        assert not Path(path.removeprefix("file:")).exists(), path

    orphan = _plant_orphan(table)
    removed = remove_orphan_files(table, older_than=datetime.now(UTC) - timedelta(days=2))
    assert removed.deleted_orphan_files_count == 1 and not removed.failed_deletes, removed.to_json()
    assert removed.orphan_file_locations[0].endswith(orphan.name), removed.to_json()
    assert not orphan.exists()
    # The current snapshot's manifests are ours since rewrite_manifests: Spark prunes with their summaries.
    _assert_spark_reads(spark, name, before, counts, "remove_orphan_files", pruned=True)

    report = table_health_report(lake.load_table(name), thresholds)
    assert "compact" not in report.needs, report.summary()
    metadata_tables = read_metadata_tables(spark, name)
    assert metadata_tables["files"] == len(live_file_paths(table)), metadata_tables
    assert metadata_tables["snapshots"] == 1, metadata_tables

    # Spark keeps writing: an INSERT on top of our snapshots, read by both engines, its totals built on ours.
    count = scalar(spark, f"SELECT count(*) FROM lake.{name}")
    sql(spark, f"INSERT INTO lake.{name} SELECT * FROM lake.{name} LIMIT 5")
    assert scalar(spark, f"SELECT count(*) FROM lake.{name}") == count + 5
    assert (
        spark.read.format("iceberg")
        .option("start-snapshot-id", table.current_snapshot().snapshot_id)
        .load(f"lake.{name}")
        .count()
        == 5
    )
    assert_same_rows(spark_rows(spark, name), our_rows(lake, name), "both engines read Spark's INSERT after ours")
    assert_summary_totals(table, "Spark's INSERT after our maintenance")


# ---------------------------------------------------------------------------------------------------
# A migration run by MigrationRunner on a table Spark created; Spark reads the table and our history.

MIGRATION_1 = """
ctx.add_column("orders", "channel", "string", doc="added by iceberg-ops")
ctx.rename_column("orders", "amount", "total")
ctx.drop_column("orders", "note")
ctx.alter_column("orders", "qty", type="long")
ctx.alter_column("orders", "price", type="double")
ctx.alter_column("orders", "total", type="decimal(12,2)")
"""
MIGRATION_2 = """
ctx.add_partition_field("orders", "day(ts)")
ctx.drop_partition_field("orders", "region")
ctx.add_partition_field("orders", "bucket(4, id)", name="id_bucket")
ctx.set_sort_order("orders", ["ts desc", "id"])
ctx.set_properties("orders", {"team": "ops", "write.metadata.previous-versions-max": "50"})
ctx.remove_properties("orders", "created-by")
"""


def _orders(spark, name: str) -> None:
    sql(
        spark,
        f"CREATE TABLE lake.{name} (id bigint NOT NULL, region string, amount decimal(10,2), qty int, price float, "
        "note string, ts timestamp) USING iceberg PARTITIONED BY (region) "
        "TBLPROPERTIES ('format-version'='2', 'created-by'='spark')",
    )
    for batch in range(3):
        values = ", ".join(
            f"({i}, '{('eu', 'us')[i % 2]}', {i}.{i % 100:02d}, {i % 9}, {i / 8}, 'note {i}', "
            f"timestamp'2026-04-0{1 + i % 3} {i % 24:02d}:00:00')"
            for i in range(batch * 20, batch * 20 + 20)
        )
        sql(spark, f"INSERT INTO lake.{name} VALUES {values}")


def test_migration_on_a_spark_table_then_spark_reads_it_and_our_history(spark, lake, ns, tmp_path):
    from iceberg_ops_provider.runner import MigrationRunner
    from tests.support.migrations import write_migration

    name = f"{ns}.orders"
    _orders(spark, name)
    before = spark_rows(spark, name)
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_columns.py", MIGRATION_1, description="columns")
    write_migration(migrations, "0002_layout.py", MIGRATION_2, description="layout")
    runner = MigrationRunner(lake, namespace=ns, migrations_dir=migrations)

    results = runner.upgrade()
    assert [(r.version, r.status) for r in results] == [("0001", "applied"), ("0002", "applied")]

    # Spark sees the new schema, spec, sort order and properties.
    schema = {field.name: field.dataType.simpleString() for field in spark.table(f"lake.{name}").schema.fields}
    assert schema == {
        "id": "bigint",
        "region": "string",
        "total": "decimal(12,2)",
        "qty": "bigint",
        "price": "double",
        "ts": "timestamp",
        "channel": "string",
    }
    properties = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES lake.{name}").collect()}
    assert properties.get("team") == "ops" and "created-by" not in properties, properties
    assert properties.get("write.metadata.previous-versions-max") == "50"
    assert "sort-order" in properties and "ts DESC" in properties["sort-order"], properties
    partitions = [row for row in spark.sql(f"DESCRIBE TABLE lake.{name}").collect() if row.col_name.startswith("Part ")]
    assert [row.data_type for row in partitions] == ["days(ts)", "bucket(4, id)"], partitions

    # Every row as before, renamed, promoted, without the dropped column and with the added one empty.
    old = before.columns
    expected = Rows.of(
        list(schema),
        (
            (
                row[old.index("id")],
                row[old.index("region")],
                row[old.index("amount")],
                row[old.index("qty")],
                row[old.index("price")],
                row[old.index("ts")],
                None,
            )
            for row, count in before.counts.items()
            for _ in range(count)
        ),
    )
    assert_same_rows(expected, spark_rows(spark, name), "Spark reads the migrated table")

    # Spark keeps writing, into the new columns and the new spec; PyIceberg reads it.
    sql(
        spark,
        f"INSERT INTO lake.{name} (id, region, total, qty, price, ts, channel) VALUES "
        "(1000, 'eu', 12345678.90, 5000000000, 0.1, timestamp'2026-05-01 00:00:00', 'web')",
    )
    assert_same_rows(
        spark_rows(spark, name), our_rows(lake, name), "both engines read Spark's INSERT after the migration"
    )
    table = lake.load_table(name)
    newest = next(task.file for task in table.scan(row_filter="id = 1000").plan_files())
    assert newest.spec_id == table.spec().spec_id

    # Spark reads our history and event tables, exactly as PyIceberg does.
    history = spark.sql(
        f"SELECT version, status, operation, checksum FROM lake._iceberg_ops.migration_history "
        f"WHERE namespace = '{ns}' ORDER BY version"
    ).collect()
    ours = runner.history()
    assert [(row.version, row.status, row.operation, row.checksum) for row in history] == [
        (row.version, row.status, row.operation, row.checksum) for row in ours
    ]
    events = spark.sql(
        f"SELECT event, version FROM lake._iceberg_ops.migration_events WHERE namespace = '{ns}' ORDER BY at"
    ).collect()
    assert [(row.event, row.version) for row in events] == [("applied", "0001"), ("applied", "0002")]
    for meta in ("_iceberg_ops.migration_history", "_iceberg_ops.migration_events"):
        assert_same_rows(our_rows(lake, meta), spark_rows(spark, meta), f"Spark reads {meta}")

    # A nightly Spark job maintains every table of the catalog, ours included; the runner works on after it.
    meta_tables = [f"_iceberg_ops.{row.tableName}" for row in spark.sql("SHOW TABLES IN lake._iceberg_ops").collect()]
    assert {"_iceberg_ops.migration_history", "_iceberg_ops.migration_events"} <= set(meta_tables), meta_tables
    cutoff = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S.%f")
    for meta in meta_tables:
        _call(spark, "rewrite_data_files", f"table => '{meta}', options => map('min-input-files', '1')")
        _call(spark, "rewrite_manifests", f"table => '{meta}'")
        _call(spark, "expire_snapshots", f"table => '{meta}', older_than => TIMESTAMP '{cutoff}', retain_last => 1")
    status = runner.status()
    assert status.current == "0002" and not status.pending, status

    # And the downgrade of the layout is what Spark sees next.
    write_migration(migrations, "0002_layout.py", MIGRATION_2, 'ctx.set_sort_order("orders", [])', "layout")
    runner = MigrationRunner(lake, namespace=ns, migrations_dir=migrations)
    runner.repair()
    runner.downgrade("-1")
    assert [(e.event, e.version) for e in runner.events()][-3:] == [
        ("applied", "0002"),
        ("repair", None),
        ("rolled_back", "0002"),
    ]
    properties = {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES lake.{name}").collect()}
    assert "sort-order" not in properties, properties
    assert (
        spark.sql(
            f"SELECT status FROM lake._iceberg_ops.migration_history WHERE namespace = '{ns}' AND version = '0002'"
        )
        .collect()[0]
        .status
        == "rolled_back"
    )


# ---------------------------------------------------------------------------------------------------
# The data mover in both directions.


def test_a_column_we_drop_and_restore_reads_its_old_values_in_spark(spark, lake, ns, tmp_path):
    """``ctx.restore_column`` on a Spark table: Spark reads the old values of rows written before the
    drop, nulls for the rows it appended while the column was gone, and keeps writing the column."""
    from iceberg_ops_provider.runner import MigrationRunner
    from tests.support.migrations import write_migration

    name = f"{ns}.orders"
    _orders(spark, name)
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_drop_note.py", 'ctx.drop_column("orders", "note")')
    write_migration(migrations, "0002_restore_note.py", 'ctx.restore_column("orders", "note")')
    runner = MigrationRunner(lake, namespace=ns, migrations_dir=migrations)
    runner.upgrade("0001")
    assert "note" not in spark.table(f"lake.{name}").columns
    accept_appends(spark, name)
    spark_append(spark, name, [100, 101], ("id", "region", "amount", "ts"))  # written while the column is gone

    runner.upgrade()

    rows = {row["id"]: row["note"] for row in spark.sql(f"SELECT id, note FROM lake.{name}").collect()}
    assert rows == {**{i: f"note {i}" for i in range(60)}, 100: None, 101: None}
    sql(spark, f"ALTER TABLE lake.{name} UNSET TBLPROPERTIES ('write.spark.accept-any-schema')")  # INSERT by position
    values = "(200, 'eu', 1.00, 1, 1.0, 'back again', timestamp'2026-04-01 00:00:00')"
    sql(spark, f"INSERT INTO lake.{name} VALUES {values}")
    assert scalar(spark, f"SELECT note FROM lake.{name} WHERE id = 200") == "back again"


def test_a_column_we_add_and_backfill_reads_in_spark_and_spark_keeps_writing(spark, lake, ns, tmp_path):
    """A migration's data steps on a Spark table: the added column filled where ``where`` holds, a delete and an
    update committed unit by unit; Spark reads exactly those rows, time-travels to the restore point, and appends."""
    from iceberg_ops_provider.runner import MigrationRunner
    from tests.support.migrations import write_migration

    name = f"{ns}.orders"
    _orders(spark, name)
    sql(spark, f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('iceberg-ops.data-step.unit-bytes'='1')")
    migrations = tmp_path / "migrations"
    write_migration(
        migrations,
        "0001_tier.py",
        'ctx.add_column("orders", "tier", "string")\n'
        'ctx.backfill("orders", "tier", "gold", where="amount >= 30")\n'
        'ctx.update_rows("orders", {"qty": lambda b: pa.compute.add(b["qty"], 100)}, where="region = \'eu\'")\n'
        'ctx.delete_rows("orders", "id >= 55")',
    )
    runner = MigrationRunner(lake, namespace=ns, migrations_dir=migrations)
    [result] = runner.upgrade()
    assert result.status == "applied" and len(result.data_steps) == 3

    rows = {r["id"]: (r["tier"], r["qty"]) for r in spark.sql(f"SELECT id, tier, qty FROM lake.{name}").collect()}
    expected = {i: ("gold" if i >= 30 else None, i % 9 + (100 if i % 2 == 0 else 0)) for i in range(55)}
    assert rows == expected
    tag = f"iceberg-ops/{ns}/0001"  # the restore point, as Spark sees it
    before = scalar(spark, f"SELECT count(*) FROM lake.{name} VERSION AS OF '{tag}'")
    assert before == 60
    accept_appends(spark, name)
    spark_append(spark, name, [300], ("id", "region", "amount", "ts"))
    assert scalar(spark, f"SELECT count(*) FROM lake.{name}") == 56


def test_data_mover_copies_spark_tables_and_spark_reads_our_copies(spark, lake, ns):
    import pyarrow as pa
    from pyiceberg.transforms import DayTransform

    from iceberg_ops_provider.data_migration import DataMover

    # Spark's table (position deletes, bucket and truncate partitions) -> our copy, then incrementally.
    source = f"{ns}.events"
    SHAPES["v2-bucket-truncate-position-deletes"](spark, source)
    mover = DataMover(lake, source, f"{ns}.events_copy", create_target=True, mode="incremental", move_id="spark-in")
    assert mover.run().complete
    assert mover.verify("checksum").ok
    assert_same_rows(spark_rows(spark, source), spark_rows(spark, f"{ns}.events_copy"), "Spark reads our copy")
    spec = [
        row.data_type
        for row in spark.sql(f"DESCRIBE TABLE lake.{ns}.events_copy").collect()
        if row.col_name.startswith("Part ")
    ]
    assert spec == ["bucket(4, id)", "truncate(6, name)"], spec
    sql(
        spark,
        f"INSERT INTO lake.{source} SELECT id + 100000, region, name, ts, amount, qty, score "
        f"FROM lake.{source} LIMIT 7",
    )
    again = DataMover(lake, source, f"{ns}.events_copy", mode="incremental", move_id="spark-in").run()
    assert again.rows == 7, again.to_json()
    assert_same_rows(spark_rows(spark, source), spark_rows(spark, f"{ns}.events_copy"), "Spark reads the increment")

    # A table we wrote (nested and temporal types, day partitions) -> our copy and a table Spark created.
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("local", pa.timestamp("us")),
            pa.field("day", pa.date32()),
            pa.field("amount", pa.decimal128(12, 2)),
            pa.field("qty", pa.int32()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("address", pa.struct([pa.field("city", pa.string()), pa.field("zip", pa.int32())])),
            pa.field("payload", pa.binary()),
            pa.field("flag", pa.bool_()),
        ]
    )
    ours = lake.create_table(f"{ns}.ours", schema)
    with ours.update_spec() as update:
        update.add_field("ts", DayTransform(), "ts_day")
    from datetime import date
    from decimal import Decimal

    for batch in range(3):
        ids = range(batch * 40, batch * 40 + 40)
        ours.append(
            pa.Table.from_pylist(
                [
                    {
                        "id": i,
                        "ts": datetime(2026, 6, 1 + i % 5, i % 24, tzinfo=UTC),
                        "local": datetime(2026, 6, 1, 12, i % 60),
                        "day": date(2026, 6, 1 + i % 28),
                        "amount": Decimal(f"{i}.{i % 100:02d}"),
                        "qty": i % 11,
                        "tags": [f"t{i % 3}", f"u{i % 5}"] if i % 4 else None,
                        "address": {"city": f"c{i % 6}", "zip": 1000 + i} if i % 5 else None,
                        "payload": bytes([i % 256, 0, 255]),
                        "flag": bool(i % 2),
                    }
                    for i in ids
                ],
                schema=schema,
            )
        )
    assert_same_rows(our_rows(lake, f"{ns}.ours"), spark_rows(spark, f"{ns}.ours"), "Spark reads a table we wrote")
    mover = DataMover(lake, f"{ns}.ours", f"{ns}.ours_copy", create_target=True, verify="checksum")
    result = mover.run()
    assert result.complete and result.verify.ok, result.to_json()
    assert_same_rows(our_rows(lake, f"{ns}.ours"), spark_rows(spark, f"{ns}.ours_copy"), "Spark reads our copy of ours")

    # Into a table Spark created: other column order, wider types, a column we leave out.
    sql(
        spark,
        f"CREATE TABLE lake.{ns}.spark_target (amount decimal(16,2), qty bigint, id bigint NOT NULL, "
        "ts timestamp, tags array<string>, address struct<city: string, zip: int>, extra string) "
        "USING iceberg PARTITIONED BY (bucket(3, id)) TBLPROPERTIES ('format-version'='2')",
    )
    columns = ["id", "ts", "amount", "qty", "tags", "address"]
    mover = DataMover(lake, f"{ns}.ours", f"{ns}.spark_target", columns=columns, verify="checksum")
    result = mover.run()
    assert result.complete and result.verify.ok, result.to_json()
    spark_order = ["amount", "qty", "id", "ts", "tags", "address"]
    assert_same_rows(
        our_rows(lake, f"{ns}.ours").project(spark_order),
        spark_rows(spark, f"{ns}.spark_target", spark_order),
        "Spark reads what we moved into its table",
    )
    assert scalar(spark, f"SELECT count(*) FROM lake.{ns}.spark_target WHERE extra IS NOT NULL") == 0


# ---------------------------------------------------------------------------------------------------
# Write-audit-publish: the mover writes an audit branch of a Spark table; Spark reads the branch, then
# main after our publish (a fast-forward, or an append after Spark's own appends), or fast-forwards it itself.


def _wap_tables(spark, ns: str) -> tuple[str, str]:
    """A Spark source of 180 events (ids 0-179) and a Spark target holding 20 events of its own (ids from 10,000)."""
    from tests.interop.support import EVENT_COLUMNS, fill

    source, target = f"{ns}.events", f"{ns}.events_wap"
    SHAPES["v1-identity"](spark, source)
    sql(
        spark,
        f"CREATE TABLE lake.{target} ({EVENT_COLUMNS}) USING iceberg PARTITIONED BY (region) "
        "TBLPROPERTIES ('format-version'='2')",
    )
    fill(spark, target, inserts=1, rows=20, start=10_000)
    return source, target


def _query_rows(spark, query: str) -> Rows:
    frame = spark.sql(query)
    return Rows.of(frame.columns, (tuple(row) for row in frame.collect()))


def _branch_rows(spark, table: str, branch: str) -> Rows:
    """``branch`` as Spark reads it by its identifier (``branch_<name>``), checked equal to ``VERSION AS OF``."""
    by_identifier = spark_rows(spark, f"{table}.`branch_{branch}`")
    by_version = _query_rows(spark, f"SELECT * FROM lake.{table} VERSION AS OF '{branch}'")
    assert_same_rows(by_identifier, by_version, f"Spark's two reads of branch {branch}")
    return by_identifier


def _spark_refs(spark, table: str) -> dict[str, int]:
    rows = spark.sql(f"SELECT name, snapshot_id FROM lake.{table}.refs").collect()
    return {row.name: row.snapshot_id for row in rows}


def _wap_mover(lake, source: str, target: str, where: str, branch: str) -> Any:
    from iceberg_ops_provider.data_migration import DataMover

    return DataMover(lake, source, target, where=where, branch=branch, commit_every_bytes=1)  # a unit per file


def test_spark_reads_our_audit_branch_and_main_after_our_fast_forward_publish(spark, lake, ns):
    source, target = _wap_tables(spark, ns)
    on_main = spark_rows(spark, target)
    moved = _query_rows(spark, f"SELECT * FROM lake.{source} WHERE id < 90")
    expected = _query_rows(spark, f"SELECT * FROM lake.{target} UNION ALL SELECT * FROM lake.{source} WHERE id < 90")
    assert len(moved) == 90 and len(expected) == 110
    fork = lake.load_table(target).metadata.current_snapshot_id
    mover = _wap_mover(lake, source, target, "id < 90", "wap-ff")

    result = mover.run()

    assert result.complete and result.units_committed >= 2, result.to_json()
    assert_same_rows(expected, _branch_rows(spark, target, "wap-ff"), "Spark reads the audit branch")
    assert_same_rows(on_main, spark_rows(spark, target), "Spark reads main before the publish")
    assert scalar(spark, f"SELECT count(*) FROM lake.{target} WHERE id < 90") == 0
    report = mover.audit(not_null=["id"], unique=["id"], min_rows=90, max_rows=90)
    assert report.ok and report.fork_snapshot_id == fork, report.to_json()
    assert _spark_refs(spark, target) == {"main": fork, "wap-ff": report.snapshot_id}

    published = mover.publish()

    assert (published.how, published.main_before, published.main_after) == ("fast_forward", fork, report.snapshot_id)
    assert_same_rows(expected, spark_rows(spark, target), "Spark reads main after our fast-forward")
    assert_same_rows(expected, our_rows(lake, target), "PyIceberg reads main after our fast-forward")
    assert _spark_refs(spark, target) == {"main": report.snapshot_id}
    # Spark keeps writing to main on top of the published snapshot.
    sql(spark, f"INSERT INTO lake.{target} SELECT * FROM lake.{source} WHERE id = 170")
    assert scalar(spark, f"SELECT count(*) FROM lake.{target}") == len(expected) + 1
    assert mover.publish().how == "already_published"


def test_spark_appends_to_main_before_our_publish_and_reads_both_once(spark, lake, ns):
    from tests.interop.support import fill

    source, target = _wap_tables(spark, ns)
    moved = _query_rows(spark, f"SELECT * FROM lake.{source} WHERE id >= 90")
    at_fork = _query_rows(spark, f"SELECT * FROM lake.{target} UNION ALL SELECT * FROM lake.{source} WHERE id >= 90")
    mover = _wap_mover(lake, source, target, "id >= 90", "wap_append")
    assert mover.run().complete
    report = mover.audit(unique=["id"], min_rows=len(moved), max_rows=len(moved))
    assert report.ok, report.to_json()

    # Spark appends to main after the audit: the branch is unchanged, main no longer at the fork.
    fill(spark, target, inserts=2, rows=10, start=30_000)
    assert_same_rows(at_fork, _branch_rows(spark, target, "wap_append"), "Spark reads the audit branch")
    assert scalar(spark, f"SELECT count(*) FROM lake.{target} WHERE id >= 90 AND id < 180") == 0
    expected = _query_rows(spark, f"SELECT * FROM lake.{target} UNION ALL SELECT * FROM lake.{source} WHERE id >= 90")
    spark_head = _spark_refs(spark, target)["main"]

    published = mover.publish()

    assert published.how == "append" and published.files >= 1, published
    assert published.main_before == spark_head and published.snapshot_id == report.snapshot_id, published
    assert_same_rows(expected, spark_rows(spark, target), "Spark reads main after our append-publish")
    assert_same_rows(expected, our_rows(lake, target), "PyIceberg reads main after our append-publish")
    assert scalar(spark, f"SELECT count(*) - count(DISTINCT id) FROM lake.{target}") == 0  # each row once
    assert _spark_refs(spark, target) == {"main": published.main_after}
    receipt = scalar(
        spark,
        f"SELECT summary['iceberg-ops.published-branch'] FROM lake.{target}.snapshots "
        f"WHERE snapshot_id = {published.main_after}",
    )
    assert receipt == f"wap_append@{report.snapshot_id}"
    # Spark's incremental read from its own last append sees exactly the published rows.
    since = spark.read.format("iceberg").option("start-snapshot-id", spark_head).load(f"lake.{target}")
    assert_same_rows(moved, Rows.of(since.columns, (tuple(row) for row in since.collect())), "Spark's increment")

    again = mover.publish()
    assert again.how == "already_published" and again.main_after == published.main_after, again
    assert_same_rows(expected, spark_rows(spark, target), "Spark reads main after a second publish")


def test_spark_fast_forwards_main_to_our_audited_branch_and_our_publish_finds_it_done(spark, lake, ns):
    from iceberg_ops_provider.data_migration.audit_branch import RECORD_PREFIX
    from iceberg_ops_provider.errors import MoveStateError

    source, target = _wap_tables(spark, ns)
    fork = lake.load_table(target).metadata.current_snapshot_id
    mover = _wap_mover(lake, source, target, "region = 'eu'", "wap-spark")
    assert mover.run().complete
    report = mover.audit(not_null=["id"], unique=["id"])
    assert report.ok, report.to_json()
    on_branch = _branch_rows(spark, target, "wap-spark")
    assert len(on_branch) == 20 + 60

    forwarded = _call(spark, "fast_forward", f"table => '{target}', branch => 'main', to => 'wap-spark'")

    assert forwarded == {"branch_updated": "main", "previous_ref": fork, "updated_ref": report.snapshot_id}
    assert_same_rows(on_branch, spark_rows(spark, target), "Spark reads main after its fast_forward")
    assert_same_rows(on_branch, our_rows(lake, target), "PyIceberg reads main after Spark's fast_forward")
    table = lake.load_table(target)
    assert table.metadata.refs["wap-spark"].snapshot_id == report.snapshot_id  # Spark leaves the branch
    history = len(table.metadata.snapshot_log)

    published = mover.publish()

    assert published.how == "already_published", published
    assert (published.snapshot_id, published.main_before, published.main_after) == (report.snapshot_id,) * 3
    table.refresh()
    assert "wap-spark" not in table.metadata.refs and RECORD_PREFIX + "wap-spark" not in table.properties
    assert table.metadata.current_snapshot_id == report.snapshot_id and len(table.metadata.snapshot_log) == history
    assert _spark_refs(spark, target) == {"main": report.snapshot_id}
    assert_same_rows(on_branch, spark_rows(spark, target), "Spark reads main after our publish")
    assert mover.publish().how == "already_published"
    with pytest.raises(MoveStateError, match="published to main already") as audited:
        mover.audit()
    assert audited.value.reason == "published"
    assert mover.run().units_committed == 0
    assert_same_rows(on_branch, spark_rows(spark, target), "Spark reads main after the move ran again")


def test_our_move_runs_on_after_spark_fast_forwarded_main_and_publishes_only_its_new_rows(spark, lake, ns):
    """Spark's fast_forward leaves the branch: the move's next run commits to it, and its audit and publish take
    only the rows after the snapshot Spark moved main to (main already holds the others)."""
    from iceberg_ops_provider.data_migration import DataMover
    from tests.interop.support import fill

    source, target = _wap_tables(spark, ns)
    mover = DataMover(
        lake, source, target, where="region = 'eu'", branch="wap-next", mode="incremental", commit_every_bytes=1
    )
    assert mover.run().complete and mover.audit().ok
    forwarded = _call(spark, "fast_forward", f"table => '{target}', branch => 'main', to => 'wap-next'")
    fill(spark, source, inserts=1, rows=30, start=1_000)  # new rows for the next run
    fill(spark, target, inserts=1, rows=6, start=40_000)  # and Spark appends to main
    new = f"SELECT * FROM lake.{source} WHERE region = 'eu' AND id >= 1000"
    added = _query_rows(spark, new)
    expected = _query_rows(spark, f"SELECT * FROM lake.{target} UNION ALL {new}")

    assert mover.run().units_committed >= 1
    report = mover.audit(unique=["id"], min_rows=len(added), max_rows=len(added))
    published = mover.publish()

    assert report.ok, report.to_json()
    assert published.how == "append" and published.main_before != forwarded["updated_ref"], published
    assert_same_rows(expected, spark_rows(spark, target), "Spark reads main after the second publish")
    assert_same_rows(expected, our_rows(lake, target), "PyIceberg reads main after the second publish")
    assert scalar(spark, f"SELECT count(*) - count(DISTINCT id) FROM lake.{target}") == 0  # each row once
    assert _spark_refs(spark, target) == {"main": published.main_after}


# ---------------------------------------------------------------------------------------------------
# Both engines' maintenance on one table, each after the other.


def _call(spark, procedure: str, arguments: str) -> dict[str, Any]:
    """A Spark procedure's one result row as a dict."""
    rows = spark.sql(f"CALL lake.system.{procedure}({arguments})").collect()
    return rows[0].asDict() if rows else {}


def test_spark_procedures_and_ours_run_after_each_other_on_one_table(spark, lake, ns):
    from tests.interop.support import fill

    name = f"{ns}.events"
    SHAPES["v2-bucket-truncate-position-deletes"](spark, name)
    table = lake.load_table(name)
    expected = spark_rows(spark, name)

    def check(step: str) -> None:
        assert_same_rows(expected, spark_rows(spark, name), f"Spark reads after {step}")
        assert_same_rows(expected, our_rows(lake, name), f"PyIceberg reads after {step}")

    def more(start: int) -> None:
        nonlocal expected
        fill(spark, name, inserts=2, rows=15, start=start)
        expected = spark_rows(spark, name)

    # Compaction: ours, then Spark's on what we wrote; more small files, then Spark's first and ours after.
    ours = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2)
    assert ours.committed_groups_count >= 1, ours.to_json()
    check("our compaction")
    theirs = _call(spark, "rewrite_data_files", f"table => '{name}', options => map('min-input-files', '2')")
    check(f"Spark's rewrite_data_files after ours ({theirs})")
    more(10_000)
    sql(spark, f"DELETE FROM lake.{name} WHERE id % 10 = 7")
    expected = spark_rows(spark, name)
    theirs = _call(
        spark,
        "rewrite_data_files",
        f"table => '{name}', options => map('min-input-files', '2', 'delete-file-threshold', '1')",
    )
    assert theirs["rewritten_data_files_count"] > 0, theirs
    check("Spark's rewrite_data_files")
    more(20_000)
    ours = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2)
    assert ours.committed_groups_count >= 1, ours.to_json()
    check("our compaction after Spark's")

    # Manifests: Spark's, then ours, then Spark's again after more commits.
    more(30_000)
    theirs = _call(spark, "rewrite_manifests", f"table => '{name}'")
    check(f"Spark's rewrite_manifests ({theirs})")
    more(40_000)
    ours_manifests = rewrite_manifests(table)
    assert ours_manifests.rewritten_manifests_count >= 2, ours_manifests.to_json()
    check("our rewrite_manifests after Spark's")
    more(50_000)
    theirs = _call(spark, "rewrite_manifests", f"table => '{name}'")
    check(f"Spark's rewrite_manifests after ours ({theirs})")

    # Expiry: ours, then Spark's; then Spark's first and ours after.
    now = datetime.now(UTC) + timedelta(seconds=1)
    expired = expire_snapshots(table, older_than=now, retain_last=3)
    assert expired.expired_snapshot_ids and not expired.failed_deletes, expired.to_json()
    check("our expire_snapshots")
    more(60_000)
    cutoff = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S.%f")
    theirs = _call(
        spark, "expire_snapshots", f"table => '{name}', older_than => TIMESTAMP '{cutoff}', retain_last => 2"
    )
    check(f"Spark's expire_snapshots after ours ({theirs})")
    more(70_000)
    # Spark's statistics of this snapshot: its expiry keeps them (the snapshot is among the last 2), ours drops them.
    for procedure in ("compute_table_stats", "compute_partition_stats"):
        _call(spark, procedure, f"table => '{name}'")
    sql(spark, f"UPDATE lake.{name} SET qty = qty + 1 WHERE id % 10 = 1")
    expected = spark_rows(spark, name)
    cutoff = (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%d %H:%M:%S.%f")
    theirs = _call(
        spark, "expire_snapshots", f"table => '{name}', older_than => TIMESTAMP '{cutoff}', retain_last => 2"
    )
    table.refresh()
    statistics = [stats.statistics_path for stats in [*table.metadata.statistics, *table.metadata.partition_statistics]]
    assert len(statistics) == 2, statistics
    expired = expire_snapshots(table, older_than=datetime.now(UTC) + timedelta(seconds=1), retain_last=1)
    assert expired.expired_snapshot_ids and not expired.failed_deletes, expired.to_json()
    assert expired.deleted_statistics_files_count == 2, expired.to_json()
    table.refresh()
    assert not table.metadata.statistics and not table.metadata.partition_statistics, table.metadata
    assert not any(Path(_local(path)).exists() for path in statistics), statistics
    check("our expire_snapshots after Spark's")

    # Orphans: each engine removes the one planted for it and nothing the other wrote.
    orphan = _plant_orphan(table)
    # Spark's procedure refuses a cut-off less than 24 hours ago; the planted files are 3 days old.
    cutoff = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%d %H:%M:%S.%f")
    found = spark.sql(f"CALL lake.system.remove_orphan_files(table => '{name}', older_than => TIMESTAMP '{cutoff}')")
    assert [row.orphan_file_location for row in found.collect()] == [f"file:{orphan}"]
    check("Spark's remove_orphan_files")
    orphan = _plant_orphan(table)
    removed = remove_orphan_files(table, older_than=datetime.now(UTC) - timedelta(days=2))
    assert removed.deleted_orphan_files_count == 1 and not removed.failed_deletes, removed.to_json()
    check("our remove_orphan_files after Spark's")
    assert not orphan.exists()
    for path in live_file_paths(table):
        assert Path(path.removeprefix("file:")).exists(), path

    sql(spark, f"INSERT INTO lake.{name} SELECT * FROM lake.{name} LIMIT 3")
    assert scalar(spark, f"SELECT count(*) FROM lake.{name}") == len(expected) + 3


# ---------------------------------------------------------------------------------------------------
# At the same time: Spark appends while our compaction and a migration run.


def spark_append(spark, name: str, ids: list[int], columns: tuple[str, ...] = ("id", "region", "ts", "amount")) -> None:
    """Spark appends rows holding only ``columns`` (of id, region, name, ts, amount): the others are null.

    Through the DataFrame API with ``merge-schema``, on a table with ``write.spark.accept-any-schema``:
    an ``INSERT`` would have to name every column, and the columns change while a migration runs.
    A table partitioned by a column needs it in the rows (Spark clusters the rows by the partitions).
    """
    from decimal import Decimal

    values = {
        "id": ("bigint", lambda i: i),
        "region": ("string", lambda i: "eu"),
        "name": ("string", lambda i: f"spark-{i % 3}"),
        "ts": ("timestamp", lambda i: datetime(2026, 3, 1 + i % 4, 8)),
        "amount": ("decimal(10,2)", lambda i: Decimal(i % 1000)),
    }
    rows = [tuple(values[column][1](i) for column in columns) for i in ids]
    frame = spark.createDataFrame(rows, ", ".join(f"{column} {values[column][0]}" for column in columns))
    frame.writeTo(f"lake.{name}").option("merge-schema", "true").append()


def accept_appends(spark, name: str) -> None:
    sql(spark, f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('write.spark.accept-any-schema'='true')")


def expect_frequent_commits(spark, name: str) -> None:
    """More commit retries, each waiting at most 1 s, as a table with a streaming writer is given.

    Both engines read ``commit.retry.*``. With the defaults (4 retries), a group's commit that loses
    the race to every one of a steady stream of appends fails with ``CommitFailedException``, as
    documented; on a loaded machine a stream of appends every second or two can do that.
    """
    sql(
        spark,
        f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('commit.retry.num-retries'='20', "
        "'commit.retry.max-wait-ms'='1000')",
    )


class SparkAppender:
    """A thread appending batches of rows to a table through Spark until stopped; knows every id it committed.

    It pauses ``pause`` seconds after each commit, as a streaming writer's trigger interval would.
    """

    def __init__(
        self, spark, name: str, first_id: int, columns: tuple[str, ...] | None = None, pause: float = 0.5
    ) -> None:
        import threading

        self.pause = pause
        self.spark, self.name, self.next_id = spark, name, first_id
        self.columns = columns or ("id", "region", "ts", "amount")
        self.committed: list[int] = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.first_commit = threading.Event()
        self.thread = threading.Thread(target=self._run, name="spark-appender", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            ids = list(range(self.next_id, self.next_id + 5))
            self.next_id += 5
            try:
                spark_append(self.spark, self.name, ids, self.columns)
            except BaseException as exc:  # reported by the test
                self.errors.append(exc)
                return
            self.committed.extend(ids)
            self.first_commit.set()
            self.stop.wait(self.pause)

    def __enter__(self) -> SparkAppender:
        self.thread.start()
        assert self.first_commit.wait(120), f"Spark's first append did not commit: {self.errors}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(120)
        assert not self.thread.is_alive(), "Spark's appender did not stop"

    def after_its_next_commit(self, commit: Any, calls: int) -> Any:
        """``commit`` whose first ``calls`` calls each wait for Spark's next commit (at most 120 s).

        Each of those commits of ours then lands on a table Spark committed to after we read it,
        whatever the machine's speed: the rebase (or refusal) is exercised, not left to timing.
        """
        held = [calls]

        def waiting(*args: Any, **kwargs: Any) -> Any:
            if held[0] > 0:
                held[0] -= 1
                seen, deadline = len(self.committed), time.monotonic() + 120
                while len(self.committed) == seen and not self.errors and time.monotonic() < deadline:
                    time.sleep(0.05)
            return commit(*args, **kwargs)

        return waiting


WITH_NAME = ("id", "region", "name", "ts", "amount")


def _ids(spark, name: str) -> list[int]:
    return sorted(row.id for row in spark.sql(f"SELECT id FROM lake.{name}").collect())


def test_spark_appends_while_our_compaction_runs(spark, lake, ns, monkeypatch):
    from iceberg_ops_provider.errors import MaintenanceConflictError
    from iceberg_ops_provider.maintenance import group_runner

    name = f"{ns}.events"
    SHAPES["v2-bucket-truncate-position-deletes"](spark, name)
    accept_appends(spark, name)
    expect_frequent_commits(spark, name)
    table = lake.load_table(name)
    expected = set(_ids(spark, name))

    # Deterministic races first: Spark commits right before one of our groups commits. Group 1 meets
    # Spark's append (kept: the commit rebases on it); group 2 meets Spark's merge-on-read DELETE of a row
    # in each file it rewrites (refused: that group is not committed and its files are deleted, the others are).
    plan = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2, dry_run=True)
    assert plan.file_groups_count >= 3, plan.to_json()
    second = plan.groups[1].data_files
    victims = [scalar(spark, f"SELECT min(id) FROM lake.{name} WHERE _file = '{path}'") for path in second]
    races = {
        1: lambda: spark_append(spark, name, [900_001], WITH_NAME),
        2: lambda: sql(spark, f"DELETE FROM lake.{name} WHERE id IN ({', '.join(map(str, victims))})"),
    }
    real = group_runner.commit_rewrite
    calls: list[int] = []

    def racing(table, validator, **kwargs):
        calls.append(1)
        if len(calls) in races:
            races.pop(len(calls))()
        return real(table, validator, **kwargs)

    monkeypatch.setattr(group_runner, "commit_rewrite", racing)
    with pytest.raises(MaintenanceConflictError) as refused:  # a commit per group, so each meets its race
        compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2, commit_every_bytes=0)
    monkeypatch.setattr(group_runner, "commit_rewrite", real)
    result = refused.value.result
    assert [group.status for group in result.groups][:2] == ["committed", "failed"], result.to_json()
    assert result.failed_groups_count == 1 and result.committed_groups_count == plan.file_groups_count - 1
    for path in result.groups[1].added_data_files:
        assert not Path(path.removeprefix("file:")).exists(), path
    expected = (expected | {900_001}) - set(victims)
    assert set(_ids(spark, name)) == expected
    rerun = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2)
    assert rerun.committed_groups_count >= 1 and rerun.failed_groups_count == 0, rerun.to_json()
    assert sorted(_ids(spark, name)) == sorted(expected)
    assert_summary_totals(table, "compaction after the refused group")

    # Then for real: Spark appends in a loop from another thread while a compaction of many groups runs.
    for first in range(500_000, 500_080, 20):  # small files in every bucket again
        spark_append(spark, name, list(range(first, first + 20)), WITH_NAME)
    expected |= set(range(500_000, 500_080))
    with SparkAppender(spark, name, 700_000, WITH_NAME) as appender:
        monkeypatch.setattr(group_runner, "commit_rewrite", appender.after_its_next_commit(real, calls=1))
        started = len(appender.committed)
        result = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2)
        during = len(appender.committed) - started
    assert not appender.errors, appender.errors
    assert result.committed_groups_count >= 2 and result.failed_groups_count == 0, result.to_json()
    assert during >= 1, "Spark committed nothing while the compaction ran"
    ids = _ids(spark, name)
    assert len(ids) == len(set(ids)), "a row was duplicated"
    assert set(ids) == expected | set(appender.committed), "a row was lost"
    assert_same_rows(spark_rows(spark, name), our_rows(lake, name), "both engines after the concurrent compaction")
    assert_summary_totals(table, "Spark's appends during our compaction")


MIGRATIONS_UNDER_LOAD = {
    "0001_channel.py": 'ctx.add_column("events", "channel", "string")',
    "0002_score.py": 'ctx.rename_column("events", "score", "rating")\nctx.alter_column("events", "qty", type="long")',
    "0003_layout.py": 'ctx.add_partition_field("events", "day(ts)")\nctx.set_sort_order("events", ["ts desc"])',
    "0004_props.py": 'ctx.set_properties("events", {"team": "ops"})\nctx.drop_column("events", "name")',
}


def test_spark_appends_while_a_migration_runs(spark, lake, ns, tmp_path, monkeypatch):
    from iceberg_ops_provider.errors import MigrationFailedError
    from iceberg_ops_provider.runner import MigrationRunner, journal
    from tests.support.migrations import write_migration

    name = f"{ns}.events"
    SHAPES["v1-identity"](spark, name)
    accept_appends(spark, name)
    expected = set(_ids(spark, name))
    migrations = tmp_path / "migrations"
    write_migration(migrations, "0001_channel.py", MIGRATIONS_UNDER_LOAD["0001_channel.py"])
    runner = MigrationRunner(lake, namespace=ns, migrations_dir=migrations)

    # Spark's append between our staging and our commit: the commit is retried on top of it (the
    # migration's requirements still hold) and the append is kept.
    real = journal.commit_atomically
    races = [lambda: spark_append(spark, name, [900_001])]

    def racing(catalog, changes):
        if races:
            races.pop()()
        return real(catalog, changes)

    monkeypatch.setattr(journal, "commit_atomically", racing)
    assert [r.status for r in runner.upgrade()] == ["applied"]
    expected.add(900_001)
    assert set(_ids(spark, name)) == expected

    # Spark's schema change between our staging and our commit: the migration is refused, recorded
    # failed with nothing committed, and runs on the next upgrade.
    write_migration(migrations, "0002_score.py", MIGRATIONS_UNDER_LOAD["0002_score.py"])
    races.append(lambda: sql(spark, f"ALTER TABLE lake.{name} ADD COLUMN spark_col string"))
    with pytest.raises(MigrationFailedError, match="None of its changes were committed"):
        runner.upgrade()
    assert "rating" not in spark.table(f"lake.{name}").columns
    assert [(r.version, r.status) for r in runner.history()] == [("0001", "applied"), ("0002", "failed")]
    assert [r.status for r in runner.upgrade()] == ["applied"]
    monkeypatch.setattr(journal, "commit_atomically", real)
    columns = spark.table(f"lake.{name}").columns
    assert "rating" in columns and "spark_col" in columns, columns

    # Then for real: Spark appends in a loop while two more migrations run.
    for file_name in ("0003_layout.py", "0004_props.py"):
        write_migration(migrations, file_name, MIGRATIONS_UNDER_LOAD[file_name])
    with SparkAppender(spark, name, 700_000) as appender:
        monkeypatch.setattr(journal, "commit_atomically", appender.after_its_next_commit(real, calls=2))
        started = len(appender.committed)
        results = runner.upgrade()
        during = len(appender.committed) - started
    assert not appender.errors, appender.errors
    assert during >= 1, "Spark committed nothing while the migrations ran"
    assert [(r.version, r.status) for r in results] == [("0003", "applied"), ("0004", "applied")]
    ids = _ids(spark, name)
    assert len(ids) == len(set(ids)), "a row was duplicated"
    assert set(ids) == expected | set(appender.committed), "a row was lost"
    assert "name" not in spark.table(f"lake.{name}").columns
    assert_same_rows(spark_rows(spark, name), our_rows(lake, name), "both engines after the concurrent migration")
    history = spark.sql(
        f"SELECT version, status FROM lake._iceberg_ops.migration_history WHERE namespace = '{ns}' ORDER BY version"
    ).collect()
    assert [(row.version, row.status) for row in history] == [(v, "applied") for v in ("0001", "0002", "0003", "0004")]


# ---------------------------------------------------------------------------------------------------
# The same question to both engines: what a dry run of ours says, Spark's procedure does.


def _local(location: str) -> str:
    """``file:/p``, ``file:///p`` and ``/p`` as one path."""
    return "/" + location.removeprefix("file:").lstrip("/")


def _age_every_file(root: Path, days: int) -> None:
    moment = (datetime.now(UTC) - timedelta(days=days)).timestamp()
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (moment, moment))


def test_our_dry_runs_plan_what_spark_procedures_do(spark, lake, ns):
    name = f"{ns}.events"
    SHAPES["v2-bucket-truncate-position-deletes"](spark, name)
    sql(
        spark,
        f"ALTER TABLE lake.{name} SET TBLPROPERTIES ('write.metadata.previous-versions-max'='3')",
        f"ALTER TABLE lake.{name} CREATE TAG first_load AS OF VERSION "
        f"{scalar(spark, f'SELECT min_by(snapshot_id, committed_at) FROM lake.{name}.snapshots')}",
        f"ALTER TABLE lake.{name} CREATE BRANCH audit RETAIN 7 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
        f"INSERT INTO lake.{name}.branch_audit SELECT id + 5000, region, name, ts, amount, qty, score "
        f"FROM lake.{name} LIMIT 4",
        f"INSERT INTO lake.{name}.branch_audit SELECT id + 6000, region, name, ts, amount, qty, score "
        f"FROM lake.{name} LIMIT 4",
        f"DELETE FROM lake.{name}.branch_audit WHERE id % 10 = 1",
    )
    # Table (Puffin) and partition statistics of an old snapshot, which expiry removes, and of the current one.
    older = scalar(spark, f"SELECT snapshot_id FROM lake.{name}.snapshots ORDER BY committed_at LIMIT 1 OFFSET 1")
    for procedure in ("compute_table_stats", "compute_partition_stats"):
        _call(spark, procedure, f"table => '{name}', snapshot_id => {older}")
        _call(spark, procedure, f"table => '{name}'")
    table = lake.load_table(name)
    root = Path(_local(table.location()))

    # Orphans: everything dated 3 days back (Spark refuses a younger cut-off), then files no metadata
    # references planted where each engine's rules differ most: partition folders, hidden names,
    # metadata, and metadata files that fell out of the metadata log.
    data = root / "data"
    partition = next(path for path in data.iterdir() if path.is_dir() and not path.name.startswith("."))
    planted = [
        data / "orphan-a.parquet",
        partition / "orphan-b.parquet",
        root / "metadata" / "orphan-c.avro",
        root / "orphan-d.txt",
    ]
    hidden = [data / "_temporary" / "x.parquet", data / ".hidden.parquet"]
    for path in planted + hidden:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"orphan")
    _age_every_file(root, days=3)
    cutoff = datetime.now(UTC) - timedelta(days=2)
    ours = remove_orphan_files(table, older_than=cutoff, dry_run=True)
    theirs = spark.sql(
        f"CALL lake.system.remove_orphan_files(table => '{name}', "
        f"older_than => TIMESTAMP '{cutoff.strftime('%Y-%m-%d %H:%M:%S')}', dry_run => true)"
    ).collect()
    spark_orphans = sorted(_local(row.orphan_file_location) for row in theirs)
    our_orphans = sorted(_local(path) for path in ours.orphan_file_locations)
    assert our_orphans == spark_orphans, f"ours only: {set(our_orphans) - set(spark_orphans)}; Spark's only: " + str(
        set(spark_orphans) - set(our_orphans)
    )
    assert {str(path) for path in planted} <= set(our_orphans)
    assert any("metadata.json" in path for path in our_orphans), "metadata files that left the log are orphans"

    # Expiry: our dry run names the snapshots Spark's procedure then expires, with the files it deletes.
    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    planned = expire_snapshots(table, older_than=cutoff, retain_last=1, dry_run=True)
    before = {row.snapshot_id for row in spark.sql(f"SELECT snapshot_id FROM lake.{name}.snapshots").collect()}
    done = _call(
        spark,
        "expire_snapshots",
        f"table => '{name}', older_than => TIMESTAMP '{cutoff.strftime('%Y-%m-%d %H:%M:%S.%f')}', retain_last => 1",
    )
    after = {row.snapshot_id for row in spark.sql(f"SELECT snapshot_id FROM lake.{name}.snapshots").collect()}
    assert sorted(planned.expired_snapshot_ids) == sorted(before - after), (planned.to_json(), done)
    for key in (
        "deleted_data_files_count",
        "deleted_position_delete_files_count",
        "deleted_manifest_files_count",
        "deleted_manifest_lists_count",
        "deleted_statistics_files_count",
    ):
        assert getattr(planned, key) == done[key], (key, planned.to_json(), done)
    assert done["deleted_statistics_files_count"] == 2, done

    # Compaction: our dry run plans the files Spark's rewrite_data_files rewrites, with the same options.
    table.refresh()
    planned = compact_small_files_streaming(table, target_file_size_bytes=TARGET, min_input_files=2, dry_run=True)
    done = _call(
        spark,
        "rewrite_data_files",
        f"table => '{name}', options => map('min-input-files', '2', 'target-file-size-bytes', '{TARGET}')",
    )
    assert planned.rewritten_data_files_count == done["rewritten_data_files_count"], (planned.to_json(), done)
    assert planned.file_groups_count >= 1
    assert sum(group.expected_output_files for group in planned.groups) == done["added_data_files_count"], (
        planned.to_json(),
        done,
    )
