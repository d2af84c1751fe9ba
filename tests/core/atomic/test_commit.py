"""All-or-nothing commits of several tables on PyIceberg's SQL catalog, on SQLite and PostgreSQL.

Every test runs on a real catalog database (``catalog_backend``: an SQLite file, then a PostgreSQL
database); concurrent writers are other catalog objects (or threads) on the same database.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.table.update import AssertCurrentSchemaId, SetPropertiesUpdate
from pyiceberg.types import StringType
from sqlalchemy import event

from iceberg_ops_provider.core.atomic.changes import TableChange
from iceberg_ops_provider.core.atomic.commit import (
    atomic_commit_mode,
    commit_atomically,
    describe_commit_mode,
)
from iceberg_ops_provider.errors import InvalidOperationError
from tests.core.atomic.support import race_on_two_tables

SCHEMA = pa.schema([pa.field("id", pa.int64())])


@pytest.fixture
def sql(catalog_backend):
    built = catalog_backend.build()
    built.create_namespace("ns")
    built.create_table("ns.a", SCHEMA)
    built.create_table("ns.b", SCHEMA)
    yield built
    built.close()


def _props(catalog, name: str) -> dict[str, str]:
    return dict(catalog.load_table(name).properties)


def _metadata_files(catalog) -> set[str]:
    found: set[str] = set()
    for name in ("ns.a", "ns.b", "ns.c"):
        if catalog.table_exists(name):
            folder = Path(catalog.load_table(name).location().removeprefix("file://")) / "metadata"
            found |= {str(path) for path in folder.glob("*.metadata.json")}
    return found


def _set(catalog, name: str, **props: str):
    transaction = catalog.load_table(name).transaction()
    transaction.set_properties(props)
    return transaction


def _count_commits(catalog) -> list[int]:
    commits: list[int] = []
    event.listen(catalog.engine, "commit", lambda connection: commits.append(1))
    return commits


def test_both_changes_land_in_one_database_transaction(sql):
    assert atomic_commit_mode(sql) == "sql-transaction"
    before = {name: sql.load_table(name).metadata_location for name in ("ns.a", "ns.b")}
    first, second = _set(sql, "ns.a", step="1"), _set(sql, "ns.b", step="1")
    with first.update_schema() as update:
        update.add_column("note", StringType())
    second.append(pa.table({"id": pa.array([7], pa.int64())}))
    commits = _count_commits(sql)

    result = commit_atomically(sql, [TableChange.of(first), TableChange.of(second)])

    assert result.applied and result.mode == "sql-transaction"
    assert result.tables == ("ns.a", "ns.b")
    assert len(commits) == 1  # one database transaction moved both pointers
    a, b = sql.load_table("ns.a"), sql.load_table("ns.b")
    assert a.properties["step"] == "1" and "note" in a.schema().column_names
    assert b.properties["step"] == "1" and b.scan().to_arrow().column("id").to_pylist() == [7]
    assert {a.metadata_location, b.metadata_location}.isdisjoint(before.values())
    assert result.metadata_locations == {"ns.a": a.metadata_location, "ns.b": b.metadata_location}
    # the transactions are settled as after PyIceberg's own commit: empty, showing the committed metadata
    assert first._updates == () and first._table.metadata_location == a.metadata_location
    assert second._snapshot_producers == []


def test_a_failed_requirement_of_the_second_table_leaves_both_unchanged(sql):
    files = _metadata_files(sql)
    a, b = sql.load_table("ns.a"), sql.load_table("ns.b")
    changes = [
        TableChange(("ns", "a"), (SetPropertiesUpdate(updates={"x": "1"}),)),
        TableChange(
            ("ns", "b"), (SetPropertiesUpdate(updates={"x": "1"}),), (AssertCurrentSchemaId(current_schema_id=7),)
        ),
    ]
    with pytest.raises(CommitFailedException, match=r"ns\.b: Requirement failed"):
        commit_atomically(sql, changes)
    assert sql.load_table("ns.a").metadata_location == a.metadata_location
    assert sql.load_table("ns.b").metadata_location == b.metadata_location
    assert "x" not in _props(sql, "ns.a") and "x" not in _props(sql, "ns.b")
    assert _metadata_files(sql) == files  # nothing was written


def test_a_writer_that_wins_the_race_makes_the_whole_commit_fail(sql, catalog_backend, monkeypatch):
    """Another writer moves ns.b's pointer after the checks and before the database transaction, twice."""
    other = catalog_backend.build()
    files = _metadata_files(sql)
    before_a = sql.load_table("ns.a").metadata_location
    first, second = _set(sql, "ns.a", step="1"), _set(sql, "ns.b", step="1")
    real_write = type(sql)._write_metadata
    raced: list[str] = []

    def write_then_race(metadata, io, metadata_path):
        real_write(metadata, io, metadata_path)
        if metadata_path.endswith(".metadata.json") and "/b/" in metadata_path:
            with other.load_table("ns.b").transaction() as concurrent:
                concurrent.set_properties(winner=f"other {len(raced)}")
            raced.append(other.load_table("ns.b").metadata_location)

    monkeypatch.setattr(sql, "_write_metadata", write_then_race)  # the timing only: the race is a real commit
    with pytest.raises(CommitFailedException, match=r"updated by another process: ns\.b"):
        commit_atomically(sql, [TableChange.of(first), TableChange.of(second)])

    # Computed on the transactions' tables, then once more on the tables loaded again: both lost.
    assert len(raced) == 2
    assert sql.load_table("ns.a").metadata_location == before_a
    assert "step" not in _props(sql, "ns.a")
    b = sql.load_table("ns.b")
    assert b.metadata_location == raced[-1] and b.properties.get("winner") == "other 1" and "step" not in b.properties
    left = _metadata_files(sql) - files
    assert left == {path.removeprefix("file://") for path in raced}  # the failed attempts' new files were deleted
    with pytest.raises(RuntimeError, match="cannot be reused"):
        first.commit_transaction()
    other.close()


def test_a_commit_computed_on_a_table_moved_since_is_computed_again_on_the_current_one(sql, catalog_backend):
    """As PyIceberg's own commit: requirements that still hold on the table as it is now let the commit land."""
    other = catalog_backend.build()
    first, second = _set(sql, "ns.a", step="1"), _set(sql, "ns.b", step="1")
    with other.load_table("ns.b").transaction() as concurrent:  # after ``second`` was staged
        concurrent.set_properties(winner="other")
    files = _metadata_files(sql)

    result = commit_atomically(sql, [TableChange.of(first), TableChange.of(second)])

    assert result.applied
    assert _props(sql, "ns.a")["step"] == "1"
    assert {k: _props(sql, "ns.b")[k] for k in ("step", "winner")} == {"step": "1", "winner": "other"}
    assert len(_metadata_files(sql) - files) == 2  # the first attempt's files were deleted
    other.close()


def test_a_concurrent_append_fails_a_staged_append_of_the_commit_and_nothing_lands(sql, catalog_backend):
    other = catalog_backend.build()
    first, second = _set(sql, "ns.a", step="1"), sql.load_table("ns.b").transaction()
    second.append(pa.table({"id": pa.array([1], pa.int64())}))
    other.load_table("ns.b").append(pa.table({"id": pa.array([2], pa.int64())}))
    producer = second._snapshot_producers[0]
    staged_files = [*producer._written_manifests, *producer._written_manifest_lists]
    assert staged_files

    with pytest.raises(CommitFailedException, match=r"ns\.b: Requirement failed: branch main"):
        commit_atomically(sql, [TableChange.of(first), TableChange.of(second)])

    assert "step" not in _props(sql, "ns.a")
    assert sql.load_table("ns.b").scan().to_arrow().column("id").to_pylist() == [2]
    assert not any(
        Path(path.removeprefix("file://")).exists() for path in staged_files
    )  # its manifests went, as in PyIceberg
    other.close()


def test_concurrent_multi_table_commits_never_half_apply(sql, catalog_backend):
    """Threads append the same value to both tables in one commit each (in both table orders), retrying lost races."""
    expected = race_on_two_tables(catalog_backend.build, writers=4, steps=4, attempts=50)
    a = sorted(sql.load_table("ns.a").scan().to_arrow().column("id").to_pylist())
    b = sorted(sql.load_table("ns.b").scan().to_arrow().column("id").to_pylist())
    assert a == b == expected


def test_a_table_is_created_in_the_same_commit(sql):
    create = sql.create_table_transaction("ns.c", SCHEMA, properties={"made": "here"})
    change = _set(sql, "ns.a", step="1")
    result = commit_atomically(sql, [TableChange.of(create), TableChange.of(change)])
    assert result.tables == ("ns.c", "ns.a")
    assert _props(sql, "ns.c")["made"] == "here" and _props(sql, "ns.a")["step"] == "1"


def test_creating_a_table_that_exists_applies_nothing(sql):
    sql.create_table("ns.c", SCHEMA)
    files = _metadata_files(sql)
    create = sql.create_table_transaction("ns.c", SCHEMA)
    with pytest.raises(TableAlreadyExistsError):
        commit_atomically(sql, [TableChange.of(_set(sql, "ns.a", step="1")), TableChange.of(create)])
    assert "step" not in _props(sql, "ns.a")
    assert _metadata_files(sql) == files


def test_a_create_losing_the_race_rolls_back_the_other_tables(sql, catalog_backend, monkeypatch):
    other = catalog_backend.build()
    create = sql.create_table_transaction("ns.c", SCHEMA)
    change = _set(sql, "ns.a", step="1")
    real_write = type(sql)._write_metadata

    def write_then_race(metadata, io, metadata_path):
        real_write(metadata, io, metadata_path)
        if not other.table_exists("ns.c"):
            other.create_table("ns.c", SCHEMA, properties={"by": "other"})

    monkeypatch.setattr(sql, "_write_metadata", write_then_race)
    with pytest.raises(TableAlreadyExistsError):
        commit_atomically(sql, [TableChange.of(change), TableChange.of(create)])
    assert "step" not in _props(sql, "ns.a")
    assert _props(sql, "ns.c")["by"] == "other"
    other.close()


def test_a_missing_table_applies_nothing(sql):
    with pytest.raises(NoSuchTableError):
        commit_atomically(
            sql,
            [
                TableChange.of(_set(sql, "ns.a", step="1")),
                TableChange(("ns", "gone"), (SetPropertiesUpdate(updates={}),)),
            ],
        )
    assert "step" not in _props(sql, "ns.a")


def test_a_table_given_twice_is_refused(sql):
    with pytest.raises(InvalidOperationError, match="twice"):
        commit_atomically(sql, [TableChange.of(_set(sql, "ns.a", x="1")), TableChange.of(_set(sql, "ns.a", y="1"))])


def test_a_table_left_as_it_is_is_still_checked_at_the_commit(sql, catalog_backend, monkeypatch):
    """A change with only requirements writes no file, but a concurrent commit to that table still fails it all."""
    other = catalog_backend.build()
    b = sql.load_table("ns.b")
    unchanged = TableChange(("ns", "b"), (), (AssertCurrentSchemaId(current_schema_id=b.schema().schema_id),))
    real_write = type(sql)._write_metadata

    def write_then_race(metadata, io, metadata_path):
        real_write(metadata, io, metadata_path)
        with other.load_table("ns.b").update_schema() as update:
            update.add_column(f"c{len(other.load_table('ns.b').schema().fields)}", StringType())

    monkeypatch.setattr(sql, "_write_metadata", write_then_race)
    with pytest.raises(CommitFailedException, match=r"ns\.b"):
        commit_atomically(sql, [TableChange.of(_set(sql, "ns.a", step="1")), unchanged])
    assert "step" not in _props(sql, "ns.a")
    monkeypatch.undo()
    result = commit_atomically(sql, [TableChange(("ns", "b"), (), ())])
    assert result.applied and result.metadata_locations["ns.b"] == sql.load_table("ns.b").metadata_location
    other.close()


def test_catalogs_without_a_multi_table_commit_say_so_and_commit_nothing(caplog):
    glue = GlueCatalog(
        "glue",
        **{
            "glue.region": "us-east-1",
            "glue.access-key-id": "x",
            "glue.secret-access-key": "y",
            "glue.endpoint": "http://127.0.0.1:9",  # never contacted
        },
    )
    assert atomic_commit_mode(glue) == "per-table"
    with caplog.at_level(logging.INFO, logger="iceberg_ops_provider.core.atomic.commit"):
        result = commit_atomically(glue, [TableChange(("ns", "a"), (SetPropertiesUpdate(updates={"x": "1"}),))])
    assert not result.applied and result.mode == "per-table"
    assert "GlueCatalog has no multi-table commit" in result.reason
    assert "table by table" in caplog.text
    assert "one commit per table" in describe_commit_mode("per-table")
    assert "all-or-nothing" in describe_commit_mode("sql-transaction")
