"""Guarded ref moves on a real SQLite catalog: every requirement holds, or nothing changes."""

from __future__ import annotations

import pytest
from pyiceberg.exceptions import CommitFailedException

from iceberg_ops_provider.core.refs import commit_refs
from tests.data_migration.support import ORDERS_SCHEMA, orders


@pytest.fixture
def table(catalog):
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", schema=ORDERS_SCHEMA)
    table.append(orders(0, 5))
    table.append(orders(5, 5))
    return table


def test_a_ref_moved_by_another_writer_fails_the_commit_and_nothing_changes(catalog, table):
    first = table.snapshots()[0].snapshot_id
    head = table.metadata.current_snapshot_id
    stale = catalog.load_table("sales.orders")
    catalog.load_table("sales.orders").manage_snapshots().create_branch(first, "audit").commit()
    table.refresh()
    table.append(orders(10, 1))  # main moves after the stale handle read it

    with pytest.raises(CommitFailedException, match="main"):
        commit_refs(stale, expected={"main": head, "audit": first}, move={"main": first}, remove=("audit",))

    table.refresh()
    assert table.metadata.current_snapshot_id != first and table.metadata.refs["audit"].snapshot_id == first


def test_a_ref_expected_missing_is_created_once_with_its_properties(catalog, table):
    head = table.metadata.current_snapshot_id
    first = table.snapshots()[0].snapshot_id
    stale = catalog.load_table("sales.orders")
    commit_refs(table, expected={"audit": None}, move={"audit": head}, properties={"owner": "one"})

    with pytest.raises(CommitFailedException, match="audit"):
        commit_refs(stale, expected={"audit": None}, move={"audit": first}, properties={"owner": "two"})

    table.refresh()
    assert table.metadata.refs["audit"].snapshot_id == head and table.properties["owner"] == "one"


def test_an_unknown_snapshot_is_refused_before_committing(table):
    with pytest.raises(ValueError, match="no such snapshot"):
        commit_refs(table, expected={}, move={"main": 42})
