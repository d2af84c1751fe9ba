"""Every import the README and docs/ show works, from the path they show it at.

Read from the documents themselves, so a page that gains an example is checked without touching this
file: the import statements of every code block, every dotted reference to the package in the text
(``iceberg_ops_provider.core.catalog.CatalogFactory``, ``iceberg_ops_provider.cli:main``), and the
names listed beside a module in a table row (``| `iceberg_ops_provider.core.contract` | `check_contract` |``).
Old paths that moved keep working only where the documentation once showed them, and then warn.
"""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"```[a-zA-Z]*\n(.*?)```", re.S)
_IMPORT = re.compile(
    r"^[ \t]*(from iceberg_ops_provider[\w.]* import (?:\([^)]*\)|[^\n]*)|import iceberg_ops_provider[\w.]*)", re.M
)
_REFERENCE = re.compile(r"\biceberg_ops_provider(?:\.\w+)+(?::\w+)?")
_ROW = re.compile(r"^\|\s*`(iceberg_ops_provider(?:\.\w+)*)`\s*\|(.*)$", re.M)
_NAME = re.compile(r"`([A-Za-z_]\w*)")
# Words a table row names beside a module that are not the module's own: PyIceberg's function and
# the official provider's connection type.
_FOREIGN_WORDS = {"load_catalog", "iceberg"}


def _statements() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        for block in _FENCE.findall(document.read_text()):
            for statement in _IMPORT.findall(block):
                found.append((document.relative_to(ROOT).as_posix(), " ".join(statement.split())))
    return sorted(set(found))


def _references() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = _FENCE.sub("", document.read_text())  # code blocks are checked as statements
        for reference in _REFERENCE.findall(text):
            found.append((document.relative_to(ROOT).as_posix(), reference.rstrip(".")))
    return sorted(set(found))


def _table_rows() -> list[tuple[str, str, str]]:
    found = []
    for document in DOCUMENTS:
        for module, cells in _ROW.findall(document.read_text()):
            for name in _NAME.findall(cells):
                if name not in _FOREIGN_WORDS:
                    found.append((document.relative_to(ROOT).as_posix(), module, name))
    return sorted(set(found))


def _resolve(reference: str) -> object:
    """Import the longest importable module of a dotted reference, then walk the rest as attributes."""
    module_path, _, attribute = reference.partition(":")
    parts = module_path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            if exc.name and not ".".join(parts[:cut]).startswith(exc.name):
                raise  # the module exists but something it imports does not
            continue
        for name in [*parts[cut:], *([attribute] if attribute else [])]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(reference)


def test_the_documents_show_imports_at_all():
    # The patterns below would check nothing if the documents' form changed; these are known to be shown.
    statements = {statement for _, statement in _statements()}
    assert "from iceberg_ops_provider.runner import MigrationRunner" in statements
    assert "from iceberg_ops_provider.catalogs import CatalogFactory" in statements
    assert any(reference == "iceberg_ops_provider.data_migration.DataMover" for _, reference in _references())
    assert any(name == "conform_to_table" for *_, name in _table_rows())


@pytest.mark.parametrize(("document", "statement"), _statements())
def test_every_import_statement_of_the_documents_runs(document: str, statement: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # documents show today's paths, not moved ones
        exec(compile(ast.parse(statement), document, "exec"), {})


@pytest.mark.parametrize(("document", "reference"), _references())
def test_every_dotted_reference_of_the_documents_resolves(document: str, reference: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert _resolve(reference) is not None


@pytest.mark.parametrize(("document", "module", "name"), _table_rows())
def test_every_name_a_table_lists_beside_a_module_is_in_it(document: str, module: str, name: str):
    assert hasattr(importlib.import_module(module), name), f"{document}: {module} has no {name}"


def test_the_console_script_and_the_click_group_are_where_pyproject_and_the_docs_say():
    from iceberg_ops_provider.cli import cli, main

    assert callable(main)
    assert cli.name == "cli"
    assert 'iceberg-ops = "iceberg_ops_provider.cli:main"' in (ROOT / "pyproject.toml").read_text()
