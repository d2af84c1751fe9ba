"""The transaction that computes its metadata once per state: the same metadata PyIceberg's gives, computed
again after a staged update or a refresh, and never a stale one."""

from __future__ import annotations

import pyarrow as pa

from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.core.transactions import cached_transaction


def test_metadata_is_computed_once_per_state_and_again_after_an_update_or_a_refresh(tmp_path, monkeypatch):
    from pyiceberg.table import Transaction

    catalog = CatalogFactory.build("sqlite", db_path=tmp_path / "c.db", warehouse_dir=tmp_path / "w")
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", pa.schema([pa.field("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    computed: list[int] = []
    original = Transaction.table_metadata.fget

    def counting(self):
        computed.append(1)
        return original(self)

    monkeypatch.setattr(Transaction, "table_metadata", property(counting))
    transaction = cached_transaction(table)
    first = transaction.table_metadata
    assert first is table.metadata and not computed  # nothing staged yet: the table's own, no copy made
    assert first == table.transaction().table_metadata  # what PyIceberg's own transaction gives
    computed.clear()
    transaction.set_properties({"owner": "ops"})
    staged = transaction.table_metadata
    assert staged.properties["owner"] == "ops" and len(computed) == 1  # the staged update is seen
    count = len(computed)
    assert transaction.table_metadata is staged and len(computed) == count  # and not computed again per look
    catalog.load_table("ns.t").append(pa.table({"id": pa.array([2], pa.int64())}))
    table.refresh()  # a retry refreshes the table: the metadata it sees moves on
    refreshed = transaction.table_metadata
    assert refreshed.current_snapshot_id == table.metadata.current_snapshot_id != first.current_snapshot_id
    assert refreshed.properties["owner"] == "ops"
