"""The compaction recommendation names only the kinds of files it rewrites: never "0 small files"."""

from __future__ import annotations

import pyarrow as pa

from iceberg_ops_provider.maintenance import table_health_report
from iceberg_ops_provider.maintenance.health_thresholds import HealthThresholds


def test_only_older_spec_files_are_named_as_such(catalog):
    catalog.create_namespace("ops")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
    table = catalog.create_table("ops.events", schema)
    for start in range(0, 50, 10):
        table.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64()), "region": ["eu"] * 10}))
    with table.update_spec() as spec:
        spec.add_identity("region")

    compact = table_health_report(table, HealthThresholds(target_file_size_bytes=1)).recommendation("compact")

    assert "of their files: 5 written under an older partition spec" in compact.reason, compact.reason
    assert "small files" not in compact.reason
