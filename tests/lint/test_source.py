"""Lint finds the context's operations however a body spells them: an alias of the context, a bound
method kept in a variable, ``getattr``, and ``upgrade``/``downgrade`` inherited from a base class of the
same file."""

from __future__ import annotations

import textwrap
from pathlib import Path

from iceberg_ops_provider.lint import lint_paths

HEADER = "from iceberg_ops_provider.migration import BaseMigration\n\n\n"


def _findings(tmp_path: Path, body: str) -> list[tuple[str, int, str | None, str | None]]:
    path = tmp_path / "0001_changes.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return [(f.rule, f.line - 3, f.table, f.column) for f in lint_paths([path]).findings]


def test_an_alias_of_the_context_and_an_alias_of_that(tmp_path):
    found = _findings(
        tmp_path,
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                c = ctx
                again = c
                again.drop_column("orders", "note")
                c.load_table("orders").append(None)
        """,
    )
    assert found == [("drop-column", 5, "orders", "note"), ("direct-write", 6, None, None)]


def test_a_bound_method_in_a_variable_and_getattr(tmp_path):
    found = _findings(
        tmp_path,
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                drop = ctx.drop_table
                drop("scratch")
                getattr(ctx, "rename_column")("orders", "amount", "total")
                catalog = getattr(ctx, "catalog")
        """,
    )
    assert found == [
        ("drop-table", 4, "scratch", None),
        ("rename-column", 5, "orders", "amount"),
        ("direct-write", 6, None, None),
    ]


def test_methods_inherited_from_a_base_class_of_the_file(tmp_path):
    found = _findings(
        tmp_path,
        """\
        class DropsNote(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_column("orders", "note")

            def downgrade(self, ctx):
                ctx.restore_column("orders", "note")


        class Migration(DropsNote):
            def downgrade(self, ctx):
                ctx.drop_table("orders")
        """,
    )
    assert found == [("drop-column", 3, "orders", "note"), ("drop-table", 11, "orders", None)]


def test_names_unrelated_to_the_context_are_not_findings(tmp_path):
    found = _findings(
        tmp_path,
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                other = object()
                drop = other.drop_column
                drop("orders", "note")
                getattr(other, "drop_table")("scratch")
                ctx = None
        """,
    )
    assert found == []
