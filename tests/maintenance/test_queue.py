"""The maintenance queue of a SQLite catalog: degraded tables ranked, held and broken ones apart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchNamespaceError

from iceberg_ops_provider.maintenance.health import table_health_report
from iceberg_ops_provider.maintenance.queue import MIB, maintenance_queue, work_benefit

SCHEMA = pa.schema([pa.field("id", pa.int64())])
NOON = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _appends(catalog, identifier: str, count: int, properties: dict[str, str] | None = None):
    table = catalog.create_table(identifier, schema=SCHEMA, properties=properties or {})
    for n in range(count):
        table.append(pa.table({"id": [n]}, schema=SCHEMA))
    return table


def test_degraded_tables_are_ranked_by_files_removed_per_mib_and_healthy_ones_left_out(catalog, namespace):
    catalog.create_namespace("ops")
    _appends(catalog, "sales.few", 6)
    many = _appends(catalog, "ops.many", 12, {"iceberg-ops.maintenance.max-rewrite-bytes": "1048576"})
    _appends(catalog, "sales.healthy", 1)
    for task in many.scan().plan_files():  # metadata alone: the data files are never opened
        Path(task.file.file_path.removeprefix("file://")).unlink()
    found = maintenance_queue(catalog, moment=NOON)
    assert found.namespaces == ("ops", "sales")
    assert [entry.table for entry in found.ranked] == ["ops.many", "sales.few"]
    assert found.healthy == ("sales.healthy",)
    assert (found.held, found.errors) == ((), ())
    many = found.ranked[0]
    assert many.needs == ("compact",) and many.held is None
    assert (many.files_removed, many.manifests_removed, many.snapshots_expired) == (11, 0, 0)
    assert 0 < many.rewrite_bytes < MIB and many.score == 11.0  # under a MiB counts as one
    assert found.ranked[1].score == 5.0
    assert (many.max_rewrite_bytes, found.ranked[1].max_rewrite_bytes) == (MIB, None)
    # the numbers are the health report's, under the table's policy
    assert work_benefit(table_health_report(catalog.load_table("ops.many")))[:3] == (11, 0, 0)
    only = maintenance_queue(catalog, "sales", moment=NOON)
    assert [entry.table for entry in only.ranked] == ["sales.few"] and only.namespaces == ("sales",)


def test_the_score_is_benefit_per_mib_rewritten(catalog, namespace):
    _appends(catalog, "sales.t", 6)
    entry = maintenance_queue(catalog, moment=NOON).ranked[0]
    big = type(entry)(entry.table, entry.needs, 40, 10, 0, 25 * MIB, None, None)
    assert (big.benefit, big.score) == (50, 2.0)
    assert big.to_json()["score"] == 2.0 and big.to_json()["recommendations"] == []


def test_policy_off_and_quiet_hours_are_held_not_ranked(catalog, namespace):
    _appends(catalog, "sales.off", 6, {"iceberg-ops.maintenance.enabled": "false"})
    _appends(catalog, "sales.quiet", 6, {"iceberg-ops.maintenance.quiet-hours": "11-13"})
    _appends(catalog, "sales.due", 6)
    found = maintenance_queue(catalog, moment=NOON)
    assert [entry.table for entry in found.ranked] == ["sales.due"]
    held = {entry.table: entry for entry in found.held}
    assert (held["sales.off"].held, held["sales.off"].needs) == ("disabled", ())
    assert (held["sales.quiet"].held, held["sales.quiet"].needs) == ("quiet_hours", ("compact",))
    later = maintenance_queue(catalog, moment=NOON.replace(hour=14))  # after its quiet hours it is ranked
    assert [entry.table for entry in later.ranked] == ["sales.due", "sales.quiet"]


def test_a_broken_table_or_bad_policy_is_reported_and_the_others_still_listed(catalog, namespace):
    _appends(catalog, "sales.due", 6)
    gone = _appends(catalog, "sales.gone", 2)
    Path(gone.metadata_location.removeprefix("file://")).unlink()  # its metadata.json is gone
    damaged = _appends(catalog, "sales.damaged", 2)
    Path(damaged.current_snapshot().manifest_list.removeprefix("file://")).unlink()
    bad = _appends(catalog, "sales.bad", 6)
    with bad.transaction() as transaction:
        transaction.set_properties({"iceberg-ops.maintenance.min-input-files": "lots"})
    found = maintenance_queue(catalog, moment=NOON, parallelism=2)
    assert [entry.table for entry in found.ranked] == ["sales.due"]
    errors = {error.table: error for error in found.errors}
    assert set(errors) == {"sales.gone", "sales.damaged", "sales.bad"}
    assert errors["sales.gone"].message is None and errors["sales.gone"].kind != "policy"
    assert errors["sales.damaged"].kind == "metadata" and errors["sales.damaged"].error == "FileNotFoundError"
    assert errors["sales.bad"].kind == "policy" and "min-input-files" in errors["sales.bad"].message


@pytest.mark.parametrize("damage", [b"", b"Obj\x01" + b"\xff" * 300], ids=["empty", "garbage"])
def test_a_manifest_list_that_is_not_avro_is_that_tables_error_and_the_others_still_listed(catalog, namespace, damage):
    from iceberg_ops_provider.maintenance.watch import watch_tables

    _appends(catalog, "sales.due", 6)
    damaged = _appends(catalog, "sales.damaged", 6)
    Path(damaged.current_snapshot().manifest_list.removeprefix("file://")).write_bytes(damage)  # EOFError to read
    found = maintenance_queue(catalog, moment=NOON, parallelism=2)
    assert [entry.table for entry in found.ranked] == ["sales.due"]
    assert [(error.table, error.kind, error.error) for error in found.errors] == [
        ("sales.damaged", "metadata", "EOFError")
    ]
    looked = watch_tables(catalog, ["sales.damaged", "sales.due"], moment=NOON)
    assert [entry.table for entry in looked.due] == ["sales.due"]
    assert [error.table for error in looked.errors] == ["sales.damaged"]


def test_an_unknown_namespace_raises(catalog, namespace):
    with pytest.raises(NoSuchNamespaceError):
        maintenance_queue(catalog, "nowhere")


def test_a_manifest_list_replaced_by_a_pipe_is_that_tables_error_not_a_read_that_never_ends(catalog, namespace):
    import os
    import threading

    _appends(catalog, "sales.due", 6)
    piped = _appends(catalog, "sales.piped", 6)
    manifest_list = Path(piped.current_snapshot().manifest_list.removeprefix("file://"))
    manifest_list.unlink()
    os.mkfifo(manifest_list)  # opening it for reading waits for a writer that never comes
    found: list = []
    look = threading.Thread(target=lambda: found.append(maintenance_queue(catalog, moment=NOON)), daemon=True)
    look.start()
    look.join(20)
    assert found, "the queue never finished: a read of the pipe blocked"
    assert [entry.table for entry in found[0].ranked] == ["sales.due"]
    assert [(error.table, error.kind) for error in found[0].errors] == [("sales.piped", "metadata")]
    assert "not a regular file" in found[0].errors[0].message
