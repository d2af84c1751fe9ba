"""The ``memory`` kind (private: importing it imports PyIceberg's SQL catalog and SQLAlchemy)."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog

__all__ = ["SharedMemorySqlCatalog"]


class SharedMemorySqlCatalog(SqlCatalog):
    """A SQL catalog on an in-memory database every thread of the process shares.

    PyIceberg's ``sqlite://`` gives each thread its own empty database; SQLite's ``memdb`` VFS names one
    database for the process, alive while one connection is open: the catalog holds one.
    """

    def __init__(self, name: str, **properties: Any) -> None:
        """Create the database and the catalog on it (``warehouse`` is required; ``uri`` is chosen here)."""
        database = f"/iceberg_ops_{uuid.uuid4().hex}"
        self._keepalive = sqlite3.connect(f"file:{database}?vfs=memdb", uri=True, check_same_thread=False)
        super().__init__(name, **{**properties, "uri": f"sqlite:///file:{database}?vfs=memdb&uri=true"})

    def close(self) -> None:
        """Dispose of the engine and free the in-memory database."""
        super().close()
        self._keepalive.close()
