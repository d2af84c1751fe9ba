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
