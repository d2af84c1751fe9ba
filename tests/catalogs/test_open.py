"""``open_catalog(spec, access=...)``: a catalog opened to read or write creates nothing; only ``create`` does.

A SQLite database that does not exist is refused (``CatalogNotFoundError``, naming the file and the
setting), and neither the file nor its folder nor the warehouse folder appears. A database that is
not a catalog (another program's SQLite file) is refused and left byte for byte as it was, opened
as kind ``sqlite``, as kind ``sql`` on a ``sqlite:///`` URL and as kind ``pyiceberg`` with ``type:
sql``. A catalog opened to read cannot write, and a v0 catalog is not migrated unless creating. A
``sql`` catalog needs no warehouse to read, and creating a table through one that has none says how
to give it one. Real SQLite files in ``tmp_path`` and a real PostgreSQL database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.catalogs import CatalogFactory, CatalogSpec, from_options, open_catalog
from iceberg_ops_provider.config import ProjectConfig
from iceberg_ops_provider.errors import CatalogConfigError, CatalogNotFoundError

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _tree(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every path under ``root``: a file's bytes and mtime (ns), a folder's mtime."""
    found = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        found[str(path.relative_to(root))] = (path.read_bytes() if path.is_file() else None, stat.st_mtime_ns)
    return found


def _tables(database: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return sorted(name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def _columns(database: Path, table: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]


# --- a database that does not exist -----------------------------------------------------------------------


def test_a_missing_sqlite_database_is_refused_and_nothing_is_created(tmp_path: Path):
    database, warehouse = tmp_path / "lake" / "catalog.db", tmp_path / "lake" / "warehouse"

    with pytest.raises(CatalogNotFoundError) as raised:
        CatalogFactory.build("sqlite", db_path=database, warehouse_dir=warehouse, create=False)

    text = str(raised.value)
    assert f"The SQLite catalog database {database} (the `db_path` option) does not exist" in text
    assert "opened without creating one, so nothing was created" in text
    assert "a command that creates tables (an upgrade) creates the catalog there" in text
    assert raised.value.path == str(database) and raised.value.reason == "missing"
    assert isinstance(raised.value, CatalogConfigError)  # the same kind of error as every bad catalog option
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("access", ["read", "write"])
def test_no_kind_creates_a_missing_database_unless_creating(tmp_path: Path, monkeypatch, access):
    monkeypatch.chdir(tmp_path)  # where the sqlite kind's default warehouse folder would appear
    database = tmp_path / "nowhere" / "catalog.db"
    specs = [
        from_options("sqlite", db_path=database),
        from_options("sql", uri=f"sqlite:///{database}", warehouse_dir=tmp_path / "nowhere" / "wh"),
        from_options("pyiceberg", type="sql", uri=f"sqlite:///{database}", warehouse=(tmp_path / "wh").as_uri()),
    ]
    for spec in specs:
        with pytest.raises(CatalogNotFoundError, match=f"The SQLite catalog database {database} .* does not exist"):
            open_catalog(spec, access=access)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_sqlite_database_opens_without_creating_the_warehouse_folder(tmp_path: Path):
    database = tmp_path / "catalog.db"
    CatalogFactory.build("sqlite", db_path=database, warehouse_dir=tmp_path / "first").create_namespace("sales")

    catalog = CatalogFactory.build("sqlite", db_path=database, warehouse_dir=tmp_path / "other", create=False)

    assert catalog.list_namespaces() == [("sales",)]
    assert not (tmp_path / "other").exists()


def test_a_sql_catalog_on_a_missing_sqlite_file_names_its_uri(tmp_path: Path):
    database = tmp_path / "nowhere" / "catalog.db"

    with pytest.raises(CatalogNotFoundError, match=r"\(the `uri` option\) does not exist"):
        CatalogFactory.build("sql", uri=f"sqlite:///{database}", create=False)

    assert not (tmp_path / "nowhere").exists()


def test_the_project_default_database_is_created_only_when_creating(tmp_path: Path):
    """The project's own ``local_data/`` is made by a command that creates tables, and by nothing else.

    Before that, a reader or a writer finds an empty catalog (nothing was applied there yet); a
    database someone named and that does not exist is refused.
    """
    config = ProjectConfig(path=tmp_path / "iceberg-ops.yaml", root=tmp_path, catalog={"kind": "sqlite"})
    for access in ("read", "write"):
        assert config.open_catalog(access=access).list_namespaces() == []
    assert list(tmp_path.iterdir()) == []

    config.open_catalog(access="create").create_namespace("sales")

    assert (tmp_path / "local_data" / "iceberg_catalog.db").is_file()
    assert (tmp_path / "local_data" / "iceberg_warehouse").is_dir()
    assert config.open_catalog(access="read").list_namespaces() == [("sales",)]

    named = ProjectConfig(path=None, root=tmp_path, catalog={"kind": "sqlite", "db_path": "elsewhere/catalog.db"})
    for access in ("read", "write"):
        with pytest.raises(CatalogNotFoundError, match=r"The SQLite catalog database .*elsewhere/catalog\.db"):
            named.open_catalog(access=access)
    assert not (tmp_path / "elsewhere").exists()


# --- a database that is not a catalog ---------------------------------------------------------------------


@pytest.fixture
def unrelated_database(tmp_path: Path) -> Path:
    """Another program's SQLite database: one table of its own, no catalog tables; its mtime set in the past."""
    database = tmp_path / "data" / "other.db"
    database.parent.mkdir()
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        connection.execute("INSERT INTO notes (text) VALUES ('keep me')")
        connection.commit()
    past = 1_600_000_000_000_000_000
    os.utime(database, ns=(past, past))
    os.utime(database.parent, ns=(past, past))
    return database


def _specs_of(database: Path, warehouse: Path) -> dict[str, CatalogSpec]:
    return {
        "sqlite": from_options("sqlite", db_path=database, warehouse_dir=warehouse),
        "sqlite-default-warehouse": from_options("sqlite", db_path=database),
        "sql": from_options("sql", uri=f"sqlite:///{database}", warehouse_dir=warehouse),
        "pyiceberg": from_options("pyiceberg", type="sql", uri=f"sqlite:///{database}", warehouse=warehouse.as_uri()),
    }


@pytest.mark.parametrize("access", ["read", "write"])
@pytest.mark.parametrize("kind", ["sqlite", "sqlite-default-warehouse", "sql", "pyiceberg"])
def test_an_unrelated_database_is_refused_and_left_byte_for_byte(
    tmp_path, monkeypatch, unrelated_database, kind, access
):
    monkeypatch.chdir(tmp_path)  # where the sqlite kind's default warehouse (local_data/) would appear
    spec = _specs_of(unrelated_database, tmp_path / "warehouse")[kind]
    before = _tree(tmp_path)

    with pytest.raises(CatalogNotFoundError) as raised:
        open_catalog(spec, access=access)

    assert "holds no Iceberg catalog (it has no iceberg_tables table)" in str(raised.value)
    assert "so nothing was created" in str(raised.value)
    assert _tree(tmp_path) == before  # the same files, bytes and mtimes: no folder, no warehouse, no journal
    assert _tables(unrelated_database) == ["notes"]


@pytest.mark.parametrize("kind", ["sqlite", "sql", "pyiceberg"])
def test_creating_makes_the_catalog_beside_the_other_tables(tmp_path, unrelated_database, kind):
    spec = _specs_of(unrelated_database, tmp_path / "warehouse")[kind]

    catalog = open_catalog(spec, access="create")
    catalog.create_namespace("sales")

    assert _tables(unrelated_database) == ["iceberg_namespace_properties", "iceberg_tables", "notes"]
    assert open_catalog(spec, access="read").list_namespaces() == [("sales",)]
    if kind != "pyiceberg":  # a warehouse URI is PyIceberg's to use; a warehouse folder is created
        assert (tmp_path / "warehouse").is_dir()
    catalog.close()


# --- reading a catalog --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "sql", "pyiceberg"])
def test_a_catalog_opened_to_read_cannot_write_and_changes_no_file(tmp_path, kind):
    database = tmp_path / "catalog.db"
    spec = _specs_of(database, tmp_path / "warehouse")[kind]
    writer = open_catalog(spec, access="create")
    writer.create_namespace("sales")
    writer.create_table("sales.orders", SCHEMA).append(pa.table({"id": [1, 2]}))
    writer.close()
    before = _tree(tmp_path)

    reader = open_catalog(spec, access="read")
    assert reader.properties["uri"] == writer.properties["uri"]  # its address as given, not as opened read-only
    assert "mode=ro" not in reader.properties["uri"]
    assert reader.list_namespaces() == [("sales",)]
    assert reader.load_table("sales.orders").scan().to_arrow().column("id").to_pylist() == [1, 2]
    with pytest.raises(Exception, match="readonly database"):
        reader.create_namespace("other")
    with pytest.raises(Exception, match="readonly database"):
        reader.drop_table("sales.orders")
    reader.close()

    assert _tree(tmp_path) == before
    assert open_catalog(spec, access="write").list_namespaces() == [("sales",)]


def _v0_catalog(database: Path, warehouse: Path) -> None:
    """A catalog in PyIceberg's v0 schema: its iceberg_tables without the iceberg_type column."""
    CatalogFactory.build("sqlite", db_path=database, warehouse_dir=warehouse).create_namespace("sales")
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("ALTER TABLE iceberg_tables DROP COLUMN iceberg_type")
        connection.commit()
    assert "iceberg_type" not in _columns(database, "iceberg_tables")


@pytest.mark.parametrize("access", ["read", "write"])
def test_schema_version_v1_migrates_a_v0_catalog_only_when_creating(tmp_path, access):
    database, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    _v0_catalog(database, warehouse)
    for spec in (
        from_options("sqlite", db_path=database, warehouse_dir=warehouse, schema_version="v1"),
        from_options("pyiceberg", name="sqlite", type="sql", uri=f"sqlite:///{database}", schema_version="v1"),
    ):
        before = database.read_bytes()

        catalog = open_catalog(spec, access=access)

        assert catalog.list_namespaces() == [("sales",)]  # a v0 catalog, read as one
        catalog.close()
        assert "iceberg_type" not in _columns(database, "iceberg_tables")
        assert database.read_bytes() == before

    spec = from_options("sqlite", db_path=database, warehouse_dir=warehouse, schema_version="v1")
    open_catalog(spec, access="create").close()
    assert "iceberg_type" in _columns(database, "iceberg_tables")


# --- a sql catalog without a warehouse ----------------------------------------------------------------------


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


@pytest.mark.postgres
@pytest.mark.parametrize("access", ["read", "write"])
def test_a_postgres_database_without_catalog_tables_is_refused_and_gets_none(new_postgres_database, access):
    from sqlalchemy import create_engine, inspect

    with pytest.raises(CatalogNotFoundError, match="holds no Iceberg catalog"):
        open_catalog(from_options("sql", uri=new_postgres_database), access=access)
    engine = create_engine(new_postgres_database)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_postgres_catalog_opened_to_read_runs_read_only_transactions(new_postgres_database, tmp_path):
    writer = CatalogFactory.build("sql", uri=new_postgres_database, warehouse_dir=tmp_path / "warehouse")
    writer.create_namespace("sales")
    writer.close()

    reader = open_catalog(from_options("sql", uri=new_postgres_database), access="read")

    assert reader.list_namespaces() == [("sales",)]
    with reader.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW default_transaction_read_only").scalar() == "on"
    with pytest.raises(Exception, match="read-only transaction"):
        reader.create_namespace("other")
    reader.close()
