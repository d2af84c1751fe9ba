"""Provider metadata Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from iceberg_ops_provider import __version__

__all__ = ["get_provider_info"]


def get_provider_info() -> dict[str, Any]:
    """Describe the provider to Airflow's ProvidersManager.

    ``package-name`` must equal the distribution name, or Airflow refuses the provider.
    """
    return {
        "package-name": "iceberg-ops",
        "name": "iceberg-ops",
        "description": "Versioned migrations, maintenance and a resumable data mover for Apache Iceberg tables.",
        "versions": [__version__],
    }
