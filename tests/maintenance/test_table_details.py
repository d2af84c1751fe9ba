"""A table's shape, snapshot timeline, metadata growth and file layout, read from its metadata alone."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, StructType

from iceberg_ops_provider.maintenance.file_layout import file_layout
from iceberg_ops_provider.maintenance.health import table_health_report
from iceberg_ops_provider.maintenance.table_details import table_details
from iceberg_ops_provider.maintenance.timeline import snapshot_timeline

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True, doc="the key"),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "address", StructType(NestedField(4, "city", StringType(), required=False)), required=False),
    identifier_field_ids=[1],
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("address", pa.struct([pa.field("city", pa.string())])),
    ]
)


def _rows(ids: list[int], region: str) -> pa.Table:
    return pa.table({"id": ids, "region": [region] * len(ids), "address": [{"city": "x"}] * len(ids)}, schema=ARROW)


@pytest.fixture
def table(catalog, namespace):
    """Partitioned by region, then by a bucket of id too; a tag, a branch, appends, a delete, a property."""
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table(f"{namespace}.orders", schema=SCHEMA, partition_spec=spec)
    table.append(_rows(list(range(100)), "eu"))
    table.append(_rows([1000], "us"))
    table.manage_snapshots().create_tag(table.current_snapshot().snapshot_id, "before-bucket").commit()
    with table.update_spec() as update:
        update.add_field("id", BucketTransform(4), "id_bucket")
    table.append(_rows([2000, 2001], "us"))
    table.manage_snapshots().create_branch(table.current_snapshot().snapshot_id, "audit").commit()
    table.delete(EqualTo("region", "us"))
    with table.transaction() as transaction:
        transaction.set_properties({"write.target-file-size-bytes": "1048576"})
    return catalog.load_table(f"{namespace}.orders")


def test_details_list_the_schema_specs_sort_order_properties_and_refs(table):
    details = table_details(table)
    fields = {field.name: field for field in details.fields}
    assert list(fields) == ["id", "region", "address", "address.city"]
    assert (fields["id"].type, fields["id"].required, fields["id"].doc) == ("long", True, "the key")
    assert (fields["address"].type, fields["address.city"].depth) == ("struct", 1)
    assert details.identifier_field_ids == (1,)
    assert [(spec.spec_id, spec.current) for spec in details.specs] == [(0, False), (1, True)]
    current = details.specs[1].fields
    assert [(f.name, f.transform, f.source) for f in current] == [
        ("region", "identity", "region"),
        ("id_bucket", "bucket[4]", "id"),
    ]
    assert [order.fields for order in details.sort_orders] == [()]  # unsorted
    assert dict(details.properties)["write.target-file-size-bytes"] == "1048576"
    refs = {ref.name: ref for ref in details.refs}
    assert [ref.name for ref in details.refs] == ["main", "audit", "before-bucket"]
    assert (refs["audit"].kind, refs["before-bucket"].kind) == ("branch", "tag")
    assert details.to_json()["specs"][1]["fields"][1]["transform"] == "bucket[4]"


def test_the_timeline_has_each_snapshot_with_what_it_added_and_removed_and_its_refs(table):
    timeline = snapshot_timeline(table)
    assert timeline.snapshots == len(table.metadata.snapshots) == len(timeline.rows)
    newest, oldest = timeline.rows[0], timeline.rows[-1]
    assert newest.snapshot_id == table.current_snapshot().snapshot_id
    assert newest.operation in ("delete", "overwrite") and newest.removed_data_files and newest.removed_bytes
    assert newest.branches == ("main",)
    assert (oldest.operation, oldest.added_data_files, oldest.added_records) == ("append", 1, 100)
    assert oldest.branches == ("main", "audit")  # in both histories
    tagged = [row for row in timeline.rows if row.tags]
    assert [row.tags for row in tagged] == [("before-bucket",)]
    assert tagged[0].snapshot_id == table.metadata.refs["before-bucket"].snapshot_id
    assert all(row.written_by == {} or "engine-name" in row.written_by for row in timeline.rows)
    assert snapshot_timeline(table, limit=2).rows == timeline.rows[:2]


def test_metadata_growth_sizes_every_file_of_the_log_and_says_which_is_gone(table):
    growth = snapshot_timeline(table).growth
    assert len(growth) == len(table.metadata.metadata_log) + 1
    assert growth[-1].current and growth[-1].location == table.metadata_location
    assert all(point.bytes for point in growth)
    assert growth[-1].bytes > growth[0].bytes  # more snapshots, specs and refs
    Path(growth[0].location.removeprefix("file://")).unlink()
    again = snapshot_timeline(table).growth
    assert again[0].bytes is None and again[1].bytes == growth[1].bytes


def test_the_file_layout_comes_from_the_health_report_with_the_largest_partitions(table):
    report = table_health_report(table)
    layout = file_layout(report, top=1)
    assert layout.files == report.data_files.files == sum(r.files for r in layout.histogram)
    assert layout.bytes == sum(r.bytes for r in layout.histogram)
    assert layout.small_file_bytes == int(1048576 * report.thresholds.small_file_fraction)
    assert all(r.small for r in layout.histogram)  # every file here is far under the 1 MiB target
    assert len(layout.largest) == 1 and layout.largest[0].path == "region=eu"
    assert layout.partitions == len([p for p in report.partitions if p.data_files])
    assert layout.to_json()["largest"][0]["times_median"] == layout.largest[0].times_median


def test_a_table_without_snapshots(catalog, namespace):
    table = catalog.create_table(f"{namespace}.empty", schema=SCHEMA)
    assert snapshot_timeline(table).rows == ()
    assert table_details(table).refs == ()
    layout = file_layout(table_health_report(table))
    assert (layout.files, layout.histogram, layout.largest, layout.skew) == (0, (), (), None)


def test_properties_and_writers_holding_a_credential_are_masked(catalog, namespace):
    secrets = {
        "s3.secret-access-key": "SECRET-ONE",
        "client.secret": "SECRET-TWO",
        "token": "SECRET-THREE",
        "rest.uri": "https://user:SECRET-FOUR@host/api?sig=SECRET-FIVE",
    }
    table = catalog.create_table(f"{namespace}.keys", schema=SCHEMA, properties={**secrets, "owner": "sales"})
    table.append(_rows([1], "eu"), snapshot_properties={"app-id": "https://u:SECRET-SIX@spark/app"})
    table = catalog.load_table(f"{namespace}.keys")

    details = table_details(table).to_json()
    timeline = snapshot_timeline(table).to_json()
    shown = repr(details) + repr(timeline)
    assert [word for word in ("ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX") if f"SECRET-{word}" in shown] == []
    assert details["properties"]["owner"] == "sales"  # the rest as written
    assert details["properties"]["client.secret"] == "***"
    assert details["properties"]["rest.uri"] == "https://user:***@host/api?sig=***"
    assert timeline["rows"][0]["written_by"]["app-id"] == "https://u:***@spark/app"


def test_metadata_growth_sizes_no_file_outside_the_table(table, tmp_path: Path):
    # A metadata log naming any path (written by hand, or by a hostile writer) must not make a reader stat it:
    # the page would show whether that file exists, and its size.
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import MetadataLogEntry

    outside = tmp_path / "elsewhere" / "secret.metadata.json"
    outside.parent.mkdir()
    outside.write_text("x" * 1234)
    log = [*table.metadata.metadata_log, MetadataLogEntry(metadata_file=f"file://{outside}", timestamp_ms=1)]
    forged = Table(
        table.name(),
        table.metadata.model_copy(update={"metadata_log": log}),
        table.metadata_location,
        table.io,
        table.catalog,
    )
    growth = {point.location: point.bytes for point in snapshot_timeline(forged).growth}
    assert growth[f"file://{outside}"] is None
    assert all(size for location, size in growth.items() if location != f"file://{outside}")  # the table's own
