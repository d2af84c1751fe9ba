"""The maintenance operators under a real Airflow (dag.test with an SQLite metadata database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from iceberg_ops_provider.operators.maintenance import as_flag, parse_older_than
from tests.airflow.conftest import catalog_at, xcom


def _events_table(root, appends: int = 4):
    catalog = catalog_at(root)
    catalog.create_namespace_if_not_exists("sales")
    table = catalog.create_table("sales.events", pa.schema([pa.field("id", pa.int64())]))
    for n in range(appends):
        table.append(pa.table({"id": pa.array([n], pa.int64())}))
    return catalog


def test_the_expire_operator_pushes_its_result_and_a_dry_run_changes_nothing(run_dag, iceberg_connection):
    catalog = _events_table(iceberg_connection)
    planned = run_dag("iceberg_ops_expire", table="sales.events", older_than="0s", dry_run=True)
    assert str(planned.state) == "success"
    result = xcom(planned, "expire")
    assert result["dry_run"] is True and len(result["expired_snapshot_ids"]) == 3
    assert len(catalog.load_table("sales.events").snapshots()) == 4

    done = run_dag("iceberg_ops_expire", table="sales.events", older_than="0s", dry_run=False)
    result = xcom(done, "expire")
    assert str(done.state) == "success" and result["deleted_manifest_lists_count"] == 3
    table = catalog.load_table("sales.events")
    assert len(table.snapshots()) == 1 and sorted(table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 3]


def test_a_missing_table_or_a_bad_argument_fails_at_once(run_dag, iceberg_connection):
    _events_table(iceberg_connection, appends=1)
    missing = run_dag("iceberg_ops_expire", table="sales.nope", older_than="1d")
    assert str(missing.state) == "failed"
    ti = missing.get_task_instance("expire")
    assert ti.try_number == 1  # AirflowFailException: no retry for what a retry cannot fix
    bad = run_dag("iceberg_ops_expire", table="sales.events", older_than="last tuesday")
    assert str(bad.state) == "failed" and bad.get_task_instance("expire").try_number == 1


def test_older_than_and_flags_accept_what_templates_render():
    now = datetime.now(UTC)
    assert abs(parse_older_than("7d") - (now - timedelta(days=7))) < timedelta(seconds=5)
    assert abs(parse_older_than(timedelta(hours=2)) - (now - timedelta(hours=2))) < timedelta(seconds=5)
    assert parse_older_than("2026-11-01T00:00:00+00:00") == datetime(2026, 11, 1, tzinfo=UTC)
    assert parse_older_than(None) is None
    with pytest.raises(ValueError, match="an age such as '7d'"):
        parse_older_than("soon")
    assert as_flag("True") is True and as_flag("false") is False and as_flag(True) is True
    with pytest.raises(ValueError, match="is not true or false"):
        as_flag("yes please")


def test_rewrite_manifests_orphans_and_the_health_gate_through_their_operators(iceberg_connection):
    from airflow.sdk.exceptions import AirflowException

    from iceberg_ops_provider.operators.maintenance import (
        IcebergRemoveOrphanFilesOperator,
        IcebergRewriteManifestsOperator,
        IcebergTableHealthOperator,
    )

    catalog = _events_table(iceberg_connection, appends=6)
    rewritten = IcebergRewriteManifestsOperator(task_id="m", table="sales.events").execute({})
    assert rewritten["rewritten_manifests_count"] == 6 and rewritten["added_manifests_count"] == 1
    assert len(catalog.load_table("sales.events").inspect.manifests()) == 1

    data = iceberg_connection / "warehouse" / "sales" / "events" / "data"
    planted = data / "left-by-a-crashed-writer.parquet"
    planted.write_bytes(b"not referenced")
    orphans = IcebergRemoveOrphanFilesOperator(task_id="o", table="sales.events", older_than="0s").execute({})
    assert [path.rsplit("/", 1)[-1] for path in orphans["orphan_file_locations"]] == [planted.name]
    assert not planted.exists()

    report = IcebergTableHealthOperator(task_id="h", table="sales.events").execute({})
    assert report["needs"] == ["compact"]  # six one-row files
    gate = IcebergTableHealthOperator(task_id="g", table="sales.events", fail_on=["compact"])
    with pytest.raises(AirflowException, match="needs compact"):
        gate.execute({})
    single = IcebergTableHealthOperator(task_id="one", table="sales.events", fail_on="compact")
    assert single.fail_on == ("compact",)
    with pytest.raises(ValueError, match="fail_on='compaction' names 'compaction'; use compact"):
        IcebergTableHealthOperator(task_id="typo", table="sales.events", fail_on="compaction")
    strict = IcebergTableHealthOperator(task_id="s", table="sales.events", thresholds={"min_input_files": 7})
    assert strict.execute({})["needs"] == []


def test_the_operators_honour_the_table_policy(iceberg_connection):
    import os

    from iceberg_ops_provider.hooks.version_compat import AirflowFailException
    from iceberg_ops_provider.maintenance.policy import set_table_policy
    from iceberg_ops_provider.operators.maintenance import (
        IcebergCompactOperator,
        IcebergExpireSnapshotsOperator,
        IcebergRemoveOrphanFilesOperator,
        IcebergTableHealthOperator,
    )

    catalog = _events_table(iceberg_connection, appends=4)
    table = catalog.load_table("sales.events")
    before = table.metadata_location
    set_table_policy(table, {"enabled": "false"})
    off = catalog.load_table("sales.events").metadata_location
    assert IcebergCompactOperator(task_id="c", table="sales.events").execute({}) == {
        "table": "sales.events",
        "skipped": "disabled",
    }
    assert IcebergExpireSnapshotsOperator(task_id="e", table="sales.events", older_than="0s").execute({})["skipped"]
    assert catalog.load_table("sales.events").metadata_location == off != before
    report = IcebergTableHealthOperator(task_id="h", table="sales.events", fail_on="any").execute({})
    assert report["policy_enabled"] is False and report["needs"] == []  # measured, nothing recommended

    set_table_policy(catalog.load_table("sales.events"), {"enabled": "", "quiet-hours": "00-24"})
    assert IcebergCompactOperator(task_id="c", table="sales.events").execute({})["skipped"] == "quiet_hours"
    dry = IcebergCompactOperator(task_id="c", table="sales.events", min_input_files=1, dry_run=True).execute({})
    assert dry["file_groups_count"] == 1  # a dry run changes nothing: quiet hours do not stop it

    set_table_policy(catalog.load_table("sales.events"), {"quiet-hours": "", "min-input-files": "4"})
    sizes = [t.file.file_size_in_bytes for t in catalog.load_table("sales.events").scan().plan_files()]
    set_table_policy(catalog.load_table("sales.events"), {"max-rewrite-bytes": str(sum(sizes) - 1)})
    capped = IcebergCompactOperator(task_id="c", table="sales.events").execute({})
    assert capped["deferred_groups_count"] == 1 and capped["committed_groups_count"] == 0
    set_table_policy(catalog.load_table("sales.events"), {"max-rewrite-bytes": ""})
    done = IcebergCompactOperator(task_id="c", table="sales.events").execute({})
    assert done["committed_groups_count"] == 1 and done["rewritten_data_files_count"] == 4  # policy's min 4

    data = iceberg_connection / "warehouse" / "sales" / "events" / "data"
    planted = data / "left-two-hours-ago.parquet"
    planted.write_bytes(b"not referenced")
    two_hours_ago = (datetime.now(UTC) - timedelta(hours=2)).timestamp()
    os.utime(planted, (two_hours_ago, two_hours_ago))
    kept = IcebergRemoveOrphanFilesOperator(task_id="o", table="sales.events").execute({})
    assert kept["orphan_file_locations"] == [] and planted.exists()  # the default age is 3 days
    set_table_policy(catalog.load_table("sales.events"), {"orphan-age": "1h"})
    removed = IcebergRemoveOrphanFilesOperator(task_id="o", table="sales.events").execute({})
    assert [path.rsplit("/", 1)[-1] for path in removed["orphan_file_locations"]] == [planted.name]

    with catalog.load_table("sales.events").transaction() as transaction:
        transaction.set_properties({"iceberg-ops.maintenance.orphan-age": "a while"})
    with pytest.raises(AirflowFailException, match=r"iceberg-ops.maintenance.orphan-age='a while' is not accepted"):
        IcebergCompactOperator(task_id="c", table="sales.events").execute({})
