"""A plan's later steps see what the earlier pending steps leave (in memory; nothing is written): a
column one step adds can be renamed by the next, schema ids follow on, a table renamed then altered
in one step is planned whole, and a created table's first schema and spec have the first ids."""

from __future__ import annotations

from iceberg_ops_provider.runner import MigrationRunner
from iceberg_ops_provider.runner.plan_document import plan_document
from tests.support.migrations import write_migration

CREATE = 'ctx.create_table("t", pa.schema([pa.field("id", pa.int64())]))'


def test_each_step_is_planned_on_what_the_steps_before_it_leave(catalog, tmp_path):
    folder = tmp_path / "migrations"
    write_migration(folder, "0001_t.py", CREATE, downgrade='ctx.drop_table("t")')
    write_migration(folder, "0002_y.py", 'ctx.add_column("t", "y", "string")', downgrade='ctx.drop_column("t", "y")')
    write_migration(
        folder,
        "0003_z.py",
        'ctx.rename_column("t", "y", "z")\nctx.rename_table("t", "t2")\nctx.add_column("t2", "w", "int")',
        downgrade='ctx.drop_column("t2", "w")\nctx.rename_table("t2", "t")\nctx.rename_column("t", "z", "y")',
    )
    runner = MigrationRunner(catalog, "sales", folder)
    runner.upgrade("0001")
    location = catalog.load_table("sales.t").metadata_location

    steps = runner.plan("head", inspect=True)
    assert [(step.version, step.risk) for step in steps] == [("0002", "safe"), ("0003", "review")]
    document = plan_document(runner, steps, "head")
    second = document["steps"][1]
    assert second["complete"] and [c["operation"] for c in second["changes"]] == [
        "update-table",
        "rename-table",
        "update-table",
    ]
    first_update, _, after_rename = second["changes"]
    assert first_update["table"] == "sales.t" and after_rename["table"] == "sales.t2"
    schema_ids = [
        [r["current-schema-id"] for r in c["requirements"] if r["type"] == "assert-current-schema-id"]
        for c in (document["steps"][0]["changes"][0], first_update, after_rename)
    ]
    assert schema_ids == [[0], [1], [2]]  # each asserts the schema the change before it leaves
    assert catalog.load_table("sales.t").metadata_location == location  # nothing was written

    runner.upgrade()
    table = catalog.load_table("sales.t2")
    assert table.schema().column_names == ["id", "z", "w"] and table.metadata.current_schema_id == 3
    assert [step.risk for step in runner.plan("base", inspect=True)] == ["review", "review", "review"]


def test_a_created_table_is_planned_with_its_first_ids(catalog, tmp_path):
    folder = tmp_path / "migrations"
    write_migration(
        folder, "0001_t.py", CREATE + '\nctx.add_column("t", "who", "string")\nctx.add_partition_field("t", "id")'
    )
    runner = MigrationRunner(catalog, "sales", folder)
    (created,) = [
        c
        for c in plan_document(runner, runner.plan("head", inspect=True), "head")["steps"][0]["changes"]
        if c["operation"] == "create-table"
    ]
    runner.upgrade()
    table = catalog.load_table("sales.t")
    assert created["schema"]["schema-id"] == table.metadata.current_schema_id == 0
    assert created["partition-spec"]["spec-id"] == table.metadata.default_spec_id == 0
    assert [f["name"] for f in created["schema"]["fields"]] == table.schema().column_names == ["id", "who"]
