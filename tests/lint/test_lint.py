"""``lint_paths`` on real migration files: each rule found with its line, allowances with and without
reasons, bad allowances, folder rules, and drops judged against a live SQLite catalog."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.lint import RULES, lint_paths

HEADER = (
    "from iceberg_ops_provider.migration import BaseMigration\n"
    "from iceberg_ops_provider.errors import IrreversibleMigrationError\n\n\n"
)


def _write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def _rules(report) -> list[tuple[str, int, str | None]]:
    return [(f.rule, f.line, f.allowed) for f in report.findings]


def test_each_destructive_operation_is_found_on_its_line(tmp_path):
    path = _write(
        tmp_path,
        "0001_changes.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_column("orders", "note")
                ctx.rename_column("orders", "amount", "total")
                ctx.add_column("orders", "email", "string", required=True)
                ctx.add_column("orders", "phone", "string")
                ctx.drop_partition_field("orders", "day")
                ctx.rename_table("orders", "orders_v2")
                ctx.drop_table("scratch")

            def downgrade(self, ctx):
                raise IrreversibleMigrationError("the note column is gone")
        """,
    )
    report = lint_paths([path])
    assert _rules(report) == [
        ("drop-column", 7, None),
        ("rename-column", 8, None),
        ("add-required-column", 9, None),
        ("drop-partition-field", 11, None),
        ("rename-table", 12, None),
        ("drop-table", 13, None),
        ("irreversible-downgrade", 16, None),
    ]
    drop = report.findings[0]
    assert drop.table == "orders" and "orders.note" in drop.message and drop.fix == RULES["drop-column"].fix
    assert not report.ok and "0001_changes.py:7: [drop-column]" in report.text()


def test_direct_catalog_access_is_an_untracked_write(tmp_path):
    path = _write(
        tmp_path,
        "0001_backfill.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, context):
                table = context.load_table("orders")
                table.append(None)
                context.catalog.drop_table("sales.x")

            def downgrade(self, context):
                pass
        """,
    )
    assert _rules(lint_paths([path])) == [("direct-write", 7, None), ("direct-write", 9, None)]


def test_allowances_on_the_line_or_the_class_accept_a_finding_with_its_reason(tmp_path):
    path = _write(
        tmp_path,
        "0001_cleanup.py",
        """\
        class Migration(BaseMigration):
            allow = {"rename-column": "the dashboards moved to the new name in PR 812"}

            def upgrade(self, ctx):
                ctx.drop_column(  # iceberg-ops: allow=drop-column reason="copied to orders_archive in 0007"
                    "orders",
                    "legacy",
                )
                ctx.rename_column("orders", "a", "b")
                ctx.drop_column("orders", "other")

            def downgrade(self, ctx):
                pass
        """,
    )
    report = lint_paths([path])
    assert _rules(report) == [
        ("drop-column", 9, "copied to orders_archive in 0007"),
        ("rename-column", 13, "the dashboards moved to the new name in PR 812"),
        ("drop-column", 14, None),  # an allowance covers its own call only
    ]
    assert [f.line for f in report.failed] == [14]


@pytest.mark.parametrize(
    ("pragma", "rule"),
    [
        ("# iceberg-ops: allow=drop-column", "allowance-without-reason"),
        ('# iceberg-ops: allow=drop-column reason=""', "allowance-without-reason"),
        ('# iceberg-ops: allow=drop-colum reason="typo"', "unknown-rule"),
        ("# iceberg-ops: please allow this", "malformed-allowance"),
    ],
)
def test_a_bad_allowance_is_a_finding_and_allows_nothing(tmp_path, pragma, rule):
    path = _write(
        tmp_path,
        "0001_drop.py",
        f"""\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_column("orders", "legacy")  {pragma}

            def downgrade(self, ctx):
                pass
        """,
    )
    report = lint_paths([path])
    assert sorted(_rules(report)) == sorted([("drop-column", 7, None), (rule, 7, None)])
    assert len(report.failed) == 2


@pytest.mark.parametrize(
    ("attribute", "rule"),
    [
        ('allow = {"drop-column": ""}', "allowance-without-reason"),
        ('allow = {"nonsense": "why"}', "unknown-rule"),
        ('allow = ["drop-column"]', "malformed-allowance"),
        ("allow = {name: 'x' for name in ['drop-column']}", "malformed-allowance"),
    ],
)
def test_a_bad_class_allowance_is_a_finding(tmp_path, attribute, rule):
    path = _write(
        tmp_path,
        "0001_drop.py",
        f"""\
        class Migration(BaseMigration):
            {attribute}

            def upgrade(self, ctx):
                ctx.drop_column("orders", "legacy")

            def downgrade(self, ctx):
                pass
        """,
    )
    report = lint_paths([path])
    assert (rule, 6, None) in _rules(report) and ("drop-column", 9, None) in _rules(report)


def test_a_version_gap_and_a_duplicate_slug_are_found_in_the_folder(tmp_path):
    clean = """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.set_properties("orders", owner="sales")

            def downgrade(self, ctx):
                ctx.remove_properties("orders", "owner")
        """
    _write(tmp_path, "0001_owner.py", clean)
    _write(tmp_path, "0002_owner.py", clean)
    _write(tmp_path, "0005_more.py", clean)
    report = lint_paths([tmp_path])
    assert _rules(report) == [("duplicate-slug", 1, None), ("version-gap", 1, None)]
    assert report.findings[0].path.endswith("0002_owner.py") and report.findings[1].path.endswith("0005_more.py")
    assert "2 version(s) skipped" in report.findings[1].message
    only_first = lint_paths([tmp_path / "0001_owner.py"])  # the folder is read, findings only for the file asked
    assert only_first.ok and only_first.findings == ()


def test_a_file_that_does_not_parse_is_a_finding(tmp_path):
    path = tmp_path / "0001_broken.py"
    path.write_text("class Migration(:\n")
    assert [f.rule for f in lint_paths([path]).findings] == ["unreadable-file"]


def test_a_clean_file_passes(tmp_path):
    path = _write(
        tmp_path,
        "0001_add.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.add_column("orders", "email", "string")

            def downgrade(self, ctx):
                ctx.drop_column("orders", "email")  # iceberg-ops: allow=drop-column reason="undoes 0001's add"
        """,
    )
    report = lint_paths([path])
    assert report.ok and report.to_json()["ok"] is True and report.failed == ()


def test_with_a_catalog_a_drop_from_an_empty_table_is_only_reported(tmp_path, catalog):
    catalog.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("legacy", pa.string())])
    catalog.create_table("sales.empty", schema)
    full = catalog.create_table("sales.full", schema)
    full.append(pa.table({"id": [1, 2], "legacy": ["a", "b"]}, schema=schema))
    path = _write(
        tmp_path / "migrations",
        "0001_drops.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_column("empty", "legacy")
                ctx.drop_column("full", "legacy")
                ctx.drop_table("not_yet_created")

            def downgrade(self, ctx):
                pass
        """,
    )
    report = lint_paths([path], catalog=catalog, namespace="sales")
    assert [(f.line, f.severity) for f in report.findings] == [(7, "info"), (8, "error"), (9, "info")]
    assert "holds 2 rows" in report.findings[1].message and "holds no rows" in report.findings[0].message
    assert [f.line for f in report.failed] == [8]


def test_a_missing_path_is_refused_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"0009_nope\.py"):
        lint_paths([tmp_path / "0009_nope.py"])
