"""rewrite_partitions after a partition spec change: every file moves to the current spec, rows unchanged,
each unit a ``replace`` snapshot; a second run finds nothing to do."""

from __future__ import annotations

import pyarrow.parquet as pq
from pyiceberg.transforms import BucketTransform, IdentityTransform

from iceberg_ops_provider.data_steps import DataStep, estimate_step, run_step
from iceberg_ops_provider.data_steps.state import STEP_KEY
from tests.data_steps.support import all_rows, make_table, read_rows, rows_of

TABLE = ("sales", "orders")


def test_files_move_to_the_new_spec_with_their_rows_unchanged(catalog):
    table = make_table(catalog)
    with table.update_spec() as update:
        update.add_field("id", BucketTransform(4), "id_bucket")
    with table.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    table.refresh()
    new_spec = table.metadata.default_spec_id
    assert {task.file.spec_id for task in table.scan().plan_files()} == {0}

    estimate = estimate_step(table, DataStep("r/1", "rewrite_partitions", TABLE))
    result = run_step(catalog, DataStep("r/1", "rewrite_partitions", TABLE), unit_bytes=1)

    assert read_rows(table) == all_rows()
    files = [task.file for task in table.scan().plan_files()]
    assert {f.spec_id for f in files} == {new_spec}
    assert all(f.partition[1] is not None for f in files)
    assert result.files_rewritten == 6 == estimate.files and result.rows_changed == 1200
    step_snapshots = [s for s in table.metadata.snapshots if s.summary.additional_properties.get(STEP_KEY) == "r/1"]
    assert len(step_snapshots) == 6 and {s.summary.operation.value for s in step_snapshots} == {"replace"}
    # Rows are sorted by the current order a batch at a time.
    for data_file in files:
        with table.io.new_input(data_file.file_path).open() as stream:
            column = pq.read_table(stream).column("id").to_pylist()
        assert column == sorted(column)

    again = run_step(catalog, DataStep("r/2", "rewrite_partitions", TABLE))
    assert again.units == 0 and again.files_rewritten == 0


def test_only_files_of_an_older_spec_are_rewritten(catalog):
    table = make_table(catalog, files_per_region=1)
    with table.update_spec() as update:
        update.add_field("id", BucketTransform(2), "id_bucket")
    table.refresh().append(rows_of(100_000, 50, "eu"))
    result = run_step(catalog, DataStep("r/3", "rewrite_partitions", TABLE, "region = 'eu'"))
    assert result.files_rewritten == 1  # the eu file of spec 0; the new files and the us file stay
