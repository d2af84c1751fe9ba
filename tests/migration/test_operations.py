"""Each migration operation is defined once, and the context, autogenerate, plan and lint read it.

Every registered operation has a reverse or a reason it has none, a rendering as a context call,
a risk and a lint rule (or none, for a change lint lets pass). One sample of each kind is staged
through the context method its rendering names, on a real SQLite catalog in a dry run: the call
parses, the method takes it, and ``plan``'s label is the operation's risk.
"""

from __future__ import annotations

import ast
import inspect

import pyarrow as pa
import pytest
from pyiceberg.types import IntegerType, LongType, StringType

from iceberg_ops_provider.autogen import operations as autogen_operations
from iceberg_ops_provider.autogen.render import render_migration, schema_literal
from iceberg_ops_provider.core.types import arrow_to_iceberg_schema
from iceberg_ops_provider.lint.rules import RULES
from iceberg_ops_provider.lint.source import _CALLS
from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.migration.column_operations import (
    AddColumn,
    AlterColumn,
    AlterColumnType,
    DropColumn,
    MakeColumnOptional,
    MoveColumn,
    RenameColumn,
    RestoreColumn,
    SetColumnDoc,
    SetIdentifierFields,
)
from iceberg_ops_provider.migration.data_operations import (
    Backfill,
    CopyRows,
    DeleteRows,
    RestoreData,
    RewritePartitions,
    UpdateRows,
)
from iceberg_ops_provider.migration.operation import OPERATIONS, Irreversible, Operation
from iceberg_ops_provider.migration.risks import RISKS
from iceberg_ops_provider.migration.table_operations import (
    AddPartitionField,
    CreateTable,
    DropPartitionField,
    DropTable,
    RemoveProperties,
    RenamePartitionField,
    RenameTable,
    SetProperties,
    SetSortOrder,
)
from tests.support.migrations import migrate

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("customer", pa.string()),
        pa.field("qty", pa.int32()),
        pa.field("legacy", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)
NEW = pa.schema([pa.field("id", pa.int64(), nullable=False)])

# One operation of each kind, valid on the tables of the ``tables`` fixture.
SAMPLES: dict[str, Operation] = {
    "create_table": CreateTable("fresh", schema_literal(arrow_to_iceberg_schema(NEW)), ("bucket(4, id)",)),
    "drop_table": DropTable("orders"),
    "rename_table": RenameTable("orders", "orders_v2"),
    "add_column": AddColumn("orders", "note", StringType(), after="customer"),
    "add_required_column": AddColumn("empty", "code", LongType(), required=True),
    "drop_column": DropColumn("orders", "customer"),
    "restore_column": RestoreColumn("orders", "legacy"),
    "rename_column": RenameColumn("orders", "customer", "client"),
    "promote_column": AlterColumnType("orders", "qty", IntegerType(), LongType()),
    "make_column_optional": MakeColumnOptional("orders", "id"),
    "set_column_doc": SetColumnDoc("orders", "customer", None, "who ordered"),
    "move_column": MoveColumn("orders", "ts", None, "qty"),
    "set_identifier_fields": SetIdentifierFields("orders", ("id",)),
    "add_partition_field": AddPartitionField("orders", "day(ts)", "ts_day"),
    "drop_partition_field": DropPartitionField("orders", "id_bucket", "bucket(4, id)"),
    "rename_partition_field": RenamePartitionField("orders", "id_bucket", "id_shard"),
    "set_sort_order": SetSortOrder("orders", ("ts desc",)),
    "set_properties": SetProperties("orders", {"owner": "sales"}, {"owner": None}),
    "remove_properties": RemoveProperties("orders", ("team",), {"team": "ops"}),
    "delete_rows": DeleteRows("orders", "qty > 100"),
    "update_rows": UpdateRows("orders", "customer = 'a'", {"qty": 3}),
    "backfill": Backfill("orders", None, "customer", "unknown"),
    "rewrite_partitions": RewritePartitions("orders"),
    "copy_rows": CopyRows("empty", "qty > 1", "orders", ("id", "qty"), {"qty": "id_copy"}),
    "restore_data": RestoreData("orders"),
}


@pytest.fixture
def tables(catalog, namespace):
    """``orders`` (rows, a dropped column, a partition field, a property) and ``empty``."""

    def create(ctx: MigrationContext) -> None:
        ctx.create_table("orders", SCHEMA, partition_by=["bucket(4, id)"], properties={"team": "ops"})
        ctx.rename_partition_field("orders", "id_bucket_4", "id_bucket")
        ctx.create_table("empty", NEW)

    migrate(catalog, create)
    table = catalog.load_table("sales.orders")
    row = {"id": 1, "customer": "a", "qty": 2, "legacy": "x", "ts": None}
    table.append(pa.Table.from_pylist([row], schema=table.schema().as_arrow()))
    migrate(catalog, lambda ctx: ctx.drop_column("orders", "legacy"))
    return catalog


def test_the_samples_cover_every_registered_kind():
    assert set(SAMPLES) == set(OPERATIONS) == set(RISKS)
    assert all(sample.kind == kind and isinstance(sample, OPERATIONS[kind]) for kind, sample in SAMPLES.items())


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_operation_has_a_reverse_or_a_reason(kind):
    sample = SAMPLES[kind]
    try:
        steps = sample.reverse()
    except Irreversible as why:
        assert str(why).strip(), f"{kind} cannot be undone and says not why"
    else:
        # Rewriting files into the current spec leaves the rows as they were: nothing to undo.
        assert steps or kind == "rewrite_partitions"
        assert all(isinstance(step, Operation) for step in steps)
        assert all(step.table in (sample.table, getattr(sample, "new", None)) for step in steps)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_operation_renders_a_call_of_its_context_method(kind):
    sample = SAMPLES[kind]
    call = ast.parse(sample.render(), mode="eval").body
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == f"ctx.{sample.method}"
    parameters = inspect.signature(getattr(MigrationContext, sample.method)).parameters
    assert {keyword.arg for keyword in call.keywords} <= set(parameters)
    assert f"[{sample.risk}] {sample.describe()}" in render_migration("m", [sample])


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_operation_names_a_lint_rule_or_none_and_where_its_call_names_things(kind):
    cls = OPERATIONS[kind]
    parameters = list(inspect.signature(getattr(MigrationContext, cls.method)).parameters)[1:]
    if cls.rule is not None:  # None: a change lint lets pass
        assert cls.rule in RULES and _CALLS[cls.method] is cls
        assert cls.lint_arguments[0] == parameters[0]
    for given in (cls.rule_when, cls.rule_unless):  # a keyword the rule reads, where the call gives it
        if given is not None:
            keyword, position = given
            assert parameters[position] == keyword
    if cls.rule is not None and cls.lint_arguments[1] is not None:  # None: it names no column
        assert cls.lint_arguments[1] in parameters


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_plan_labels_what_the_context_stages_with_the_operations_risk(tables, namespace, kind):
    sample = SAMPLES[kind]
    context = MigrationContext(tables, namespace, dry_run=True)
    sample.apply(context)
    ((noted),) = context.operations
    assert noted["risk"] == sample.risk == RISKS[kind]
    assert noted["operation"].startswith(sample.note().split(" (")[0])


def test_the_context_autogenerate_and_plan_agree_on_the_operations():
    not_operations = {"identifier", "load_table", "commit", "finish", "discard", "pending_changes"}
    not_operations.add("add_partition_fields")  # several AddPartitionField in one spec change, as create_table does
    context_methods = {
        name
        for name, member in vars(MigrationContext).items()
        if callable(member) and not name.startswith("_") and name not in not_operations
    }
    assert context_methods == {cls.method for cls in OPERATIONS.values()} | {AlterColumn.method}
    written = {
        value
        for value in vars(autogen_operations).values()
        if isinstance(value, type) and issubclass(value, Operation) and value is not Operation
    }
    assert written <= set(OPERATIONS.values())
    assert set(RISKS) == set(OPERATIONS)


def test_alter_column_takes_the_highest_risk_of_what_it_changes(tables, namespace):
    context = MigrationContext(tables, namespace, dry_run=True)
    context.alter_column("orders", "qty", type="long", doc="how many")
    assert [op["risk"] for op in context.operations] == [RISKS["promote_column"]]
    with pytest.raises(Irreversible, match="without saying what it was before"):
        AlterColumn("orders", "qty", doc="how many").reverse()


def test_a_rule_applies_only_when_its_keyword_may_be_missing(tmp_path):
    from iceberg_ops_provider.lint import lint_paths

    body = (
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n"
        "    def upgrade(self, ctx):\n"
        '        ctx.update_rows("orders", {"v": 1}, "v > 0")\n'
        '        ctx.update_rows("orders", {"v": 2}, where=None)\n'
    )
    (tmp_path / "0001_set.py").write_text(body)
    findings = lint_paths([tmp_path]).findings
    assert [(f.rule, f.line, f.table, f.column) for f in findings] == [("update-all-rows", 7, "orders", None)]


def test_a_rule_applies_only_when_its_keyword_may_be_true(tmp_path):
    from iceberg_ops_provider.lint import lint_paths

    body = (
        "from iceberg_ops_provider.migration import BaseMigration\n\n\n"
        "class Migration(BaseMigration):\n"
        "    def upgrade(self, ctx):\n"
        '        ctx.add_column("orders", "a", "long", False)\n'
        '        ctx.add_column("orders", "b", "long", required=True)\n'
    )
    (tmp_path / "0001_add.py").write_text(body)
    findings = lint_paths([tmp_path]).findings
    assert [(f.rule, f.line, f.column) for f in findings] == [("add-required-column", 7, "b")]
