"""DAGs the Airflow tests run with dag.test(); their inputs arrive as run config (params)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import dag, task

from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

DEFAULTS = {"start_date": datetime(2026, 1, 1, tzinfo=UTC), "schedule": None, "catchup": False}


@dag(params={"namespace": "sales", "migrations_dir": "", "target": "head"}, **DEFAULTS)
def iceberg_ops_migrate():
    IcebergMigrateOperator(
        task_id="migrate",
        namespace="{{ params.namespace }}",
        migrations_dir="{{ params.migrations_dir }}",
        target="{{ params.target }}",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


@dag(params={"namespace": "sales", "migrations_dir": "", "models_dir": ""}, **DEFAULTS)
def iceberg_ops_gate():
    check = IcebergMigrateOperator(
        task_id="check",
        action="check",
        namespace="{{ params.namespace }}",
        migrations_dir="{{ params.migrations_dir }}",
        models_dir="{{ params.models_dir }}",
    )

    @task
    def load() -> str:
        return "loaded"

    check >> load()


@dag(params={"namespace": "sales", "migrations_dir": ""}, **DEFAULTS)
def iceberg_ops_plan():
    IcebergMigrateOperator(
        task_id="plan",
        action="plan",
        namespace="{{ params.namespace }}",
        migrations_dir="{{ params.migrations_dir }}",
    )


@dag(params={"namespace": "sales", "migrations_dir": ""}, **DEFAULTS)
def iceberg_ops_unlock():
    IcebergMigrateOperator(
        task_id="unlock",
        action="unlock",
        namespace="{{ params.namespace }}",
        migrations_dir="{{ params.migrations_dir }}",
    )


iceberg_ops_migrate()
iceberg_ops_unlock()
iceberg_ops_gate()
iceberg_ops_plan()


@dag(
    params={"table": "sales.events", "older_than": "0s", "dry_run": False},
    render_template_as_native_obj=True,
    **DEFAULTS,
)
def iceberg_ops_expire():
    from iceberg_ops_provider.operators.maintenance import IcebergExpireSnapshotsOperator

    IcebergExpireSnapshotsOperator(
        task_id="expire",
        table="{{ params.table }}",
        older_than="{{ params.older_than }}",
        dry_run="{{ params.dry_run }}",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )


iceberg_ops_expire()


@dag(params={"table": "sales.events", "replace": False}, **DEFAULTS)
def iceberg_ops_tag():
    from iceberg_ops_provider.operators.tags import IcebergTagOperator

    tagged = IcebergTagOperator(
        task_id="tag",
        table="{{ params.table }}",
        tag="before-load-{{ ds }}",
        max_age="7d",
        replace="{{ params.replace }}",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

    @task
    def load(tag: dict) -> int:
        return tag["snapshot_id"]

    load(tagged.output)


iceberg_ops_tag()


@dag(params={"move_id": "orders-backfill", "branch": "backfill", "no_rows_where": "amount < 0"}, **DEFAULTS)
def iceberg_ops_wap():
    from iceberg_ops_provider.operators.data_move import IcebergDataMoveOperator
    from iceberg_ops_provider.operators.wap import IcebergAuditOperator, IcebergPublishOperator

    move = IcebergDataMoveOperator(
        task_id="move",
        source="staging.orders",
        target="sales.orders",
        move_id="{{ params.move_id }}",
        branch="{{ params.branch }}",
    )
    audit = IcebergAuditOperator(
        task_id="audit",
        source="staging.orders",
        target="sales.orders",
        move_id=move.output["move_id"],
        branch="{{ params.branch }}",
        not_null=["id"],
        unique=["id"],
        no_rows_where="{{ params.no_rows_where }}",
        min_rows=1,
        checks={"customer set": lambda batch: batch.column("customer").null_count},
    )
    publish = IcebergPublishOperator(
        task_id="publish",
        source="staging.orders",
        target="sales.orders",
        move_id=move.output["move_id"],
        branch="{{ params.branch }}",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )
    publish_again = IcebergPublishOperator(
        task_id="publish_again",
        source="staging.orders",
        target="sales.orders",
        move_id=move.output["move_id"],
        branch="{{ params.branch }}",
    )
    audit >> publish >> publish_again


iceberg_ops_wap()
