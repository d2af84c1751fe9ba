"""IcebergMigrationTrigger: wait in the triggerer until a namespace reaches a migration version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.hooks.catalog import connection_meta_namespace
from iceberg_ops_provider.runner.readiness import (
    NOTE_WARNING,
    check_wanted_version,
    describe_version_wait,
    namespace_version,
    version_reached,
)
from iceberg_ops_provider.triggers.polling import CatalogPollingTrigger, CheckResult

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["IcebergMigrationTrigger"]


class IcebergMigrationTrigger(CatalogPollingTrigger):
    """Poll a namespace's migration history until its current version is at least ``version``.

    Reads the history only: takes no lock, creates nothing; a namespace never migrated is at base.

    Args:
        namespace: The namespace.
        version: The version to reach (digits, such as ``"0003"``, ``head`` resolved by the sensor); ``None``
            is base.
        meta_namespace: Where the history lives: this, else the connection extra's ``meta_namespace``.
        **polling: ``iceberg_conn_id``, ``deadline``, ... of :class:`CatalogPollingTrigger`.
    """

    def __init__(
        self, *, namespace: str, version: str | None, meta_namespace: str | None = None, **polling: Any
    ) -> None:
        super().__init__(**polling)
        if version is not None and check_wanted_version(version) == "head":
            raise ValueError("IcebergMigrationTrigger needs a version number; resolve 'head' from the files first.")
        self.namespace = namespace
        self.version = version
        self.meta_namespace = meta_namespace

    def arguments(self) -> dict[str, Any]:
        """The namespace, version and meta-namespace."""
        return {"namespace": self.namespace, "version": self.version, "meta_namespace": self.meta_namespace}

    def waiting_for(self) -> str:
        """``namespace 'sales' to reach migration version 0003``."""
        return describe_version_wait(self.namespace, self.version)

    def check(self, catalog: Catalog, connection: Any) -> CheckResult:
        """Read the namespace's current version once."""
        meta_namespace = self.meta_namespace or connection_meta_namespace(connection)
        seen = namespace_version(catalog, self.namespace, meta_namespace)
        if seen.note:
            self.log.warning(NOTE_WARNING, seen.namespace, seen.note)
        return version_reached(seen.current, self.version), seen.to_json(), seen.describe()
