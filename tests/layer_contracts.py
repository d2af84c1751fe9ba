"""Layer contracts of our own for ``lint-imports`` (``[tool.importlinter]`` in pyproject.toml names them).

:class:`OneOpenerContract`: every catalog the package opens is opened by the ``opener`` package's one
function. Outside it, no module calls ``load_catalog``, constructs a PyIceberg catalog class, calls
``CatalogFactory.build``/``load`` (the Python API's convenience, for users), or replaces a ``requests``
session's ``request`` for a whole class. Imports alone say too little here (a module may import
``SqlCatalog`` to tell what a catalog is), so the modules' code is read: the calls themselves are the rule.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output

__all__ = ["OneOpenerContract", "openings"]

CATALOG_CLASSES = frozenset(
    {
        "SqlCatalog",
        "RestCatalog",
        "GlueCatalog",
        "HiveCatalog",
        "InMemoryCatalog",
        "DynamoDbCatalog",
        "BigQueryMetastoreCatalog",
        "SharedMemorySqlCatalog",
        "BoundedRestCatalog",
    }
)


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def openings(source: str) -> list[tuple[int, str]]:
    """Where ``source`` opens a catalog by itself: ``(line, what)`` for each call or patch the contract forbids."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            called = _name(node.func)
            last = called.rsplit(".", 1)[-1]
            factory = called in ("CatalogFactory.build", "CatalogFactory.load")
            if last == "load_catalog" or last in CATALOG_CLASSES or factory:
                found.append((node.lineno, f"{called}(...)"))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if _name(target).endswith("Session.request"):  # a whole class of sessions changed: every caller's
                    found.append((node.lineno, f"{_name(target)} = ..."))
    return found


class OneOpenerContract(Contract):
    """Only ``opener`` (a package) opens catalogs; the rest of ``package`` calls its function.

    Configuration options:
        - package: The package whose modules are read.
        - opener: The package allowed to construct catalogs.
    """

    type_name = "one_opener"

    package = fields.StringField()
    opener = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        violations = []
        for module in sorted(graph.find_descendants(self.package) | {self.package}):
            if module == self.opener or module.startswith(f"{self.opener}."):
                continue
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                continue
            for line, what in openings(Path(spec.origin).read_text(encoding="utf-8")):
                violations.append(f"{module} (l.{line}): {what}")
        return ContractCheck(kept=not violations, metadata={"violations": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for violation in check.metadata["violations"]:
            output.print_error(f"- {violation}", bold=False)
        output.new_line()
        output.print(f"Open catalogs with {self.opener}.open_catalog(spec, access=...) instead.")
