"""IcebergMigrationSensor: wait until a namespace has reached a migration version, without running anything."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.runner.readiness import (
    NOTE_WARNING,
    check_wanted_version,
    describe_version_wait,
    namespace_version,
    newest_version,
    resolve_version,
)
from iceberg_ops_provider.runner.readiness import version_reached as reached
from iceberg_ops_provider.sensors.base import IcebergCatalogSensor

if TYPE_CHECKING:
    from iceberg_ops_provider.triggers.migration import IcebergMigrationTrigger
    from iceberg_ops_provider.triggers.polling import CheckResult

__all__ = ["IcebergMigrationSensor"]


class IcebergMigrationSensor(IcebergCatalogSensor):
    """Wait until ``namespace`` is at ``version`` or above, so loads can wait on another team's migration.

    The sensor only reads the history (no lock, nothing created); a namespace never migrated is at base.
    A missing namespace or history logs a warning at every check (see ``docs/sensors.md``).

    Args:
        namespace: The namespace (templated).
        migrations_dir: The migrations folder on the worker (templated); needed for ``head``. A folder
            holding no migration file fails the task.
        version: ``"head"`` (the newest migration of ``migrations_dir``) or a version such as ``"0003"``
            (templated).
        iceberg_conn_id: The Airflow connection of the catalog (templated).
        meta_namespace: Where the history lives: this, else the connection extra's ``meta_namespace``,
            else ``_iceberg_ops`` (``iceberg_ops`` on S3 Tables) (templated).
        deferrable: Wait in the triggerer (default: Airflow's ``[operators] default_deferrable``).
        **kwargs: ``poke_interval``, ``timeout``, ``mode`` (default ``reschedule``), ``soft_fail``, ...

    Returns (XCom):
        ``{"namespace", "version", "failed"}``: the version seen when the wait ended.

    Raises:
        ValueError: At construction, ``version="head"`` without ``migrations_dir``, or a malformed version.
    """

    template_fields: Sequence[str] = ("namespace", "migrations_dir", "version", "meta_namespace", "iceberg_conn_id")
    ui_color = "#cfe8fc"

    def __init__(
        self,
        *,
        namespace: str,
        migrations_dir: str | None = None,
        version: str = "head",
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        meta_namespace: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(iceberg_conn_id=iceberg_conn_id, **kwargs)
        if not (isinstance(version, str) and "{{" in version):  # a template is checked once rendered
            version = check_wanted_version(version)
        if version == "head" and not migrations_dir:
            raise ValueError(
                f"{type(self).__name__} {self.task_id!r}: version='head' needs migrations_dir (the folder whose "
                "newest migration is awaited); pass migrations_dir=..., or a version such as version='0003'."
            )
        self.namespace = namespace
        self.migrations_dir = migrations_dir
        self.version = version
        self.meta_namespace = meta_namespace
        self._wanted: str | None = None

    def prepare(self) -> None:
        """Check the rendered version and resolve ``head`` from the migration files on the worker."""
        version = check_wanted_version(self.version.strip() if isinstance(self.version, str) else self.version)
        self._wanted = resolve_version(version, self.migrations_dir, self.namespace)
        if version != "head" and self.migrations_dir and self._wanted is not None:
            try:
                newest = newest_version(self.migrations_dir, self.namespace)
            except Exception as exc:  # the folder is only advisory for an explicit version
                self.log.warning("Could not read migrations_dir %r: %s", self.migrations_dir, exc)
                return
            if newest is None or int(self._wanted) > int(newest):
                self.log.warning(
                    "Waiting for version %s of namespace %r, above the newest migration in %s (%s): only a migrate "
                    "run with newer files can reach it; check the version and migrations_dir.",
                    self._wanted,
                    self.namespace,
                    self.migrations_dir,
                    newest or "none",
                )

    def waiting_for(self) -> str:
        """``namespace 'sales' to reach migration version 0003``."""
        return describe_version_wait(self.namespace, self._wanted)

    def check(self, hook: IcebergCatalogHook) -> CheckResult:
        """Read the namespace's current version once."""
        seen = namespace_version(hook.catalog_for("read"), self.namespace, self.meta_namespace or hook.meta_namespace())
        if seen.note:
            self.log.warning(NOTE_WARNING, seen.namespace, seen.note)
        return reached(seen.current, self._wanted), seen.to_json(), seen.describe()

    def trigger(self, **polling: Any) -> IcebergMigrationTrigger:
        """The trigger that waits for the resolved version."""
        from iceberg_ops_provider.triggers.migration import IcebergMigrationTrigger

        return IcebergMigrationTrigger(
            namespace=self.namespace, version=self._wanted, meta_namespace=self.meta_namespace, **polling
        )
