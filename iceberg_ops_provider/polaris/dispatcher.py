"""Polaris maintenance policies enforced: for each table, the effective policy of each type runs its function.

:class:`PolicyDispatcher` asks a :class:`PolicySource` for a table's policies and runs each type's function
(:mod:`.mappings`) with the arguments :mod:`.parameters` resolves (see docs/polaris.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from iceberg_ops_provider.errors import (
    MaintenanceError,
    PolarisNotFoundError,
    PolarisRequestError,
    UnsafeLocationError,
)
from iceberg_ops_provider.maintenance.compaction import compact_small_files_streaming
from iceberg_ops_provider.maintenance.expire import expire_snapshots
from iceberg_ops_provider.maintenance.listing import contains
from iceberg_ops_provider.maintenance.manifests import rewrite_manifests
from iceberg_ops_provider.maintenance.orphans import remove_orphan_files
from iceberg_ops_provider.polaris.mappings import MAPPINGS
from iceberg_ops_provider.polaris.outcomes import (
    DRY_RUN,
    FAILED,
    RAN,
    SKIPPED_DISABLED,
    SKIPPED_NO_POLICY,
    NamespacePolicyOutcome,
    PolicyOutcome,
    TablePolicyOutcome,
    describe,
    stops_every_table,
    transient,
)
from iceberg_ops_provider.polaris.parameters import ResolvedParameters, check_overrides, resolve_parameters
from iceberg_ops_provider.polaris.policies import ApplicablePolicy, PolicyType

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = [
    "DRY_RUN",
    "FAILED",
    "RAN",
    "RUN_ORDER",
    "SKIPPED_DISABLED",
    "SKIPPED_NO_POLICY",
    "NamespacePolicyOutcome",
    "PolicyDispatcher",
    "PolicyOutcome",
    "PolicySource",
    "TablePolicyOutcome",
]

log = logging.getLogger(__name__)


# Rewrites first: compaction and the manifest rewrite replace files, whose old copies stay referenced by
# the snapshots before them; expiry then expires those snapshots and deletes the replaced files (once old
# enough). Orphan removal goes last, against the final metadata, for whatever earlier crashed writes or
# undeleted expiries left behind.
RUN_ORDER: tuple[PolicyType, ...] = (
    PolicyType.DATA_COMPACTION,
    PolicyType.METADATA_COMPACTION,
    PolicyType.SNAPSHOT_EXPIRY,
    PolicyType.ORPHAN_FILE_REMOVAL,
)
"""The order the policy types run in on one table."""

_OverridesArg = Mapping[PolicyType | str, Mapping[str, Any]] | None


class PolicySource(Protocol):
    """Where policies come from: the Polaris policy client, or an in-memory stand-in."""

    def applicable_policies(
        self, namespace: Sequence[str], table: str | None = None, policy_type: PolicyType | str | None = None
    ) -> list[ApplicablePolicy]:
        """The policies that apply to the table ``namespace.table`` (or to the namespace), as Polaris resolves them."""
        ...


def _levels(value: str | Sequence[str], what: str, minimum: int) -> tuple[str, ...]:
    levels = tuple(value.split(".")) if isinstance(value, str) else tuple(value)
    if len(levels) < minimum or not all(isinstance(level, str) and level for level in levels):
        shape = "'namespace.table' or a tuple of its parts" if minimum > 1 else "'sales' or ('lake', 'sales')"
        raise PolarisRequestError(f"{value!r} is not a {what} name; pass {shape}.")
    return levels


def _selected(types: Sequence[PolicyType | str] | None) -> tuple[PolicyType, ...]:
    if types is None:
        return RUN_ORDER
    if isinstance(types, str):
        types = [types]
    wanted = set()
    for item in types:
        try:
            wanted.add(PolicyType(item))
        except ValueError:
            raise PolarisRequestError(
                f"types names {item!r}, which is not a maintenance policy type; use some of "
                f"{', '.join(member.value for member in RUN_ORDER)}, or None for all."
            ) from None
    if not wanted:
        raise PolarisRequestError("types is empty, so nothing would run; pass None to run every policy type.")
    return tuple(policy_type for policy_type in RUN_ORDER if policy_type in wanted)


def _effective(
    policies: Sequence[ApplicablePolicy], table: str
) -> tuple[dict[PolicyType, ApplicablePolicy], dict[PolicyType, list[str]], list[ApplicablePolicy]]:
    by_type: dict[PolicyType, list[ApplicablePolicy]] = {}
    unknown: list[ApplicablePolicy] = []
    for policy in policies:
        if policy.policy_type in PolicyType._value2member_map_:
            by_type.setdefault(PolicyType(policy.policy_type), []).append(policy)
        else:
            unknown.append(policy)
            log.warning(
                "%s: policy %r has the type %r, which is not a maintenance policy type; it is reported, not run",
                table,
                policy.name,
                policy.policy_type,
            )
    chosen: dict[PolicyType, ApplicablePolicy] = {}
    notes: dict[PolicyType, list[str]] = {}
    for policy_type, candidates in by_type.items():
        attached = [policy for policy in candidates if not policy.inherited]
        chosen[policy_type] = pick = (attached or candidates)[0]
        if len(candidates) > 1:
            why = "it is attached to the table itself" if not pick.inherited else "it was returned first"
            note = (
                f"Polaris returned {len(candidates)} {policy_type.value} policies "
                f"({', '.join(repr(policy.name) for policy in candidates)}); {pick.name!r} applies because {why}"
            )
            notes[policy_type] = [note]
            log.warning("%s: %s", table, note)
    return chosen, notes, unknown


class PolicyDispatcher:
    """Runs the maintenance the Polaris policies of a table or namespace ask for.

    ``dry_run`` calls the functions with ``dry_run=True``; ``now`` is the time ages count back from (default:
    the clock when each run starts; naive is UTC).
    """

    def __init__(
        self, source: PolicySource, catalog: Catalog, *, dry_run: bool = False, now: datetime | None = None
    ) -> None:
        self.source = source
        self.catalog = catalog
        self.dry_run = dry_run
        self.now = now if now is None or now.tzinfo is not None else now.replace(tzinfo=UTC)

    def run_table(
        self,
        identifier: str | Sequence[str],
        overrides: _OverridesArg = None,
        types: Sequence[PolicyType | str] | None = None,
        *,
        raise_on_failure: bool = True,
    ) -> TablePolicyOutcome:
        """Run the policies of one table (``"namespace.table"`` or a tuple of its parts).

        ``overrides`` (``{policy type: {argument: value}}``) win over the policy; ``types`` limits the types
        run; ``raise_on_failure`` raises once everything ran.

        Raises:
            PolarisRequestError: A bad identifier, type or override (checked before anything runs).
            MaintenanceConflictError: Every failure may pass on a retry; ``result`` holds the outcome.
            MaintenanceError: Something failed that needs a change first; ``result`` holds the outcome.
        """
        levels = _levels(identifier, "table", 2)
        now = self.now or datetime.now(UTC)
        checked = check_overrides(overrides, now)
        outcome = self._run_table(levels, checked, _selected(types), now, listed=False)
        if raise_on_failure:
            outcome.raise_for_failures()
        return outcome

    def run_namespace(
        self,
        namespace: str | Sequence[str],
        overrides: _OverridesArg = None,
        types: Sequence[PolicyType | str] | None = None,
        *,
        raise_on_failure: bool = True,
    ) -> NamespacePolicyOutcome:
        """Run the policies of every table directly in ``namespace``, in name order, as :meth:`run_table` does.

        A failing table does not stop the others; every table's cut-offs count back from the same ``now``.

        Raises:
            PolarisRequestError: A bad namespace, type or override (checked before anything runs).
            MaintenanceError: The namespace does not exist, or (with ``raise_on_failure``) some table failed
                (:class:`~iceberg_ops_provider.errors.MaintenanceConflictError` when every failure may pass).
        """
        levels = _levels(namespace, "namespace", 1)
        now = self.now or datetime.now(UTC)
        checked = check_overrides(overrides, now)
        selected = _selected(types)
        name = ".".join(levels)
        try:
            identifiers = sorted(tuple(identifier) for identifier in self.catalog.list_tables(levels))
        except NoSuchNamespaceError as exc:
            raise MaintenanceError(
                f"Namespace {name!r} does not exist in the catalog ({exc}); check the namespace argument."
            ) from exc
        log.info("%s: running the policies of %d table(s)%s", name, len(identifiers), " (dry run)" * self.dry_run)
        outcome = NamespacePolicyOutcome(name, self.dry_run)
        stopped: BaseException | None = None
        for identifier in identifiers:
            if stopped is not None:
                error = f"not attempted: an earlier table failed with {describe(stopped)}"
                table_outcome = TablePolicyOutcome(
                    ".".join(identifier), self.dry_run, error=error, transient=transient(stopped)
                )
            else:
                table_outcome = self._run_table(identifier, checked, selected, now)
            outcome.tables.append(table_outcome)
            if stopped is None and table_outcome.cause is not None and stops_every_table(table_outcome.cause):
                stopped = table_outcome.cause
                log.error("%s: the remaining tables are not attempted: %s", name, describe(stopped))
        if outcome.failed_tables:
            log.warning(
                "%s: %d table(s) failed: %s", name, len(outcome.failed_tables), ", ".join(outcome.failed_tables)
            )
        if raise_on_failure:
            outcome.raise_for_failures()
        return outcome

    def _run_table(
        self,
        identifier: tuple[str, ...],
        overrides: Mapping[PolicyType, Mapping[str, tuple[Any, Any]]],
        selected: tuple[PolicyType, ...],
        now: datetime,
        *,
        listed: bool = True,
    ) -> TablePolicyOutcome:
        name = ".".join(identifier)
        started = time.monotonic()
        outcome = TablePolicyOutcome(name, self.dry_run)
        try:
            table = self.catalog.load_table(identifier)
            policies = self.source.applicable_policies(identifier[:-1], table=identifier[-1])
        except Exception as exc:
            if listed and isinstance(exc, NoSuchTableError):
                log.warning("%s: dropped since the namespace was listed; skipped", name)
                outcome.skipped = "the table was dropped after the namespace was listed"
                return outcome
            described = describe(exc)
            if isinstance(exc, PolarisNotFoundError) and exc.error_type == "NoSuchTableException":
                described += (
                    f" Polaris must hold the table {name} under the same namespace and name as the catalog the "
                    "tables are read from (with a separate policy connection, register the table there too)."
                )
            log.error("%s: nothing ran: %s", name, described)
            outcome.error, outcome.transient, outcome.cause = described, transient(exc), exc
            outcome.seconds = time.monotonic() - started
            return outcome
        effective, notes, unknown = _effective(policies, name)
        outcome.unknown_policies = [{"name": policy.name, "policy_type": policy.policy_type} for policy in unknown]
        outcome.policies = [
            self._run_policy(table, name, kind, effective.get(kind), notes.get(kind, []), overrides.get(kind, {}), now)
            for kind in selected
        ]
        outcome.seconds = time.monotonic() - started
        return outcome

    def _run_policy(
        self,
        table: Table,
        name: str,
        policy_type: PolicyType,
        policy: ApplicablePolicy | None,
        notes: list[str],
        overrides: Mapping[str, tuple[Any, Any]],
        now: datetime,
    ) -> PolicyOutcome:
        if policy is None:
            log.info("%s: no %s policy applies; skipped", name, policy_type.value)
            return PolicyOutcome(policy_type, SKIPPED_NO_POLICY, notes=notes)
        outcome = PolicyOutcome(
            policy_type,
            FAILED,
            policy=policy.name,
            defined_in=policy.namespace,
            inherited=policy.inherited,
            enabled=policy.content.enable if policy.content is not None else None,
            policy_version=policy.version,
            function=MAPPINGS[policy_type].function,
            notes=notes,
        )
        what = f"{name}: {policy_type.value} policy {policy.name!r}"
        where = f"{'inherited' if policy.inherited else 'attached'}, defined in {'.'.join(policy.namespace) or '?'}"
        if policy.content_error is not None:
            log.error("%s (%s) cannot be used: %s", what, where, policy.content_error)
            outcome.error, outcome.transient = f"PolicyContentError: {policy.content_error}", False
            return outcome
        if outcome.enabled is False:
            log.info("%s (%s) is disabled; skipped", what, where)
            outcome.action = SKIPPED_DISABLED
            return outcome
        started = time.monotonic()
        try:
            outcome.parameters = resolve_parameters(
                policy_type,
                policy,
                table=name,
                properties=table.metadata.properties,
                table_location=table.location(),
                now=now,
                overrides=overrides,
            )
            log.info("%s (%s): %s%s", what, where, outcome.function, " (dry run)" * self.dry_run)
            self._call(policy_type, table, outcome.parameters, outcome.results)
        except Exception as exc:
            partial = getattr(exc, "result", None)  # a compaction that committed some groups says which
            if partial is not None and hasattr(partial, "to_json"):
                outcome.results.append(partial.to_json())
            log.error("%s failed: %s", what, describe(exc))
            outcome.error, outcome.transient = describe(exc), transient(exc)
        else:
            outcome.action = DRY_RUN if self.dry_run else RAN
        outcome.seconds = time.monotonic() - started
        return outcome

    def _call(
        self, policy_type: PolicyType, table: Table, parameters: ResolvedParameters, results: list[dict[str, Any]]
    ) -> None:
        """Call the type's function (once per location for orphan removal), appending each result to ``results``."""
        arguments = {name: parameter.value for name, parameter in parameters.parameters.items()}
        function = {
            PolicyType.DATA_COMPACTION: compact_small_files_streaming,
            PolicyType.METADATA_COMPACTION: rewrite_manifests,
            PolicyType.SNAPSHOT_EXPIRY: expire_snapshots,
        }.get(policy_type)
        if function is not None:
            results.append(function(table, **arguments, dry_run=self.dry_run).to_json())
        else:
            locations: tuple[str, ...] = arguments["locations"]
            root = table.location()
            outside = [location for location in locations if not contains(root, location)]
            if outside:
                # Checked for all before any runs: a policy naming a broad location must not clean even part of it.
                raise UnsafeLocationError(
                    f"The orphan-file-removal policy names location(s) {', '.join(map(repr, outside))} outside the "
                    f"location of table {'.'.join(table.name())} ({root!r}); nothing was listed or deleted. Limit "
                    "the policy's locations to folders under the table's location, or drop them to clean the whole "
                    "table."
                )
            for location in locations:
                result = remove_orphan_files(
                    table, older_than=arguments["older_than"], dry_run=self.dry_run, location=location
                )
                results.append(result.to_json())
