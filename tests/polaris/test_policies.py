"""PolicyContent.parse, Policy.from_json and ApplicablePolicy.from_json: good and bad inputs."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from iceberg_ops_provider.errors import PolicyContentError
from iceberg_ops_provider.polaris import CONTENT_VERSION, ApplicablePolicy, Policy, PolicyContent, PolicyType

EXPIRY = PolicyType.SNAPSHOT_EXPIRY
ORPHANS = PolicyType.ORPHAN_FILE_REMOVAL


def test_the_spec_example_parses_from_its_json_string():
    text = json.dumps(
        {
            "version": "2025-02-03",
            "enable": True,
            "config": {"min_snapshot_to_keep": 1, "max_snapshot_age_days": 2, "max_ref_age_days": 3, "key1": "value1"},
        }
    )
    parsed = PolicyContent.parse(EXPIRY, text, policy="snap-exp")

    assert parsed.enable is True and parsed.version == CONTENT_VERSION
    assert dict(parsed.config) == {
        "min_snapshot_to_keep": 1,
        "max_snapshot_age_days": 2,
        "max_ref_age_days": 3,
        "key1": "value1",
    }
    assert isinstance(parsed.config, MappingProxyType)
    assert PolicyContent.parse(EXPIRY, json.loads(text)) == parsed  # an already decoded object works too


@pytest.mark.parametrize(
    "content",
    [
        {"enable": False},
        {"enable": True, "version": None},
        {"enable": True, "version": ""},
        {"enable": True, "config": None},
        {"enable": True, "config": {}},
    ],
)
def test_what_polaris_accepts_with_defaults_parses(content):
    parsed = PolicyContent.parse(EXPIRY, json.dumps(content))
    assert parsed.version == CONTENT_VERSION and dict(parsed.config) == {}
    assert parsed.to_json() == {"version": CONTENT_VERSION, "enable": content["enable"], "config": {}}


def test_config_values_keep_their_json_types():
    config = {"s": "bin-pack", "i": 7, "f": 0.5, "b": False}
    assert dict(PolicyContent.parse(PolicyType.DATA_COMPACTION, {"enable": True, "config": config}).config) == config


def test_orphan_file_removal_takes_its_extra_fields():
    parsed = PolicyContent.parse(
        ORPHANS,
        {
            "enable": True,
            "max_orphan_file_age_in_days": 3,
            "locations": ["s3://b/t1"],
            "config": {"prefix_mismatch_mode": "ignore"},
        },
    )
    assert (parsed.max_orphan_file_age_in_days, parsed.locations) == (3, ("s3://b/t1",))
    assert parsed.to_json()["locations"] == ["s3://b/t1"]


@pytest.mark.parametrize(
    ("policy_type", "content", "match"),
    [
        (EXPIRY, json.dumps(json.dumps({"enable": True})), "encoded twice"),
        (EXPIRY, '{"enable": "true"}', r"'enable' must be true or false \(a JSON boolean\), not 'true'"),
        (EXPIRY, '{"enable": 1}', "'enable' must be true or false"),
        (EXPIRY, '{"enable": null}', "'enable' must be true or false"),
        (EXPIRY, '{"config": {}}', "lacks the required key 'enable'"),
        (
            EXPIRY,
            '{"enable": true, "max_snapshot_age_days": 2}',
            "unknown key\\(s\\) 'max_snapshot_age_days'.*inside config",
        ),
        (EXPIRY, '{"enable": true, "version": "2024-01-01"}', "'version' must be '2025-02-03', not '2024-01-01'"),
        (EXPIRY, '{"enable": true, "version": 20250203}', "'version' must be"),
        (EXPIRY, '{"enable": true, "config": []}', "'config' must be an object"),
        (EXPIRY, '{"enable": true, "config": ""}', "'config' must be an object"),
        (EXPIRY, '{"enable": true, "config": 0}', "'config' must be an object"),
        (
            EXPIRY,
            '{"enable": true, "config": {"k": {"nested": 1}}}',
            "config key 'k' must be a string, number or boolean",
        ),
        (EXPIRY, '{"enable": true, "config": {"k": null}}', "config key 'k'"),
        (EXPIRY, '{"enable": true, "locations": ["s3://b"]}', "unknown key\\(s\\) 'locations'"),
        (EXPIRY, "{enable: true}", "not JSON"),
        (EXPIRY, "[true]", "JSON list, not an object"),
        (EXPIRY, "", "has no content"),
        (EXPIRY, None, "has no content"),
        (ORPHANS, '{"enable": true, "max_orphan_file_age_in_days": -1}', "must be a number of days"),
        (ORPHANS, '{"enable": true, "max_orphan_file_age_in_days": true}', "must be a number of days"),
        (ORPHANS, '{"enable": true, "max_orphan_file_age_in_days": "a week"}', "must be a number of days"),
        (ORPHANS, '{"enable": true, "locations": "s3://b"}', "'locations' must be a list"),
        (ORPHANS, '{"enable": true, "locations": [""]}', "'locations' must be a list"),
    ],
)
def test_malformed_content_is_refused_naming_the_policy_and_the_problem(policy_type, content, match):
    with pytest.raises(PolicyContentError, match=match) as info:
        PolicyContent.parse(policy_type, content, policy="p1")
    assert info.value.policy == "p1"
    assert str(info.value).startswith("Policy 'p1': ")
    assert isinstance(info.value, ValueError)


def test_a_policy_from_json_parses_known_types_and_keeps_unknown_ones_raw():
    known = Policy.from_json(
        {"policy-type": EXPIRY.value, "inheritable": True, "name": "e", "content": '{"enable": true}', "version": 4}
    )
    assert known.known_type and known.content is not None and known.version == 4 and known.description is None

    custom = Policy.from_json({"policy-type": "custom.acl", "name": "c", "content": "not json at all", "version": 0})
    assert not custom.known_type and custom.content is None and custom.raw_content == "not json at all"
    assert custom.to_json()["content"] == "not json at all"


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"policy-type": EXPIRY.value, "content": '{"enable": true}'}, "without a 'name' or 'policy-type'"),
        ({"name": "x", "content": '{"enable": true}'}, "without a 'name' or 'policy-type'"),
        (
            {"policy-type": EXPIRY.value, "name": "x", "content": '{"enable": true}', "version": "3"},
            "not a whole number",
        ),
        ({"policy-type": EXPIRY.value, "name": "x", "content": '{"enable": "yes"}'}, "served it at https://p/x"),
    ],
)
def test_a_malformed_policy_answer_is_refused_with_where_it_came_from(payload, match):
    with pytest.raises(PolicyContentError, match=match) as info:
        Policy.from_json(payload, where="https://p/x")
    assert info.value.url == "https://p/x"


def test_an_applicable_policy_keeps_where_it_is_defined_and_whether_inherited():
    applied = ApplicablePolicy.from_json(
        {
            "policy-type": EXPIRY.value,
            "inheritable": True,
            "name": "snap-exp",
            "description": "d",
            "content": '{"version":"2025-02-03","enable":true,"config":{"max_snapshot_age_days":2}}',
            "version": 3,
            "inherited": True,
            "namespace": ["finance"],
        }
    )
    assert (applied.inherited, applied.namespace, applied.version) == (True, ("finance",), 3)
    assert applied.to_json()["namespace"] == ["finance"] and applied.to_json()["content"]["config"] == {
        "max_snapshot_age_days": 2
    }
    direct = ApplicablePolicy.from_json({"policy-type": EXPIRY.value, "name": "d", "content": '{"enable": false}'})
    assert (direct.inherited, direct.namespace) == (False, ())


def test_an_orphan_age_written_as_text_is_read_as_polaris_reads_it():
    parsed = PolicyContent.parse(ORPHANS, '{"enable": true, "max_orphan_file_age_in_days": " 7 "}', policy="p1")
    assert parsed.max_orphan_file_age_in_days == 7.0


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"inherited": "false", "inheritable": "true"}, (False, True)),
        ({"inherited": True, "inheritable": False}, (True, False)),
        ({}, (False, True)),
    ],
)
def test_boolean_fields_of_an_applicable_policy_are_read_strictly(fields, expected):
    payload = {"policy-type": EXPIRY, "name": "p", "content": '{"enable": true}', "namespace": ["sales"], **fields}
    policy = ApplicablePolicy.from_json(payload)
    assert (policy.inherited, policy.inheritable) == expected


@pytest.mark.parametrize(
    "fields", [{"inherited": "no"}, {"inheritable": 1}, {"namespace": "sales"}, {"namespace": [None]}]
)
def test_odd_fields_of_an_applicable_policy_are_refused(fields):
    payload = {"policy-type": EXPIRY, "name": "p", "content": '{"enable": true}', "namespace": ["sales"], **fields}
    with pytest.raises(PolicyContentError, match=r"Polaris 1\.x policy endpoint"):
        ApplicablePolicy.from_json(payload, where="http://polaris/x")
