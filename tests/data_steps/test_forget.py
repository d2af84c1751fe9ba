"""Forgetting finished data steps: exactly their state properties go, in one metadata commit."""

from __future__ import annotations

from iceberg_ops_provider.data_steps import DataStep, run_step, step_state
from iceberg_ops_provider.data_steps.forget import forget_steps, state_keys
from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from tests.data_steps.support import make_table

STEP = "sales/0001/upgrade/run-1/1"


def test_only_the_named_steps_and_prefixes_are_matched():
    properties = {
        f"iceberg-ops.data-step.{STEP}": "{}",
        "iceberg-ops.move.sales/0001/upgrade/run-1/2": "{}",  # a copy step's move
        "iceberg-ops.data-step.sales/0001/upgrade/run-10/1": "{}",  # another run: its id only starts alike
        "iceberg-ops.data-step.sales/0002/upgrade/run-1/1": "{}",  # another migration
        UNIT_BYTES_PROPERTY: "1",  # a setting under the same prefix
        "iceberg-ops.last-migration": "namespace=sales",
        "owner": "team-a",
    }
    assert state_keys(properties, [STEP, "sales/0001/upgrade/run-1/2"]) == [
        f"iceberg-ops.data-step.{STEP}",
        "iceberg-ops.move.sales/0001/upgrade/run-1/2",
    ]
    assert state_keys(properties, [], ["sales/0001/upgrade/"]) == [
        f"iceberg-ops.data-step.{STEP}",
        "iceberg-ops.data-step.sales/0001/upgrade/run-10/1",
        "iceberg-ops.move.sales/0001/upgrade/run-1/2",
    ]
    assert state_keys(properties, ["sales/0003/upgrade/run-1/1"], [""]) == []  # an empty prefix matches nothing


def test_a_finished_step_is_forgotten_in_one_metadata_commit_and_still_read_from_its_snapshots(lake):
    catalog = lake.catalog()
    table = make_table(catalog, files_per_region=1, rows=20)
    with table.transaction() as transaction:
        transaction.set_properties({UNIT_BYTES_PROPERTY: "1", "owner": "team-a"})
    run_step(catalog, DataStep(STEP, "update_rows", ("sales", "orders"), "region = 'eu'", {"k": 1}))
    table.refresh()
    assert f"iceberg-ops.data-step.{STEP}" in table.properties
    head, commits = table.metadata.current_snapshot_id, len(table.metadata.metadata_log)

    removed = forget_steps(table, [STEP])

    table = catalog.load_table("sales.orders")
    assert removed == [f"iceberg-ops.data-step.{STEP}"]
    assert f"iceberg-ops.data-step.{STEP}" not in table.properties
    assert table.properties[UNIT_BYTES_PROPERTY] == "1" and table.properties["owner"] == "team-a"
    assert table.metadata.current_snapshot_id == head and len(table.metadata.metadata_log) == commits + 1
    state = step_state(table, STEP)  # the snapshot summaries still hold it
    assert state is not None and state.complete
    assert forget_steps(table, [STEP]) == []  # nothing left: no commit
    assert len(catalog.load_table("sales.orders").metadata.metadata_log) == commits + 1
