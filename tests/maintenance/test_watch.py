"""Watching a SQLite catalog's tables: an unchanged table costs one load, due work is announced once per change."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.watch import WatchState, watch_tables, watched_tables

SCHEMA = pa.schema([pa.field("id", pa.int64())])
NOON = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _appends(table, count: int) -> None:
    for n in range(count):
        table.append(pa.table({"id": [n]}, schema=SCHEMA))


def _counting_loads(catalog, monkeypatch) -> list[str]:
    """The names ``catalog.load_table`` is called with, the real call still made."""
    calls: list[str] = []
    load = catalog.load_table

    def counted(identifier):
        calls.append(identifier if isinstance(identifier, str) else ".".join(identifier))
        return load(identifier)

    monkeypatch.setattr(catalog, "load_table", counted)
    return calls


def test_an_append_making_a_table_due_is_announced_once_and_again_after_healthy_then_due(
    catalog, namespace, monkeypatch
):
    table = catalog.create_table("sales.t", schema=SCHEMA)
    catalog.create_table("sales.quiet", schema=SCHEMA)
    names = watched_tables(catalog, "sales", None)
    assert names == ["sales.quiet", "sales.t"]
    loads = _counting_loads(catalog, monkeypatch)

    first = watch_tables(catalog, names, moment=NOON)
    assert (first.due, set(first.measured)) == ((), {"sales.t", "sales.quiet"})  # empty tables are healthy

    _appends(table, 6)
    loads.clear()
    due = watch_tables(catalog, names, first.state, moment=NOON)
    assert [(entry.table, entry.needs) for entry in due.due] == [("sales.t", ("compact",))]
    assert due.measured == ("sales.t",)  # the unchanged table was loaded, not measured
    assert sorted(loads) == names  # one load per table

    again = watch_tables(catalog, names, due.state, moment=NOON)
    assert (again.due, again.measured) == ((), ())  # no change, no event, nothing measured
    assert again.state == due.state

    compact_small_files_streaming(catalog.load_table("sales.t"), min_input_files=2)
    healthy = watch_tables(catalog, names, again.state, moment=NOON)
    assert (healthy.due, healthy.measured) == ((), ("sales.t",))
    assert "sales.t" not in healthy.state.announced

    _appends(catalog.load_table("sales.t"), 6)
    back = watch_tables(catalog, names, healthy.state, moment=NOON)
    assert [entry.table for entry in back.due] == ["sales.t"]  # due again after being healthy


def test_a_due_table_whose_metadata_changed_is_announced_again_and_the_state_round_trips(catalog, namespace):
    table = catalog.create_table("sales.t", schema=SCHEMA)
    _appends(table, 6)
    first = watch_tables(catalog, ["sales.t"], moment=NOON)
    assert [entry.table for entry in first.due] == ["sales.t"]
    kept = WatchState.from_json(first.state.to_json())  # as the trigger keeps it between restarts
    assert kept == first.state
    assert watch_tables(catalog, ["sales.t"], kept, moment=NOON).due == ()
    _appends(table, 1)
    assert [entry.table for entry in watch_tables(catalog, ["sales.t"], kept, moment=NOON).due] == ["sales.t"]
    # an empty state (a triggerer restart without a state store) announces what is due once more
    assert [entry.table for entry in watch_tables(catalog, ["sales.t"], None, moment=NOON).due] == ["sales.t"]


def test_a_table_held_by_quiet_hours_is_announced_when_they_end_without_any_change(catalog, namespace):
    table = catalog.create_table("sales.q", schema=SCHEMA, properties={"iceberg-ops.maintenance.quiet-hours": "11-13"})
    _appends(table, 6)
    quiet = watch_tables(catalog, ["sales.q"], moment=NOON)
    assert quiet.due == () and quiet.state.held == frozenset({"sales.q"})
    still = watch_tables(catalog, ["sales.q"], quiet.state, moment=NOON.replace(minute=30))
    assert (still.due, still.measured) == ((), ())  # still quiet: its policy read from the loaded table only
    later = watch_tables(catalog, ["sales.q"], still.state, moment=NOON.replace(hour=14))
    assert [(entry.table, entry.held) for entry in later.due] == [("sales.q", None)]
    assert later.state.held == frozenset()


def test_a_broken_table_is_reported_and_tried_again_and_a_dropped_one_forgotten(catalog, namespace):
    broken = catalog.create_table("sales.broken", schema=SCHEMA)
    _appends(broken, 2)
    catalog.create_table("sales.gone", schema=SCHEMA)
    Path(broken.metadata_location.removeprefix("file://")).unlink()
    first = watch_tables(catalog, ["sales.broken", "sales.gone"], moment=NOON)
    assert [error.table for error in first.errors] == ["sales.broken"]
    assert "sales.broken" not in first.state.locations  # measured again at the next look
    catalog.drop_table("sales.gone")
    second = watch_tables(catalog, ["sales.broken"], first.state, moment=NOON)
    assert [error.table for error in second.errors] == ["sales.broken"]
    assert second.state.locations == {}


def test_a_stored_state_of_another_shape_keeps_only_what_it_can_read(catalog, namespace):
    # Written by another version, or by hand: a look from it must still run (a bad entry costs a measure).
    stored = {
        "locations": {"sales.a": "file:///a.metadata.json", "sales.b": 7, "sales.c": None},
        "announced": {"sales.a": "file:///a.metadata.json", "sales.d": ["x"]},
        "held": ["sales.e", ["sales.f", "quiet_hours"], {"table": "sales.g"}, 3],
    }
    state = WatchState.from_json(stored)
    assert state == WatchState(
        locations={"sales.a": "file:///a.metadata.json"},
        announced={"sales.a": "file:///a.metadata.json"},
        held=frozenset({"sales.e"}),
    )
    due = catalog.create_table("sales.due", schema=SCHEMA)
    _appends(due, 6)
    assert [entry.table for entry in watch_tables(catalog, ["sales.due"], state, moment=NOON).due] == ["sales.due"]
