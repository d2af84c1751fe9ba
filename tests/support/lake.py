"""The lake every test builds on: a SQLite catalog and its warehouse in one folder.

The ``lake`` fixture (``tests/conftest.py``) gives one per test in its temporary folder; a module
whose tests only read shares one, ``Lake(tmp_path_factory.mktemp("lake"))`` in a module-scoped
fixture. The command line names the same catalog with :attr:`Lake.flags`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Lake:
    """A SQLite catalog (``root/catalog.db``) whose warehouse is ``root/warehouse``."""

    root: Path

    @property
    def db_path(self) -> Path:
        """The catalog's SQLite database."""
        return self.root / "catalog.db"

    @property
    def warehouse(self) -> Path:
        """The folder holding the tables' data and metadata."""
        return self.root / "warehouse"

    @property
    def flags(self) -> list[str]:
        """The global options of ``iceberg-ops`` naming this catalog (no project file needed)."""
        return ["--catalog", "sqlite", "--db-path", str(self.db_path), "--warehouse", str(self.warehouse)]

    @property
    def extra(self) -> dict[str, str]:
        """The ``extra`` of an Airflow connection (or a project file's ``catalog:``) naming this catalog."""
        return {"kind": "sqlite", "db_path": str(self.db_path), "warehouse_dir": str(self.warehouse)}

    def catalog(self) -> Any:
        """A new catalog object on this lake, as another worker would open it."""
        from iceberg_ops_provider.catalogs import CatalogFactory

        return CatalogFactory.build("sqlite", db_path=self.db_path, warehouse_dir=self.warehouse)


def sqlite_flags(root: Path) -> list[str]:
    """The global options naming the lake in ``root``."""
    return Lake(root).flags


def sqlite_catalog(root: Path) -> Any:
    """The lake in ``root``, opened in the test process."""
    return Lake(root).catalog()
