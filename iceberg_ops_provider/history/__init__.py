"""Migration history (:class:`HistoryStore`) and locking (:class:`NamespaceLock`), as Iceberg tables in the catalog."""

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
