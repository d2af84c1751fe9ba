"""The migration engine: discover, apply, roll back, stamp, plan and report migrations per namespace.

:class:`MigrationRunner` (in :mod:`~iceberg_ops_provider.runner.migration_runner`) is the engine's
face; :mod:`~iceberg_ops_provider.runner.commands` holds the verbs the command line and the
operators share. The other modules are its parts: a locked run's bookkeeping and settling of an
earlier run (:mod:`.session`), executing a step (:mod:`.steps`) through its commit journal
(:mod:`.journal`), how migrations commit (:mod:`.commit_modes`), what to run (:mod:`.planning`), what
a run returns (:mod:`.results`), how far a namespace has got (:mod:`.readiness`) and which
namespaces exist (:mod:`.namespaces`).

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
