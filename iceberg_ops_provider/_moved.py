"""Documented import paths of modules that have moved: they keep working and warn where to import from.

Only paths the documentation once showed are kept here; each loads the module(s) it moved to and
forwards every attribute to them, with a :class:`DeprecationWarning` naming the new path, raised
at the import that used the old one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

__all__ = ["MOVED_MODULES", "install"]

MOVED_MODULES: dict[str, tuple[str, ...]] = {
    "iceberg_ops_provider.readiness": ("iceberg_ops_provider.runner.readiness", "iceberg_ops_provider.core.polling"),
    "iceberg_ops_provider.partition_probe": ("iceberg_ops_provider.partitions.probe",),
    "iceberg_ops_provider.partition_values": ("iceberg_ops_provider.partitions.values",),
    "iceberg_ops_provider.partition_deletes": ("iceberg_ops_provider.partitions.deletes",),
}
"""Old module path -> the modules its names live in now, searched in this order."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of :data:`MOVED_MODULES` and loads each as a forwarder to its new modules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        targets = MOVED_MODULES[module.__name__]
        warnings.warn(
            f"{module.__name__} has moved: import from {' or '.join(targets)} instead",
            DeprecationWarning,
            stacklevel=2,  # warnings skips importlib's frames: this is the importing line
        )
        loaded = [importlib.import_module(target) for target in targets]

        def forward(name: str) -> Any:
            for target in loaded:
                if hasattr(target, name):
                    return getattr(target, name)
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        module.__getattr__ = forward  # type: ignore[method-assign]
        module.__all__ = sorted({name for target in loaded for name in getattr(target, "__all__", ())})


def install() -> None:
    """Put the finder of moved modules on :data:`sys.meta_path` (once)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
