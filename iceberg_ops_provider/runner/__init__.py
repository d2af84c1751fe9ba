"""The migration engine: discover, apply, roll back, stamp, plan and report migrations per namespace.

``MigrationRunner`` is imported on first use, so the light modules of this package (readiness, the
sensors' engine) load without PyIceberg's table machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from iceberg_ops_provider.runner.migration_runner import MigrationRunner

__all__ = ["MigrationRunner"]


def __getattr__(name: str) -> Any:
    if name == "MigrationRunner":
        from iceberg_ops_provider.runner.migration_runner import MigrationRunner

        return MigrationRunner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
