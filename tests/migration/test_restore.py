"""``ctx.restore_column``: a dropped column comes back with its data (files written before the drop read
their old values, files written after it read null), its field id, type, doc and position, keeping
the columns added since; the refusals; and what plan and lint say about the rows that hold it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.lint import lint_paths
from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import migrate, write_migration

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("legacy", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


@pytest.fixture
def orders(catalog):
    migrate(catalog, lambda ctx: ctx.create_table("orders", SCHEMA))
    migrate(catalog, lambda ctx: ctx.alter_column("orders", "legacy", doc="the old code"))
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [1, 2], "legacy": ["a", "b"], "amount": [1.0, 2.0]}, schema=table.schema().as_arrow()))
    return table


def _rows(catalog) -> list[dict]:
    return sorted(catalog.load_table("sales.orders").scan().to_arrow().to_pylist(), key=lambda row: row["id"])


def test_a_dropped_column_comes_back_with_its_values_its_id_doc_and_place(catalog, orders):
    legacy = orders.schema().find_field("legacy")
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [3], "amount": [3.0]}, schema=table.schema().as_arrow()))  # written without it
    migrate(catalog, lambda ctx: ctx.add_column("orders", "note", "string"))

    migrate(catalog, lambda ctx: ctx.restore_column("orders", "legacy"))

    table = catalog.load_table("sales.orders")
    restored = table.schema().find_field("legacy")
    assert (restored.field_id, restored.doc, restored.required) == (legacy.field_id, "the old code", False)
    assert [field.name for field in table.schema().fields] == ["id", "legacy", "amount", "note"]
    assert [(row["id"], row["legacy"]) for row in _rows(catalog)] == [(1, "a"), (2, "b"), (3, None)]


def test_undoing_a_drop_at_once_makes_the_old_schema_current_again(catalog, orders):
    before = orders.schema()
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    migrate(catalog, lambda ctx: ctx.restore_column("orders", "legacy"))
    table = catalog.load_table("sales.orders")
    assert table.schema().schema_id == before.schema_id and len(table.schemas()) == before.schema_id + 2
    assert [row["legacy"] for row in _rows(catalog)] == ["a", "b"]


def test_a_required_column_held_by_every_row_stays_required(catalog):
    migrate(
        catalog,
        lambda ctx: ctx.create_table(
            "orders",
            pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("code", pa.string(), nullable=False)]),
        ),
    )
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [1], "code": ["x"]}, schema=table.schema().as_arrow()))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "code"))
    migrate(catalog, lambda ctx: ctx.restore_column("orders", "code"))
    assert catalog.load_table("sales.orders").schema().find_field("code").required


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("amount", r"a live column has that name \(field id 3\)"),
        ("nothing", r"no schema of the table ever had it\. Dropped columns it can restore: legacy"),
    ],
)
def test_refusals_name_the_reason(catalog, orders, name, message):
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    ctx = MigrationContext(catalog, "sales")
    with pytest.raises(InvalidOperationError, match=message):
        ctx.restore_column("orders", name)
    ctx.discard()


def test_a_renamed_column_is_not_restorable(catalog, orders):
    migrate(catalog, lambda ctx: ctx.rename_column("orders", "legacy", "code"))
    ctx = MigrationContext(catalog, "sales")
    with pytest.raises(InvalidOperationError, match=r"renamed, not dropped; field id 2 is live as 'code'"):
        ctx.restore_column("orders", "legacy")


def test_plan_and_lint_say_how_many_live_rows_hold_its_data(catalog, orders, tmp_path):
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_drop.py", 'ctx.drop_column("orders", "legacy")')
    write_migration(
        folder,
        "0002_restore.py",
        'ctx.restore_column("orders", "legacy")',
        downgrade='ctx.drop_column("orders", "legacy")',
    )
    runner = MigrationRunner(catalog, "sales", folder)
    runner.upgrade("0001")
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [3, 4, 5], "amount": [3.0, 4.0, 5.0]}, schema=table.schema().as_arrow()))

    (step,) = runner.plan("head", inspect=True)
    assert (
        step.operations[0]["operation"]
        == "restore column orders.legacy (field id 2): 2 live rows hold its data, 3 do not"
    )
    findings = lint_paths([folder / "0002_restore.py"], catalog=catalog, namespace="sales").findings
    (finding,) = [f for f in findings if f.function == "upgrade"]  # the downgrade drops it: a finding of its own
    assert finding.rule == "restore-column" and finding.severity == "info" and not finding.fails
    assert "sales.orders: 2 live rows hold its data, 3 do not" in finding.message

    runner.upgrade()
    assert [row["legacy"] for row in _rows(catalog)] == ["a", "b", None, None, None]
    runner.downgrade("0001")  # the restore's downgrade drops it again
    assert "legacy" not in catalog.load_table("sales.orders").schema().column_names


# --- What a refused or planned restore says: the columns it offers are only those that can come back
# (not names a live column took since), and the rows holding the column's data say how many are null.

CODES_SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("legacy", pa.string()), pa.field("code", pa.string())]
)


def test_a_dropped_name_a_live_column_took_since_is_not_offered(catalog):
    migrate(catalog, lambda ctx: ctx.create_table("orders", CODES_SCHEMA))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"), lambda ctx: ctx.drop_column("orders", "code"))
    migrate(catalog, lambda ctx: ctx.add_column("orders", "code", "int"))  # a new column under an old name
    ctx = MigrationContext(catalog, "sales")
    with pytest.raises(InvalidOperationError, match=r"Dropped columns it can restore: legacy\.$"):
        ctx.restore_column("orders", "nothing")
    ctx.discard()


def test_the_count_of_rows_holding_its_data_says_how_many_are_null(catalog):
    migrate(catalog, lambda ctx: ctx.create_table("orders", CODES_SCHEMA))
    table = catalog.load_table("sales.orders")
    values = {"id": [1, 2, 3, 4], "legacy": ["a", None, None, "d"], "code": ["x"] * 4}
    table.append(pa.table(values, schema=table.schema().as_arrow()))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    table = catalog.load_table("sales.orders")
    table.append(pa.table({"id": [5], "code": ["y"]}, schema=table.schema().as_arrow()))

    ctx = MigrationContext(catalog, "sales")
    ctx.restore_column("orders", "legacy")
    assert ctx.operations[-1]["operation"] == (
        "restore column orders.legacy (field id 2): 4 live rows hold its data (2 of them null), 1 do not"
    )
    ctx.discard()
