"""Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from iceberg_ops_provider import __version__
from iceberg_ops_provider.hooks.connection_form import CONNECTION_TYPE

__all__ = ["get_provider_info"]

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
        "operators": _modules("operators", "migrate", "maintenance", "data_move", "policy_maintenance", "tags", "wap"),
        "sensors": _modules("sensors", "migration", "partition"),
        "triggers": _modules("triggers", "health", "migration", "partition"),
        # The Iceberg pages of Airflow's UI (docs/ui.md); the `airflow.plugins` entry point registers the same class.
        "plugins": [{"name": "iceberg_ops", "plugin-class": "iceberg_ops_provider.ui.plugin.IcebergOpsPlugin"}],
        "config": _ui_config(),
        "connection-types": [CONNECTION_TYPE],
    }


def _ui_config() -> dict[str, Any]:
    """The ``[iceberg_ops]`` options of the Iceberg pages (``airflow config list`` shows them)."""
    from iceberg_ops_provider.ui.settings import OPTIONS, SECTION

    return {
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
    }
