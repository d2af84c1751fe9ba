"""A second partition field on one column is refused when staged: PyIceberg could not write the table after it.

Appending to a table whose spec partitions ``id`` by both ``bucket(4, id)`` and ``bucket(8, id)`` fails
in PyIceberg (``Cannot have redundant partitions``), so a migration that makes such a spec would leave
a table no append, compaction or move can write. Dropping the old field first, in the same migration,
is the way to change a column's partitioning, and still works; so do fields on other columns, and a
table that already had such a spec before the migration (made by another engine) is not blamed for it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.transforms import BucketTransform

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration import MigrationContext
from tests.support.migrations import write_migration

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "ts": pa.array([1, 2, 3], pa.int64())})


@pytest.fixture
def ctx(catalog) -> MigrationContext:
    return MigrationContext(catalog, "sales")


def _table(catalog, ctx, format_version: int = 2):
    ctx.create_table("t", ROWS.schema, partition_by=["bucket(4, id)"], properties={"format-version": format_version})
    ctx.commit()
    return catalog.load_table("sales.t")


def test_the_unwritable_spec_is_what_the_refusal_prevents(catalog, ctx):
    """Without the check: PyIceberg itself accepts the spec, then refuses every append."""
    table = _table(catalog, ctx)
    with table.update_spec() as update:
        update.add_field("id", BucketTransform(8))
    with pytest.raises(ValueError, match="redundant partitions"):
        catalog.load_table("sales.t").append(ROWS)


def test_a_second_field_on_one_column_is_refused_naming_both_and_the_fix(catalog, ctx):
    _table(catalog, ctx)
    with pytest.raises(InvalidOperationError) as refused:
        ctx.add_partition_field("t", "bucket(8, id)")
    text = str(refused.value)
    assert "sales.t" in text and "'id'" in text and "id_bucket_4" in text and "bucket[8]" in text
    assert "ctx.drop_partition_field('t', 'id_bucket_4')" in text and "void" not in text
    ctx.commit()
    table = catalog.load_table("sales.t")
    assert len(table.spec().fields) == 1  # nothing of it was committed
    table.append(ROWS)


def test_dropping_the_old_field_first_changes_the_bucket_count(catalog, ctx):
    _table(catalog, ctx)
    ctx.drop_partition_field("t", "id_bucket_4")
    ctx.add_partition_field("t", "bucket(8, id)")
    ctx.add_partition_field("t", "identity(ts)")  # another column: fine
    ctx.commit()
    table = catalog.load_table("sales.t")
    assert [str(f.transform) for f in table.spec().fields] == ["bucket[8]", "identity"]
    table.append(ROWS)
    assert table.scan().to_arrow().num_rows == 3


def test_format_version_1_says_the_void_field_stays(catalog, ctx):
    _table(catalog, ctx, format_version=1)
    ctx.drop_partition_field("t", "id_bucket_4")
    with pytest.raises(InvalidOperationError, match="void field"):
        ctx.add_partition_field("t", "bucket(8, id)")


def test_a_table_that_already_had_two_fields_on_a_column_is_not_blamed(catalog, ctx):
    table = _table(catalog, ctx)
    with table.update_spec() as update:  # made outside migrations (Spark can write such a table)
        update.add_field("id", BucketTransform(8))
    ctx.add_partition_field("t", "identity(ts)")
    ctx.commit()
    assert len(catalog.load_table("sales.t").spec().fields) == 3


def test_plan_and_upgrade_report_it_before_anything_commits(catalog, migrations_dir, runner):
    create = 'ctx.create_table("t", pa.schema([pa.field("id", pa.int64())]), partition_by=["bucket(4, id)"])'
    write_migration(migrations_dir, "0001_create_t.py", create)
    write_migration(migrations_dir, "0002_rebucket.py", 'ctx.add_partition_field("t", "bucket(8, id)")')
    runner.upgrade("0001")
    (step,) = runner.plan(inspect=True)
    assert "drop the old field first" in str(step)
    with pytest.raises(Exception, match="drop the old field first"):
        runner.upgrade()
    assert runner.current() == "0001"
    assert len(catalog.load_table("sales.t").spec().fields) == 1


def test_a_model_partitioning_one_column_twice_is_refused(tmp_path):
    from iceberg_ops_provider.autogen import load_model
    from iceberg_ops_provider.errors import ModelError

    model = tmp_path / "t.yaml"
    model.write_text('name: t\ncolumns: [{name: id, type: long}]\npartition_by: ["bucket(4, id)", "identity(id)"]\n')
    with pytest.raises(ModelError, match="partition column 'id' twice"):
        load_model(model)
