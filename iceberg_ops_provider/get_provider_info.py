"""Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from iceberg_ops_provider import __version__
from iceberg_ops_provider.ui.settings import OPTIONS, SECTION

__all__ = ["get_provider_info"]

_TEXT = {"type": ["string", "null"]}
_INTEGRATION = "Apache Iceberg (iceberg-ops)"


def _modules(package: str, *modules: str) -> list[dict[str, Any]]:
    return [
        {"integration-name": _INTEGRATION, "python-modules": [f"iceberg_ops_provider.{package}.{m}" for m in modules]}
    ]


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's ProvidersManager.

    ``package-name`` must equal the distribution name, or Airflow refuses the provider. The
    declarative ``conn-fields``/``ui-field-behaviour`` serve Airflow 3.2+; the hook's legacy methods
    serve 3.1.
    """
    return {
        "package-name": "iceberg-ops",
        "name": "iceberg-ops",
        "description": "Alembic-style versioned migrations for Apache Iceberg tables, with history in your catalog.",
        "versions": [__version__],
        "integrations": [
            {"integration-name": _INTEGRATION, "external-doc-url": "https://iceberg.apache.org/", "tags": ["software"]}
        ],
        "hooks": _modules("hooks", "catalog"),
        "operators": _modules("operators", "migrate", "maintenance", "data_move", "policy_maintenance"),
        "sensors": _modules("sensors", "migration", "partition"),
        "triggers": _modules("triggers", "migration", "partition"),
        # The Iceberg pages of Airflow's UI (docs/ui.md); the `airflow.plugins` entry point registers the same class.
        "plugins": [{"name": "iceberg_ops", "plugin-class": "iceberg_ops_provider.ui.plugin.IcebergOpsPlugin"}],
        "config": {
            SECTION: {
                "description": "The Iceberg pages of Airflow's UI, served by the iceberg-ops plugin (docs/ui.md).",
                "options": {
                    name: {
                        "description": description,
                        "version_added": None,
                        "type": "boolean" if name == "ui_enabled" else "string",
                        "example": None,
                        "default": default,
                    }
                    for name, (default, description) in OPTIONS.items()
                },
            }
        },
        "connection-types": [
            {
                "hook-class-name": "iceberg_ops_provider.hooks.catalog.IcebergCatalogHook",
                "hook-name": _INTEGRATION,
                "connection-type": "iceberg_ops",
                "conn-fields": {
                    "kind": {
                        "label": "Catalog kind",
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
                    "placeholders": {"host": "https://polaris.example.com/api/catalog (empty for sqlite and glue)"},
                },
            }
        ],
    }
