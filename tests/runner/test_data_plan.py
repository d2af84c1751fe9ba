"""Data operations seen before they run: ``plan`` estimates each from manifest metadata and writes nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import IcebergOpsError
from iceberg_ops_provider.history import HistoryStore
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from iceberg_ops_provider.runner.plan_document import plan_document
from tests.support.migrations import write_migration

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("region", pa.string())])


def _orders(catalog, files: int = 4, rows: int = 25):
    """``sales.orders``: ``files`` data files of ``rows`` rows, ids counting up, so ``id < 25`` is the first file."""
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table("sales.orders", SCHEMA, properties={UNIT_BYTES_PROPERTY: "1"})
    for n in range(files):
        ids = list(range(n * rows, (n + 1) * rows))
        table.append(pa.table({"id": ids, "v": ids, "region": ["eu" if i % 2 else "us" for i in ids]}, schema=SCHEMA))
    return catalog.load_table("sales.orders")


def _sizes(table) -> list[int]:
    return sorted(task.file.file_size_in_bytes for task in table.scan().plan_files())


def _state(catalog) -> dict[str, tuple[str, tuple[int | None, ...]]]:
    """Every table's metadata location and snapshot ids, in every namespace (the meta-namespace too)."""
    found = {}
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            table = catalog.load_table(identifier)
            found[".".join(identifier)] = (table.metadata_location, tuple(s.snapshot_id for s in table.snapshots()))
    return found


def _operations(runner, target: str = "head", direction: str | None = None) -> list[dict]:
    [step] = runner.plan(target, direction, inspect=True)
    return list(step.operations)


def test_plan_estimates_each_data_operation_from_metadata(catalog, runner, migrations_dir):
    table = _orders(catalog)
    sizes = _sizes(table)
    write_migration(
        migrations_dir,
        "0001_fix.py",
        'ctx.add_column("orders", "score", "long")\n'
        'ctx.backfill("orders", "score", 7)\n'
        'ctx.update_rows("orders", {"v": 0}, where="id >= 50")\n'
        'ctx.delete_rows("orders", "id < 25")\n'
        'ctx.rewrite_partitions("orders")',
    )
    added, backfill, update, delete, rewrite = _operations(runner)
    assert "estimate" not in added
    assert backfill["risk"] == update["risk"] == "data" and delete["risk"] == "destructive"
    assert backfill["estimate"]["files"] == 4 and backfill["estimate"]["rows"] == 100
    assert backfill["estimate"]["bytes"] == sum(sizes) and backfill["estimate"]["units"] == 4
    # Files whose id bounds lie below 50 cannot match: only the two others are read.
    assert (update["estimate"]["files"], update["estimate"]["rows"]) == (2, 50)
    # Every row of the first file matches: it is dropped whole, nothing is rewritten.
    assert (delete["estimate"]["files"], delete["estimate"]["files_dropped"]) == (0, 1)
    assert (delete["estimate"]["rows_dropped"], delete["estimate"]["bytes_dropped"]) == (25, sizes[0])
    assert rewrite["estimate"]["files"] == 0  # already in the current (unpartitioned) spec
    snapshot = table.current_snapshot().snapshot_id
    assert {op["estimate"]["snapshot_id"] for op in (backfill, update, delete, rewrite)} == {snapshot}
    assert all(isinstance(value, int) for value in backfill["estimate"].values())


def test_a_table_the_migration_creates_estimates_as_empty(catalog, runner, migrations_dir):
    catalog.create_namespace("sales")
    write_migration(
        migrations_dir,
        "0001_new.py",
        'ctx.create_table("fresh", pa.schema([("id", pa.int64()), ("v", pa.int64())]))\n'
        'ctx.update_rows("fresh", {"v": 1})',
    )
    [step] = runner.plan("head", inspect=True)
    assert step.risk == "data"
    _, update = step.operations
    assert update["estimate"]["snapshot_id"] is None
    assert {name: value for name, value in update["estimate"].items() if name != "snapshot_id"} == dict.fromkeys(
        ("files", "bytes", "rows", "files_dropped", "bytes_dropped", "rows_dropped", "delete_files", "units"), 0
    )


def test_a_later_step_of_the_plan_sees_the_table_an_earlier_one_creates(catalog, runner, migrations_dir):
    catalog.create_namespace("sales")
    write_migration(migrations_dir, "0001_new.py", 'ctx.create_table("fresh", pa.schema([("id", pa.int64())]))')
    write_migration(migrations_dir, "0002_clean.py", 'ctx.delete_rows("fresh", "id > 3")')
    _, second = runner.plan("head", inspect=True)
    assert second.risk == "destructive" and second.operations[0]["estimate"]["files"] == 0


def test_plan_writes_nothing(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(migrations_dir, "0001_base.py", 'ctx.set_properties("orders", owner="sales")')
    runner.upgrade()
    write_migration(
        migrations_dir,
        "0002_fix.py",
        'ctx.add_column("orders", "score", "long")\nctx.backfill("orders", "score", 7)\n'
        'ctx.delete_rows("orders", "id < 30")',
        downgrade='ctx.restore_data("orders")\nctx.drop_column("orders", "score")',
    )
    before = _state(catalog)
    assert "sales.orders" in before and len(before) > 1  # the history's tables too
    document = plan_document(runner, runner.plan("head", inspect=True), "head")
    runner.plan("base", inspect=True)
    assert _state(catalog) == before
    [step] = document["steps"]
    assert [op.get("estimate", {}).get("rows") for op in step["operations"]] == [None, 100, 25]


def test_a_downgrade_that_restores_data_plans(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_double.py",
        'ctx.update_rows("orders", {"v": 1}, where="id < 50")',
        downgrade='ctx.restore_data("orders")',
    )
    runner.upgrade()
    [step] = runner.plan("base", inspect=True)
    assert step.risk == "destructive"
    [restore] = step.operations
    assert restore["risk"] == "destructive" and "estimate" not in restore


def test_a_plan_shows_a_restore_that_another_writers_commit_would_refuse(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_double.py",
        'ctx.update_rows("orders", {"v": 1}, where="id < 50")',
        downgrade='ctx.restore_data("orders")',
    )
    runner.upgrade()
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [1000], "v": [1], "region": ["eu"]}, schema=SCHEMA))
    head = catalog.load_table("sales.orders").current_snapshot().snapshot_id

    [step] = runner.plan("base", inspect=True)

    assert step.risk == "failed"
    problem = step.operations[-1]["operation"]
    assert "RestorePointError" in problem and str(head) in problem
    assert catalog.load_table("sales.orders").current_snapshot().snapshot_id == head  # a plan writes nothing


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ('ctx.backfill("orders", "scroe", 1)', "scroe"),
        ('ctx.update_rows("orders", {"v": 1}, where="regoin = \'eu\'")', "regoin"),
    ],
)
def test_plan_fails_a_step_whose_data_operation_is_bad(catalog, runner, migrations_dir, body, named):
    _orders(catalog)
    write_migration(migrations_dir, "0001_bad.py", body)
    [step] = runner.plan("head", inspect=True)
    assert step.risk == "failed"
    assert step.operations[-1]["operation"].startswith("failed: its data operations were refused: ")
    assert named in step.operations[-1]["operation"]


@pytest.mark.parametrize("then", ['ctx.drop_table("orders")', 'ctx.rename_table("orders", "orders_old")'])
def test_a_data_operation_on_a_table_the_migration_drops_later_is_refused_before_any_commit(
    catalog, runner, migrations_dir, then
):
    table = _orders(catalog)
    write_migration(migrations_dir, "0001_drop.py", f'ctx.delete_rows("orders", "id < 3")\n{then}')
    [step] = runner.plan("head", inspect=True)
    assert step.risk == "failed" and "dropped or renamed later in this migration" in step.operations[-1]["operation"]
    with pytest.raises(IcebergOpsError, match="dropped or renamed later in this migration"):
        runner.upgrade()
    after = catalog.load_table("sales.orders")
    assert after.metadata_location == table.metadata_location
    assert [row.status for row in HistoryStore(catalog).rows("sales")] == ["failed"]


def test_an_operation_without_a_where_says_every_row(catalog, runner, migrations_dir):
    _orders(catalog)
    write_migration(
        migrations_dir,
        "0001_all.py",
        'ctx.update_rows("orders", {"v": 0}, where=None)\nctx.delete_rows("orders", None)',
    )
    update, delete = _operations(runner)
    assert (update["operation"], update["estimate"]["rows"]) == ("update v of every row of orders", 100)
    assert (delete["operation"], delete["estimate"]["rows_dropped"]) == ("delete every row of orders", 100)
