"""No string of an engine module names a command-line option: the engine states facts, each front words them.

Every string literal (docstrings and f-string parts included) of every module outside the fronts
is read; a ``--word`` in one fails. A message of a library that names its own options is reworded by
pattern (``catalogs/failures.py``), never matched by the option's text.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "iceberg_ops_provider"
FRONTS = {"cli", "hooks", "operators", "sensors", "triggers", "ui"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


def flags_in(source: str) -> list[tuple[int, str]]:
    """Each ``--word`` in a string literal of ``source``, with its line."""
    return [
        (node.lineno, found)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for found in FLAG.findall(node.value)
    ]


def engine_modules() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).parts[0] not in FRONTS]


def test_no_engine_string_names_a_command_line_option():
    found = [
        f"{path.relative_to(PACKAGE).as_posix()}:{line}: {flag}"
        for path in engine_modules()
        for line, flag in flags_in(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "name the argument as a fact (messages.Arg) and let each front word it:\n" + "\n".join(found)


def test_options_are_found_in_every_kind_of_string_and_nothing_else_is():
    source = '''
"""Run it with --yes."""
message = f"pass {name} or --conn-id"
sql = "SELECT 1 -- a comment"
options = ["--"]
count = 1 - -2
text = "no-dashes and x--y"
'''
    assert flags_in(source) == [(2, "--yes"), (3, "--conn-id")]
