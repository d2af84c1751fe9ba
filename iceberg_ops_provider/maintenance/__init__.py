"""Table maintenance without a JVM.

Snapshot expiry that deletes files (and, as they land, compaction, orphan removal, manifest rewrite
and the health report).

Every function takes a PyIceberg ``Table``, returns a result with ``to_json()``, and has
``dry_run=True`` that reports what a real run would do and changes nothing.
"""

from iceberg_ops_provider.maintenance.expire import ExpireSnapshotsResult, expire_snapshots

__all__ = ["ExpireSnapshotsResult", "expire_snapshots"]
