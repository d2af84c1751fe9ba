"""Upsert with key and schema checks on a real table."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.types import StringType

from iceberg_ops_provider.core.upsert import key_columns, upsert
from iceberg_ops_provider.errors import SchemaContractError, UpsertError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("status", pa.string())])


@pytest.fixture
def accounts(catalog, namespace):
    table = catalog.create_table(f"{namespace}.accounts", SCHEMA)
    with table.update_schema() as update:
        update.set_identifier_fields("id")
    table.append(pa.table({"id": [1, 2], "status": ["new", "new"]}, schema=SCHEMA))
    return table


def _rows(table) -> dict[int, str]:
    data = table.scan().to_arrow()
    return dict(zip(data.column("id").to_pylist(), data.column("status").to_pylist(), strict=True))


def test_upsert_updates_matches_and_inserts_the_rest_in_one_commit(accounts):
    snapshots = len(accounts.snapshots())
    result = upsert(accounts, pa.table({"id": pa.array([2, 3], pa.int32()), "status": ["paid", "new"]}))
    assert (result.rows_updated, result.rows_inserted) == (1, 1)
    assert _rows(accounts) == {1: "new", 2: "paid", 3: "new"}
    assert len(accounts.snapshots()) > snapshots


def test_upsert_insert_only_and_snapshot_properties(accounts):
    result = upsert(
        accounts,
        pa.table({"id": [1, 4], "status": ["changed", "new"]}),
        update_matched=False,
        snapshot_properties={"batch": "b-7"},
    )
    assert (result.rows_updated, result.rows_inserted) == (0, 1)
    assert _rows(accounts)[1] == "new"
    assert accounts.current_snapshot().summary["batch"] == "b-7"


def test_empty_data_commits_nothing(accounts):
    snapshots = len(accounts.snapshots())
    result = upsert(accounts, pa.table({"id": pa.array([], pa.int64()), "status": pa.array([], pa.string())}))
    assert (result.rows_updated, result.rows_inserted) == (0, 0)
    assert len(accounts.snapshots()) == snapshots


def test_keys_default_to_identifier_fields_or_must_be_given(catalog, namespace, accounts):
    assert key_columns(accounts) == ["id"]
    plain = catalog.create_table(f"{namespace}.plain", SCHEMA)
    with pytest.raises(UpsertError, match=r"has no identifier fields.*Pass join_cols"):
        upsert(plain, pa.table({"id": [1], "status": ["x"]}))
    with pytest.raises(UpsertError, match=r"Key column\(s\) \['nope'\] are not in table"):
        upsert(plain, pa.table({"id": [1], "status": ["x"]}), join_cols=["nope"])
    assert upsert(plain, pa.table({"id": [1], "status": ["x"]}), join_cols=["id"]).rows_inserted == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            pa.table({"id": [1, 1], "status": ["a", "b"]}),
            r"1 key\(s\) that occur more than once \(for example \{'id': 1\}\)",
        ),
        (pa.table({"id": pa.array([1, None], pa.int64()), "status": ["a", "b"]}), "has 1 null value"),
        (pa.table({"status": ["a"]}), r"missing from the data"),
        (pa.table({"id": [9]}), r"lacks column\(s\) \['status'\].*needs every column"),
    ],
)
def test_bad_keys_are_refused_and_nothing_is_written(accounts, data, message):
    before = _rows(accounts)
    with pytest.raises(UpsertError, match=message):
        upsert(accounts, data)
    assert _rows(accounts) == before


def test_schema_mismatch_is_refused_with_every_problem(accounts):
    with pytest.raises(SchemaContractError, match="2 problem"):
        upsert(accounts, pa.table({"id": [1], "status": [5], "extra": ["x"]}))
    with pytest.raises(UpsertError, match=r"takes a pyarrow\.Table"):
        upsert(accounts, [{"id": 1}])  # type: ignore[arg-type]


def test_upsert_right_after_a_schema_change(accounts):
    # PyIceberg 0.12's own Table.upsert reads matched rows with the last snapshot's schema and
    # fails here ("field names are not matching"); ours reads with the current schema.
    with accounts.update_schema() as update:
        update.add_column("tier", StringType())
    data = pa.table({"id": [1, 5], "status": ["gold", "new"], "tier": ["a", "b"]})
    result = upsert(accounts, data)
    assert (result.rows_updated, result.rows_inserted) == (1, 1)
    rows = accounts.scan().to_arrow().sort_by("id").to_pylist()
    assert rows == [
        {"id": 1, "status": "gold", "tier": "a"},
        {"id": 2, "status": "new", "tier": None},
        {"id": 5, "status": "new", "tier": "b"},
    ]


def test_unchanged_matches_are_not_rewritten(accounts):
    snapshots = len(accounts.snapshots())
    result = upsert(accounts, pa.table({"id": [1, 2], "status": ["new", "new"]}))
    assert (result.rows_updated, result.rows_inserted) == (0, 0)
    assert len(accounts.snapshots()) == snapshots
