"""Compaction on S3 for real: SeaweedFS's Iceberg REST catalog (the S3 Tables protocol) and a SQL
catalog whose warehouse is on moto's S3 server. Files are read, written and (after a conflict)
deleted through the table's FileIO."""

from __future__ import annotations

import boto3
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import MaintenanceConflictError
from iceberg_ops_provider.maintenance import group_runner
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from tests.support.servers import boto_kwargs
from tests.support.tables import (
    batch,
    commit_delete_files,
    counted,
    live_data_files,
    position_delete_file,
    rows,
    small_files_table,
)

pytestmark = pytest.mark.backends

TARGET = 1024 * 1024


def _rest_catalog(seaweedfs, bucket: str):
    return seaweedfs.rest_catalog(bucket)


def _keys(endpoint: str, bucket: str) -> set[str]:
    client = boto3.client("s3", **boto_kwargs(endpoint))
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {f"s3://{bucket}/{item['Key']}" for page in pages for item in page.get("Contents", [])}


def test_compaction_through_the_s3_tables_protocol_on_seaweedfs_keeps_a_concurrent_append(
    seaweedfs, unique_name, monkeypatch
):
    seaweedfs.create_table_bucket(unique_name)
    catalog, other = _rest_catalog(seaweedfs, unique_name), _rest_catalog(seaweedfs, unique_name)
    table = small_files_table(catalog, f"{unique_name}.events", appends=6, rows=40, partitioned=True)
    victim = sorted(live_data_files(table), key=lambda f: f.file_path)[0]
    commit_delete_files(table, [position_delete_file(table, {victim.file_path: [0, 1]})])
    before, old_snapshot = rows(table), table.current_snapshot().snapshot_id
    appended = batch(90_000, 6)
    real = group_runner.commit_rewrite
    calls = []

    def racing(table_, validator, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            other.load_table(f"{unique_name}.events").append(appended)
        return real(table_, validator, **kwargs)

    monkeypatch.setattr(group_runner, "commit_rewrite", racing)

    result = compact_small_files_streaming(table, target_file_size_bytes=TARGET)

    assert result.committed_groups_count == 2 and result.removed_delete_files_count == 1
    assert rows(table) == before + counted(appended)
    assert rows(table, snapshot_id=old_snapshot) == before
    assert all(f.file_path.startswith("s3://") for f in live_data_files(table))
    assert len(live_data_files(table)) == 4  # one per partition, plus the two appended files


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
def test_compaction_with_its_warehouse_on_moto_s3_and_a_refused_group_cleaned_up(
    moto_server, unique_name, tmp_path, monkeypatch
):
    moto_server.create_bucket(unique_name)
    properties = moto_server.s3_properties()
    build = lambda: CatalogFactory.build(  # noqa: E731
        "sqlite", db_path=tmp_path / "c.db", warehouse_dir=f"s3://{unique_name}/wh", **properties
    )
    catalog = build()
    table = small_files_table(catalog, "sales.events", appends=6, rows=40, partitioned=True)
    before = rows(table)
    keys = _keys(moto_server.endpoint, unique_name)

    # A dry run reads only; a real run then rewrites both partitions.
    assert compact_small_files_streaming(table, target_file_size_bytes=TARGET, dry_run=True).file_groups_count == 2
    assert _keys(moto_server.endpoint, unique_name) == keys
    result = compact_small_files_streaming(table, target_file_size_bytes=TARGET)
    assert result.committed_groups_count == 2 and rows(table) == before
    new_files = {f.file_path for f in live_data_files(table)}
    assert len(new_files) == 2 and new_files <= _keys(moto_server.endpoint, unique_name)

    # A group refused by a concurrent delete leaves none of its files in the bucket.
    for number in range(6):
        table.append(batch(10_000 + number * 40, 40))
    other = build()
    real = group_runner.commit_rewrite
    calls = []

    def racing(table_, validator, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            other.load_table("sales.events").delete("id = 10000")
        return real(table_, validator, **kwargs)

    keys = _keys(moto_server.endpoint, unique_name)
    monkeypatch.setattr(group_runner, "commit_rewrite", racing)
    with pytest.raises(MaintenanceConflictError) as caught:
        compact_small_files_streaming(table, target_file_size_bytes=TARGET)
    assert [g.status for g in caught.value.result.groups] == ["failed", "committed"]
    assert set(caught.value.result.groups[0].data_files) <= keys  # nothing deleted the refused group's inputs
    table.refresh()
    written_since = _keys(moto_server.endpoint, unique_name) - keys
    live = {f.file_path for f in live_data_files(table)}
    leftovers = {k for k in written_since if k.endswith(".parquet") and "category=a" in k} - live
    assert leftovers == set()
