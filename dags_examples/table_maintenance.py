"""Scheduled maintenance of every table of a namespace, doing only what each table's health needs.

For each table (dynamic task mapping): a health report, then compaction, manifest rewrite and
snapshot expiry, each mapped over just the tables whose report asks for it, with the parameters the
report recommends (a table with a sort order is compacted with ``strategy="sort"``, expiry keeps what
the table's ``history.expire.*`` properties say); a step no table needs is skipped. Orphan removal
cannot be judged from metadata, so it runs on every table, last, with its three-day guard. Every
task is retry-safe (compaction commits group by group, so a retry only does what is left). Runs
against whatever catalog the ``iceberg_ops_default`` connection points at.

Trigger with ``{"namespace": "sales"}`` as run config (``"dry_run": true`` to see what it would do).
Set the ``namespace`` param's default to yours before unpausing: a scheduled run uses the default.
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
        from pyiceberg.exceptions import NoSuchNamespaceError

        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

        try:
            tables = IcebergCatalogHook().get_conn().list_tables(namespace)
        except NoSuchNamespaceError as exc:
            raise ValueError(
                f"Namespace {namespace!r} does not exist in the catalog of connection iceberg_ops_default: set the "
                "DAG's `namespace` param (run config, or its default for scheduled runs)."
            ) from exc
        return sorted(".".join(identifier) for identifier in tables)

    @task
    def recommended(action: str, tables: list[str], reports: list[dict], dry_run: bool) -> list[dict]:
        """The keyword arguments of each table whose report needs ``action``: the table and the report's parameters."""
        calls = []
        for table, report in zip(tables, reports, strict=True):
            if action not in report["needs"]:
                continue
            advice = next(r for r in report["recommendations"] if r["action"] == action)
            calls.append({"table": table, **advice["params"], "dry_run": dry_run})
        print(f"{action}: {', '.join(call['table'] for call in calls) or 'no table needs it'}")
        return calls

    namespace = "{{ params.namespace }}"
    dry_run = "{{ params.dry_run }}"
    tables = list_tables(namespace)
    health = IcebergTableHealthOperator.partial(task_id="health", **RETRIES).expand(table=tables)

    def needing(action: str, task_id: str):
        return recommended.override(task_id=task_id)(action, tables, health.output, dry_run)

    compact = IcebergCompactOperator.partial(task_id="compact", **AFTER_EARLIER_STEPS).expand_kwargs(
        needing("compact", "needs_compaction")
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
