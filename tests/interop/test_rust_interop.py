"""iceberg-rust reads what this project writes, from the metadata file alone, independently of PyIceberg:
a restored column's old values, compacted files and a mover's copy, with filtered reads (a wrong column
statistic would prune the wrong files). ``make rust-peer`` installs the reader; without it these skip.

iceberg-rust 0.11 scans with the schema of the table's current snapshot, not the table's current
schema, so a column added or restored after the last write shows up there after the next write: the
restore test appends once after restoring, as a producer writing the column again would.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.maintenance import compact_small_files_streaming
from tests.interop.rust_peer import RustPeer, locate, read
from tests.support.migrations import migrate

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def rust_peer() -> RustPeer:
    """The installed iceberg-rust peer, or a skip naming the command that installs it."""
    found = locate()
    if not isinstance(found, RustPeer):
        pytest.skip(f"iceberg-rust interop: {found}")
    return found


def _append(catalog, name: str, columns: dict) -> None:
    table = catalog.load_table(name)
    table.append(pa.table(columns, schema=table.schema().as_arrow()))


def _rust(peer: RustPeer, catalog, name: str, sql: str) -> list[dict]:
    return read(peer, catalog.load_table(name).metadata_location, sql)


def test_iceberg_rust_reads_a_restored_columns_old_values_and_filters_on_them(rust_peer, catalog):
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("legacy", pa.string()), pa.field("amount", pa.float64())]
    )
    migrate(catalog, lambda ctx: ctx.create_table("orders", schema))
    _append(catalog, "sales.orders", {"id": [1, 2], "legacy": ["a", "b"], "amount": [1.0, 2.0]})
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    _append(catalog, "sales.orders", {"id": [3], "amount": [3.0]})  # written while the column is gone
    migrate(catalog, lambda ctx: ctx.add_column("orders", "note", "string"))

    migrate(catalog, lambda ctx: ctx.restore_column("orders", "legacy"))
    _append(catalog, "sales.orders", {"id": [4], "legacy": ["d"], "amount": [4.0], "note": ["n"]})

    rows = _rust(rust_peer, catalog, "sales.orders", "SELECT id, legacy, note FROM t ORDER BY id")
    assert rows == [
        {"id": 1, "legacy": "a", "note": None},
        {"id": 2, "legacy": "b", "note": None},
        {"id": 3, "legacy": None, "note": None},
        {"id": 4, "legacy": "d", "note": "n"},
    ]
    assert _rust(rust_peer, catalog, "sales.orders", "SELECT id FROM t WHERE legacy = 'b'") == [{"id": 2}]
    assert _rust(rust_peer, catalog, "sales.orders", "SELECT id FROM t WHERE legacy IS NULL") == [{"id": 3}]


def test_iceberg_rust_reads_compacted_files_and_prunes_them_by_their_statistics(rust_peer, catalog):
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string()), pa.field("amount", pa.float64())]
    )
    migrate(
        catalog,
        lambda ctx: ctx.create_table("orders", schema, partition_by=["region"], sort_by=["id"]),
    )
    for batch in range(8):
        ids = list(range(batch * 50, batch * 50 + 50))
        _append(
            catalog,
            "sales.orders",
            {"id": ids[::-1], "region": ["eu" if i % 3 else "us" for i in ids], "amount": [i / 4 for i in ids]},
        )
    before = _rust(rust_peer, catalog, "sales.orders", "SELECT id, region, amount FROM t ORDER BY id")

    result = compact_small_files_streaming(catalog.load_table("sales.orders"), strategy="sort", min_input_files=2)

    assert result.rewritten_data_files_count == 16 and result.added_data_files_count == 2
    assert _rust(rust_peer, catalog, "sales.orders", "SELECT id, region, amount FROM t ORDER BY id") == before
    pyiceberg = catalog.load_table("sales.orders").scan(row_filter="id >= 100 and id < 130").to_arrow()
    expected = sorted(pyiceberg.column("id").to_pylist())
    filtered = _rust(rust_peer, catalog, "sales.orders", "SELECT id FROM t WHERE id >= 100 AND id < 130 ORDER BY id")
    assert [row["id"] for row in filtered] == expected == list(range(100, 130))
    by_region = _rust(rust_peer, catalog, "sales.orders", "SELECT count(*) AS n FROM t WHERE region = 'us'")
    assert by_region == [{"n": sum(1 for i in range(400) if i % 3 == 0)}]


def test_iceberg_rust_reads_the_movers_copy_row_for_row(rust_peer, catalog):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
    migrate(catalog, lambda ctx: ctx.create_table("source", schema))
    for start in (0, 500):
        _append(catalog, "sales.source", {"id": list(range(start, start + 500)), "name": [f"n{start}"] * 500})

    mover = DataMover(catalog, "sales.source", "sales.copy", create_target=True)
    assert mover.run().complete

    query = "SELECT id, name FROM t WHERE id BETWEEN 450 AND 560 ORDER BY id"
    assert _rust(rust_peer, catalog, "sales.copy", query) == _rust(rust_peer, catalog, "sales.source", query)
    assert _rust(rust_peer, catalog, "sales.copy", "SELECT count(*) AS n FROM t") == [{"n": 1000}]
