"""``lint_paths``: namespace subfolders, what a file's own upgrade made, rules that cannot be allowed,
unused allowances, the wording of names given at run time, GitHub annotations, and findings judged
against a live SQLite catalog (a restore of a column its upgrade drops, no namespace, a missing table)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.lint import RULES, lint_paths

HEADER = "from iceberg_ops_provider.migration import BaseMigration\n\n\n"


def _write(folder: Path, name: str, body: str, header: str = HEADER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(header + textwrap.dedent(body))
    return path


def _rules(report) -> list[tuple[str, int, str]]:
    return [(f.rule, f.line, f.severity) for f in report.findings]


CLEAN = """\
    class Migration(BaseMigration):
        def upgrade(self, ctx):
            ctx.set_properties("orders", owner="sales")
    """


def test_a_folder_lints_its_namespace_subfolders_each_as_a_folder_of_its_own(tmp_path):
    _write(tmp_path / "sales", "0001_a.py", CLEAN)
    _write(tmp_path / "sales", "0002_b.py", CLEAN)
    _write(tmp_path / "hr", "0001_a.py", CLEAN)
    _write(tmp_path / "hr", "0003_c.py", CLEAN)
    _write(tmp_path / "hr" / "archive", "0001_old.py", "class Migration(BaseMigration):\n    x = ctx.drop_table('t')\n")
    report = lint_paths([tmp_path])
    assert sorted(Path(p).relative_to(tmp_path).as_posix() for p in report.files) == [
        "hr/0001_a.py",
        "hr/0003_c.py",
        "sales/0001_a.py",
        "sales/0002_b.py",
    ]
    # 0001 in two folders is no duplicate version; the gap is hr's own.
    assert [(Path(f.path).relative_to(tmp_path).as_posix(), f.rule) for f in report.findings] == [
        ("hr/0003_c.py", "version-gap")
    ]


def test_a_folder_given_twice_lints_each_file_once(tmp_path):
    _write(tmp_path / "sales", "0001_a.py", CLEAN)
    assert len(lint_paths([tmp_path, tmp_path / "sales"]).files) == 1


def test_a_downgrade_dropping_what_its_upgrade_made_is_info(tmp_path):
    path = _write(
        tmp_path,
        "0001_orders.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.create_table("orders", schema)
                ctx.add_column("customers", "email", "string")

            def downgrade(self, ctx):
                ctx.drop_column("customers", "email")
                ctx.drop_table("orders")
                ctx.drop_table("customers")
        """,
    )
    report = lint_paths([path])
    assert _rules(report) == [("drop-column", 10, "info"), ("drop-table", 11, "info"), ("drop-table", 12, "error")]
    kept = report.findings[0]
    assert "customers.email, which upgrade() adds: it removes what the upgrade made" in kept.message
    assert "a downgrade asks for confirmation" in kept.message and kept.fix.startswith("nothing to fix")
    assert [f.line for f in report.failed] == [12]


def test_renaming_a_column_the_body_just_added_is_no_finding(tmp_path):
    path = _write(
        tmp_path,
        "0001_rename.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.add_column("orders", "a", "string")
                ctx.rename_column("orders", "a", "b")
                ctx.drop_column("orders", "b")
                ctx.rename_column("orders", "amount", "total")
        """,
    )
    assert _rules(lint_paths([path])) == [("rename-column", 9, "warning")]


def test_a_name_given_at_run_time_is_shown_as_its_expression(tmp_path):
    path = _write(
        tmp_path,
        "0001_drop.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                for name in self.columns:
                    ctx.drop_column("orders", name)
                ctx.drop_column(TABLES["orders"], "legacy")
        """,
    )
    first, second = lint_paths([path]).findings
    assert "drop_column on orders.<name>:" in first.message and first.column is None
    assert "drop_column on <TABLES['orders']>.legacy:" in second.message and second.table is None


def test_an_unknown_rule_in_an_allowance_suggests_the_closest_rule(tmp_path):
    path = _write(
        tmp_path,
        "0001_drop.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_column("orders", "legacy")  # iceberg-ops: allow=drop-colum reason="archived"
        """,
    )
    unknown = next(f for f in lint_paths([path]).findings if f.rule == "unknown-rule")
    assert unknown.message.endswith("Did you mean 'drop-column'?")


def test_every_rule_that_can_be_allowed_ends_its_fix_with_its_allowance():
    for rule in RULES.values():
        assert rule.fix.endswith(f'# iceberg-ops: allow={rule.id} reason="..."') == rule.allowable, rule.id
    assert {"duplicate-version", "unreadable-file", "unused-allowance"} <= {
        r.id for r in RULES.values() if not r.allowable
    }


def test_an_allowance_of_a_rule_the_runner_refuses_allows_nothing(tmp_path):
    for name in ("0001_a.py", "0001_b.py"):
        _write(tmp_path, name, CLEAN, header='# iceberg-ops: allow=duplicate-version reason="both needed"\n' + HEADER)
    report = lint_paths([tmp_path / "0001_b.py"])
    assert sorted(_rules(report)) == [("duplicate-version", 1, "error"), ("not-allowable", 1, "error")]
    refused = next(f for f in report.findings if f.rule == "not-allowable")
    assert (
        "duplicate-version, which cannot be allowed: the runner refuses two files with one version" in refused.message
    )
    assert len(report.failed) == 2


def test_a_class_allowance_of_an_unreadable_file_allows_nothing(tmp_path):
    path = _write(
        tmp_path,
        "0001_x.py",
        """\
        class Migration(BaseMigration):
            allow = {"unreadable-file": "it parses for me"}
        """,
    )
    assert _rules(lint_paths([path])) == [("not-allowable", 5, "error")]


def test_an_allowance_that_accepts_no_finding_is_reported_where_it_is(tmp_path):
    path = _write(
        tmp_path,
        "0001_drop.py",
        """\
        class Migration(BaseMigration):
            allow = {"rename-table": "nothing renamed here"}

            def upgrade(self, ctx):
                ctx.drop_column("orders", "legacy")
        """,
        header='"""Drop the legacy column."""\n# iceberg-ops: allow=drop-column reason="archived"\n' + HEADER,
    )
    report = lint_paths([path])
    assert _rules(report) == [
        ("unused-allowance", 2, "info"),
        ("unused-allowance", 7, "info"),
        ("drop-column", 10, "error"),
    ]
    on_line, on_class = report.findings[0], report.findings[1]
    assert "drop-column on line 2 accepts no finding" in on_line.message
    assert "on a line of the operation's call, on line 1 for the rules about the whole file" in on_line.message
    assert "the Migration class (line 7)" in on_class.message and "has no rename-table finding" in on_class.message


def test_an_allowance_that_accepts_a_finding_is_not_reported_unused(tmp_path):
    path = _write(
        tmp_path,
        "0001_drop.py",
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_column("orders", "legacy")  # iceberg-ops: allow=drop-column reason="archived"
        """,
    )
    assert _rules(lint_paths([path])) == [("drop-column", 6, "error")]


def test_github_annotations_put_the_fix_on_its_own_line_and_name_files_from_the_working_directory(
    tmp_path, monkeypatch
):
    path = _write(
        tmp_path / "migrations",
        "0001_drop.py",
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_table('t')\n",
    )
    monkeypatch.chdir(tmp_path)
    line = lint_paths([path]).github()
    assert line.startswith("::error file=migrations/0001_drop.py,line=6,title=drop-table::")
    assert "readers and writers of the table fail%0AFix: rename the table aside" in line
    monkeypatch.chdir(tmp_path / "migrations")
    assert lint_paths([Path("0001_drop.py")]).github().startswith("::error file=0001_drop.py,")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert lint_paths([path]).github().startswith(f"::error file={path.as_posix().replace(':', '%3A')},")


@pytest.fixture
def orders(catalog):
    """sales.orders (id, legacy), holding no rows."""
    catalog.create_namespace("sales")
    catalog.create_table("sales.orders", pa.schema([pa.field("id", pa.int64()), pa.field("legacy", pa.string())]))
    return catalog


RESTORE = (
    'class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.restore_column("orders", "legacy")\n'
)

DROP_AND_RESTORE = """\
    class Migration(BaseMigration):
        def upgrade(self, ctx):
            ctx.drop_column("orders", "legacy")

        def downgrade(self, ctx):
            ctx.restore_column("orders", "legacy")
    """


def test_a_restore_of_a_column_its_upgrade_drops_is_judged_after_that_upgrade(tmp_path, orders):
    path = _write(tmp_path, "0001_drop.py", DROP_AND_RESTORE)
    report = lint_paths([path], catalog=orders, namespace="sales")
    restore = next(f for f in report.findings if f.rule == "restore-column")
    assert restore.severity == "info"
    assert "sales.orders.legacy is live now: it is judged once the upgrade that drops it (0001_drop.py) has run" in (
        restore.message
    )
    assert "Rename or drop it first" not in restore.message


def test_a_restore_in_an_upgrade_after_the_migration_that_drops_the_column(tmp_path, orders):
    _write(tmp_path, "0001_drop.py", DROP_AND_RESTORE)
    later = _write(
        tmp_path,
        "0002_back.py",
        RESTORE,
    )
    restore = next(
        f for f in lint_paths([tmp_path], catalog=orders, namespace="sales").findings if f.path == str(later)
    )
    assert "judged once the upgrade that drops it (0001_drop.py) has run" in restore.message


def test_a_restore_of_a_live_column_nothing_drops_keeps_the_refusal(tmp_path, orders):
    path = _write(
        tmp_path,
        "0001_back.py",
        RESTORE,
    )
    (restore,) = lint_paths([path], catalog=orders, namespace="sales").findings
    assert "Rename or drop it first" in restore.message


def test_a_restore_no_schema_allows_is_an_error_with_a_fix_that_fits(tmp_path, orders):
    path = _write(
        tmp_path,
        "0001_back.py",
        'class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.restore_column("orders", "legcy")\n',
    )
    report = lint_paths([path], catalog=orders, namespace="sales")
    (restore,) = report.findings
    assert restore.severity == "error" and "it cannot work" in restore.message
    assert restore.fix.startswith("check the table and column names: no schema of sales.orders ever had legcy")
    assert "nothing to fix" not in report.text() and "fix: check the table and column names" in report.text()


def test_without_a_namespace_bare_names_are_not_judged_and_say_how_to_name_one(tmp_path, orders):
    path = _write(tmp_path, "0001_drop.py", DROP_AND_RESTORE)
    report = lint_paths([path], catalog=orders, namespace=None)
    assert [f.severity for f in report.findings] == ["error", "info"]
    for finding in report.findings:
        assert "(not judged live: no namespace to find orders in; give the namespace" in finding.message
        assert "Empty namespace identifier" not in finding.message


def test_a_dotted_name_is_judged_without_a_namespace(tmp_path, orders):
    path = _write(
        tmp_path,
        "0001_drop.py",
        RESTORE.replace('restore_column("orders"', 'drop_column("sales.orders"'),
    )
    (drop,) = lint_paths([path], catalog=orders, namespace=None).findings
    assert drop.severity == "info" and "(sales.orders holds no rows: nothing is lost)" in drop.message


def test_a_drop_of_a_table_that_does_not_exist_says_so(tmp_path, orders):
    path = _write(
        tmp_path,
        "0001_drop.py",
        'class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        ctx.drop_table("old_stuff")\n',
    )
    (drop,) = lint_paths([path], catalog=orders, namespace="sales").findings
    assert drop.severity == "info" and drop.message.endswith("(sales.old_stuff does not exist: nothing to lose)")
    assert drop.fix == "nothing to fix: sales.old_stuff does not exist: nothing to lose"
