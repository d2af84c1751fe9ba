"""Scheduled maintenance of a namespace, driven by the Apache Polaris policies that apply to each table.

Policies attached in Polaris to the catalog, the namespace or a table (``system.data-compaction``,
``system.metadata-compaction``, ``system.snapshot-expiry``, ``system.orphan-file-removal``) decide
what runs on each table and with which settings; the nearest attachment wins, a disabled policy
skips its step, and a table without policies is left alone. A first task shows what would run (a
dry run, in its log and XCom); the second runs it, even when the plan found a broken policy (the
other tables still get their maintenance). Both are retry-safe.

The catalog is the ``iceberg_ops_default`` connection. When it points at Polaris's REST catalog, the
policy API is reached with the same credentials; set the DAG's ``polaris_conn_id`` param to a
separate connection otherwise (see docs/polaris.md).

Trigger with ``{"namespace": "sales"}`` as run config. It starts paused: set the params' defaults
before unpausing (a scheduled run uses them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import dag

from iceberg_ops_provider.operators.policy_maintenance import IcebergPolicyMaintenanceOperator

RETRIES = {"retries": 2, "retry_delay": timedelta(minutes=5)}


@dag(
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    # Paused when first seen: its scheduled runs need the params set first (and Polaris policies to follow).
    is_paused_upon_creation=True,
    render_template_as_native_obj=True,
    params={"namespace": "demo", "polaris_conn_id": None},
    tags=["iceberg-ops", "example", "maintenance", "polaris"],
)
def policy_maintenance():
    plan = IcebergPolicyMaintenanceOperator(
        task_id="plan",
        namespace="{{ params.namespace }}",
        polaris_conn_id="{{ params.polaris_conn_id }}",
        dry_run=True,
        **RETRIES,
    )
    run = IcebergPolicyMaintenanceOperator(
        task_id="run",
        namespace="{{ params.namespace }}",
        polaris_conn_id="{{ params.polaris_conn_id }}",
        # A table whose policy the plan found broken must not hold back the maintenance of the others:
        # the run does what it can and fails on that table again.
        trigger_rule="all_done",
        **RETRIES,
    )
    plan >> run


policy_maintenance()
