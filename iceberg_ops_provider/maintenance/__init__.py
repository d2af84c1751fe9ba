"""Table maintenance without a JVM.

Snapshot expiry that deletes files, orphan removal, manifest rewrite, compaction and the health report: each
takes a PyIceberg ``Table``, returns a result with ``to_json()``, and has ``dry_run=True`` that reports what
a real run would do and changes nothing.
"""

from iceberg_ops_provider.maintenance.compaction import CompactionResult, compact_small_files_streaming
from iceberg_ops_provider.maintenance.compaction_units import (
    CompactionUnit,
    plan_compaction_units,
    run_compaction_units,
)
from iceberg_ops_provider.maintenance.expire import ExpireSnapshotsResult, expire_snapshots
from iceberg_ops_provider.maintenance.health import HealthThresholds, TableHealthReport, table_health_report
from iceberg_ops_provider.maintenance.manifests import RewriteManifestsResult, rewrite_manifests
from iceberg_ops_provider.maintenance.orphans import RemoveOrphanFilesResult, remove_orphan_files

__all__ = [
    "CompactionResult",
    "CompactionUnit",
    "plan_compaction_units",
    "run_compaction_units",
    "ExpireSnapshotsResult",
    "HealthThresholds",
    "TableHealthReport",
    "compact_small_files_streaming",
    "table_health_report",
    "RemoveOrphanFilesResult",
    "RewriteManifestsResult",
    "expire_snapshots",
    "remove_orphan_files",
    "rewrite_manifests",
]
