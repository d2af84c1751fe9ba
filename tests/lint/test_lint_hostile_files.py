"""Lint on files written to slip past it or to break it: the class Python binds, other spellings of an
operation, encodings, files too deep to parse, odd folder entries, two allowances in a comment,
duplicate versions, GitHub annotations of odd paths, and a drop of a name an earlier rename gives."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.lint import lint_paths

HEAD = "from iceberg_ops_provider.migration import BaseMigration\n\n\n"


def _rules(path) -> list[tuple[str, int, str | None]]:
    return [(f.rule, f.line, f.allowed) for f in lint_paths([path]).findings]


def test_the_last_class_named_migration_is_the_one_read(tmp_path):
    path = tmp_path / "0001_twice.py"
    path.write_text(
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_column('t', 'a')\n\n\n"
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_table('orders')\n"
    )
    assert _rules(path) == [("drop-table", 11, None)]


def test_other_spellings_of_a_required_add_and_a_drop(tmp_path):
    path = tmp_path / "0001_spellings.py"
    path.write_text(
        HEAD + "from iceberg_ops_provider.errors import IrreversibleMigrationError as IME\n\n\n"
        "class Migration(BaseMigration):\n"
        "    def upgrade(self, ctx):\n"
        "        ctx.add_column('t', 'a', 'long', True)\n"
        "        ctx.add_column('t', 'b', 'long', required=flag)\n"
        "        ctx.add_column('t', 'c', 'long', **{'required': True})\n"
        "        ctx.add_column('t', 'd', 'long', required=False)\n"
        "        ctx.drop_table(name='full')\n\n"
        "    def downgrade(self, ctx):\n"
        "        raise IME('no way back')\n"
    )
    report = lint_paths([path])
    assert [f.rule for f in report.findings] == ["add-required-column"] * 3 + ["drop-table", "irreversible-downgrade"]
    assert report.findings[3].table == "full"


@pytest.mark.parametrize("prefix", [b"\xef\xbb\xbf", b"# -*- coding: latin-1 -*-\n"])
def test_files_python_reads_are_read(tmp_path, prefix):
    path = tmp_path / "0001_encoded.py"
    body = (
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_column('t', 'caf\xe9')\n"
    )
    path.write_bytes(prefix + body.encode("latin-1" if b"latin" in prefix else "utf-8"))
    assert [f.rule for f in lint_paths([path]).findings] == ["drop-column"]


def test_a_file_too_deep_to_parse_is_a_finding_and_the_rest_is_linted(tmp_path):
    (tmp_path / "0001_deep.py").write_text("x = " + "-" * 200_000 + "1\n")
    (tmp_path / "0002_drop.py").write_text(
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_table('t')\n"
    )
    report = lint_paths([tmp_path])
    assert [f.rule for f in report.findings] == ["unreadable-file", "drop-table"]
    assert sys.getrecursionlimit() > 0  # the interpreter is still usable


def test_folder_entries_that_are_not_files_are_skipped_and_a_wrong_name_is_refused(tmp_path):
    (tmp_path / "0001_adir.py").mkdir()
    (tmp_path / "0002_broken.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "0003_ok.py").write_text(HEAD)
    assert lint_paths([tmp_path]).files == (str(tmp_path / "0003_ok.py"),)
    (tmp_path / "notes.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match=r"Not a migration file name .*notes\.py"):
        lint_paths([tmp_path / "notes.py"])


def test_two_allowances_in_one_comment_and_an_empty_rule_id(tmp_path):
    path = tmp_path / "0001_pragmas.py"
    path.write_text(
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
        "        ctx.drop_column('t', 'a')  # iceberg-ops: allow=drop-column reason=\"x\" "
        '# iceberg-ops: allow=drop-table reason="y"\n'
        "        ctx.drop_column('t', 'b')  # iceberg-ops: allow=drop-column,,rename-column reason=\"z\"\n"
        "        ctx.drop_column('t', 'c')  # iceberg-ops: allow=drop-column reason=\"has \\\"quotes\\\"\"\n"
    )
    assert _rules(path) == [
        ("drop-column", 6, "x"),
        ("unused-allowance", 6, None),  # no drop-table on that line
        ("drop-column", 7, None),
        ("malformed-allowance", 7, None),
        ("drop-column", 8, 'has "quotes"'),
    ]


def test_duplicate_version_numbers_are_found(tmp_path):
    for name in ("0001_a.py", "0001_b.py", "0002_c.py"):
        (tmp_path / name).write_text(HEAD)
    assert [(Path(f.path).name, f.rule) for f in lint_paths([tmp_path]).findings] == [
        ("0001_b.py", "duplicate-version")
    ]


def test_github_annotations_escape_the_path(tmp_path):
    folder = tmp_path / "a,b:c%d"
    folder.mkdir()
    (folder / "0001_x.py").write_text(
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_table('t')\n"
    )
    line = lint_paths([folder]).github()
    assert "a%2Cb%3Ac%25d" in line and line.count("::") == 2


def test_a_drop_of_the_name_a_rename_gives_keeps_its_severity_with_a_catalog(tmp_path, catalog):
    catalog.create_namespace("ns")
    schema = pa.schema([pa.field("id", pa.int64())])
    catalog.create_table("ns.full", schema).append(pa.table({"id": [1, 2]}, schema=schema))
    (tmp_path / "0001_park.py").write_text(
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
        "        ctx.rename_table('full', 'parked')  # iceberg-ops: allow=rename-table reason=\"parked\"\n"
    )
    (tmp_path / "0002_purge.py").write_text(
        HEAD
        + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_table('parked', purge=True)\n"
    )
    report = lint_paths([tmp_path], catalog=catalog, namespace="ns")
    drop = next(f for f in report.findings if f.rule == "drop-table")
    assert drop.severity == "error" and not report.ok
    assert "full (to parked)" in next(f for f in report.findings if f.rule == "rename-table").message


def test_what_a_body_creates_itself_is_no_finding_when_it_drops_it_or_makes_it_required(tmp_path):
    path = tmp_path / "0001_scratch.py"
    path.write_text(
        HEAD + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
        "        ctx.create_table('audit', schema)\n"
        "        ctx.add_column('audit', 'who', 'string', required=True)\n"
        "        ctx.add_column('orders', 'tmp', 'string')\n"
        "        ctx.drop_column('orders', 'tmp')\n"
        "        ctx.create_table('scratch', schema)\n"
        "        ctx.drop_table('scratch')\n"
        "        ctx.drop_column('orders', 'legacy')\n"
    )
    assert _rules(path) == [("drop-column", 12, None)]
