"""An in-memory SQL catalog that every thread of the process shares.

PyIceberg's ``sqlite://`` catalog gives each thread its own empty database, and sharing one
connection across threads loses writes. SQLite's ``memdb`` VFS instead names an in-memory database
that every connection of the process opens by name, with ordinary SQLite locking between them: one
catalog, visible from every thread, whose compare-and-swap commits stay correct under concurrency.
The database lives while at least one connection is open, so the catalog holds one for its lifetime.
"""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog

__all__ = ["SharedMemorySqlCatalog"]


class SharedMemorySqlCatalog(SqlCatalog):
    """A :class:`~pyiceberg.catalog.sql.SqlCatalog` on a private, process-wide in-memory database."""

    def __init__(self, name: str, **properties: Any) -> None:
        """Create the database and the catalog on it.

        Args:
            name: Catalog name.
            **properties: ``SqlCatalog`` properties; ``warehouse`` is required, ``uri`` is chosen here.
        """
        database = f"/iceberg_ops_{uuid.uuid4().hex}"
        self._keepalive = sqlite3.connect(f"file:{database}?vfs=memdb", uri=True, check_same_thread=False)
        super().__init__(name, uri=f"sqlite:///file:{database}?vfs=memdb&uri=true", **properties)

    def close(self) -> None:
        """Dispose of the engine and free the in-memory database."""
        super().close()
        self._keepalive.close()
