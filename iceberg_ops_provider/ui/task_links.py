"""From a task of this provider to its page: the "Iceberg" extra link and what it resolves to.

The link answers only for tasks of this provider; its ``/tasks/...`` route reads the task instance's
rendered fields (namespace or table, and connection) and redirects to that page (none before they are rendered).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from airflow.sdk.bases.operatorlink import BaseOperatorLink

__all__ = ["MOUNT", "TARGETS", "URL_ROUTE", "IcebergPageLink", "TaskTarget", "task_target"]

MOUNT = "/iceberg-ops"
"""Where the application is mounted in the api-server."""

URL_ROUTE = "iceberg"
"""The UI route of the navigation entry: the pages show at ``/plugin/iceberg/...``."""

_MODULE = "iceberg_ops_provider."

# task type -> (what its page is, the rendered field naming it, the connection fields in order of preference)
TARGETS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "IcebergMigrateOperator": ("namespace", "namespace", ("iceberg_conn_id",)),
    "IcebergMigrationSensor": ("namespace", "namespace", ("iceberg_conn_id",)),
    "IcebergPolicyMaintenanceOperator": ("namespace", "namespace", ("iceberg_conn_id",)),
    "IcebergTableHealthOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergCompactOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergPlanCompactionOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergExpireSnapshotsOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergRemoveOrphanFilesOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergRewriteManifestsOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergPartitionSensor": ("table", "table", ("iceberg_conn_id",)),
    "IcebergTagOperator": ("table", "table", ("iceberg_conn_id",)),
    "IcebergDataMoveOperator": ("table", "target", ("target_conn_id", "source_conn_id")),
    "IcebergMovePlanOperator": ("table", "target", ("target_conn_id", "source_conn_id")),
    "IcebergMoveVerifyOperator": ("table", "target", ("target_conn_id", "source_conn_id")),
    "IcebergAuditOperator": ("table", "target", ("target_conn_id", "source_conn_id")),
    "IcebergPublishOperator": ("table", "target", ("target_conn_id", "source_conn_id")),
    "IcebergDiscardOperator": ("table", "target", ("target_conn_id", "source_conn_id")),
}
_DEFAULT_CONN_ID = "iceberg_ops_default"  # IcebergCatalogHook.default_conn_name, without importing the hook


class IcebergPageLink(BaseOperatorLink):
    """The "Iceberg" button of a task of this provider: its namespace's or table's page."""

    name = "Iceberg"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """The link for a task of ours; an empty string (no button) for any other task."""
        module = str(getattr(operator, "_task_module", "") or "")
        task_type = str(getattr(operator, "task_type", "") or "")
        if not module.startswith(_MODULE) or task_type not in TARGETS:
            return ""
        from airflow.api_fastapi.app import API_ROOT_PATH

        parts = "/".join(quote(str(part), safe="") for part in (ti_key.dag_id, ti_key.run_id, ti_key.task_id))
        return f"{API_ROOT_PATH.rstrip('/')}{MOUNT}/tasks/{parts}?map_index={ti_key.map_index}"


@dataclass(frozen=True)
class TaskTarget:
    """Where a task of ours points: a namespace (``table`` is ``None``) or a table of a connection."""

    conn_id: str
    namespace: str
    table: str | None = None


def task_target(task_type: str, rendered: dict[str, Any] | None) -> TaskTarget | None:
    """The page of a task of type ``task_type`` with these rendered fields; ``None`` when it has none.

    Raises:
        ValueError: The rendered table is not ``namespace.table``.
    """
    target = TARGETS.get(task_type)
    if target is None or not rendered:
        return None
    kind, field, conn_fields = target
    value = rendered.get(field)
    if not isinstance(value, str) or not value.strip():
        return None
    given = (rendered[f] for f in conn_fields if isinstance(rendered.get(f), str) and rendered[f])
    conn_id, value = next(given, _DEFAULT_CONN_ID), value.strip()
    if kind == "namespace":
        return TaskTarget(conn_id, value)
    namespace, _, table = value.rpartition(".")
    if not namespace or not table:
        raise ValueError(f"{field}={value!r} is not namespace.table")
    return TaskTarget(conn_id, namespace, table)


def read_task(session: Any, dag_id: str, run_id: str, task_id: str, map_index: int) -> tuple[str, dict | None] | None:
    """The task instance's type and rendered fields, ``None`` when Airflow has no such task instance."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    def of(model: Any) -> tuple[Any, ...]:
        return model.dag_id == dag_id, model.run_id == run_id, model.task_id == task_id, model.map_index == map_index

    task_type = session.scalar(select(TaskInstance.operator).where(*of(TaskInstance)))
    if task_type is None:
        return None
    fields = RenderedTaskInstanceFields
    rendered = session.scalar(select(fields.rendered_fields).where(*of(fields)))
    return str(task_type), rendered if isinstance(rendered, dict) else None
