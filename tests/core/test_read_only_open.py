"""``CatalogFactory.build(..., create=False)``: a catalog opened only to read creates nothing.

A SQLite database that does not exist is refused (``CatalogNotFoundError``, naming the file and the
setting), and neither the file nor its folder nor the warehouse folder appears; a ``sql`` catalog
needs no warehouse, and creating a table through one that has none says how to give it one. Real
SQLite files in ``tmp_path`` and a real PostgreSQL database.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.config import ProjectConfig
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.errors import CatalogConfigError, CatalogNotFoundError

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def test_a_missing_sqlite_database_is_refused_and_nothing_is_created(tmp_path: Path):
    database, warehouse = tmp_path / "lake" / "catalog.db", tmp_path / "lake" / "warehouse"

    with pytest.raises(CatalogNotFoundError) as raised:
        CatalogFactory.build("sqlite", db_path=database, warehouse_dir=warehouse, create=False)

    text = str(raised.value)
    assert f"The SQLite catalog database {database} (db_path) does not exist" in text
    assert "opened only to read (create=False), so nothing was created" in text
    assert "opened with create=True (the default), a new, empty catalog is created there" in text
    assert raised.value.path == str(database)
    assert isinstance(raised.value, CatalogConfigError)  # the same kind of error as every bad catalog option
    assert not (tmp_path / "lake").exists()


def test_an_existing_sqlite_database_opens_without_creating_the_warehouse_folder(tmp_path: Path):
    database = tmp_path / "catalog.db"
    CatalogFactory.build("sqlite", db_path=database, warehouse_dir=tmp_path / "first").create_namespace("sales")

    catalog = CatalogFactory.build("sqlite", db_path=database, warehouse_dir=tmp_path / "other", create=False)

    assert catalog.list_namespaces() == [("sales",)]
    assert not (tmp_path / "other").exists()


def test_a_sql_catalog_on_a_missing_sqlite_file_names_its_uri(tmp_path: Path):
    database = tmp_path / "nowhere" / "catalog.db"

    with pytest.raises(CatalogNotFoundError, match=r"\(uri\) does not exist"):
        CatalogFactory.build("sql", uri=f"sqlite:///{database}", create=False)

    assert not (tmp_path / "nowhere").exists()


def test_the_project_default_database_is_still_created_on_first_use(tmp_path: Path):
    """Only a database someone named is refused: the project's own ``local_data/`` is made on first use."""
    config = ProjectConfig(path=tmp_path / "iceberg-ops.yaml", root=tmp_path, catalog={"kind": "sqlite"})

    config.build_catalog(create=False)

    assert (tmp_path / "local_data" / "iceberg_catalog.db").is_file()

    named = ProjectConfig(path=None, root=tmp_path, catalog={"kind": "sqlite", "db_path": "elsewhere/catalog.db"})
    with pytest.raises(CatalogNotFoundError):
        named.build_catalog(create=False)
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.postgres
def test_a_sql_catalog_read_without_a_warehouse_refuses_to_create_a_table(new_postgres_database: str, tmp_path):
    writer = CatalogFactory.build("sql", uri=new_postgres_database, warehouse_dir=tmp_path / "warehouse")
    writer.create_namespace("sales")
    writer.create_table("sales.orders", SCHEMA)
    with pytest.raises(CatalogConfigError, match=r"needs a place for its data files: warehouse_dir=<local folder>"):
        CatalogFactory.build("sql", uri=new_postgres_database)  # a catalog that may create tables needs one

    reader = CatalogFactory.build("sql", uri=new_postgres_database, create=False)

    assert reader.load_table("sales.orders").schema().column_names == ["id"]
    with pytest.raises(CatalogConfigError) as raised:
        reader.create_table("sales.customers", SCHEMA)
    text = str(raised.value)
    assert "was opened without a place for its data files, so table sales.customers cannot be created" in text
    assert "warehouse_dir=<local folder> (created if missing) or warehouse=<URI such as" in text
    assert not reader.table_exists("sales.customers")
