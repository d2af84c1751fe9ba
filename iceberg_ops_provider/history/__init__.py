"""Migration history and locking, kept as Iceberg tables inside the user's catalog.

* :class:`HistoryStore`: ``<meta_namespace>.migration_history``, one row per (version, namespace).
* :class:`NamespaceLock`: the per-namespace lock (a table created to acquire, dropped to release).
* :class:`ConcurrentMigrationError`: raised when another run holds the lock, or wrote the history
  under this run.
"""

from __future__ import annotations

from iceberg_ops_provider.errors import ConcurrentMigrationError
from iceberg_ops_provider.history.lock import LockInfo, NamespaceLock
from iceberg_ops_provider.history.records import HISTORY_SCHEMA, HISTORY_TABLE, HistoryRow
from iceberg_ops_provider.history.store import DEFAULT_META_NAMESPACE, HistoryStore

__all__ = [
    "DEFAULT_META_NAMESPACE",
    "HISTORY_SCHEMA",
    "HISTORY_TABLE",
    "ConcurrentMigrationError",
    "HistoryRow",
    "HistoryStore",
    "LockInfo",
    "NamespaceLock",
]
