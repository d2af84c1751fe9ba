"""Property test: over random table histories, maintenance never deletes what a retained snapshot needs.

Histories mix appends, overwrites, deletes, schema and partition-spec changes, tags, branches (with
writes of their own), rollbacks, and the maintenance calls: expiries with random parameters,
compactions, manifest rewrites and orphan removals. After every maintenance call, each retained
snapshot must read exactly the rows it read when it was made (a compaction or manifest rewrite adds
a snapshot reading what the one before it read), and every file a retained snapshot or ref reaches
must still exist. Orphan removal must find every planted orphan and nothing any snapshot reaches.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import boto3
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.expressions import LessThan
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import StringType

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.maintenance import (
    compact_small_files_streaming,
    expire_snapshots,
    remove_orphan_files,
    rewrite_manifests,
)
from iceberg_ops_provider.maintenance.files import ManifestReader
from tests.support.servers import boto_kwargs

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 20)),
        st.tuples(st.just("overwrite"), st.integers(1, 10)),
        st.tuples(st.just("delete"), st.integers(0, 60)),
        st.tuples(st.just("add_column"), st.none()),
        st.tuples(st.just("partition"), st.none()),
        st.tuples(st.just("tag"), st.integers(0, 1_000)),
        st.tuples(st.just("branch"), st.integers(0, 1_000)),
        st.tuples(st.just("rollback"), st.integers(0, 1_000)),
        EXPIRE := st.tuples(st.just("expire"), st.tuples(st.integers(1, 4), st.booleans(), st.booleans())),
        EXPIRE,  # twice as likely as any other step
        st.tuples(st.just("compact"), st.integers(2, 5)),
        st.tuples(st.just("rewrite_manifests"), st.none()),
        st.tuples(st.just("orphans"), st.integers(1, 3)),
    ),
    min_size=3,
    max_size=14,
)


def _rows(table, snapshot_id: int) -> Counter:
    data = table.scan(snapshot_id=snapshot_id, selected_fields=("id",)).to_arrow()
    return Counter(data.column("id").to_pylist())


def _reachable(table) -> set[str]:
    reader = ManifestReader(table.io)
    paths: set[str] = set()
    for snapshot in table.snapshots():
        paths.add(snapshot.manifest_list)
        for manifest in reader.manifests(snapshot):
            paths.add(manifest.manifest_path)
            paths.update(entry.path for entry in reader.entries(manifest) if entry.live)
    return paths


def _plain(location: str) -> str:
    """A local path, whether written ``file:///x``, ``file:/x`` or ``/x``."""
    return urlparse(location).path if location.startswith("file:") else location


def _check(table, expected: dict[int, Counter], storage) -> None:
    """Every retained snapshot reads what it read when made; every file reached exists."""
    for snapshot in table.snapshots():
        if snapshot.snapshot_id in expected:
            assert _rows(table, snapshot.snapshot_id) == expected[snapshot.snapshot_id]
    missing = [p for p in _reachable(table) if not storage.exists(p)]
    assert missing == [], missing


class LocalStorage:
    """Files of a table on the local file system."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def exists(self, location: str) -> bool:
        return os.path.exists(_plain(location))

    def plant(self, table, folder: str, name: str) -> str:
        path = Path(_plain(table.location())) / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"left behind")
        return str(path)

    def same(self, location: str) -> str:
        return _plain(location)


class S3Storage:
    """Files of a table in an S3 bucket of a real server on loopback."""

    def __init__(self, s3) -> None:
        self.client = boto3.client("s3", **boto_kwargs(s3.endpoint))
        self.bucket = s3.bucket

    def _key(self, location: str) -> str:
        return urlparse(location).path.lstrip("/")

    def exists(self, location: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(location))
            return True
        except self.client.exceptions.ClientError:
            return False

    def plant(self, table, folder: str, name: str) -> str:
        location = f"{table.location().rstrip('/')}/{folder}/{name}"
        self.client.put_object(Bucket=self.bucket, Key=self._key(location), Body=b"left behind")
        return self.same(location)

    def same(self, location: str) -> str:
        return "s3://" + location.split("://", 1)[1]


@pytest.mark.long  # seconds of real subprocesses or catalogs; make test-all runs it
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, last=EXPIRE)
def test_maintenance_never_deletes_what_a_retained_snapshot_or_ref_needs(steps, last):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        catalog = CatalogFactory.build("sqlite", db_path=root / "c.db", warehouse_dir=root / "w")
        catalog.create_namespace("p")
        _run_history(catalog, "p.t", [*steps, last], LocalStorage(root))


@pytest.mark.backends
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS, last=EXPIRE)
def test_the_same_holds_on_s3(s3_catalog, steps, last):
    catalog = s3_catalog.catalog
    if ("p",) not in catalog.list_namespaces():
        catalog.create_namespace("p")
    name = f"p.t{uuid.uuid4().hex[:8]}"
    _run_history(catalog, name, [*steps, last], S3Storage(s3_catalog))


def _run_history(catalog, name: str, steps: list, storage) -> None:
    """Play ``steps`` on a new table ``name``, checking every retained snapshot after each maintenance call."""
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table(name, schema)
    expected: dict[int, Counter] = {}
    next_id = 0

    def remember() -> None:
        # Only snapshots not seen before are read: what a snapshot read when made is never overwritten
        # (and re-reading the others here would only repeat what _check does after each maintenance call).
        for snapshot in table.snapshots():
            if snapshot.snapshot_id not in expected:
                expected[snapshot.snapshot_id] = _rows(table, snapshot.snapshot_id)

    def batch(count: int) -> pa.Table:
        nonlocal next_id
        ids = list(range(next_id, next_id + count))
        next_id += count
        columns = {"id": pa.array(ids, pa.int64())}
        for field in table.schema().fields[1:]:
            columns[field.name] = pa.array([None] * count, pa.string())
        return pa.table(columns)

    partitioned = False
    for kind, arg in steps:
        snapshots = table.snapshots()
        if kind == "append":
            table.append(batch(arg))
        elif kind == "overwrite":
            table.overwrite(batch(arg))
        elif kind == "delete" and table.current_snapshot() is not None:
            table.delete(LessThan("id", arg))
        elif kind == "add_column":
            with table.update_schema() as update:
                update.add_column(f"c{len(table.schema().fields)}", StringType())
        elif kind == "partition" and not partitioned:
            with table.update_spec() as update:
                update.add_field("id", BucketTransform(4), "id_bucket")
            partitioned = True
        elif kind in ("tag", "branch") and snapshots:
            target = snapshots[arg % len(snapshots)].snapshot_id
            ref = f"{kind}{len(table.refs())}"
            if kind == "tag":
                table.manage_snapshots().create_tag(target, ref).commit()
            else:
                table.manage_snapshots().create_branch(target, ref).commit()
                table.append(batch(3), branch=ref)
        elif kind == "rollback" and table.current_snapshot() is not None:
            current = table.current_snapshot()
            ancestors = []
            snapshot = current
            while snapshot is not None and snapshot.parent_snapshot_id is not None:
                snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id)
                if snapshot is not None:
                    ancestors.append(snapshot.snapshot_id)
            if ancestors:
                table.manage_snapshots().rollback_to_snapshot(ancestors[arg % len(ancestors)]).commit()
        elif kind in ("compact", "rewrite_manifests") and table.current_snapshot() is not None:
            remember()
            before = _rows(table, table.current_snapshot().snapshot_id)
            if kind == "compact":
                planned = compact_small_files_streaming(table, min_input_files=arg, dry_run=True)
                done = compact_small_files_streaming(table, min_input_files=arg)
                assert planned.rewritten_data_files_count == done.rewritten_data_files_count
            else:
                rewrite_manifests(table)
            table = catalog.load_table(name)
            assert _rows(table, table.current_snapshot().snapshot_id) == before
            _check(table, expected, storage)
        elif kind == "orphans":
            remember()
            planted = {
                storage.plant(table, "data" if n % 2 == 0 else "metadata", f"orphan-{uuid.uuid4().hex}.parquet")
                for n in range(arg)
            }
            reachable = {storage.same(p) for p in _reachable(table)}
            result = remove_orphan_files(table, older_than=datetime.now(UTC) + timedelta(seconds=1))
            found = {storage.same(p) for p in result.orphan_file_locations}
            assert planted <= found, (planted, found)
            assert not (found & reachable), found & reachable
            table = catalog.load_table(name)
            _check(table, expected, storage)
        elif kind == "expire":
            retain_last, all_old, delete_files = arg
            remember()
            cutoff = datetime.now(UTC) + timedelta(seconds=1) if all_old else None
            planned = expire_snapshots(table, older_than=cutoff, retain_last=retain_last, dry_run=True)
            done = expire_snapshots(table, older_than=cutoff, retain_last=retain_last, delete_files=delete_files)
            assert planned.expired_snapshot_ids == done.expired_snapshot_ids
            table = catalog.load_table(name)
            _check(table, expected, storage)
        remember()
    if table.current_snapshot() is not None:
        # The table still takes writes and reads after all of it.
        table.append(batch(1))
        assert sum(_rows(table, table.current_snapshot().snapshot_id).values()) >= 1
