"""Scheduled maintenance of every table of a namespace, doing only what each table's health needs.

For each table (dynamic task mapping): a health report, then compaction, manifest rewrite and
snapshot expiry, each mapped over just the tables whose report asks for it, with the parameters the
report recommends (a table with a sort order is compacted with ``strategy="sort"``, expiry keeps what
the table's ``history.expire.*`` properties say); a step no table needs is skipped. Compaction fans
out: each table needing it is planned as units (a partition's small files each), and one compact
task is mapped per unit of every table, so the workers share even one large table's groups; each
unit commits on its own, exactly once across retries. Orphan removal
cannot be judged from metadata, so it runs on every table, last, with its three-day guard. Every
task is retry-safe (compaction commits group by group, so a retry only does what is left). Runs
against whatever catalog the ``iceberg_ops_default`` connection points at.

Trigger with ``{"namespace": "sales"}`` as run config (``"dry_run": true`` to see what it would do: the
plan task's XCom lists the compaction units; no unit runs), and ``"tables": ["sales.orders"]`` to maintain
only those tables of the namespace (a table's page in the Iceberg pages gives that run config).
It starts paused: set the ``namespace`` param's default to yours, then unpause it (a scheduled run uses
the default; no run, scheduled or triggered by hand, starts while it is paused).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import dag, task

from iceberg_ops_provider.operators.maintenance import (
    IcebergCompactOperator,
    IcebergExpireSnapshotsOperator,
    IcebergPlanCompactionOperator,
    IcebergRemoveOrphanFilesOperator,
    IcebergRewriteManifestsOperator,
    IcebergTableHealthOperator,
)

RETRIES = {"retries": 2, "retry_delay": timedelta(seconds=30)}
# A step runs when the steps before it did not fail; a step that no table needed counts as done.
AFTER_EARLIER_STEPS = {"trigger_rule": "none_failed", **RETRIES}


@dag(
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # Paused when first seen: its scheduled runs maintain the `namespace` param's default, set it first.
    is_paused_upon_creation=True,
    render_template_as_native_obj=True,  # "{{ params.dry_run }}" renders as a bool
    # `tables`: names (namespace.table) of tables of `namespace` to maintain; empty: every table of it.
    params={"namespace": "demo", "tables": [], "dry_run": False},
    tags=["iceberg-ops", "example", "maintenance"],
)
def table_maintenance():
    @task
    def list_tables(namespace: str, only: list[str] | None) -> list[str]:
        """The tables of ``namespace`` to maintain: those named in ``only``, or every one when it is empty."""
        from pyiceberg.exceptions import NoSuchNamespaceError

        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        try:
            tables = IcebergCatalogHook().get_conn().list_tables(namespace)
        except NoSuchNamespaceError as exc:
            raise ValueError(
                f"Namespace {namespace!r} does not exist in the catalog of connection iceberg_ops_default: set the "
                "DAG's `namespace` param (run config, or its default for scheduled runs)."
            ) from exc
        names = sorted(".".join(identifier) for identifier in tables)
        only = [only] if isinstance(only, str) else list(only or ())  # one name typed without brackets
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise ValueError(
                f"The `tables` param names {', '.join(map(repr, unknown))}, not tables of namespace {namespace!r} "
                f"(name them as {namespace}.TABLE; its tables: {', '.join(names) or 'none'})."
            )
        return [name for name in names if name in only] if only else names

    @task
    def recommended(action: str, tables: list[str], reports: list[dict], dry_run: bool | None) -> list[dict]:
        """The keyword arguments of each table whose report needs ``action``: the table and the report's parameters
        (and ``dry_run``, unless it is ``None``)."""
        calls = []
        for table, report in zip(tables, reports, strict=True):
            if action not in report["needs"]:
                continue
            advice = next(r for r in report["recommendations"] if r["action"] == action)
            call = {"table": table, **advice["params"]}
            calls.append(call if dry_run is None else {**call, "dry_run": dry_run})
        print(f"{action}: {', '.join(call['table'] for call in calls) or 'no table needs it'}")
        return calls

    namespace = "{{ params.namespace }}"
    dry_run = "{{ params.dry_run }}"
    tables = list_tables(namespace, "{{ params.tables }}")
    health = IcebergTableHealthOperator.partial(task_id="health", **RETRIES).expand(table=tables)

    def needing(action: str, task_id: str, dry_run=dry_run):
        return recommended.override(task_id=task_id)(action, tables, health.output, dry_run)

    @task
    def compaction_units(plans: list[list[dict]], dry_run: bool) -> list[dict]:
        """One compact task's arguments per unit of every table planned; none in a dry run (the plan says it)."""
        tasks = [task for plan in plans for task in plan]
        print(f"{len(tasks)} compaction unit(s){' (dry run: none runs)' if dry_run else ''}")
        return [] if dry_run else tasks

    # The report's compaction parameters plan the units (planning writes nothing: no dry_run for it).
    plans = IcebergPlanCompactionOperator.partial(task_id="plan_compaction", **AFTER_EARLIER_STEPS).expand_kwargs(
        needing("compact", "needs_compaction", dry_run=None)
    )
    compact = IcebergCompactOperator.partial(task_id="compact", **AFTER_EARLIER_STEPS).expand_kwargs(
        compaction_units(plans.output, dry_run)
    )
    rewrite = IcebergRewriteManifestsOperator.partial(task_id="rewrite_manifests", **AFTER_EARLIER_STEPS).expand_kwargs(
        needing("rewrite_manifests", "needs_manifest_rewrite")
    )
    expire = IcebergExpireSnapshotsOperator.partial(task_id="expire_snapshots", **AFTER_EARLIER_STEPS).expand_kwargs(
        needing("expire_snapshots", "needs_expiry")
    )
    orphans = IcebergRemoveOrphanFilesOperator.partial(
        task_id="remove_orphan_files", dry_run=dry_run, **AFTER_EARLIER_STEPS
    ).expand(table=tables)
    compact >> rewrite >> expire >> orphans


table_maintenance()
