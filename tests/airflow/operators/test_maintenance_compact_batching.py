"""``IcebergCompactOperator``'s ``commit_every_bytes`` and ``max_concurrent_groups`` fields: what they do to
the snapshots a compaction makes, and the bad values, refused naming the field, with nothing written."""

from __future__ import annotations

import pytest

from tests.airflow.conftest import catalog_at
from tests.support.tables import small_files_table


def _events(root):
    catalog = catalog_at(root)
    small_files_table(catalog, "sales.events", appends=6, rows=20, partitioned=True)
    return catalog


def _compactions(catalog) -> list[str]:
    table = catalog.load_table("sales.events")
    return [
        s.summary.get("iceberg-ops.compaction.group")
        for s in table.snapshots()
        if s.summary.get("iceberg-ops.compaction.group")
    ]


def test_commit_every_bytes_zero_makes_a_snapshot_per_group(iceberg_connection):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    catalog = _events(iceberg_connection)
    result = IcebergCompactOperator(task_id="compact", table="sales.events", commit_every_bytes=0).execute({})
    assert result["committed_groups_count"] == 2 and len(result["snapshot_ids"]) == 2
    assert _compactions(catalog) == ["1/2", "2/2"]


def test_by_default_small_groups_share_a_snapshot(iceberg_connection):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    catalog = _events(iceberg_connection)
    result = IcebergCompactOperator(task_id="compact", table="sales.events", max_concurrent_groups=1).execute({})
    assert result["committed_groups_count"] == 2 and _compactions(catalog) == ["1-2/2"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"max_concurrent_groups": 0}, "max_concurrent_groups"),
        ({"commit_every_bytes": -1}, "commit_every_bytes"),
        ({"commit_every_bytes": 0, "units": [{"table": "sales.events"}]}, "commit_every_bytes given with units"),
    ],
)
def test_bad_fields_are_refused_naming_them(iceberg_connection, fields, expected):
    from airflow.exceptions import AirflowException

    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    catalog = _events(iceberg_connection)
    location = catalog.load_table("sales.events").metadata_location
    with pytest.raises((ValueError, AirflowException), match=expected):
        IcebergCompactOperator(task_id="compact", table="sales.events", **fields).execute({})
    assert catalog.load_table("sales.events").metadata_location == location
