"""A table's maintenance policy in its properties: read, set, checked, and honoured, on real catalogs."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.errors import MaintenancePolicyError
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.health import HealthThresholds, table_health_report
from iceberg_ops_provider.maintenance.policy import (
    KEYS,
    MaintenancePolicy,
    check_policy_properties,
    policy_key,
    set_table_policy,
    table_policy,
)
from tests.support.lake import Lake

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _table(catalog, name: str = "ops.t", files: int = 0):
    if ("ops",) not in catalog.list_namespaces():
        catalog.create_namespace("ops")
    table = catalog.create_table(name, SCHEMA)
    for start in range(files):
        table.append(pa.table({"id": pa.array([start], pa.int64())}))
    return table


def test_policy_set_and_read_back_through_another_catalog_object(catalog_backend):
    table = _table(catalog_backend.build())
    assert table_policy(table) == MaintenancePolicy(table="ops.t")  # today's defaults, all from "default"
    assert {value.source for value in table_policy(table).values()} == {"default"}

    change = set_table_policy(
        table, {"quiet-hours": "22-02", "enabled": False, "history.expire.min-snapshots-to-keep": 3}
    )
    assert change.committed and change.set["iceberg-ops.maintenance.enabled"] == "false"

    again = catalog_backend.build().load_table("ops.t")  # another worker's view of the catalog
    policy = table_policy(again)
    assert (policy.enabled, policy.quiet_hours, policy.min_snapshots_to_keep) == (False, ((22, 2),), 3)
    sources = {value.key.property: value.source for value in policy.values()}
    assert sources["iceberg-ops.maintenance.quiet-hours"] == "iceberg-ops.maintenance.quiet-hours"
    assert sources["iceberg-ops.maintenance.orphan-age"] == "default"
    assert policy.thresholds().retain_last == 3

    removed = set_table_policy(again, {"enabled": "", "quiet-hours": None})
    assert set(removed.removed) == {"iceberg-ops.maintenance.enabled", "iceberg-ops.maintenance.quiet-hours"}
    assert table_policy(catalog_backend.build().load_table("ops.t")).skip_reason() is None


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("iceberg-ops.maintenance.enabled", "1", "true or false"),
        ("iceberg-ops.maintenance.min-input-files", "0", "an integer of at least 1"),
        ("iceberg-ops.maintenance.min-input-files", "2.5", "an integer of at least 1"),
        ("iceberg-ops.maintenance.small-file-share", "1", "a number >= 0 and < 1"),
        ("iceberg-ops.maintenance.small-file-share", "nan", "a number >= 0 and < 1"),
        ("iceberg-ops.maintenance.orphan-age", "-3d", "a positive age"),
        ("iceberg-ops.maintenance.quiet-hours", "5-5", "UTC hour ranges"),
        ("iceberg-ops.maintenance.quiet-hours", "01-05;07-08", "UTC hour ranges"),
        ("iceberg-ops.maintenance.max-rewrite-bytes", "0", "an integer >= 1 (bytes), or none"),
        ("write.target-file-size-bytes", "512MB", "an integer >= 1 (bytes)"),
        ("history.expire.max-snapshot-age-ms", "-1", "an integer >= 0 (milliseconds)"),
        ("history.expire.min-snapshots-to-keep", "0", "an integer >= 1"),
        # Other engines read Iceberg's keys as Java's long (int for min-snapshots-to-keep): what they cannot parse
        # would fail their writes, so it is refused here too; and ours take the same digits.
        ("write.target-file-size-bytes", "1_000_000", "an integer >= 1 (bytes)"),
        ("write.target-file-size-bytes", str(2**63), "an integer >= 1 (bytes)"),
        ("history.expire.max-snapshot-age-ms", "\u0663", "an integer >= 0 (milliseconds)"),
        ("history.expire.min-snapshots-to-keep", str(2**31), "an integer >= 1"),
        ("history.expire.min-snapshots-to-keep", "1_0", "an integer >= 1"),
        ("iceberg-ops.maintenance.min-input-files", "1_0", "an integer of at least 1"),
        ("iceberg-ops.maintenance.quiet-hours", "\uff10\uff11-05", "UTC hour ranges"),
    ],
)
def test_each_kind_of_bad_value_names_its_key_and_what_it_accepts(key, value, accepted):
    with pytest.raises(MaintenancePolicyError) as raised:
        table_policy({key: value}, "ops.t")
    assert (raised.value.key, raised.value.value, raised.value.table) == (key, value, "ops.t")
    assert raised.value.accepted.startswith(accepted)
    assert f"{key}={value!r} is not accepted: it takes {raised.value.accepted}" in str(raised.value)
    with pytest.raises(MaintenancePolicyError):
        check_policy_properties({key: value})


def test_unknown_keys_name_the_closest_and_other_properties_pass_through():
    with pytest.raises(MaintenancePolicyError) as raised:
        table_policy({"iceberg-ops.maintenance.enabeld": "false"})
    assert raised.value.closest == "iceberg-ops.maintenance.enabled"
    with pytest.raises(MaintenancePolicyError) as raised:
        policy_key("max-rewrite-byte")
    assert raised.value.closest == "iceberg-ops.maintenance.max-rewrite-bytes"
    assert check_policy_properties({"owner": "sales", "max-rewrite-bytes": 5}) == {
        "owner": "sales",
        "max-rewrite-bytes": "5",
    }  # without short names, a short key is no policy key: set as it is, like any other property
    assert len({key.property for key in KEYS}) == len(KEYS)


def test_quiet_hours_are_utc_and_wrap_midnight():
    policy = table_policy({"iceberg-ops.maintenance.quiet-hours": "22-02,12-13"})
    at = lambda hour: datetime(2026, 12, 7, hour, 30, tzinfo=UTC)  # noqa: E731
    assert [hour for hour in range(24) if policy.quiet_at(at(hour))] == [0, 1, 12, 22, 23]
    later = datetime(2026, 12, 7, 23, 30, tzinfo=UTC).astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
    assert policy.quiet_at(later)  # 08:30 in Tokyo is 23:30 UTC
    assert policy.skip_reason(at(23)) == "quiet_hours" and policy.skip_reason(at(5)) is None
    off = table_policy({"iceberg-ops.maintenance.enabled": "false", "iceberg-ops.maintenance.quiet-hours": "none"})
    assert off.skip_reason(at(5)) == "disabled" and off.quiet_hours == ()
    assert table_policy({"iceberg-ops.maintenance.orphan-age": "12h"}).orphan_age == timedelta(hours=12)


def test_health_report_judges_by_the_policy_and_says_when_it_is_off(catalog):
    table = _table(catalog, files=3)
    assert table_health_report(table).needs == ()  # 3 small files: fewer than the default 5
    set_table_policy(table, {"min-input-files": "3"})
    report = table_health_report(table)
    assert report.needs == ("compact",) and report.thresholds.min_input_files == 3
    assert report.recommendation("compact").params["min_input_files"] == 3
    assert table_health_report(table, HealthThresholds()).needs == ()  # the caller's thresholds win

    set_table_policy(table, {"enabled": "false"})
    off = table_health_report(table)
    assert off.policy_enabled is False and off.recommendations == () and off.healthy
    assert off.data_files.files == 3  # still measured
    assert "maintenance off by its policy (iceberg-ops.maintenance.enabled=false)" in off.summary()
    assert off.to_json()["policy_enabled"] is False


def test_compaction_rewrites_at_most_max_rewrite_bytes_and_leaves_the_rest(catalog):
    catalog.create_namespace("ops")
    spec_table = catalog.create_table(
        "ops.parts",
        pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.string())]),
    )
    with spec_table.update_spec() as update:
        update.add_identity("day")
    for day in ("a", "b", "c"):
        for start in range(3):
            spec_table.append(pa.table({"id": pa.array([start], pa.int64()), "day": pa.array([day])}))
    per_day = {}
    for task in spec_table.scan().plan_files():
        per_day[task.file.partition[0]] = per_day.get(task.file.partition[0], 0) + task.file.file_size_in_bytes
    cap = max(per_day.values()) * 2  # two partitions' groups fit, the third does not

    capped = compact_small_files_streaming(spec_table, min_input_files=3, max_rewrite_bytes=cap)
    assert capped.committed_groups_count == 2 and capped.deferred_groups_count == 1
    assert capped.rewritten_bytes_count <= cap and capped.deferred_bytes_count > 0
    rest = compact_small_files_streaming(spec_table, min_input_files=3, max_rewrite_bytes=cap)
    assert rest.committed_groups_count == 1 and rest.deferred_groups_count == 0
    assert len(list(spec_table.scan().plan_files())) == 3
    assert spec_table.scan().to_arrow().num_rows == 9
    with pytest.raises(ValueError, match="max_rewrite_bytes must be an integer of at least 1"):
        compact_small_files_streaming(spec_table, max_rewrite_bytes=0)


def test_policy_set_writes_what_other_engines_parse_and_refuses_a_key_given_twice(catalog):
    table = _table(catalog)
    change = set_table_policy(table, {"write.target-file-size-bytes": " 1048576 ", "quiet-hours": " 01-05"})
    properties = catalog.load_table("ops.t").metadata.properties
    assert properties["write.target-file-size-bytes"] == "1048576"  # Java's parseLong takes no blank
    assert properties["iceberg-ops.maintenance.quiet-hours"] == "01-05"
    assert change.set["write.target-file-size-bytes"] == "1048576"

    with pytest.raises(MaintenancePolicyError) as raised:  # the same key by its two names: which one was meant?
        set_table_policy(table, {"iceberg-ops.maintenance.enabled": "true", "enabled": "false"})
    assert raised.value.key == "iceberg-ops.maintenance.enabled"
    assert "given twice" in str(raised.value) and "'enabled'" in str(raised.value)
    assert "iceberg-ops.maintenance.enabled" not in catalog.load_table("ops.t").metadata.properties


SETS = 8


def _set_many(root: Path, key: str, start: multiprocessing.synchronize.Barrier, errors: multiprocessing.Queue) -> None:
    """Another process: ``SETS`` sets of ``key`` on ``ops.t``, each on a fresh catalog object."""
    start.wait()
    for n in range(SETS):
        try:
            set_table_policy(Lake(root).catalog().load_table("ops.t"), {key: str(n + 1)})
        except Exception as exc:
            errors.put(f"{key}={n + 1}: {type(exc).__name__}: {exc}")


def test_two_processes_setting_the_same_tables_policy_both_win(tmp_path, catalog):
    _table(catalog)
    fork = multiprocessing.get_context("fork")
    start, errors = fork.Barrier(2), fork.Queue()
    keys = ("min-input-files", "max-rewrite-bytes")
    workers = [fork.Process(target=_set_many, args=(tmp_path, key, start, errors)) for key in keys]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    lost = []
    while not errors.empty():
        lost.append(errors.get())
    assert lost == []  # a property set is not a conflict: a lost race is tried again on a fresh read
    policy = table_policy(catalog.load_table("ops.t"))
    assert (policy.min_input_files, policy.max_rewrite_bytes) == (SETS, SETS)
