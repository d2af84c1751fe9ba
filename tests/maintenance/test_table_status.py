"""A table's status and its policy's state on a SQLite catalog: the queue's measure in one state, never another."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from iceberg_ops_provider.maintenance.queue import maintenance_queue
from iceberg_ops_provider.maintenance.table_status import STATES, policy_state, table_status

SCHEMA = pa.schema([pa.field("id", pa.int64())])
NOON = datetime(2026, 1, 1, 12, tzinfo=UTC)
P = "iceberg-ops.maintenance."

TABLES: dict[str, tuple[int, dict[str, str]]] = {
    "healthy": (1, {}),
    "compact": (6, {}),
    "expire": (3, {"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "1"}),
    "budget": (8, {f"{P}max-rewrite-bytes": "1"}),
    "roomy": (8, {f"{P}max-rewrite-bytes": "1073741824"}),
    "off": (8, {f"{P}enabled": "false"}),
    "quiet": (6, {f"{P}quiet-hours": "11-13"}),
    "invalid": (6, {f"{P}min-input-files": "zero"}),
}


def _lake(catalog) -> None:
    for name, (appends, properties) in TABLES.items():
        table = catalog.create_table(f"sales.{name}", schema=SCHEMA, properties=properties)
        for n in range(appends):
            table.append(pa.table({"id": [n]}, schema=SCHEMA))


def test_each_state_is_the_queue_s_measure_of_the_table(catalog, namespace):
    _lake(catalog)
    found = {name: table_status(catalog.load_table(f"sales.{name}"), NOON) for name in TABLES}
    assert {name: status.state for name, status in found.items()} == {
        "healthy": "healthy",
        "compact": "due",
        "expire": "due",
        "budget": "over_budget",
        "roomy": "due",
        "off": "disabled",
        "quiet": "due",
        "invalid": "policy_error",
    }
    assert found["compact"].needs == ("compact",) and found["expire"].needs == ("expire_snapshots",)
    assert found["quiet"].held == "quiet_hours" and found["off"].held == "disabled"
    assert found["budget"].compaction_bytes > 1 == found["budget"].max_rewrite_bytes
    assert found["roomy"].compaction_bytes < found["roomy"].max_rewrite_bytes
    assert found["invalid"].error_kind == "policy" and "min-input-files" in found["invalid"].message
    assert found["healthy"].score is None and found["compact"].score == 5.0
    # the same tables, as `maintain queue` lists them
    queue = maintenance_queue(catalog, "sales", moment=NOON)
    ranked = {entry.table.removeprefix("sales.") for entry in queue.ranked}
    assert ranked == {name for name, s in found.items() if s.state in ("due", "over_budget") and s.held is None}
    assert {e.table for e in queue.held} == {"sales.off", "sales.quiet"}
    assert queue.healthy == ("sales.healthy",) and [e.table for e in queue.errors] == ["sales.invalid"]
    budget = next(entry for entry in queue.ranked if entry.table == "sales.budget")
    assert budget.over_budget and budget.to_json()["over_budget"] is True
    assert sorted(STATES.index(s.state) for s in found.values()) == sorted(s.rank for s in found.values())


def test_a_missing_manifest_is_the_state_unreadable(catalog, namespace):
    table = catalog.create_table("sales.damaged", schema=SCHEMA)
    table.append(pa.table({"id": [1]}, schema=SCHEMA))
    Path(table.current_snapshot().manifest_list.removeprefix("file://")).unlink()
    status = table_status(catalog.load_table("sales.damaged"), NOON)
    assert (status.state, status.error_kind, status.error) == ("unreadable", "metadata", "FileNotFoundError")


def test_the_policy_state_is_read_from_properties_at_the_moment(catalog, namespace):
    _lake(catalog)
    states = {name: policy_state(catalog.load_table(f"sales.{name}"), NOON) for name in TABLES}
    assert states["healthy"].state == "on" and states["healthy"].keys_set == ()
    assert states["off"].state == "off" and states["off"].keys_set == (f"{P}enabled",)
    assert states["quiet"].state == "quiet_hours"
    assert policy_state(catalog.load_table("sales.quiet"), NOON.replace(hour=14)).state == "on"
    assert states["invalid"].state == "invalid" and "min-input-files" in states["invalid"].message
