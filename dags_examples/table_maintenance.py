"""Scheduled maintenance of every table of a namespace, doing only what each table's health needs.

For each table (dynamic task mapping): a health report, then compaction, manifest rewrite, snapshot
expiry and orphan-file removal, each mapped over just the tables whose report asks for it; a step no
table needs is skipped. Every task is retry-safe (compaction commits group by group, so a retry only
does what is left). Runs against whatever catalog the ``iceberg_ops_default`` connection points at.

Trigger with ``{"namespace": "sales", "dry_run": true}`` as run config to see what it would do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import dag, task

from iceberg_ops_provider.operators.maintenance import (
    IcebergCompactOperator,
    IcebergExpireSnapshotsOperator,
    IcebergRemoveOrphanFilesOperator,
    IcebergRewriteManifestsOperator,
    IcebergTableHealthOperator,
)

RETRIES = {"retries": 2, "retry_delay": timedelta(minutes=5)}
# A step runs when the steps before it did not fail; a step that no table needed counts as done.
AFTER_EARLIER_STEPS = {"trigger_rule": "none_failed", **RETRIES}


@dag(
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,  # "{{ params.dry_run }}" renders as a bool
    params={"namespace": "demo", "dry_run": False},
    tags=["iceberg-ops", "example", "maintenance"],
)
def table_maintenance():
    @task
    def list_tables(namespace: str) -> list[str]:
        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        tables = IcebergCatalogHook().get_conn().list_tables(namespace)
        return sorted(".".join(identifier) for identifier in tables)

    @task
    def tables_needing(need: str, tables: list[str], reports: list[dict]) -> list[str]:
        chosen = [table for table, report in zip(tables, reports, strict=True) if need in report["needs"]]
        print(f"{need}: {', '.join(chosen) or 'no table needs it'}")
        return chosen

    tables = list_tables("{{ params.namespace }}")
    health = IcebergTableHealthOperator.partial(task_id="health", **RETRIES).expand(table=tables)
    compact = IcebergCompactOperator.partial(
        task_id="compact", dry_run="{{ params.dry_run }}", **AFTER_EARLIER_STEPS
    ).expand(table=tables_needing.override(task_id="needs_compaction")("compact", tables, health.output))
    rewrite = IcebergRewriteManifestsOperator.partial(
        task_id="rewrite_manifests", dry_run="{{ params.dry_run }}", **AFTER_EARLIER_STEPS
    ).expand(
        table=tables_needing.override(task_id="needs_manifest_rewrite")("rewrite_manifests", tables, health.output)
    )
    expire = IcebergExpireSnapshotsOperator.partial(
        task_id="expire_snapshots", dry_run="{{ params.dry_run }}", **AFTER_EARLIER_STEPS
    ).expand(table=tables_needing.override(task_id="needs_expiry")("expire_snapshots", tables, health.output))
    orphans = IcebergRemoveOrphanFilesOperator.partial(
        task_id="remove_orphan_files", dry_run="{{ params.dry_run }}", **AFTER_EARLIER_STEPS
    ).expand(
        table=tables_needing.override(task_id="needs_orphan_removal")("remove_orphan_files", tables, health.output)
    )
    compact >> rewrite >> expire >> orphans


table_maintenance()
