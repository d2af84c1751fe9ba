"""Which tables a migration touched and how: the net change per table, in results, JSON and the runner."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.errors import MigrationError
from iceberg_ops_provider.migration.context import MigrationContext
from iceberg_ops_provider.migration.touched import TouchedTable, TouchedTables, merge_touched, recording
from tests.support.migrations import ORDERS, write_migration


def _changes(tables) -> list[tuple]:
    return [(t.table, t.change, t.previous) for t in tables]


# -- folding changes, without a catalog -------------------------------------------------------


def test_changes_to_one_table_fold_into_its_net_change():
    touched = TouchedTables()
    touched.created("s.a")
    touched.altered("s.a")  # created, then changed: created
    touched.altered("s.b")
    touched.renamed("s.b", "s.c")  # changed, then renamed: renamed from its first name
    touched.renamed("s.c", "s.d")
    touched.dropped("s.e", "file:///w/s/e")
    touched.created("s.e")  # dropped and created again: overwritten
    touched.written("s.f")
    touched.altered("s.f")  # loaded to write, then changed: altered
    assert _changes(touched.tables()) == [
        ("s.a", "create", None),
        ("s.d", "rename", "s.b"),
        ("s.e", "overwrite", None),
        ("s.f", "alter", None),
    ]


def test_a_table_created_then_dropped_leaves_nothing_and_a_rename_back_is_an_alter():
    touched = TouchedTables()
    touched.created("s.tmp")
    touched.dropped("s.tmp")
    touched.renamed("s.a", "s.b")
    touched.renamed("s.b", "s.a")
    assert _changes(touched.tables()) == [("s.a", "alter", None)]


def test_a_renamed_table_dropped_is_the_drop_of_its_first_name():
    touched = TouchedTables()
    touched.renamed("s.a", "s.b")
    touched.dropped("s.b", "file:///w/s/a")
    (gone,) = touched.tables()
    assert (gone.table, gone.change, gone.location) == ("s.a", "drop", "file:///w/s/a")


def test_net_changes_of_migrations_in_a_row_merge():
    first = [TouchedTable("s.a", "create"), TouchedTable("s.old", "drop", location="file:///w/s/old")]
    second = [TouchedTable("s.b", "rename", previous="s.a"), TouchedTable("s.old", "create")]
    third = [TouchedTable("s.b", "alter")]
    assert _changes(merge_touched(first, second, third)) == [("s.b", "create", None), ("s.old", "overwrite", None)]


def test_a_touched_table_round_trips_through_json_and_refuses_nonsense():
    renamed = TouchedTable("s.b", "rename", previous="s.a")
    assert renamed.to_json() == {"table": "s.b", "change": "rename", "previous": "s.a"}
    assert TouchedTable(**renamed.to_json()) == renamed
    with pytest.raises(ValueError, match="not one of"):
        TouchedTable("s.a", "truncate")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="previous name"):
        TouchedTable("s.a", "rename")
    with pytest.raises(ValueError, match="previous name"):
        TouchedTable("s.a", "alter", previous="s.z")


# -- the context notes what reached the catalog ---------------------------------------------------


def test_the_context_notes_commits_drops_renames_and_loads(catalog, namespace, orders_schema):
    catalog.create_table("sales.old", orders_schema)
    catalog.create_table("sales.moved", orders_schema)
    catalog.create_table("sales.data", orders_schema)
    old_location = catalog.load_table("sales.old").location()
    with recording() as touched:
        ctx = MigrationContext(catalog, "sales")
        ctx.create_table("orders", orders_schema)
        ctx.set_properties("orders", owner="ops")
        ctx.drop_table("old")
        ctx.rename_table("moved", "archive.moved")
        ctx.load_table("data")
        ctx.finish()
    assert ctx.touched is touched  # a context built inside a recording notes there
    tables = {t.table: t for t in touched.tables()}
    assert _changes(touched.tables()) == [  # load_table commits what was staged before it
        ("sales.orders", "create", None),
        ("sales.old", "drop", None),
        ("archive.moved", "rename", "sales.moved"),
        ("sales.data", "write", None),
    ]
    assert tables["sales.old"].location == old_location  # read before the drop: the catalog forgets it


def test_staged_changes_that_were_discarded_are_not_touched(catalog, namespace, orders_schema):
    ctx = MigrationContext(catalog, "sales")
    ctx.create_table("orders", orders_schema)
    ctx.discard()
    ctx.finish()
    assert ctx.touched.tables() == ()
    assert not catalog.table_exists("sales.orders")


# -- results and the runner -----------------------------------------------------------------------


def test_results_and_their_json_list_the_tables_each_migration_touched(runner, migrations_dir, catalog):
    write_migration(migrations_dir, "0001_orders.py", ORDERS, downgrade='ctx.drop_table("orders")')
    write_migration(
        migrations_dir,
        "0002_rename.py",
        'ctx.rename_table("orders", "orders_v1")\nctx.set_properties("orders_v1", owner="ops")',
        downgrade='ctx.rename_table("orders_v1", "orders")',
    )
    first, second = runner.upgrade()
    assert _changes(first.tables) == [("sales.orders", "create", None)]
    assert _changes(second.tables) == [("sales.orders_v1", "rename", "sales.orders")]
    payload = second.to_json()
    assert payload["tables"] == [{"table": "sales.orders_v1", "change": "rename", "previous": "sales.orders"}]
    assert {"version", "description", "status", "duration", "direction"} <= payload.keys()  # unchanged keys
    assert _changes(runner.touched) == [("sales.orders_v1", "create", None)]  # the run's net change

    location = catalog.load_table("sales.orders_v1").location()
    rolled_back = runner.downgrade("base")
    assert [_changes(r.tables) for r in rolled_back] == [
        [("sales.orders", "rename", "sales.orders_v1")],
        [("sales.orders", "drop", None)],
    ]
    assert rolled_back[1].tables[0].location == location
    assert _changes(runner.touched) == [("sales.orders_v1", "drop", None)]  # gone, under its first name here


def test_a_failed_migration_still_reports_what_it_committed_before_failing(runner, migrations_dir, catalog):
    write_migration(migrations_dir, "0001_orders.py", ORDERS)
    write_migration(
        migrations_dir,
        "0002_half.py",
        'ctx.create_table("audit", pa.schema([("n", pa.int64())]))\nctx.commit()\nraise RuntimeError("stop here")',
    )
    with pytest.raises(MigrationError, match="partly committed"):
        runner.upgrade()
    assert _changes(runner.touched) == [("sales.orders", "create", None), ("sales.audit", "create", None)]
    assert catalog.table_exists("sales.audit")


def test_a_stamp_touches_nothing(runner, migrations_dir):
    write_migration(migrations_dir, "0001_orders.py", ORDERS)
    (stamped,) = runner.stamp("head")
    assert stamped.tables == () and stamped.to_json()["tables"] == []
