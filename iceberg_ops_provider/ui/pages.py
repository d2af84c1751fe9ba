"""The pages, rendered from the views (:mod:`.views`) through the templates of ``ui/templates``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from iceberg_ops_provider.ui.html import errors_once, path, render

__all__ = [
    "Urls",
    "api_page",
    "catalog_page",
    "catalogs_page",
    "crumbs",
    "message_page",
    "namespace_page",
    "table_page",
]

_TABLE_DEFAULTS: dict[str, Any] = {"sort": "table", "order": "asc", "filter": "", "tpage": 1}


@dataclass(frozen=True)
class Urls:
    """Where things are: ``root`` is this application's path (``/iceberg-ops``), ``airflow`` the UI's (``""``)."""

    root: str
    airflow: str

    def catalogs(self) -> str:
        """The catalogs page."""
        return f"{self.root}/"

    def catalog(self, conn_id: str) -> str:
        """A catalog's page."""
        return f"{self.root}/c/{path(conn_id)}/"

    def namespace(
        self, conn_id: str, namespace: str, page: int | None = None, tables: Mapping[str, Any] | None = None
    ) -> str:
        """A namespace's page (``page``: of its audit trail; ``tables``: ``sort``, ``order``, ``filter``, ``tpage``).

        Values at their defaults are left out of the query; a list of tables asked for is shown at its panel.
        """
        query = {"page": page} if page and page > 1 else {}
        listed = {key: value for key, value in (tables or {}).items() if value != _TABLE_DEFAULTS.get(key)}
        suffix = f"?{urlencode({**query, **listed})}" if query or listed else ""
        return f"{self.root}/c/{path(conn_id)}/ns/{path(namespace)}{suffix}{'#tables' if listed else ''}"

    def table(self, conn_id: str, namespace: str, name: str) -> str:
        """A table's page."""
        return f"{self.root}/c/{path(conn_id)}/ns/{path(namespace)}/t/{path(name)}"

    def api(self, suffix: str) -> str:
        """A JSON endpoint."""
        return f"{self.root}/api/{suffix}"

    def dag(self, dag_id: str) -> str:
        """A DAG's page in Airflow."""
        return f"{self.airflow}/dags/{path(dag_id)}"

    def task(self, context: dict[str, str]) -> str | None:
        """A task instance's page in Airflow, when the context names one."""
        if not all(context.get(key) for key in ("dag_id", "run_id", "task_id")):
            return None
        dag, run, task = (path(context[key]) for key in ("dag_id", "run_id", "task_id"))
        return f"{self.airflow}/dags/{dag}/runs/{run}/tasks/{task}"


def crumbs(urls: Urls, conn_id: str | None = None, namespace: str | None = None) -> list[tuple[str, str | None]]:
    """The breadcrumbs of a page: Iceberg, then the catalog and the namespace it is in."""
    trail: list[tuple[str, str | None]] = [("Iceberg", urls.catalogs())]
    if conn_id is not None:
        trail.append((conn_id, urls.catalog(conn_id)))
    if namespace is not None and conn_id is not None:
        trail.append((namespace, urls.namespace(conn_id, namespace)))
    return trail


def message_page(
    title: str, message: str, urls: Urls, *, action: tuple[str, str] | None = None, login: str | None = None
) -> str:
    """A page that only says something (an error, a refusal), with an ``action`` link ``(text, href)`` under it.

    ``login``: Airflow's login returning to the page as Airflow shows it, which the page's script follows at once.
    """
    return render(
        "message.html", title=title, message=message, action=action, login=login, urls=urls, crumbs=crumbs(urls)
    )


def api_page(openapi: dict[str, Any], urls: Urls) -> str:
    """The JSON endpoints from the OpenAPI document, rendered here (a documentation tool loads remote scripts)."""
    rows = [
        {"method": method, "route": route, "operation": operation}
        for route, operations in sorted(openapi.get("paths", {}).items())
        for method, operation in operations.items()
    ]
    return render("api.html", title="iceberg-ops API", openapi=openapi, rows=rows, urls=urls, crumbs=crumbs(urls))


def _view_page(template: str, title: str, view: dict[str, Any], urls: Urls, *where: str) -> str:
    return render(template, title=title, view=view, urls=urls, crumbs=crumbs(urls, *where), read_at=view["read_at"])


def catalogs_page(view: dict[str, Any], urls: Urls) -> str:
    """The catalogs: each connection's kind, endpoint and whether it answers."""
    return _view_page("catalogs.html", "Iceberg catalogs", view, urls)


def catalog_page(view: dict[str, Any], urls: Urls) -> str:
    """A catalog's namespaces."""
    conn_id = view["catalog"]["conn_id"]
    return _view_page("catalog.html", f"Catalog {conn_id}", view, urls, conn_id)


def namespace_page(view: dict[str, Any], urls: Urls) -> str:
    """A namespace: migrations, lock, unsettled run, the DAGs that migrate it, the audit trail, the tables."""
    view = errors_once(view)
    return _view_page("namespace.html", f"Namespace {view['namespace']}", view, urls, view["catalog"]["conn_id"])


def table_page(view: dict[str, Any], urls: Urls) -> str:
    """A table: facts, health and recommendations, maintenance history, data moves."""
    view = errors_once(view)
    conn_id, namespace, name = view["catalog"]["conn_id"], view["namespace"], view["table"]
    return _view_page("table.html", f"Table {namespace}.{name}", view, urls, conn_id, namespace)
