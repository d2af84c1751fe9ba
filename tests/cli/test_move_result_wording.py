"""The move summary says why units were skipped: another run had committed them."""

from __future__ import annotations

from iceberg_ops_provider.cli.move import _describe_result
from iceberg_ops_provider.data_migration import DataMover
from tests.data_migration.support import source_table


def test_skipped_units_are_said_to_be_committed_by_another_run(catalog):
    source_table(catalog, files=3, rows_per_file=50)
    mover = DataMover(catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=1)
    units = mover.plan().units
    first = mover.run(units=[units[0].index])  # another worker's share, committed first
    again = DataMover(
        catalog, "sales.orders", "archive.orders", create_target=True, commit_every_bytes=1, move_id=mover.move_id
    )
    everything = again.run(units=[unit.index for unit in units])

    assert "1 unit(s) committed, 0 skipped, of 3" in _describe_result(first)
    assert (everything.units_committed, everything.units_skipped) == (2, 1)
    text = _describe_result(everything)
    assert "2 unit(s) committed, 1 skipped (already committed by another run), of 3" in text, text
