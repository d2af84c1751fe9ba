"""PolicyDispatcher on real SQLite catalogs and real tables, its policies from an in-memory source."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from iceberg_ops_provider.errors import (
    MaintenanceConflictError,
    MaintenanceError,
    PolarisAuthError,
    PolarisNotFoundError,
    PolarisRequestError,
    PolarisServerError,
    UnsafeLocationError,
)
from iceberg_ops_provider.polaris import PolarisPolicyClient
from iceberg_ops_provider.polaris.dispatcher import (
    DRY_RUN,
    FAILED,
    RAN,
    RUN_ORDER,
    SKIPPED_DISABLED,
    SKIPPED_NO_POLICY,
    NamespacePolicyOutcome,
    PolicyDispatcher,
    TablePolicyOutcome,
)
from iceberg_ops_provider.polaris.policies import ApplicablePolicy, PolicyType
from tests.polaris.conftest import CLIENT_ID, CLIENT_SECRET
from tests.support.tables import files_on_disk, live_data_files, rows, small_files_table

EXPIRY = PolicyType.SNAPSHOT_EXPIRY
COMPACTION = PolicyType.DATA_COMPACTION
MANIFESTS = PolicyType.METADATA_COMPACTION
ORPHANS = PolicyType.ORPHAN_FILE_REMOVAL
TEN_DAYS_AGO = time.time() - 10 * 24 * 3600


def applicable(
    policy_type: PolicyType | str,
    config: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    enable: bool = True,
    inherited: bool = False,
    defined_in: Sequence[str] = ("sales",),
    **top: Any,
) -> ApplicablePolicy:
    """A policy as Polaris's applicable-policies endpoint returns it, read by the real parser."""
    kind = str(getattr(policy_type, "value", policy_type))
    content = {"version": "2025-02-03", "enable": enable, "config": config or {}, **top}
    return ApplicablePolicy.from_json(
        {
            "policy-type": kind,
            "inheritable": True,
            "name": name or kind.rsplit(".", 1)[-1],
            "content": json.dumps(content),
            "version": 2,
            "inherited": inherited,
            "namespace": list(defined_in),
        }
    )


class MemoryPolicySource:
    """Policies per table (``namespace.table``), as Polaris would have resolved them; errors per table too."""

    def __init__(
        self, policies: dict[str, list[ApplicablePolicy]] | None = None, errors: dict[str, Exception] | None = None
    ) -> None:
        self.policies = policies or {}
        self.errors = errors or {}
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def applicable_policies(
        self, namespace: Sequence[str], table: str | None = None, policy_type: PolicyType | str | None = None
    ) -> list[ApplicablePolicy]:
        self.calls.append((tuple(namespace), table))
        key = ".".join([*namespace, table or ""])
        if key in self.errors:
            raise self.errors[key]
        return [p for p in self.policies.get(key, []) if policy_type is None or p.policy_type == policy_type]


def every_policy(**overrides: ApplicablePolicy) -> list[ApplicablePolicy]:
    """One enabled policy of each type that makes each function do something on a small table."""
    policies = {
        "compaction": applicable(
            COMPACTION, {"target_file_size_bytes": "1048576", "min_input_files": "2", "compaction_strategy": "bin-pack"}
        ),
        "manifests": applicable(MANIFESTS, {"target_manifest_size_bytes": "8388608"}, inherited=True),
        "expiry": applicable(EXPIRY, {"min_snapshot_to_keep": "1", "max_snapshot_age_days": "0"}),
        "orphans": applicable(ORPHANS, max_orphan_file_age_in_days=1),
    }
    policies.update(overrides)
    return list(policies.values())


def local(location: str) -> Path:
    return Path(location.removeprefix("file://"))


def old_orphan(table: Any, relative: str = "data/orphan.parquet") -> Path:
    """A file under the table's location that no metadata references, ten days old."""
    path = local(table.location()) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left behind by a crashed writer")
    os.utime(path, (TEN_DAYS_AGO, TEN_DAYS_AGO))
    return path


def manifests(table: Any) -> int:
    table.refresh()
    return len(table.current_snapshot().manifests(table.io))


def test_each_policy_type_does_its_job_in_order_and_expiry_frees_what_the_rewrites_replaced(catalog):
    table = small_files_table(catalog, "sales.events", appends=6, rows=50)
    before, small_files = rows(table), {f.file_path for f in live_data_files(table)}
    orphan = old_orphan(table)
    source = MemoryPolicySource({"sales.events": every_policy()})

    outcome = PolicyDispatcher(source, catalog).run_table("sales.events")

    assert [p.policy_type for p in outcome.policies] == list(RUN_ORDER) and not outcome.failed
    assert [p.action for p in outcome.policies] == [RAN] * 4
    by_type = {p.policy_type: p for p in outcome.policies}
    compacted = by_type[COMPACTION].results[0]
    assert compacted["rewritten_data_files_count"] == 6 and compacted["added_data_files_count"] == 1
    assert by_type[MANIFESTS].results[0]["rewritten_manifests_count"] == 2 and manifests(table) == 1
    expired = by_type[EXPIRY].results[0]
    # The six appends' snapshots went, and with them the six small files the compaction replaced.
    assert len(expired["expired_snapshot_ids"]) == 6 and expired["deleted_data_files_count"] == 6
    assert not any(local(path).exists() for path in small_files)
    assert by_type[ORPHANS].results[0]["orphan_file_locations"] == [orphan.as_uri()] and not orphan.exists()
    table.refresh()
    assert rows(table) == before and len(table.snapshots()) == 2
    assert source.calls == [(("sales",), "events")]
    payload = json.loads(json.dumps(outcome.to_json()))
    assert list(payload["policies"]) == [t.value for t in RUN_ORDER] and payload["status"] == "ok"
    assert payload["policies"]["system.metadata-compaction"]["inherited"] is True
    assert payload["policies"]["system.data-compaction"]["defined_in"] == ["sales"]
    assert payload["policies"]["system.data-compaction"]["parameters"]["strategy"] == {
        "value": "binpack",
        "source": "policy data-compaction",
        "key": "compaction_strategy",
        "given": "bin-pack",
    }


def test_arguments_win_over_the_policy_which_wins_over_table_properties_on_a_real_table(catalog, caplog):
    table = small_files_table(catalog, "sales.events", appends=8, rows=10)
    with table.transaction() as transaction:
        transaction.set_properties(
            {"history.expire.min-snapshots-to-keep": "3", "write.target-file-size-bytes": "4096"}
        )
    policy = applicable(EXPIRY, {"max_snapshot_age_days": "0"})
    source = MemoryPolicySource({"sales.events": [policy, applicable(COMPACTION, {"min_input_files": "2"})]})
    dispatcher = PolicyDispatcher(source, catalog, now=datetime.now(UTC) + timedelta(seconds=1))
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.polaris")

    explicit = dispatcher.run_table("sales.events", {EXPIRY: {"retain_last": 6}}, types=[EXPIRY])
    parameters = explicit.policies[0].parameters.parameters
    assert (parameters["retain_last"].value, parameters["retain_last"].source) == (6, "argument")
    assert parameters["older_than"].source == "policy snapshot-expiry"
    assert len(catalog.load_table("sales.events").snapshots()) == 6

    from_property = dispatcher.run_table("sales.events", types=[EXPIRY])
    retain = from_property.policies[0].parameters.parameters["retain_last"]
    assert (retain.value, retain.source) == (3, "table property history.expire.min-snapshots-to-keep")
    assert len(catalog.load_table("sales.events").snapshots()) == 3
    assert any("retain_last=3 from table property" in r.getMessage() for r in caplog.records)

    dry = PolicyDispatcher(source, catalog, dry_run=True).run_table("sales.events", types=[COMPACTION])
    target = dry.policies[0].parameters.parameters["target_file_size_bytes"]
    assert (target.value, target.source) == (4096, "table property write.target-file-size-bytes")
    assert dry.policies[0].results[0]["target_file_size_bytes"] == 4096


def test_a_retain_last_the_tables_own_minimum_overrules_is_noted(catalog):
    table = small_files_table(catalog, "sales.events", appends=5, rows=10)
    with table.transaction() as transaction:
        transaction.set_properties({"history.expire.min-snapshots-to-keep": "3"})
    source = MemoryPolicySource(
        {"sales.events": [applicable(EXPIRY, {"min_snapshot_to_keep": 1, "max_snapshot_age_days": 0})]}
    )

    outcome = PolicyDispatcher(source, catalog, now=datetime.now(UTC) + timedelta(seconds=1)).run_table("sales.events")

    expiry = outcome.to_json()["policies"]["system.snapshot-expiry"]
    assert expiry["parameters"]["retain_last"]["value"] == 1
    assert len(expiry["notes"]) == 1 and "min-snapshots-to-keep=3" in expiry["notes"][0]
    assert len(catalog.load_table("sales.events").snapshots()) == 3


def test_the_manifest_rewrite_merges_the_manifests_of_many_appends(catalog):
    table = small_files_table(catalog, "sales.events", appends=7, rows=5)
    before = rows(table)
    source = MemoryPolicySource({"sales.events": [applicable(MANIFESTS, {"target_manifest_size_bytes": "1048576"})]})

    outcome = PolicyDispatcher(source, catalog).run_table("sales.events")

    assert manifests(table) == 1 and rows(table) == before
    actions = {p.policy_type: p.action for p in outcome.policies}
    assert actions == {
        MANIFESTS: RAN,
        COMPACTION: SKIPPED_NO_POLICY,
        EXPIRY: SKIPPED_NO_POLICY,
        ORPHANS: SKIPPED_NO_POLICY,
    }
    result = outcome.policies[1].results[0]
    assert result["rewritten_manifests_count"] == 7 and result["target_manifest_size_bytes"] == 1048576


def test_a_dry_run_reports_what_each_function_would_do_and_changes_nothing(catalog, tmp_path: Path):
    table = small_files_table(catalog, "sales.events", appends=6, rows=50)
    orphan = old_orphan(table)
    disk, metadata = files_on_disk(tmp_path / "warehouse"), table.metadata_location
    source = MemoryPolicySource({"sales.events": every_policy()})

    outcome = PolicyDispatcher(source, catalog, dry_run=True).run_table("sales.events")

    assert files_on_disk(tmp_path / "warehouse") == disk and orphan.exists()
    assert catalog.load_table("sales.events").metadata_location == metadata
    assert [p.action for p in outcome.policies] == [DRY_RUN] * 4 and outcome.dry_run
    compaction, manifest_rewrite, expiry, orphans = (p.results[0] for p in outcome.policies)
    assert all(result["dry_run"] for result in (compaction, manifest_rewrite, expiry, orphans))
    assert compaction["rewritten_data_files_count"] == 6 and manifest_rewrite["rewritten_manifests_count"] == 6
    assert len(expiry["expired_snapshot_ids"]) == 5  # against the table as it is: nothing was compacted
    assert orphans["orphan_file_locations"] == [orphan.as_uri()]
    assert outcome.to_json()["dry_run"] is True


def test_a_disabled_policy_is_skipped_and_logged(catalog, caplog):
    table = small_files_table(catalog, "sales.events", appends=4, rows=10)
    disabled = applicable(EXPIRY, {"max_snapshot_age_days": "0"}, name="keep-all", enable=False)
    source = MemoryPolicySource({"sales.events": [disabled]})
    caplog.set_level(logging.INFO, logger="iceberg_ops_provider.polaris.dispatcher")

    outcome = PolicyDispatcher(source, catalog, now=datetime.now(UTC) + timedelta(seconds=1)).run_table("sales.events")

    expiry = outcome.policies[2]
    assert (expiry.action, expiry.policy, expiry.enabled, expiry.results) == (SKIPPED_DISABLED, "keep-all", False, [])
    assert expiry.parameters is None and not outcome.failed
    assert len(catalog.load_table("sales.events").snapshots()) == len(table.snapshots()) == 4
    assert any("'keep-all'" in r.getMessage() and "disabled" in r.getMessage() for r in caplog.records)


def test_unknown_policy_types_and_config_keys_are_reported_not_run(catalog, caplog):
    small_files_table(catalog, "sales.events", appends=2, rows=10)
    custom = applicable("acme.retention", name="acme", defined_in=("sales",))
    expiry = applicable(EXPIRY, {"max_snapshot_age_days": "1", "max_ref_age_days": "3", "key1": "value1"})
    source = MemoryPolicySource({"sales.events": [custom, expiry]})
    caplog.set_level(logging.WARNING)

    outcome = PolicyDispatcher(source, catalog, dry_run=True).run_table("sales.events")

    payload = outcome.to_json()
    assert payload["unknown_policies"] == [{"name": "acme", "policy_type": "acme.retention"}]
    assert "acme.retention" not in payload["policies"] and payload["status"] == "ok"
    reported = payload["policies"]["system.snapshot-expiry"]
    assert reported["unknown_keys"] == ["key1"] and list(reported["not_applied"]) == ["max_ref_age_days"]
    warnings = " ".join(r.getMessage() for r in caplog.records)
    assert "'acme.retention'" in warnings and "'key1'" in warnings


def test_a_policy_attached_to_the_table_wins_over_an_inherited_one_of_the_same_type(catalog):
    small_files_table(catalog, "sales.events", appends=2, rows=10)
    inherited = applicable(EXPIRY, {"min_snapshot_to_keep": "1"}, name="ns-expiry", inherited=True)
    attached = applicable(EXPIRY, {"min_snapshot_to_keep": "2"}, name="table-expiry")
    later = applicable(EXPIRY, {"min_snapshot_to_keep": "3"}, name="other-ns-expiry", inherited=True)
    dispatcher = PolicyDispatcher(MemoryPolicySource({"sales.events": [inherited, attached]}), catalog, dry_run=True)

    chosen = dispatcher.run_table("sales.events", types=[EXPIRY]).policies[0]

    assert (chosen.policy, chosen.inherited, chosen.parameters.parameters["retain_last"].value) == (
        "table-expiry",
        False,
        2,
    )
    assert "'ns-expiry', 'table-expiry'" in chosen.notes[0] and "attached to the table itself" in chosen.notes[0]
    dispatcher.source = MemoryPolicySource({"sales.events": [inherited, later]})
    first = dispatcher.run_table("sales.events", types=[EXPIRY]).policies[0]
    assert first.policy == "ns-expiry" and "returned first" in first.notes[0]


def test_a_namespace_runs_every_table_and_one_failing_table_stops_none_of_the_others(catalog):
    for name in ("sales.a", "sales.b", "sales.c", "sales.d"):
        small_files_table(catalog, name, appends=3, rows=10)
    orphan_b = old_orphan(catalog.load_table("sales.b"))
    expire = {"min_snapshot_to_keep": "1", "max_snapshot_age_days": "0"}
    source = MemoryPolicySource(
        {
            "sales.a": [applicable(EXPIRY, expire)],
            # A bad value fails its type only: the orphan removal of the same table still runs.
            "sales.b": [applicable(EXPIRY, {"min_snapshot_to_keep": "abc"}), applicable(ORPHANS)],
            "sales.d": [applicable(EXPIRY, expire)],
        },
        errors={
            "sales.c": PolarisNotFoundError(
                "Table does not exist: sales.c", status=404, error_type="NoSuchTableException"
            )
        },
    )
    dispatcher = PolicyDispatcher(source, catalog, now=datetime.now(UTC) + timedelta(seconds=1))

    with pytest.raises(MaintenanceError) as raised:
        dispatcher.run_namespace("sales")

    assert not isinstance(raised.value, MaintenanceConflictError) and not raised.value.transient
    message = str(raised.value)
    assert "namespace sales (2 of 4 table(s))" in message and "'min_snapshot_to_keep' to 'abc'" in message
    assert "PolarisNotFoundError" in message
    outcome = raised.value.result
    assert isinstance(outcome, NamespacePolicyOutcome)
    assert [t.table for t in outcome.tables] == ["sales.a", "sales.b", "sales.c", "sales.d"]
    assert outcome.failed_tables == ["sales.b", "sales.c"]
    assert len(catalog.load_table("sales.a").snapshots()) == len(catalog.load_table("sales.d").snapshots()) == 1
    b = {p.policy_type: p for p in outcome.tables[1].policies}
    assert b[EXPIRY].action == FAILED and "PolicyContentError" in b[EXPIRY].error and b[EXPIRY].transient is False
    assert b[ORPHANS].action == RAN and not orphan_b.exists()
    assert len(catalog.load_table("sales.b").snapshots()) == 3
    c = outcome.tables[2]
    assert c.policies == [] and c.error.startswith("PolarisNotFoundError") and c.transient is False
    payload = json.loads(json.dumps(outcome.to_json()))
    assert payload["status"] == "failed" and payload["failed_tables"] == ["sales.b", "sales.c"]
    assert payload["tables"]["sales.a"]["status"] == "ok" and payload["tables_count"] == 4

    kept = dispatcher.run_namespace("sales", raise_on_failure=False)
    assert kept.failed_tables == ["sales.b", "sales.c"]
    with pytest.raises(MaintenanceError):
        kept.raise_for_failures()


def test_a_run_whose_every_failure_may_pass_on_a_retry_raises_a_transient_error(catalog):
    small_files_table(catalog, "sales.a", appends=2, rows=10)
    small_files_table(catalog, "sales.b", appends=2, rows=10)
    source = MemoryPolicySource(
        {"sales.a": [applicable(EXPIRY)]}, errors={"sales.b": PolarisServerError("Polaris answered 503.", status=503)}
    )

    with pytest.raises(MaintenanceConflictError) as raised:
        PolicyDispatcher(source, catalog, dry_run=True).run_namespace(("sales",))

    assert raised.value.transient and "run it again" in str(raised.value)
    assert raised.value.result.failed_tables == ["sales.b"] and raised.value.result.tables[1].transient is True


def test_orphan_removal_cleans_only_the_policys_locations_under_the_table(catalog):
    table = small_files_table(catalog, "sales.events", appends=2, rows=10)
    in_data, elsewhere = old_orphan(table, "data/orphan.parquet"), old_orphan(table, "scratch/orphan.parquet")
    data = f"{table.location()}/data"
    source = MemoryPolicySource(
        {"sales.events": [applicable(ORPHANS, max_orphan_file_age_in_days=3, locations=[data])]}
    )

    outcome = PolicyDispatcher(source, catalog).run_table("sales.events", types=[ORPHANS])

    result = outcome.policies[0].results
    assert [r["location"] for r in result] == [data] and result[0]["deleted_orphan_files_count"] == 1
    assert not in_data.exists() and elsewhere.exists()


@pytest.mark.parametrize("inside_too", [False, True])
def test_a_policy_location_outside_the_table_is_refused_and_nothing_is_deleted(catalog, inside_too: bool):
    table = small_files_table(catalog, "sales.events", appends=2, rows=10)
    other = small_files_table(catalog, "sales.other", appends=2, rows=10)
    ours, theirs = old_orphan(table), old_orphan(other)
    locations = [other.location(), f"{local(table.location()).parent}"]
    if inside_too:
        locations.insert(0, f"{table.location()}/data")
    source = MemoryPolicySource(
        {"sales.events": [applicable(ORPHANS, max_orphan_file_age_in_days=1, locations=locations)]}
    )

    with pytest.raises(MaintenanceError) as raised:
        PolicyDispatcher(source, catalog).run_table("sales.events")

    orphans = raised.value.result.policies[3]
    assert orphans.action == FAILED and orphans.error.startswith(UnsafeLocationError.__name__)
    assert other.location() in orphans.error and "nothing was listed or deleted" in orphans.error
    assert orphans.results == [] and ours.exists() and theirs.exists()


def test_bad_arguments_are_refused_before_anything_runs(catalog):
    small_files_table(catalog, "sales.events", appends=2, rows=10)
    source = MemoryPolicySource({"sales.events": every_policy()})
    dispatcher = PolicyDispatcher(source, catalog)

    with pytest.raises(PolarisRequestError, match="'retain', which expire_snapshots does not take"):
        dispatcher.run_table("sales.events", {EXPIRY: {"retain": 2}})
    with pytest.raises(PolarisRequestError, match=r"'system\.vacuum', which is not a maintenance policy type"):
        dispatcher.run_namespace("sales", types=["system.vacuum"])
    with pytest.raises(PolarisRequestError, match="types is empty"):
        dispatcher.run_table("sales.events", types=[])
    with pytest.raises(PolarisRequestError, match="'events' is not a table name"):
        dispatcher.run_table("events")
    with pytest.raises(PolarisRequestError, match="not a namespace name"):
        dispatcher.run_namespace("sales..x")
    assert source.calls == []
    with pytest.raises(MaintenanceError, match="Namespace 'nowhere' does not exist"):
        dispatcher.run_namespace("nowhere")


def test_a_table_the_catalog_does_not_have_is_a_failed_table(catalog):
    catalog.create_namespace("sales")
    dispatcher = PolicyDispatcher(MemoryPolicySource(), catalog)

    outcome = dispatcher.run_table(("sales", "missing"), raise_on_failure=False)

    assert outcome.failed and outcome.error.startswith("NoSuchTableError") and outcome.policies == []
    assert outcome.to_json()["status"] == "failed"
    with pytest.raises(MaintenanceError, match=r"table sales\.missing failed: sales\.missing: NoSuchTableError"):
        outcome.raise_for_failures()


def test_only_the_selected_types_run(catalog, tmp_path: Path):
    table = small_files_table(catalog, "sales.events", appends=6, rows=10)
    orphan = old_orphan(table)
    source = MemoryPolicySource({"sales.events": every_policy()})

    outcome = PolicyDispatcher(source, catalog).run_table(
        "sales.events", types=["system.orphan-file-removal", PolicyType.DATA_COMPACTION]
    )

    assert isinstance(outcome, TablePolicyOutcome)
    assert [p.policy_type for p in outcome.policies] == [COMPACTION, ORPHANS]
    assert not orphan.exists() and len(catalog.load_table("sales.events").snapshots()) == 7  # compacted, not expired


def test_a_policy_with_unusable_content_fails_its_type_and_the_other_types_of_the_table_run(catalog):
    small_files_table(catalog, "sales.a", appends=3, rows=10)
    broken = ApplicablePolicy.from_json(
        {"policy-type": COMPACTION.value, "name": "broken", "content": "not-json", "inherited": False},
        where="http://polaris/applicable-policies",
        lenient=True,
    )
    expire = applicable(EXPIRY, {"min_snapshot_to_keep": "1", "max_snapshot_age_days": "0"})
    source = MemoryPolicySource({"sales.a": [broken, expire]})
    dispatcher = PolicyDispatcher(source, catalog, now=datetime.now(UTC) + timedelta(seconds=1))

    outcome = dispatcher.run_table("sales.a", raise_on_failure=False)

    by_type = {p.policy_type: p for p in outcome.policies}
    assert by_type[COMPACTION].action == FAILED and by_type[COMPACTION].transient is False
    assert "not JSON" in by_type[COMPACTION].error and "broken" in by_type[COMPACTION].error
    assert by_type[EXPIRY].action == RAN
    assert len(catalog.load_table("sales.a").snapshots()) == 1


@pytest.mark.parametrize(
    "error",
    [
        PolarisAuthError("Polaris refused the credentials (401).", status=401),
        PolarisServerError("Polaris did not answer within 30 s.", status=None),
        PolarisNotFoundError("Namespace does not exist: sales", status=404, error_type="NoSuchNamespaceException"),
    ],
    ids=["auth", "unreachable", "no-namespace"],
)
def test_a_failure_every_table_would_repeat_stops_the_namespace_after_the_first_table(catalog, error):
    for name in ("sales.a", "sales.b", "sales.c"):
        small_files_table(catalog, name, appends=2, rows=5)
    source = MemoryPolicySource(errors={f"sales.{t}": error for t in "abc"})

    outcome = PolicyDispatcher(source, catalog).run_namespace("sales", raise_on_failure=False)

    assert len(source.calls) == 1  # one token request, one timeout, not one per table
    assert outcome.failed_tables == ["sales.a", "sales.b", "sales.c"]
    assert [t.error.startswith("not attempted") for t in outcome.tables] == [False, True, True]
    assert type(error).__name__ in outcome.tables[2].error


def test_a_table_polaris_does_not_hold_says_polaris_needs_the_same_names(catalog):
    small_files_table(catalog, "sales.a", appends=2, rows=5)
    missing = PolarisNotFoundError("Table does not exist: sales.a", status=404, error_type="NoSuchTableException")
    source = MemoryPolicySource(errors={"sales.a": missing})

    outcome = PolicyDispatcher(source, catalog).run_namespace("sales", raise_on_failure=False)

    assert "Polaris must hold the table sales.a under the same namespace and name" in outcome.tables[0].error


def test_a_table_dropped_after_the_namespace_was_listed_is_skipped_not_failed(catalog, monkeypatch):
    for name in ("sales.a", "sales.b"):
        small_files_table(catalog, name, appends=2, rows=5)
    expire = applicable(EXPIRY, {"min_snapshot_to_keep": "1", "max_snapshot_age_days": "0"})
    source = MemoryPolicySource({"sales.a": [expire], "sales.b": [expire]})
    listed = catalog.list_tables

    def list_then_drop(namespace):
        tables = listed(namespace)
        catalog.drop_table("sales.b")  # dropped by someone else right after the listing
        return tables

    monkeypatch.setattr(catalog, "list_tables", list_then_drop)
    outcome = PolicyDispatcher(source, catalog, now=datetime.now(UTC) + timedelta(seconds=1)).run_namespace("sales")

    assert not outcome.failed and outcome.tables[1].skipped.startswith("the table was dropped")
    assert outcome.to_json()["tables"]["sales.b"]["skipped"]
    assert {p.policy_type: p.action for p in outcome.tables[0].policies}[EXPIRY] == RAN


def test_a_catalog_polaris_does_not_know_stops_the_namespace_after_the_first_table(catalog, polaris):
    for name in ("sales.a", "sales.b", "sales.c"):
        small_files_table(catalog, name, appends=2, rows=5)
        polaris.add_table("prod", name)
    client = PolarisPolicyClient(polaris.base_url, "prdo", credential=f"{CLIENT_ID}:{CLIENT_SECRET}", backoff=0)

    outcome = PolicyDispatcher(client, catalog).run_namespace("sales", raise_on_failure=False)

    assert outcome.tables[0].error.startswith("PolarisNotFoundError") and "prdo" in outcome.tables[0].error
    assert [t.error.startswith("not attempted") for t in outcome.tables] == [False, True, True]
    assert sum("applicable-policies" in seen.path for seen in polaris.requests) == 1
