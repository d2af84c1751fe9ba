"""The ``iceberg_ops`` connection form: the provider info declares it (Airflow 3.2+), the hook hands it to 3.1."""

from __future__ import annotations

from typing import Any

__all__ = ["CONNECTION_TYPE"]

_TEXT = {"type": ["string", "null"]}
CONNECTION_TYPE: dict[str, Any] = {
    "hook-class-name": "iceberg_ops_provider.hooks.catalog.IcebergCatalogHook",
    "hook-name": "Apache Iceberg (iceberg-ops)",
    "connection-type": "iceberg_ops",
    "conn-fields": {
        "kind": {
            "label": "Catalog kind",
            "description": "sqlite, sql, rest, glue, hive, s3tables; or a PyIceberg type",
            "schema": {
                "type": ["string", "null"],
                "default": "rest",
                "enum": ["sqlite", "sql", "rest", "glue", "hive", "s3tables", "dynamodb", "bigquery"],
            },
        },
        "warehouse": {
            "label": "Warehouse",
            "schema": _TEXT,
            "description": "Warehouse location, or the table bucket ARN for s3tables",
        },
        "region": {"label": "Region", "schema": _TEXT, "description": "For glue and s3tables"},
        "db_path": {"label": "SQLite database path", "schema": _TEXT},
        "warehouse_dir": {"label": "SQLite warehouse folder", "schema": _TEXT},
        "timeout": {
            "label": "Timeout (seconds)",
            "schema": _TEXT,
            "description": "Seconds the catalog may take to answer (default 60)",
        },
    },
    "ui-field-behaviour": {
        "hidden-fields": ["schema", "port"],
        "relabeling": {"host": "Catalog URI", "login": "Client ID", "password": "Client secret"},
        "placeholders": {
            "host": "https://polaris.example.com/api/catalog (empty for sqlite and glue)",
            "extra": '{"kind": "rest", "warehouse": "analytics"}',
        },
    },
}
