"""Lint of data operations: a delete or update of every row needs an allowance, and a data operation on a
table its own migration drops or renames is an error no allowance accepts (the runner refuses it)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from iceberg_ops_provider.lint import lint_paths
from iceberg_ops_provider.lint.rules import RULES

HEADER = "from iceberg_ops_provider.migration import BaseMigration\n\n\n"


def _lint(tmp_path: Path, body: str, **kwargs):
    path = tmp_path / "0001_rows.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return lint_paths([path], **kwargs)


def _found(tmp_path: Path, upgrade: str) -> list[tuple[str, int, str | None]]:
    body = "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n" + textwrap.indent(upgrade, " " * 8)
    return [(f.rule, f.line - 5, f.table) for f in _lint(tmp_path, body).findings]


def test_the_rules_exist_with_stable_ids():
    assert RULES["delete-all-rows"].severity == "error" and RULES["delete-all-rows"].allowable
    assert RULES["update-all-rows"].severity == "warning" and RULES["update-all-rows"].allowable
    assert RULES["data-on-dropped-table"].severity == "error" and not RULES["data-on-dropped-table"].allowable


@pytest.mark.parametrize(
    "call",
    [
        'ctx.delete_rows("orders", None)',
        'ctx.delete_rows("orders", where=None)',
        'ctx.delete_rows(table="orders", where=None)',
        'ctx.delete_rows("orders")',
    ],
)
def test_a_delete_without_a_where_is_a_finding(tmp_path, call):
    assert _found(tmp_path, call + "\n") == [("delete-all-rows", 1, "orders")]


@pytest.mark.parametrize(
    "call",
    [
        'ctx.update_rows("orders", {"v": 1})',
        'ctx.update_rows("orders", {"v": 1}, None)',
        'ctx.update_rows("orders", set={"v": 1}, where=None)',
    ],
)
def test_an_update_without_a_where_is_a_finding(tmp_path, call):
    assert _found(tmp_path, call + "\n") == [("update-all-rows", 1, "orders")]


@pytest.mark.parametrize(
    "call",
    [
        'ctx.delete_rows("orders", "region = \'eu\'")',
        'ctx.delete_rows("orders", where=expression)',
        'ctx.update_rows("orders", {"v": 1}, "id < 3")',
        'ctx.update_rows("orders", {"v": 1}, where=chosen)',
        'ctx.update_rows("orders", {"v": 1}, **options)',
        'ctx.backfill("orders", "v", 1)',
        'ctx.rewrite_partitions("orders")',
    ],
)
def test_a_where_that_may_be_given_or_an_operation_without_a_rule_is_no_finding(tmp_path, call):
    assert _found(tmp_path, call + "\n") == []


def test_an_allowance_accepts_it(tmp_path):
    report = _lint(
        tmp_path,
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.delete_rows("scratch", None)  # iceberg-ops: allow=delete-all-rows reason="scratch is refilled"
                ctx.update_rows(  # iceberg-ops: allow=update-all-rows reason="every price changes"
                    "orders",
                    {"price": 2},
                )
        """,
    )
    assert report.ok and [f.allowed for f in report.findings] == ["scratch is refilled", "every price changes"]


def test_a_table_the_body_creates_loses_nothing(tmp_path):
    assert _found(tmp_path, 'ctx.create_table("fresh", schema)\nctx.update_rows("fresh", {"v": 1})\n') == []


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ('ctx.delete_rows("orders", "id < 3")\nctx.drop_table("orders")\n', 1),
        ('ctx.drop_table("orders")\nctx.backfill("orders", "v", 1)\n', 2),
        ('ctx.rewrite_partitions("orders")\nctx.rename_table("orders", "orders_old")\n', 1),
        ('ctx.drop_table("orders")\nctx.restore_data("orders")\n', 2),
    ],
)
def test_a_data_operation_on_a_table_the_migration_drops_is_an_error(tmp_path, body, line):
    report = _lint(
        tmp_path,
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
        + textwrap.indent(body, " " * 8)
        + '    allow = {"data-on-dropped-table": "fine"}\n',
    )
    rules = [(f.rule, f.line - 5) for f in report.findings if f.rule not in ("drop-table", "rename-table")]
    assert ("data-on-dropped-table", line) in rules
    assert ("not-allowable", 3) in rules and not report.ok
    [finding] = [f for f in report.findings if f.rule == "data-on-dropped-table"]
    assert finding.table == "orders" and "drops or renames" in finding.message


@pytest.mark.parametrize(
    "body",
    [
        'ctx.rename_table("orders", "orders_v2")\nctx.backfill("orders_v2", "v", 1)\n',
        'ctx.drop_table("orders")\nctx.create_table("orders", schema)\nctx.backfill("orders", "v", 1)\n',
        'ctx.rename_table("orders_old", "orders")\nctx.backfill("orders", "v", 1)\n',
    ],
)
def test_a_table_that_exists_at_the_end_under_its_name_is_no_error(tmp_path, body):
    assert "data-on-dropped-table" not in [rule for rule, _, _ in _found(tmp_path, body)]


def test_downgrade_is_judged_on_its_own(tmp_path):
    report = _lint(
        tmp_path,
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.drop_table("orders")

            def downgrade(self, ctx):
                ctx.restore_data("orders")
        """,
    )
    assert "data-on-dropped-table" not in [f.rule for f in report.findings]


def test_with_a_catalog_an_empty_table_loses_nothing_and_a_full_one_says_its_rows(tmp_path, catalog):
    catalog.create_namespace("sales")
    catalog.create_table("sales.empty", pa.schema([("v", pa.int64())]))
    full = catalog.create_table("sales.full", pa.schema([("v", pa.int64())]))
    full.append(pa.table({"v": [1, 2, 3]}))
    report = _lint(
        tmp_path,
        """\
        class Migration(BaseMigration):
            def upgrade(self, ctx):
                ctx.delete_rows("empty", None)
                ctx.update_rows("full", {"v": 0})
        """,
        catalog=catalog,
        namespace="sales",
    )
    empty, whole = report.findings
    assert (empty.rule, empty.severity) == ("delete-all-rows", "info") and "holds no rows" in empty.message
    assert (whole.rule, whole.severity) == ("update-all-rows", "warning") and "holds 3 rows" in whole.message
    assert not report.ok


def test_a_literal_maintenance_policy_value_a_key_does_not_accept_is_an_error(tmp_path):
    assert not RULES["maintenance-policy-value"].allowable
    found = _found(
        tmp_path,
        'ctx.set_properties("orders", {"iceberg-ops.maintenance.enabled": "off", "owner": "sales"})\n'
        'ctx.set_properties("orders", {"iceberg-ops.maintenance.quiet-hours": "01-05", "owner": "ops"})\n'
        'ctx.set_properties("orders", {"iceberg-ops.maintenance.max-rewrite-byte": 5})\n'
        'ctx.set_properties("orders", {"iceberg-ops.maintenance.enabled": flag})\n',
    )
    assert found == [("maintenance-policy-value", 1, "orders"), ("maintenance-policy-value", 3, "orders")]
    report = _lint(
        tmp_path,
        "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n"
        '        ctx.set_properties("orders", {"history.expire.min-snapshots-to-keep": 0})\n',
    )
    [finding] = report.findings
    assert "history.expire.min-snapshots-to-keep=0 is not accepted: it takes an integer >= 1" in finding.message
    assert finding.severity == "error"
