"""resolve_parameters and check_overrides: precedence, string-typed config, bad values, unknown keys (no catalog)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from iceberg_ops_provider.errors import MaintenanceError, PolarisRequestError, PolicyContentError
from iceberg_ops_provider.polaris.mappings import MAPPINGS
from iceberg_ops_provider.polaris.parameters import check_overrides, resolve_parameters
from iceberg_ops_provider.polaris.policies import ApplicablePolicy, PolicyType

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LOCATION = "file:///warehouse/sales/events"

EXPIRY = PolicyType.SNAPSHOT_EXPIRY
COMPACTION = PolicyType.DATA_COMPACTION
MANIFESTS = PolicyType.METADATA_COMPACTION
ORPHANS = PolicyType.ORPHAN_FILE_REMOVAL


def policy(policy_type: PolicyType, config: dict[str, Any] | None = None, name: str = "p", **top: Any):
    """An applicable policy read through the real parser, its content a JSON string as Polaris sends it."""
    content = {"version": "2025-02-03", "enable": True, "config": config or {}, **top}
    return ApplicablePolicy.from_json(
        {"policy-type": policy_type.value, "name": name, "content": json.dumps(content), "version": 1}
    )


def resolve(policy_type, config=None, properties=None, overrides=None, **top):
    checked = check_overrides({policy_type: overrides}, NOW).get(policy_type) if overrides else None
    return resolve_parameters(
        policy_type,
        policy(policy_type, config, **top),
        table="sales.events",
        properties=properties or {},
        table_location=LOCATION,
        now=NOW,
        overrides=checked,
    )


@dataclass(frozen=True)
class Case:
    """One argument, given at each level: in the policy, as a table property and explicitly."""

    policy_type: PolicyType
    name: str
    key: str
    raw: Any
    meaning: Any
    default: Any
    argument: Any
    argument_meaning: Any
    prop: tuple[str, str] | None = None
    prop_meaning: Any = None
    top_level: bool = False


PRECEDENCE = [
    Case(
        EXPIRY, "retain_last", "min_snapshot_to_keep", "3", 3, 1, 7, 7, ("history.expire.min-snapshots-to-keep", "4"), 4
    ),
    Case(
        EXPIRY, "older_than", "max_snapshot_age_days", "2", NOW - timedelta(days=2), NOW - timedelta(days=5),
        timedelta(hours=6), NOW - timedelta(hours=6), ("history.expire.max-snapshot-age-ms", "3600000"),
        NOW - timedelta(hours=1),
    ),
    Case(
        COMPACTION, "target_file_size_bytes", "target_file_size_bytes", "1048576", 1048576, 536870912, "4096", 4096,
        ("write.target-file-size-bytes", "2097152"), 2097152,
    ),
    Case(COMPACTION, "strategy", "compaction_strategy", "sort", "sort", "binpack", "bin-pack", "binpack"),
    Case(COMPACTION, "min_input_files", "min_input_files", "2", 2, 5, 9, 9),
    Case(COMPACTION, "where", "where", "id > 5", "id > 5", None, "id < 3", "id < 3"),
    Case(
        COMPACTION, "max_concurrent_groups", "max-concurrent-file-group-rewrites", "4", 4, None, 1, 1
    ),
    Case(
        MANIFESTS, "target_manifest_size_bytes", "target_manifest_size_bytes", "65536", 65536, 8 * 1024 * 1024, 1024,
        1024, ("commit.manifest.target-size-bytes", "131072"), 131072,
    ),
    Case(
        ORPHANS, "older_than", "max_orphan_file_age_in_days", 1.5, NOW - timedelta(days=1.5), NOW - timedelta(days=3),
        datetime(2026, 1, 1), datetime(2026, 1, 1, tzinfo=UTC), top_level=True,
    ),
    Case(
        ORPHANS, "locations", "locations", [f"{LOCATION}/data"], (f"{LOCATION}/data",), (LOCATION,),
        f"{LOCATION}/metadata", (f"{LOCATION}/metadata",), top_level=True,
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", PRECEDENCE, ids=lambda case: f"{case.policy_type.value}:{case.name}")
def test_each_argument_wins_over_the_policy_which_wins_over_the_property_which_wins_over_the_default(case: Case):
    config, top = ({}, {case.key: case.raw}) if case.top_level else ({case.key: case.raw}, {})
    properties = dict([case.prop]) if case.prop else {}

    explicit = resolve(case.policy_type, config, properties, {case.name: case.argument}, **top).parameters[case.name]
    assert (explicit.value, explicit.source, explicit.given) == (case.argument_meaning, "argument", case.argument)

    from_policy = resolve(case.policy_type, config, properties, **top).parameters[case.name]
    assert from_policy.value == case.meaning
    assert (from_policy.source, from_policy.key, from_policy.given) == ("policy p", case.key, case.raw)

    if case.prop:
        from_property = resolve(case.policy_type, {}, properties).parameters[case.name]
        assert from_property.value == case.prop_meaning
        assert (from_property.source, from_property.key, from_property.given) == (
            f"table property {case.prop[0]}",
            *case.prop,
        )

    from_default = resolve(case.policy_type, {}, {}).parameters[case.name]
    assert (from_default.value, from_default.source, from_default.key) == (case.default, "default", None)


def test_every_argument_of_every_type_is_covered_by_the_precedence_cases():
    covered = {(case.policy_type, case.name) for case in PRECEDENCE}
    declared = {(t, spec.name) for t, mapping in MAPPINGS.items() for spec in mapping.parameters}
    assert declared - covered == {(EXPIRY, "delete_files")}  # argument only: tested below


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"min_snapshot_to_keep": 2, "max_snapshot_age_days": 1.5}, (2, NOW - timedelta(days=1.5))),
        ({"min_snapshot_to_keep": "2", "max_snapshot_age_days": "1.5"}, (2, NOW - timedelta(days=1.5))),
        ({"min_snapshot_to_keep": " 2 ", "max_snapshot_age_days": "0"}, (2, NOW)),
        ({"min_snapshot_to_keep": 2.0, "max_snapshot_age_days": "2"}, (2, NOW - timedelta(days=2))),
        ({"min-snapshot-to-keep": "5", "max_snapshot_age_days": 10}, (5, NOW - timedelta(days=10))),
    ],
)
def test_config_values_are_read_from_numbers_and_from_the_strings_polaris_stores(config, expected):
    resolved = resolve(EXPIRY, config)
    assert (resolved.parameters["retain_last"].value, resolved.parameters["older_than"].value) == expected
    assert resolved.unknown_keys == ()


@pytest.mark.parametrize(("given", "expected"), [("true", True), ("FALSE", False), (False, False), (" True ", True)])
def test_a_boolean_argument_is_read_from_its_text(given, expected):
    assert resolve(EXPIRY, overrides={"delete_files": given}).parameters["delete_files"].value is expected


@pytest.mark.parametrize(("given", "expected"), [("bin-pack", "binpack"), ("BINPACK", "binpack"), ("sort", "sort")])
def test_the_compaction_strategy_takes_polaris_and_spark_spellings(given, expected):
    assert resolve(COMPACTION, {"compaction_strategy": given}).parameters["strategy"].value == expected


@pytest.mark.parametrize(
    ("policy_type", "config", "top", "key", "value"),
    [
        (EXPIRY, {"min_snapshot_to_keep": "abc"}, {}, "min_snapshot_to_keep", "abc"),
        (EXPIRY, {"min_snapshot_to_keep": "2.5"}, {}, "min_snapshot_to_keep", "2.5"),
        (EXPIRY, {"min_snapshot_to_keep": "0"}, {}, "min_snapshot_to_keep", "0"),
        (EXPIRY, {"min_snapshot_to_keep": True}, {}, "min_snapshot_to_keep", "True"),
        (EXPIRY, {"max_snapshot_age_days": "-1"}, {}, "max_snapshot_age_days", "-1"),
        (EXPIRY, {"max_snapshot_age_days": "nan"}, {}, "max_snapshot_age_days", "nan"),
        (EXPIRY, {"max_snapshot_age_days": "five"}, {}, "max_snapshot_age_days", "five"),
        (COMPACTION, {"target_file_size_bytes": "1e400"}, {}, "target_file_size_bytes", "1e400"),
        (COMPACTION, {"target_file_size_bytes": "512MB"}, {}, "target_file_size_bytes", "512MB"),
        (COMPACTION, {"compaction_strategy": "zorder"}, {}, "compaction_strategy", "zorder"),
        (COMPACTION, {"where": "  "}, {}, "where", "'  '"),
        (MANIFESTS, {"target_manifest_size_bytes": ""}, {}, "target_manifest_size_bytes", "''"),
        (ORPHANS, {}, {"locations": []}, "locations", "[]"),
    ],
)
def test_a_policy_value_that_cannot_be_read_names_the_policy_the_key_and_the_value(
    policy_type, config, top, key, value
):
    with pytest.raises(PolicyContentError) as raised:
        resolve(policy_type, config, **top)
    message = str(raised.value)
    assert "Policy 'p'" in message and key in message and value in message and policy_type.value in message
    assert "fix the policy's content in Polaris" in message
    assert raised.value.policy == "p"


def test_a_table_property_that_cannot_be_read_names_the_table_and_the_property():
    with pytest.raises(MaintenanceError, match=r"sales\.events .*history\.expire\.max-snapshot-age-ms='soon'"):
        resolve(EXPIRY, {}, {"history.expire.max-snapshot-age-ms": "soon"})
    # A bad property the policy overrides is never read.
    assert resolve(EXPIRY, {"max_snapshot_age_days": 1}, {"history.expire.max-snapshot-age-ms": "soon"})


def test_two_spellings_of_one_config_key_are_refused():
    with pytest.raises(PolicyContentError, match=r"'min_input_files' and 'min-input-files'.*mean the same"):
        resolve(COMPACTION, {"min_input_files": 2, "min-input-files": 3})


def test_unknown_keys_are_reported_and_logged_and_known_inapplicable_ones_are_reported_with_the_reason(caplog):
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.polaris.parameters")
    expiry = resolve(EXPIRY, {"min_snapshot_to_keep": 1, "max_ref_age_days": 3, "key1": "value1", "Key2": 2})
    assert expiry.unknown_keys == ("key1", "Key2")
    assert list(expiry.not_applied) == ["max_ref_age_days"]
    assert "history.expire.max-ref-age-ms" in expiry.not_applied["max_ref_age_days"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'key1', 'Key2'" in message and "not applied" in message for message in warnings)

    compaction = resolve(COMPACTION, {"max-concurrent-file-group-rewrites": "4", "partial-progress.enabled": "true"})
    assert compaction.unknown_keys == ("partial-progress.enabled",)
    assert list(compaction.not_applied) == []
    assert compaction.parameters["max_concurrent_groups"].value == 4
    assert list(resolve(MANIFESTS, {"spec_id": 0}).not_applied) == ["spec_id"]
    orphans = resolve(ORPHANS, {"prefix_mismatch_mode": "ignore", "locations": "x"}, max_orphan_file_age_in_days=4)
    assert list(orphans.not_applied) == ["prefix_mismatch_mode", "locations"]
    assert "top-level" in orphans.not_applied["locations"] and orphans.unknown_keys == ()
    assert orphans.parameters["locations"].source == "default"  # the misplaced key is not read


def test_which_source_won_is_logged_for_every_argument(caplog):
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.polaris.parameters")
    resolve(
        EXPIRY,
        {"max_snapshot_age_days": "1"},
        {"history.expire.min-snapshots-to-keep": "2"},
        overrides={"delete_files": "false"},
    )
    messages = [r.getMessage() for r in caplog.records]
    assert (
        "sales.events: system.snapshot-expiry retain_last=2 from table property history.expire.min-snapshots-to-keep"
        in messages
    )
    assert (
        f"sales.events: system.snapshot-expiry older_than='{(NOW - timedelta(days=1)).isoformat()}' from policy p"
        in messages
    )
    assert "sales.events: system.snapshot-expiry delete_files=False from argument" in messages


def test_a_retain_last_below_the_tables_own_minimum_is_noted():
    noted = resolve(EXPIRY, {"min_snapshot_to_keep": 1}, {"history.expire.min-snapshots-to-keep": "3"})
    assert len(noted.notes) == 1 and "history.expire.min-snapshots-to-keep=3" in noted.notes[0]
    assert resolve(EXPIRY, {"min_snapshot_to_keep": 4}, {"history.expire.min-snapshots-to-keep": "3"}).notes == ()
    assert resolve(EXPIRY, {}, {"history.expire.min-snapshots-to-keep": "3"}).notes == ()


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (timedelta(days=2), NOW - timedelta(days=2)),
        (datetime(2026, 11, 1, 8, 30), datetime(2026, 11, 1, 8, 30, tzinfo=UTC)),
        ("2026-11-01T00:00:00+01:00", datetime(2026, 10, 31, 23, 0, tzinfo=UTC)),
    ],
)
def test_an_explicit_cut_off_takes_a_timedelta_a_datetime_or_an_iso_timestamp(given, expected):
    assert resolve(EXPIRY, overrides={"older_than": given}).parameters["older_than"].value == expected


def test_an_age_string_counts_back_from_the_clock():
    value = resolve(ORPHANS, overrides={"older_than": "7d"}).parameters["older_than"].value
    assert abs(value - (datetime.now(UTC) - timedelta(days=7))) < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"system.snapshot-retention": {"retain_last": 1}}, "'system.snapshot-retention'.*system.data-compaction"),
        ({EXPIRY: {"retain": 1}}, "'retain', which expire_snapshots does not take.*retain_last, older_than"),
        ({EXPIRY: {"min_snapshot_to_keep": 1}}, "policy key 'min_snapshot_to_keep' is the argument 'retain_last'"),
        ({EXPIRY: {"retain_last": "many"}}, r"\['retain_last'\] = 'many' cannot be used.*whole number of at least 1"),
        ({EXPIRY: {"older_than": "yesterday"}}, "'yesterday' cannot be used.*ISO timestamp"),
        ({EXPIRY: {"delete_files": "yes"}}, "'yes' cannot be used: delete_files takes true or false"),
        ({ORPHANS: {"locations": [""]}}, "non-empty list of locations"),
        ({COMPACTION: ["strategy"]}, "must be a mapping of argument names to values"),
    ],
)
def test_bad_overrides_are_refused_up_front(overrides, match):
    with pytest.raises(PolarisRequestError, match=match):
        check_overrides(overrides, NOW)


def test_overrides_by_type_string_are_read_once():
    checked = check_overrides({"system.data-compaction": {"min_input_files": "3", "where": "id > 1"}}, NOW)
    assert checked == {COMPACTION: {"min_input_files": ("3", 3), "where": ("id > 1", "id > 1")}}
    assert check_overrides(None, NOW) == {}


def test_the_resolution_is_json_ready():
    resolved = resolve(
        ORPHANS, {"prefix_mismatch_mode": "ignore", "zz": 1}, max_orphan_file_age_in_days=2, locations=[LOCATION]
    )
    assert json.loads(json.dumps(resolved.to_json())) == {
        "function": "remove_orphan_files",
        "parameters": {
            "older_than": {
                "value": (NOW - timedelta(days=2)).isoformat(),
                "source": "policy p",
                "key": "max_orphan_file_age_in_days",
                "given": 2,
            },
            "locations": {"value": [LOCATION], "source": "policy p", "key": "locations", "given": [LOCATION]},
        },
        "unknown_keys": ["zz"],
        "not_applied": {"prefix_mismatch_mode": resolved.not_applied["prefix_mismatch_mode"]},
        "notes": [],
    }


def test_a_policy_orphan_age_under_a_day_is_refused_and_huge_ages_mean_no_limit():
    from datetime import UTC, datetime, timedelta

    from iceberg_ops_provider.errors import PolarisRequestError, PolicyContentError
    from iceberg_ops_provider.polaris.parameters import check_overrides, resolve_parameters
    from iceberg_ops_provider.polaris.policies import ApplicablePolicy, PolicyType

    now = datetime(2026, 12, 1, tzinfo=UTC)

    def policy(kind: PolicyType, **content: object) -> ApplicablePolicy:
        body = {"version": "2025-02-03", "enable": True, "config": {}, **content}
        return ApplicablePolicy.from_json({"policy-type": kind.value, "name": "p", "content": json.dumps(body)})

    def resolve(kind: PolicyType, given: ApplicablePolicy, properties: dict | None = None, overrides=None):
        return resolve_parameters(
            kind,
            given,
            table="s.t",
            properties=properties or {},
            table_location="file:///w/s/t",
            now=now,
            overrides=overrides or {},
        )

    # A cut-off of now deletes the files of writes in flight: a policy may not ask for less than a day.
    with pytest.raises(PolicyContentError, match="at least 1"):
        resolve(PolicyType.ORPHAN_FILE_REMOVAL, policy(PolicyType.ORPHAN_FILE_REMOVAL, max_orphan_file_age_in_days=0.5))
    day = resolve(PolicyType.ORPHAN_FILE_REMOVAL, policy(PolicyType.ORPHAN_FILE_REMOVAL, max_orphan_file_age_in_days=1))
    assert day.parameters["older_than"].value == now - timedelta(days=1)
    # Long.MAX as the max snapshot age ("never") and absurd policy ages are no limit, not an OverflowError.
    never = resolve(
        PolicyType.SNAPSHOT_EXPIRY,
        policy(PolicyType.SNAPSHOT_EXPIRY),
        {"history.expire.max-snapshot-age-ms": str(2**63 - 1)},
    )
    assert never.parameters["older_than"].value == datetime.min.replace(tzinfo=UTC)
    huge_age = policy(PolicyType.SNAPSHOT_EXPIRY, config={"max_snapshot_age_days": "1e9"})
    huge = resolve(PolicyType.SNAPSHOT_EXPIRY, huge_age)
    assert huge.parameters["older_than"].value == datetime.min.replace(tzinfo=UTC)
    with pytest.raises(PolarisRequestError, match="negative timedelta"):
        check_overrides({PolicyType.ORPHAN_FILE_REMOVAL: {"older_than": timedelta(hours=-1)}}, now)
