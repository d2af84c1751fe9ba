"""init_project and create_revision: numbering, slugs, never overwriting, and literals formatters keep."""

from __future__ import annotations

import ast

import pytest

from iceberg_ops_provider.autogen.scaffolding import (
    LINE_LENGTH,
    create_revision,
    display_width,
    docstring,
    fitted_value,
    init_project,
    next_version,
    slugify,
    string_literal,
)
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.errors import ScaffoldingError
from iceberg_ops_provider.migration.discovery import discover

TRICKY = [
    "",
    "plain",
    "it's",
    'say "hi"',
    "both ' and \"",
    "C:\\new\\path\\",
    "tab\tnew\nline\r",
    "\x00\x7f\u2028\xa0",
    "😀 顧客 é",
]


def test_init_project_writes_a_loadable_config(tmp_path):
    created = init_project(tmp_path / "p", namespace="sales")
    assert [p.name for p in created] == ["iceberg-ops.yaml", "migrations", "models", "_example.yaml"]
    config = load_config(tmp_path / "p" / "iceberg-ops.yaml")
    assert config.namespace == "sales" and config.catalog == {"kind": "sqlite"}
    assert config.meta_namespace is None  # the runner picks the catalog's default (iceberg_ops on S3 Tables)
    assert config.migrations_dir == (tmp_path / "p" / "migrations").resolve()
    with pytest.raises(ScaffoldingError, match="refusing to overwrite"):
        init_project(tmp_path / "p")


def test_revisions_are_numbered_after_the_highest(tmp_path):
    first = create_revision(tmp_path, "create orders")
    assert first.name == "0001_create_orders.py"
    (tmp_path / "0041_manual.py").write_text("")
    assert next_version(tmp_path) == "0042"
    assert create_revision(tmp_path, "Add e-mail!", content="x = 1\n").read_text() == "x = 1\n"
    assert (tmp_path / "0042_add_e_mail.py").exists()
    with pytest.raises(ScaffoldingError, match="needs a message"):
        create_revision(tmp_path, "  ")


def test_slugify():
    assert slugify("Rename email -> customer_email") == "rename_email_customer_email"
    assert slugify("!!!") == "revision"
    assert len(slugify("x" * 200)) <= 48


def test_config_without_a_file_resolves_folders_next_to_where_it_was_looked_for(tmp_path):
    config = load_config(tmp_path / "iceberg-ops.yaml", required=False)
    assert config.path is None
    assert config.migrations_dir == tmp_path.resolve() / "migrations"
    assert config.models_dir == tmp_path.resolve() / "models"


@pytest.mark.parametrize("text", TRICKY)
def test_string_literals_evaluate_to_their_text(text):
    literal = string_literal(text)
    assert ast.literal_eval(literal) == text
    assert "\n" not in literal and literal.isprintable()


def test_string_literals_use_double_quotes_unless_single_ones_escape_less():
    assert string_literal("it's") == '"it\'s"'
    assert string_literal('say "hi"') == "'say \"hi\"'"
    assert string_literal("both ' and \"") == '"both \' and \\""'
    assert string_literal("C:\\x") == '"C:\\\\x"'


@pytest.mark.parametrize("text", [*TRICKY[1:], 'add """x"""', 'ends with "'])
def test_docstrings_evaluate_to_their_text(text):
    literal = docstring(text)
    assert literal.startswith('"""') and literal.endswith('"""')
    assert ast.literal_eval(literal).strip() == text.strip()


def test_docstrings_take_the_layout_formatters_give_them():
    assert docstring("  Add e-mail.  ") == '"""Add e-mail."""'
    assert docstring("Add e-mail.\n") == '"""Add e-mail."""'
    text = "First line  \n\n    indented paragraph   \n      deeper\n"
    assert docstring(text) == '"""First line\n\nindented paragraph\n  deeper\n"""'


def test_fitted_values_are_parenthesized_only_when_that_makes_them_fit():
    start = "    description = "
    short = string_literal("create orders")
    assert fitted_value(start, short) == short
    medium = string_literal("x" * (LINE_LENGTH - len(start)))
    assert fitted_value(start, medium) == f"(\n        {medium}\n    )"
    long = string_literal("x" * LINE_LENGTH)
    assert fitted_value(start, long) == long


def test_display_width_counts_wide_characters_twice():
    assert display_width("abc") == 3
    assert display_width("顧客") == 4
    assert display_width("e\u0301") == 1


@pytest.mark.parametrize("message", ["Ajouter l'e-mail du client (été)", "a NUL \x00 and a\nnew line", "😀" * 40])
def test_skeletons_keep_any_message_and_load(tmp_path, message):
    path = create_revision(tmp_path, message)
    (script,) = discover(tmp_path)
    assert script.path == path and script.migration.description == message
    text = path.read_bytes().decode("utf-8")  # whatever the locale's encoding
    assert "\x00" not in text  # escaped: Python refuses source code with NUL characters
    assert message.split("\n")[0].replace("\x00", "\\x00") in text  # other characters as they are
