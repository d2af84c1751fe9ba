"""The table page's parts computed from metadata are kept per metadata location: a second view of the same
state computes nothing, a commit makes the next view compute again. The view is called directly, on a real
SQLite catalog (no api-server: what is measured is the view's work)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from iceberg_ops_provider.catalogs.sources import from_options
from iceberg_ops_provider.ui import metadata_cache, views
from iceberg_ops_provider.ui.connections import CatalogConnection
from iceberg_ops_provider.ui.reads import Reads
from iceberg_ops_provider.ui.settings import UiSettings
from tests.support.lake import Lake

SETTINGS = UiSettings(
    enabled=True, migrations_dir=None, connections=(), cache_seconds=0, events_page_size=50, parallelism=4
)
ARROW = pa.schema([pa.field("p", pa.int64()), pa.field("v", pa.string())])


@pytest.fixture
def lake_table(tmp_path, monkeypatch):
    # The health report is kept for CLOCK_SECONDS: a view crossing that boundary would measure again.
    monkeypatch.setattr(metadata_cache, "CLOCK_SECONDS", 10**9)
    lake = Lake(tmp_path)  # this folder's `lake` fixture is the api-server's
    catalog = lake.catalog()
    catalog.create_namespace("shop")
    schema = Schema(NestedField(1, "p", LongType(), required=False), NestedField(2, "v", StringType(), required=False))
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="p"))
    table = catalog.create_table("shop.wide", schema=schema, partition_spec=spec)
    for n in range(3):
        table.append(pa.table({"p": [n, n + 1], "v": ["x", "y"]}, schema=ARROW))
    spec = from_options("sqlite", db_path=str(lake.db_path), warehouse_dir=str(lake.warehouse))
    conn = CatalogConnection("lake", "iceberg_ops", spec)
    return table, conn


def test_a_second_view_of_the_same_metadata_computes_nothing_and_a_commit_computes_again(lake_table):
    table, conn = lake_table
    reads = Reads()
    first = views.table_view(conn, "shop", "wide", SETTINGS, reads)
    assert first["errors"] == {}
    computed = reads.metadata.computed
    assert computed == 4  # health (with the file layout), maintenance, details, timeline

    second = views.table_view(conn, "shop", "wide", SETTINGS, reads)  # the reads expired (cache_seconds 0)
    assert reads.metadata.computed == computed
    for part in ("details", "timeline", "files", "maintenance"):
        assert second[part] == first[part]
    assert second["health"]["generated_at"] == first["health"]["generated_at"]  # kept, not measured again

    table.append(pa.table({"p": [9], "v": ["z"]}, schema=ARROW))
    third = views.table_view(conn, "shop", "wide", SETTINGS, reads)
    assert reads.metadata.computed == computed + 4
    assert third["timeline"]["snapshots"] == first["timeline"]["snapshots"] + 1
    assert third["files"]["files"] == first["files"]["files"] + 1
    assert third["details"]["metadata_location"] != first["details"]["metadata_location"]


def test_every_part_is_in_the_view_and_the_policy_is_read_each_time(lake_table):
    table, conn = lake_table
    reads = Reads()
    view = views.table_view(conn, "shop", "wide", SETTINGS, reads)
    assert set(view) >= {"facts", "health", "files", "maintenance", "details", "timeline", "policy"}
    assert view["policy"]["enabled"] is True
    assert view["files"]["largest"][0]["data_files"] == 2  # p=1 and p=2 have two files each
    with table.transaction() as transaction:  # a bad policy value: the parts that judge by it say so
        transaction.set_properties({"iceberg-ops.maintenance.enabled": "perhaps"})
    view = views.table_view(conn, "shop", "wide", SETTINGS, reads)
    assert "iceberg-ops.maintenance.enabled" in view["errors"]["policy"]
    assert view["errors"]["files"] == view["errors"]["health"]
    assert view["details"] is not None and view["timeline"] is not None  # the rest of the page stands
