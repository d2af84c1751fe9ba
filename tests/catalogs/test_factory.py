"""CatalogFactory: the SQL kinds for real, option checking, missing extras, unknown kinds.

A bad option is a problem of the spec (``from_options`` never raises), raised by ``open_catalog``
before anything is created. Real SQLite files in ``tmp_path``."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException

from iceberg_ops_provider.catalogs import (
    CatalogFactory,
    from_connection,
    from_file,
    from_name,
    from_options,
    open_catalog,
)
from iceberg_ops_provider.errors import CatalogConfigError, IcebergOpsError, MissingExtraError, UnknownCatalogKindError

SCHEMA = pa.schema([pa.field("n", pa.int64())])


def test_sqlite_defaults_resolve_against_the_working_directory_at_call_time(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    catalog_one = CatalogFactory.build("sqlite")
    monkeypatch.chdir(second)
    catalog_two = CatalogFactory.build("sqlite")

    assert (first / "local_data" / "iceberg_catalog.db").is_file()
    assert (second / "local_data" / "iceberg_catalog.db").is_file()
    catalog_one.create_namespace("only_in_first")
    table = catalog_one.create_table("only_in_first.t", SCHEMA)
    table.append(pa.table({"n": [1, 2]}))
    data_files = list((first / "local_data" / "iceberg_warehouse").rglob("*.parquet"))
    assert len(data_files) == 1
    assert catalog_two.list_namespaces() == []


def test_sqlite_explicit_paths_and_name(tmp_path):
    catalog = CatalogFactory.build(
        "sqlite", db_path=tmp_path / "db" / "c.db", warehouse_dir=str(tmp_path / "wh"), name="lake"
    )
    assert isinstance(catalog, SqlCatalog)
    assert catalog.name == "lake"
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", SCHEMA).append(pa.table({"n": [1]}))
    reopened = CatalogFactory.build(
        "sqlite", db_path=tmp_path / "db" / "c.db", warehouse_dir=tmp_path / "wh", name="lake"
    )
    assert reopened.load_table("ns.t").scan().to_arrow().column("n").to_pylist() == [1]
    assert list((tmp_path / "wh").rglob("*.parquet"))


def test_kind_is_case_insensitive(tmp_path):
    catalog = CatalogFactory.build("SQLite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "wh")
    assert isinstance(catalog, SqlCatalog)


def test_memory_catalog_is_shared_by_every_thread_without_lost_writes(tmp_path):
    catalog = CatalogFactory.build("memory", warehouse_dir=tmp_path / "wh")
    catalog.create_namespace("ns")
    catalog.create_table("ns.t", SCHEMA)
    acknowledged: list[int] = []
    created: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(worker: int) -> None:
        try:
            name = f"ns.created_by_{worker}"
            catalog.create_table(name, SCHEMA)
            with lock:
                created.append(name)
            for step in range(5):
                value = worker * 100 + step
                for _attempt in range(20):
                    try:
                        catalog.load_table("ns.t").append(pa.table({"n": [value]}))
                        break
                    except CommitFailedException:
                        continue
                else:
                    raise AssertionError(f"append of {value} never committed")
                with lock:
                    acknowledged.append(value)
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    rows = catalog.load_table("ns.t").scan().to_arrow().column("n").to_pylist()
    assert sorted(rows) == sorted(acknowledged)
    assert len(rows) == 30
    listed = {".".join(identifier) for identifier in catalog.list_tables("ns")}
    assert listed == {"ns.t", *created}
    # Visible from a thread that did not exist when the tables were written.
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(len(catalog.load_table("ns.t").scan().to_arrow())))
    reader.start()
    reader.join()
    assert seen == [30]


def test_memory_catalogs_are_independent_and_use_a_temporary_warehouse():
    one = CatalogFactory.build("memory")
    two = CatalogFactory.build("memory")
    one.create_namespace("ns")
    table = one.create_table("ns.t", SCHEMA)
    table.append(pa.table({"n": [1]}))
    assert two.list_namespaces() == []
    location = table.location()
    assert location.startswith("file://") and "iceberg_ops_memory_" in location
    one.close()
    two.close()


def test_unknown_kind_lists_the_valid_kinds():
    with pytest.raises(ValueError, match="Unknown catalog kind 'postgres'") as info:
        CatalogFactory.build("postgres")
    assert isinstance(info.value, UnknownCatalogKindError)
    for kind in CatalogFactory.KINDS:
        assert kind in str(info.value)


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        (
            "sqlite",
            {"db_pth": "x.db"},
            "the `db_pth` option is not an option of the 'sqlite' catalog; valid options: db_path, ",
        ),
        (
            "memory",
            {"db_path": "x.db"},
            "the `db_path` option does not apply to the 'memory' catalog, which keeps no database file",
        ),
        ("memory", {"uri": "sqlite://"}, "the `uri` option is not an option of the 'memory' catalog"),
        ("sqlite", {"echo": object()}, "the `echo` option is <object .*values must be strings, numbers, booleans"),
        ("sqlite", {"type": "sql"}, "the `type` option is not an option of the 'sqlite' catalog: the kind decides"),
        ("rest", {"db_path": "x.db"}, "the `db_path` option belongs to the 'sqlite' kind"),
        ("rest", {"wharehouse": "s3://b"}, "the `wharehouse` option is not an option of the 'rest' catalog"),
        ("s3tables", {"warehouse": "arn:aws:s3tables:us-east-1:1:bucket/b"}, "needs the `region` option"),
        ("s3tables", {"region": "us-east-1"}, "needs the `warehouse` option: the table bucket's ARN"),
    ],
)
def test_bad_options_are_refused_with_a_clear_message(tmp_path, monkeypatch, kind, options, message):
    monkeypatch.chdir(tmp_path)
    spec = from_options(kind, **options)  # parsing never raises: the problem is the spec's
    assert spec.problems
    with pytest.raises(CatalogConfigError, match=message) as info:
        CatalogFactory.build(kind, **options)
    assert isinstance(info.value, ValueError | IcebergOpsError)
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


def test_the_memory_kind_says_it_keeps_no_database_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        CatalogConfigError, match="does not apply to the 'memory' catalog, which keeps no database file"
    ):
        CatalogFactory.build("memory", db_path="x.db")


GARBAGE = [None, 5, -1, 10**400, 1.5, True, object(), [1], {"a": {"b": object()}}, "", " ", "é/../..", float("nan")]
JSON_GARBAGE = [None, 5, -1, 1.5, True, [1], {"a": {"b": 1}}, "", " ", "é/../..", float("nan"), "sqlite://"]
HOSTS = [None, "", " ", "h:abc", "h:99999", "[::1", "http://[", "://", "@", "http://u:p@", "a b", "é", "http://h:0"]


def test_no_parser_raises_whatever_it_is_given(tmp_path):
    """Bad input becomes problems of the spec, raised when it is opened; parsing itself never fails."""
    keys = ("db_path", "uri", "warehouse_dir", "warehouse", "name", "timeout", "type", "region", "kind", "x")
    for value in GARBAGE:
        for kind in (value, "sqlite", "sql", "rest", "s3tables", "pyiceberg", "memory", "in-memory"):
            for key in keys:
                options = {key: value} if key != "kind" else {}
                assert from_options(kind, **options).kind is not None
                spec = from_file({"kind": kind, **options}, file=tmp_path / "iceberg-ops.yaml", root=tmp_path)
                assert spec.source.kind == "file"
        from_name(value, {"type": value})  # type: ignore[arg-type]
        from_file({"name": value, "timeout": value}, file=None, root=tmp_path)
    for value in JSON_GARBAGE:
        for host in HOSTS:
            for port in (None, 0, -1, 70000, 10**12):
                for key in keys:
                    for conn_type in ("iceberg_ops", "iceberg", None):
                        spec = from_connection(
                            "c", conn_type, host=host, port=port, login=host, password=host, extra={key: value}
                        )
                        assert spec.source.where == "c"
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UnknownCatalogKindError):
        CatalogFactory.build(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "parse",
    [
        pytest.param(
            lambda: from_options("sql", uri="postgresql://u@h:5432x/db", warehouse_dir="/w"),
            id="sql-uri-port",
        ),
        pytest.param(
            lambda: from_connection("c", "iceberg_ops", host="postgresql://u@h:5432x/db", extra={"kind": "sql"}),
            id="sql-connection-port",
        ),
        pytest.param(
            lambda: from_options("sqlite", db_path="~no_such_user_here/c.db"),
            id="unknown-user-home",
        ),
        pytest.param(
            lambda: from_options("sqlite", db_path="a\x00b"),
            id="nul-in-db-path",
        ),
    ],
)
def test_parsers_never_raise_for_these_either(parse):
    spec = parse()  # a problem of the spec, raised as CatalogConfigError when it is opened
    assert spec.problems
    with pytest.raises(CatalogConfigError):
        open_catalog(spec, access="read")


def test_db_path_that_is_a_directory_is_refused(tmp_path):
    with pytest.raises(CatalogConfigError, match=f"the `db_path` option names the folder {tmp_path}; give the path"):
        CatalogFactory.build("sqlite", db_path=tmp_path, warehouse_dir=tmp_path / "wh")
    assert not (tmp_path / "wh").exists()


@pytest.mark.parametrize(
    ("kind", "blocked_module", "extra"),
    [
        ("glue", "boto3", "glue"),
        ("s3tables", "botocore.auth", "s3tables"),
        ("hive", "hive_metastore", "hive"),
        ("sqlite", "sqlalchemy", "sqlite"),
        ("memory", "sqlalchemy", "sqlite"),
    ],
)
def test_missing_extra_names_the_pip_install_line(kind, blocked_module, extra):
    # Runs in a fresh interpreter where the extra's module cannot be imported, as on a machine
    # without that extra installed.
    code = f"""
import sys
sys.modules[{blocked_module!r}] = None
from iceberg_ops_provider.catalogs import CatalogFactory
try:
    if {kind!r} in ("sqlite", "memory"):
        CatalogFactory.build({kind!r})
    else:
        CatalogFactory.build({kind!r}, uri="http://127.0.0.1:1", warehouse="w", region="us-east-1")
except ImportError as exc:
    print(type(exc).__name__, "|", exc)
else:
    print("no error")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=os.getcwd())
    assert result.returncode == 0, result.stderr
    assert "MissingExtraError" in result.stdout
    assert f"pip install 'iceberg-ops[{extra}]'" in result.stdout


def test_missing_extra_error_is_an_import_error():
    error = MissingExtraError("The 'glue' catalog kind", "glue", "boto3")
    assert isinstance(error, ImportError) and isinstance(error, IcebergOpsError)
    assert error.install_command == "pip install 'iceberg-ops[glue]'"
    assert error.name == "boto3"


def test_hive_kind_is_loaded_through_load_catalog(tmp_path):
    # No Hive Metastore runs here; the catalog object is built without connecting.
    from pyiceberg.catalog.hive import HiveCatalog

    catalog = CatalogFactory.build("hive", uri="thrift://127.0.0.1:1", warehouse=(tmp_path / "wh").as_uri())
    assert isinstance(catalog, HiveCatalog)
    assert catalog.name == "hive"
    assert catalog.properties["uri"] == "thrift://127.0.0.1:1"


def test_sqlite_with_a_warehouse_uri_passes_it_unchanged(tmp_path):
    catalog = CatalogFactory.build(
        "sqlite", db_path=tmp_path / "c.db", warehouse_dir="s3://bucket/wh", **{"s3.endpoint": "http://127.0.0.1:1"}
    )
    assert catalog.properties["warehouse"] == "s3://bucket/wh"
    assert catalog.properties["s3.endpoint"] == "http://127.0.0.1:1"
    assert not Path("s3:").exists()


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("sqlite", {"db_path": 5}, "the `db_path` option must be a path, got 5"),
        ("sqlite", {"name": None}, "the `name` option must be a non-empty string"),
        ("rest", {"name": 5}, "the `name` option must be a non-empty string"),
        (
            "rest",
            {"warehouse": "w"},
            r"Could not open the 'rest' catalog 'rest': its uri is missing; give the `uri` option, or set "
            r"PYICEBERG_CATALOG__REST__URI",
        ),
    ],
)
def test_more_bad_options(tmp_path, monkeypatch, kind, options, message):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))  # no .pyiceberg.yaml there
    monkeypatch.delenv("PYICEBERG_CATALOG__REST__URI", raising=False)
    with pytest.raises(CatalogConfigError, match=message):
        CatalogFactory.build(kind, **options)


def test_warehouse_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(CatalogConfigError, match=r"the `warehouse_dir` option names the file .*; give a folder"):
        CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "file")
    assert not (tmp_path / "c.db").exists()


# How many times the processes race to open a new catalog (make it larger to hunt for a rare failure).
OPEN_RACES = int(os.environ.get("ICEBERG_OPS_OPEN_RACES", "8"))

# Runs in one interpreter: per race, forks processes that open the same new catalog at one moment.
OPEN_AT_ONCE = """
import json, os, sys, traceback
from iceberg_ops_provider.catalogs import CatalogFactory

root, races, processes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Opening another catalog first loads PyIceberg's SQL catalog and SQLAlchemy: the processes forked
# below then reach the tables check within moments of each other, not after seconds of imports.
CatalogFactory.build("sqlite", db_path=root + "/warm/catalog.db", warehouse_dir=root + "/warm/wh").close()
for race in range(races):
    folder = f"{root}/attempt{race}"
    os.makedirs(folder)
    go_read, go_write = os.pipe()
    ready_read, ready_write = os.pipe()
    children = []
    for _ in range(processes):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.close(go_write)
                os.write(ready_write, b".")
                os.close(ready_write)
                os.read(go_read, 1)  # returns when the parent closes go_write: in every process at once
                CatalogFactory.build("sqlite", db_path=folder + "/catalog.db", warehouse_dir=folder + "/wh")
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(status)
        children.append(pid)
    os.close(go_read)
    os.close(ready_write)
    ready = 0
    while ready < processes:  # every process is waiting for the signal (EOF: one ended before saying so)
        chunk = os.read(ready_read, processes)
        if not chunk:
            break
        ready += len(chunk)
    os.close(go_write)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    os.close(ready_read)
    print(json.dumps({"folder": folder, "ready": ready, "exit_codes": codes}), flush=True)
"""


def test_processes_opening_a_new_sqlite_catalog_at_once_all_succeed(tmp_path):
    """PyIceberg creates the catalog tables after checking they are missing: openers race on a new file."""
    done = subprocess.run(
        [sys.executable, "-c", OPEN_AT_ONCE, str(tmp_path), str(OPEN_RACES), "6"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    races = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(race["ready"], race["exit_codes"]) for race in races] == [(6, [0] * 6)] * OPEN_RACES, done.stderr[-3000:]
    for race in races:  # and they made the catalog's tables, once
        with contextlib.closing(sqlite3.connect(Path(race["folder"]) / "catalog.db")) as database:
            tables = sorted(name for (name,) in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        assert tables == ["iceberg_namespace_properties", "iceberg_tables"]
