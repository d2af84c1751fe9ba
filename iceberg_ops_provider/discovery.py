"""Find and load migration files: ``NNNN_slug.py`` in a folder, one ``Migration`` class each.

Discovery is pure file work: it never touches a catalog, so a bad file is reported before anything
changes. ``migrations_dir/<namespace>/`` is used instead of the flat folder when it exists.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from iceberg_ops_provider.errors import MigrationDiscoveryError
from iceberg_ops_provider.migration.base import BaseMigration

__all__ = ["MIGRATION_FILE", "MigrationScript", "discover", "file_checksum", "migrations_folder"]

MIGRATION_FILE = re.compile(r"^(?P<version>\d{4,})_(?P<slug>[A-Za-z0-9_]+)\.py$")
"""File names of migrations: four or more digits, an underscore, a slug of letters, digits and ``_``."""


@dataclass(frozen=True)
class MigrationScript:
    """One migration file, loaded.

    Attributes:
        version: The number prefix as written (``"0003"``); ordered numerically.
        slug: The rest of the file name (``"add_email"``).
        description: The class's ``description``, its docstring's first line, or the slug.
        path: The file.
        checksum: SHA-256 of the file with line endings normalised (a checkout on Windows does not
            count as a change).
        migration: An instance of the file's ``Migration`` class.
    """

    version: str
    slug: str
    description: str
    path: Path
    checksum: str
    migration: BaseMigration

    @property
    def number(self) -> int:
        """The version as a number, for ordering."""
        return int(self.version)


def file_checksum(path: Path) -> str:
    """SHA-256 of a file's bytes, with Windows line endings normalised to Unix ones."""
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def migrations_folder(migrations_dir: str | Path, namespace: str) -> Path:
    """``migrations_dir/<namespace>`` when that folder exists, else ``migrations_dir``."""
    root = Path(migrations_dir)
    per_namespace = root / namespace
    return per_namespace if per_namespace.is_dir() else root


def _load(path: Path, version: str, slug: str) -> BaseMigration:
    module_name = f"iceberg_ops_migrations._{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise MigrationDiscoveryError(path, "cannot be loaded as a Python module.")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise MigrationDiscoveryError(path, f"syntax error on line {exc.lineno}: {exc.msg}.") from exc
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise MigrationDiscoveryError(
            path, f"importing it raised {type(exc).__name__}: {exc} (line {last.lineno} of {Path(last.filename).name})."
        ) from exc
    finally:
        sys.modules.pop(module_name, None)
    migration_class = getattr(module, "Migration", None)
    if migration_class is None:
        raise MigrationDiscoveryError(path, "defines no class named Migration; add `class Migration(BaseMigration):`.")
    if not isinstance(migration_class, type) or not issubclass(migration_class, BaseMigration):
        raise MigrationDiscoveryError(
            path, "its Migration is not a subclass of iceberg_ops_provider.migration.BaseMigration."
        )
    if migration_class.upgrade is BaseMigration.upgrade:
        raise MigrationDiscoveryError(path, "its Migration class defines no upgrade(self, ctx) method.")
    try:
        migration = migration_class()
    except Exception as exc:
        raise MigrationDiscoveryError(path, f"Migration() raised {type(exc).__name__}: {exc}.") from exc
    migration.version = version
    return migration


def _description(migration: BaseMigration, slug: str) -> str:
    if migration.description:
        return str(migration.description)
    doc = (type(migration).__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else slug.replace("_", " ")


def discover(migrations_dir: str | Path, namespace: str | None = None) -> list[MigrationScript]:
    """Load every migration in the folder for ``namespace``, ordered by version.

    ``__init__.py`` and files starting with ``_`` are helpers, not migrations, and are skipped.

    Raises:
        MigrationDiscoveryError: The folder is missing, a ``.py`` file has a bad name, two files
            share a number, or a file does not load or has no proper ``Migration`` class. The
            message names the file.
    """
    folder = migrations_folder(migrations_dir, namespace) if namespace else Path(migrations_dir)
    if not folder.is_dir():
        raise MigrationDiscoveryError(
            folder, "migrations folder not found; create it (iceberg-ops init) or pass the right migrations_dir."
        )
    found: dict[int, MigrationScript] = {}
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        match = MIGRATION_FILE.match(path.name)
        if not match:
            raise MigrationDiscoveryError(
                path,
                "is not a migration file name; name migrations NNNN_slug.py (four or more digits, then letters, "
                "digits and underscores), or start helper modules with '_'.",
            )
        version, slug = match.group("version"), match.group("slug")
        number = int(version)
        if number in found:
            raise MigrationDiscoveryError(
                path, f"has the same version number as {found[number].path.name}; renumber one of them."
            )
        migration = _load(path, version, slug)
        found[number] = MigrationScript(
            version=version,
            slug=slug,
            description=_description(migration, slug),
            path=path,
            checksum=file_checksum(path),
            migration=migration,
        )
    return [found[number] for number in sorted(found)]
