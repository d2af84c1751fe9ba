"""The moves into a table and how far each got, read from the target's metadata."""

from __future__ import annotations

import pyarrow as pa

from iceberg_ops_provider.data_migration import DataMover
from iceberg_ops_provider.data_migration.progress_report import moves_into

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.string())])


def _source(catalog, files: int):
    table = catalog.create_table("sales.src", schema=SCHEMA)
    for n in range(files):
        table.append(pa.table({"id": list(range(n * 100, n * 100 + 100)), "day": [f"d{n}"] * 100}, schema=SCHEMA))
    return table


def test_finished_and_partial_moves_report_units_rows_and_bytes(catalog, namespace):
    _source(catalog, 4)
    done = DataMover(catalog, "sales.src", "sales.dst", create_target=True, move_id="all", commit_every_bytes=1)
    done.run()
    partial = DataMover(catalog, "sales.src", "sales.dst", where="day = 'd0'", move_id="first-day")
    plan = partial.plan()
    partial.run(units=plan.units[:1])
    moves = {move.move_id: move for move in moves_into(catalog.load_table("sales.dst"))}
    assert set(moves) == {"all", "first-day"}
    whole = moves["all"]
    assert (whole.units_committed, whole.units_planned, whole.rows, whole.complete) == (4, 4, 400, True)
    assert whole.source == "sales.src" and whole.branch == "main" and whole.bytes > 0 and whole.error is None
    assert moves["first-day"].rows == 100 and moves["first-day"].to_json()["units_committed"] == 1
    assert moves_into(catalog.load_table("sales.src")) == []


def test_an_unpublished_overwrite_reports_its_staging_branch(catalog, namespace):
    _source(catalog, 3)
    mover = DataMover(
        catalog, "sales.src", "sales.dst", create_target=True, mode="overwrite", move_id="ow", commit_every_bytes=1
    )
    mover.run(units=mover.plan().units[:1])
    (move,) = moves_into(catalog.load_table("sales.dst"))
    progress = (move.branch, move.units_committed, move.units_planned, move.complete)
    assert progress == ("iceberg-ops-move-ow", 1, 3, False)
    mover.run()
    (move,) = moves_into(catalog.load_table("sales.dst"))
    assert (move.branch, move.complete, move.rows) == ("main", True, 300)
