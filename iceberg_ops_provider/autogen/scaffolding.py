"""Write new project files: ``init_project`` and ``create_revision``. Neither overwrites anything.

Generated source is written as ``ruff format`` would write it, so formatting ``migrations/`` leaves it as it is.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from iceberg_ops_provider.config import CONFIG_FILE
from iceberg_ops_provider.errors import ScaffoldingError
from iceberg_ops_provider.migration.discovery import MIGRATION_FILE

_BACKSLASH = "\\"
_QUOTE = '"'
_APOSTROPHE = "'"

__all__ = [
    "CONFIG_TEMPLATE",
    "LINE_LENGTH",
    "create_revision",
    "display_width",
    "docstring",
    "fitted_value",
    "init_project",
    "next_version",
    "slugify",
    "string_literal",
]

LINE_LENGTH = 88
"""Columns the lines of generated files keep within: the default of ``ruff format``."""

CONFIG_TEMPLATE = """\
# iceberg-ops project settings. Every key is optional until a command needs it.
catalog:
  kind: sqlite      # sqlite | sql | glue | rest | hive | s3tables; or `name: <catalog>` for any PyIceberg catalog
  # options of that kind, e.g. for sql: uri (a SQLAlchemy URL), warehouse; for rest: uri, warehouse, credential;
  # for s3tables: warehouse (table bucket ARN), region
namespace: {namespace}
migrations_dir: migrations
models_dir: models
# meta_namespace: _iceberg_ops   # where history and locks live; default _iceberg_ops, iceberg_ops on S3 Tables
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


def string_literal(text: str) -> str:
    """``text`` as a Python string literal written the way ``ruff format`` writes it (``"it's"``, ``'say "hi"'``).

    Double quotes, unless ``text`` holds more double quotes than single ones; backslashes, the chosen
    quote and characters that are not printable are escaped.
    """
    quote = _APOSTROPHE if text.count(_QUOTE) > text.count(_APOSTROPHE) else _QUOTE
    return f"{quote}{_escaped(text, quote)}{quote}"


def docstring(text: str) -> str:
    """``text`` as a module docstring (triple double quotes) that ``ruff format`` leaves as it is.

    Quotes, backslashes and characters that are not printable (but line breaks) are escaped; the layout
    is the formatter's: no blanks around the first line or at line ends, later lines dedented.
    """
    lines = [_escaped(line, _QUOTE) for line in text.split("\n")]
    first, rest = lines[0].strip(" "), lines[1:]
    margin = min((len(line) - len(line.lstrip(" ")) for line in rest if line.strip(" ")), default=0)
    rest = [line[margin:].rstrip(" ") for line in rest]
    body = "\n".join([first, *rest]) if any(rest) else first or " "
    return f"{_QUOTE * 3}{body}{_QUOTE * 3}"


def display_width(text: str) -> int:
    """Columns ``text`` takes, as ``ruff format`` counts them (wide East Asian: two, combining marks: none)."""
    return sum(
        0 if unicodedata.category(char) in ("Mn", "Me") else 2 if unicodedata.east_asian_width(char) in "WF" else 1
        for char in text
    )


def fitted_value(line_start: str, value: str) -> str:
    """``value`` (one that cannot be split) as ``ruff format`` writes it after ``line_start``.

    As it is when the line fits in :data:`LINE_LENGTH` columns or the value would not fit on a line of its
    own either; else between parentheses, on a line of its own.
    """
    if display_width(line_start + value) <= LINE_LENGTH:
        return value
    indent = " " * (len(line_start) - len(line_start.lstrip(" ")))
    inner = f"{indent}    {value}"
    return value if display_width(inner) > LINE_LENGTH else f"(\n{inner}\n{indent})"


def _escaped(text: str, quote: str) -> str:
    """``text`` inside a string literal quoted by ``quote``: backslashes, the quote and unprintables escaped."""
    return "".join(
        _BACKSLASH + char if char in (quote, _BACKSLASH) else char if char.isprintable() else repr(char)[1:-1]
        for char in text
    )


EXAMPLE_MODEL_FILE = "_example.yaml"
"""The commented example model ``init`` writes; files starting with ``_`` are not models."""

EXAMPLE_MODEL = """\
# An example table model. Files in models/ whose name starts with `_` are ignored: copy this one to
# models/orders.yaml, edit it, then let `iceberg-ops revision` autogenerate its migration (docs/cli.md).
#
# name: orders                      # the table, in the project's namespace
# columns:
#   - {name: id, type: long, required: true, doc: "order id"}
#   - {name: ts, type: timestamptz}
#   - {name: amount, type: "decimal(12,2)"}
#   - {name: address, type: "struct<street: string, city: string>"}
#   - {name: tags, type: "list<string>"}
# partition_by: ["day(ts)"]
# sort_by: ["ts desc"]
# identifier_fields: [id]
# properties: {owner: sales}
"""


def init_project(directory: str | Path = ".", *, namespace: str = "default") -> list[Path]:
    """Create ``iceberg-ops.yaml``, ``migrations/`` and ``models/`` in ``directory``; the paths created.

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
    example = root / "models" / EXAMPLE_MODEL_FILE
    if not example.exists():
        example.write_text(EXAMPLE_MODEL, encoding="utf-8")
        created.append(example)
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
    """Write the next ``NNNN_slug.py`` in ``migrations_dir`` (created if missing), ``content`` or a skeleton.

    Raises:
        ScaffoldingError: An empty message, or the file appeared meanwhile (nothing is overwritten).
    """
    if not message or not message.strip():
        raise ScaffoldingError("A revision needs a message: -m 'what it does'.")
    folder = Path(migrations_dir)
    folder.mkdir(parents=True, exist_ok=True)
    version = next_version(folder)
    path = folder / f"{version}_{slugify(message)}.py"
    if content is None:
        description = fitted_value("    description = ", string_literal(message))
        content = SKELETON.format(docstring=docstring(message), description=description, version=version)
    try:
        with path.open("x", encoding="utf-8") as handle:
            handle.write(content)
    except FileExistsError as exc:
        raise ScaffoldingError(f"{path} already exists; refusing to overwrite it.") from exc
    return path
