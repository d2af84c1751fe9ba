"""Write new project files: ``init_project`` and ``create_revision``. Neither overwrites anything."""

from __future__ import annotations

import re
from pathlib import Path

from iceberg_ops_provider.config import CONFIG_FILE
from iceberg_ops_provider.discovery import MIGRATION_FILE
from iceberg_ops_provider.errors import ScaffoldingError

_BACKSLASH = "\\"
_QUOTE = '"'

__all__ = ["CONFIG_TEMPLATE", "create_revision", "docstring", "init_project", "next_version", "slugify"]

CONFIG_TEMPLATE = """\
# iceberg-ops project settings. Every key is optional until a command needs it.
catalog:
  kind: sqlite            # sqlite | glue | rest | hive | s3tables; or `name: <catalog>` for any PyIceberg catalog
  # options of that kind, e.g. for rest: uri, warehouse, credential; for s3tables: warehouse (table bucket ARN), region
namespace: {namespace}
migrations_dir: migrations
models_dir: models
meta_namespace: _iceberg_ops   # where history lives; S3 Tables rejects names that start with `_`
"""

SKELETON = """\
{docstring}

from iceberg_ops_provider.migration import BaseMigration, IrreversibleMigrationError


class Migration(BaseMigration):
    description = {description}

    def upgrade(self, ctx):
        pass

    def downgrade(self, ctx):
        raise IrreversibleMigrationError("{version} has no downgrade yet")
"""


def docstring(text: str) -> str:
    """``text`` as a triple-quoted Python string literal, whatever quotes or backslashes it holds."""
    escaped = text.replace(_BACKSLASH, _BACKSLASH * 2).replace(_QUOTE, _BACKSLASH + _QUOTE)
    return f"{_QUOTE * 3}{escaped}{_QUOTE * 3}"


def init_project(directory: str | Path = ".", *, namespace: str = "default") -> list[Path]:
    """Create ``iceberg-ops.yaml``, ``migrations/`` and ``models/`` in ``directory``.

    Returns:
        The paths created.

    Raises:
        ScaffoldingError: ``iceberg-ops.yaml`` already exists there (nothing is written).
    """
    root = Path(directory)
    config = root / CONFIG_FILE
    if config.exists():
        raise ScaffoldingError(f"{config} already exists; refusing to overwrite it.")
    root.mkdir(parents=True, exist_ok=True)
    created = []
    for folder in (root / "migrations", root / "models"):
        if not folder.exists():
            folder.mkdir()
            created.append(folder)
    with config.open("x") as handle:
        handle.write(CONFIG_TEMPLATE.format(namespace=namespace))
    return [config, *created]


def slugify(message: str) -> str:
    """A file-name slug for a revision message: ``"Add e-mail!"`` -> ``add_e_mail``."""
    slug = re.sub(r"[^a-z0-9]+", "_", message.lower()).strip("_")[:48].strip("_")
    return slug or "revision"


def next_version(migrations_dir: str | Path) -> str:
    """The next version number: the highest existing one plus one, at least four digits."""
    numbers = [
        int(match.group("version"))
        for path in Path(migrations_dir).glob("*.py")
        if (match := MIGRATION_FILE.match(path.name))
    ]
    return f"{max(numbers, default=0) + 1:04d}"


def create_revision(migrations_dir: str | Path, message: str, *, content: str | None = None) -> Path:
    """Write the next ``NNNN_slug.py`` in ``migrations_dir``.

    Args:
        migrations_dir: The folder (created if missing).
        message: The revision message: the migration's description and the file's slug.
        content: The file's text (from the autogenerate renderer); default an empty skeleton.

    Raises:
        ScaffoldingError: An empty message, or the file appeared meanwhile (nothing is overwritten).
    """
    if not message or not message.strip():
        raise ScaffoldingError("A revision needs a message: -m 'what it does'.")
    folder = Path(migrations_dir)
    folder.mkdir(parents=True, exist_ok=True)
    version = next_version(folder)
    path = folder / f"{version}_{slugify(message)}.py"
    text = (
        content
        if content is not None
        else SKELETON.format(docstring=docstring(message), description=repr(message), version=version)
    )
    try:
        with path.open("x") as handle:
            handle.write(text)
    except FileExistsError as exc:
        raise ScaffoldingError(f"{path} already exists; refusing to overwrite it.") from exc
    return path
