"""Property test: over random table histories, maintenance never deletes what a retained snapshot needs.

Histories mix appends, overwrites, deletes, schema and partition-spec changes, tags, branches (with
writes of their own), rollbacks and expiries with random parameters. After every expiry, each
retained snapshot must read exactly the rows it read when it was made, and every file a retained
snapshot or ref reaches must still exist.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.expressions import LessThan
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import StringType

from iceberg_ops_provider.core.catalog import CatalogFactory
from iceberg_ops_provider.maintenance import expire_snapshots
from iceberg_ops_provider.maintenance.files import ManifestReader

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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, last=EXPIRE)
def test_expiry_never_deletes_what_a_retained_snapshot_or_ref_needs(steps, last):
    steps = [*steps, last]  # every history ends with an expiry
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        catalog = CatalogFactory.build("sqlite", db_path=root / "c.db", warehouse_dir=root / "w")
        catalog.create_namespace("p")
        schema = pa.schema([pa.field("id", pa.int64())])
        table = catalog.create_table("p.t", schema)
        expected: dict[int, Counter] = {}
        next_id = 0

        def remember() -> None:
            for snapshot in table.snapshots():
                expected.setdefault(snapshot.snapshot_id, _rows(table, snapshot.snapshot_id))

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
                name = f"{kind}{len(table.refs())}"
                if kind == "tag":
                    table.manage_snapshots().create_tag(target, name).commit()
                else:
                    table.manage_snapshots().create_branch(target, name).commit()
                    table.append(batch(3), branch=name)
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
            elif kind == "expire":
                retain_last, all_old, delete_files = arg
                remember()
                cutoff = datetime.now(UTC) + timedelta(seconds=1) if all_old else None
                planned = expire_snapshots(table, older_than=cutoff, retain_last=retain_last, dry_run=True)
                done = expire_snapshots(table, older_than=cutoff, retain_last=retain_last, delete_files=delete_files)
                assert planned.expired_snapshot_ids == done.expired_snapshot_ids
                table = catalog.load_table("p.t")
                for snapshot in table.snapshots():
                    assert _rows(table, snapshot.snapshot_id) == expected[snapshot.snapshot_id]
                missing = [p for p in _reachable(table) if not os.path.exists(p.removeprefix("file://"))]
                assert missing == [], missing
            remember()
        if table.current_snapshot() is not None:
            # The table still takes writes and reads after all of it.
            table.append(batch(1))
            assert sum(_rows(table, table.current_snapshot().snapshot_id).values()) >= 1
