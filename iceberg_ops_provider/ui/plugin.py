"""The Airflow plugin: the pages' application, the "Iceberg" navigation entry and the tasks' "Iceberg" link.

Found through the ``airflow.plugins`` entry point and the provider info's ``plugins``. Every process
that loads plugins imports this module (task processes too), so the application is built the first
time ``fastapi_apps`` is read, not at import. ``[iceberg_ops] ui_enabled = False`` turns all three off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from airflow.plugins_manager import AirflowPlugin

__all__ = ["IcebergOpsPlugin"]


class _Built:
    """A class attribute computed on first read (by the class or an instance), then kept; ``[]`` with the UI off."""

    def __init__(self, build: Callable[[], list[Any]]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: list[Any] | None = None

    def __get__(self, instance: object, owner: type | None = None) -> list[Any]:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    from iceberg_ops_provider.ui.settings import ui_settings

                    self._value = self._build() if ui_settings().enabled else []
        return self._value


def _apps() -> list[Any]:
    from iceberg_ops_provider.ui.app import create_app
    from iceberg_ops_provider.ui.task_links import MOUNT

    return [{"app": create_app(), "url_prefix": MOUNT, "name": "iceberg-ops"}]


def _views() -> list[Any]:
    from iceberg_ops_provider.ui.task_links import MOUNT, URL_ROUTE

    prefix = MOUNT.lstrip("/")
    return [
        {
            "name": "Iceberg",
            "href": f"{prefix}/",  # relative: the UI resolves it against its base URL
            "icon": f"{prefix}/icon.svg",
            "url_route": URL_ROUTE,
            "destination": "nav",
            "nav_top_level": True,
        }
    ]


def _links() -> list[Any]:
    from iceberg_ops_provider.ui.task_links import IcebergPageLink

    return [IcebergPageLink()]


class IcebergOpsPlugin(AirflowPlugin):
    """Iceberg pages in Airflow's UI: catalogs, namespaces (migrations, lock, audit trail) and tables (health)."""

    name = "iceberg_ops"
    fastapi_apps = _Built(_apps)  # type: ignore[assignment]
    external_views = _Built(_views)  # type: ignore[assignment]
    global_operator_extra_links = _Built(_links)  # type: ignore[assignment]
