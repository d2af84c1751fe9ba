"""A DAG for the migrate operator's commit modes: one step table by table, the rest all or nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag

from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator


@dag(
    params={"namespace": "sales", "migrations_dir": ""},
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    schedule=None,
    catchup=False,
)
def iceberg_ops_migrate_commit_modes():
    per_table = IcebergMigrateOperator(
        task_id="per_table",
        namespace="{{ params.namespace }}",
        migrations_dir="{{ params.migrations_dir }}",
        target="+1",
        atomic_commits=False,
    )
    atomic = IcebergMigrateOperator(
        task_id="atomic", namespace="{{ params.namespace }}", migrations_dir="{{ params.migrations_dir }}"
    )
    per_table >> atomic


iceberg_ops_migrate_commit_modes()
