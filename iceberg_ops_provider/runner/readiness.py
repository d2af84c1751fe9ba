"""Readiness checks: has a namespace reached a migration version.

What the Airflow sensors and triggers ask, answered from the catalog's metadata alone, without a lock
and without writing anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchNamespaceError

from iceberg_ops_provider.core.polling import check_errors
from iceberg_ops_provider.history.store import HistoryStore, default_meta_namespace
from iceberg_ops_provider.migration.discovery import discover
from iceberg_ops_provider.runner.namespaces import check_namespace
from iceberg_ops_provider.runner.planning import classify

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "NOTE_WARNING",
    "NamespaceVersion",
    "check_wanted_version",
    "describe_version_wait",
    "namespace_version",
    "newest_version",
    "resolve_version",
    "version_reached",
]

_DIGITS = re.compile(r"^[0-9]+$")


# -- migrations ---------------------------------------------------------------------------------


def check_wanted_version(version: object) -> str:
    """``version`` when it is ``"head"`` or a version number written in digits (``"0003"``, ``"3"``).

    Raises:
        ValueError: Anything else, with what to pass instead.
    """
    if isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        return str(version)
    if not isinstance(version, str) or not (version == "head" or _DIGITS.match(version)):
        raise ValueError(
            f"version must be 'head' or a migration version such as '0003', got {version!r}; "
            "a namespace 'reaches' a version once that version or a higher one is applied."
        )
    return version


def resolve_version(version: str, migrations_dir: str | Path | None, namespace: str) -> str | None:
    """The version to wait for: ``version`` itself, or for ``head`` the highest version of the files.

    Raises:
        ValueError: ``head`` without a folder or of a folder without migrations, or a malformed version.
        MigrationDiscoveryError: The folder is missing or holds a bad migration file.
    """
    version = check_wanted_version(version)
    if version != "head":
        return version
    if migrations_dir is None or str(migrations_dir) == "":
        raise ValueError("version='head' needs migrations_dir (the folder whose newest migration is waited for).")
    newest = newest_version(migrations_dir, namespace)
    if newest is None:
        raise ValueError(
            f"version='head' of migrations_dir {str(migrations_dir)!r} for namespace {namespace!r}: the folder holds "
            "no migration file (NNNN_name.py), so there is no head to wait for; point migrations_dir at the folder "
            "the migrate task reads (it holds the migration files, or a sub-folder per namespace), or pass a version."
        )
    return newest


def newest_version(migrations_dir: str | Path, namespace: str) -> str | None:
    """The highest version among the migration files of ``namespace`` in ``migrations_dir``; ``None`` when none.

    Raises:
        MigrationDiscoveryError: The folder is missing or holds a bad migration file.
    """
    scripts = discover(migrations_dir, namespace)
    return scripts[-1].version if scripts else None


@dataclass(frozen=True)
class NamespaceVersion:
    """Where a namespace's migrations stand, read from its history.

    Attributes:
        current: The highest applied version, or ``None`` at base.
        failed: Versions whose latest attempt failed.
        note: At base, why there is nothing to read when that may be a mistake (no such namespace or history).
    """

    namespace: str
    current: str | None
    failed: tuple[str, ...] = ()
    note: str | None = None

    def describe(self) -> str:
        """One line for logs and messages: ``namespace 'sales' at 0002 (0003 failed in its last attempt)``."""
        text = f"namespace {self.namespace!r} at {self.current or 'base'}"
        if self.failed:
            text += f" ({', '.join(self.failed)} failed in its last attempt)"
        if self.note:
            text += f" ({self.note})"
        return text

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the sensor pushes to XCom)."""
        return {"namespace": self.namespace, "version": self.current, "failed": list(self.failed)}


def namespace_version(catalog: Catalog, namespace: str, meta_namespace: str | None = None) -> NamespaceVersion:
    """The current migration version of ``namespace``: no lock taken, nothing created.

    Raises:
        CatalogConfigError: A malformed namespace name.
        CatalogUnavailableError: The catalog did not answer (transient).
    """
    meta_namespace = meta_namespace or default_meta_namespace(catalog)
    check_namespace("namespace", namespace)
    check_namespace("meta_namespace", meta_namespace)
    note = None
    with check_errors(catalog):
        try:
            rows = HistoryStore(catalog, meta_namespace).rows(namespace)
        except NoSuchNamespaceError:  # no meta-namespace yet: nothing was ever migrated here
            rows = []
        if not rows:
            exists = catalog.namespace_exists(namespace)
            note = f"no migration history of it in {meta_namespace!r}" if exists else "the namespace does not exist"
    state = classify([], rows)
    return NamespaceVersion(namespace, state.current, tuple(state.failed), note if state.current is None else None)


NOTE_WARNING = "Namespace %r is at base: %s; are namespace and meta_namespace right?"
"""The warning a migration wait logs at each check while :attr:`NamespaceVersion.note` says why it is at base."""


def version_reached(current: str | None, wanted: str | None) -> bool:
    """Whether a namespace at ``current`` has reached ``wanted`` (``None``: base); versions compare as numbers."""
    if wanted is None:
        return True
    return current is not None and int(current) >= int(wanted)


def describe_version_wait(namespace: str, version: str | None) -> str:
    """What a migration wait is for, for messages."""
    return f"namespace {namespace!r} to reach migration version {version or 'base'}"
