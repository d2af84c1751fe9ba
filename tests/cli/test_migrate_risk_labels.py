"""One risk per kind of operation: a generated file's label for a step is ``plan``'s label for it.

One project on a real SQLite catalog holds a table per kind of operation autogenerate writes; each
table's model then changes in exactly that way. ``iceberg-ops revision --autogenerate`` and
``iceberg-ops plan`` run as real subprocesses once, and each kind is checked on its own table: the
``# [risk]`` comment of the file, its ``operations`` and ``plan``'s label all say
:data:`~iceberg_ops_provider.migration.risks.RISKS` of that kind.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iceberg_ops_provider.autogen import operations as operations_module
from iceberg_ops_provider.config import load_config
from iceberg_ops_provider.migration import MigrationContext
from iceberg_ops_provider.migration.discovery import discover
from iceberg_ops_provider.migration.risks import EMPTY_DROP_RISK, RISKS
from iceberg_ops_provider.runner.commands import open_runner, revision
from tests.cli.ops_support import run

ID = "  - {name: id, type: long, required: true}\n"
TS = "  - {name: ts, type: timestamptz}\n"

# kind -> (the model before, the model after, whether the table holds rows); the table is t_<kind>.
CASES: dict[str, tuple[str | None, str, bool]] = {
    "create_table": (None, ID, False),
    "drop_table": (ID, "dropped", True),
    "add_column": (ID, ID + "  - {name: note, type: string}\n", False),
    "add_required_column": (ID, ID + "  - {name: code, type: long, required: true}\n", False),
    "drop_column": (ID + "  - {name: old, type: string}\n", ID, True),
    "rename_column": (
        ID + "  - {name: email, type: string}\n",
        ID + "  - {name: customer_email, type: string, renamed_from: email}\n",
        False,
    ),
    "promote_column": (ID + "  - {name: qty, type: int}\n", ID + "  - {name: qty, type: long}\n", False),
    "make_column_optional": (
        ID + "  - {name: code, type: long, required: true}\n",
        ID + "  - {name: code, type: long}\n",
        False,
    ),
    "set_column_doc": (
        ID + "  - {name: note, type: string, doc: before}\n",
        ID + "  - {name: note, type: string, doc: after}\n",
        False,
    ),
    "move_column": (
        ID + "  - {name: a, type: string}\n  - {name: b, type: string}\n",
        ID + "  - {name: b, type: string}\n  - {name: a, type: string}\n",
        False,
    ),
    "set_identifier_fields": (ID, ID + "identifier_fields: [id]\n", False),
    "add_partition_field": (ID + TS, ID + TS + 'partition_by: ["day(ts)"]\n', False),
    "drop_partition_field": (ID + TS + 'partition_by: ["day(ts)"]\n', ID + TS, False),
    "set_sort_order": (ID + TS, ID + TS + 'sort_by: ["ts desc"]\n', False),
    "set_properties": (ID, ID + "properties: {owner: sales}\n", False),
    "remove_properties": (ID + "properties: {owner: sales}\n", ID + "properties: {owner: null}\n", False),
}
# No model change writes these in an upgrade; a hand-written body may (autogenerate writes restore_column
# only as the downgrade of a drop).
CONTEXT_ONLY = {"rename_table", "rename_partition_field", "restore_column"}
# Data operations: a model says what tables look like, not how their rows change.
CONTEXT_ONLY |= {"delete_rows", "update_rows", "backfill", "rewrite_partitions", "copy_rows", "restore_data"}


def _model(kind: str, body: str) -> str:
    if body == "dropped":
        return f"name: t_{kind}\ndropped: true\n"
    return f"name: t_{kind}\ncolumns:\n{body}"  # the columns, then any other key


def _write_models(models: Path, version: int) -> None:
    for path in models.glob("*.yaml"):
        path.unlink()
    for kind, (before, after, _) in CASES.items():
        body = before if version == 1 else after
        if body is not None:
            (models / f"t_{kind}.yaml").write_text(_model(kind, body))


def _mentions(description: str, kind: str) -> bool:
    return re.search(rf"(?<!\w)t_{kind}(?!\w)", description) is not None


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every kind's tables migrated to their first model, then a revision and a plan by the command line."""
    project = tmp_path_factory.mktemp("risks")
    (project / "models").mkdir()
    (project / "migrations").mkdir()
    (project / "iceberg-ops.yaml").write_text(
        "catalog: {kind: sqlite, db_path: catalog.db, warehouse_dir: warehouse}\nnamespace: sales\n"
    )
    config = load_config(project / "iceberg-ops.yaml")
    _write_models(project / "models", 1)
    revision(config, "first models", autogenerate_from_models=True)
    runner = open_runner(config)
    runner.upgrade()
    for kind, (_, _, rows) in CASES.items():
        if rows:
            table = runner.catalog.load_table(f"sales.t_{kind}")
            row = {"id": 1, **({"old": "kept"} if kind == "drop_column" else {})}  # a dropped column that holds a value
            table.append(pa.Table.from_pylist([row], schema=table.schema().as_arrow()))
    _write_models(project / "models", 2)

    written = run(project, "--json", "revision", "-m", "every kind", "--autogenerate")
    assert written.returncode == 0, written.stderr
    planned = run(project, "--json", "plan")
    assert planned.returncode == 0, planned.stderr
    (step,) = json.loads(planned.stdout)["steps"]
    path = Path(json.loads(written.stdout)["path"])
    (script,) = [s for s in discover(project / "migrations") if s.path == path]
    return {
        "text": path.read_text(),
        "operations": script.migration.operations,
        "revision": json.loads(written.stdout)["operations"],
        "plan": step["operations"],
    }


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_file_and_plan_give_a_step_the_same_label(generated, kind):
    comments = [
        (risk, description)
        for risk, description in re.findall(r"^ {8}# \[(\w+)\] (.*)$", generated["text"], re.MULTILINE)
        if _mentions(description, kind)
    ]
    listed = [line for line in generated["operations"] if _mentions(line, kind)]
    planned = [op for op in generated["plan"] if _mentions(op["operation"], kind)]

    assert len(comments) == 1, comments  # each table changes in one way only
    assert [f"[{risk}] {description}" for risk, description in comments] == listed
    assert [risk for risk, _ in comments] == [RISKS[kind]]
    assert [op["risk"] for op in planned] == [RISKS[kind]], planned


def test_the_cases_cover_every_kind_and_every_operation_autogenerate_writes(generated):
    assert set(CASES) | CONTEXT_ONLY == set(RISKS)
    written = {op["operation"] for op in generated["revision"]}
    classes = {
        name
        for name in operations_module.__all__
        if isinstance(getattr(operations_module, name), type)
        and issubclass(getattr(operations_module, name), operations_module.Operation)
        and name != "Operation"
    }
    assert written == classes - {"RestoreColumn"}  # written as a drop's downgrade only
    assert all(op["risk"] != "unknown" for op in generated["plan"]), generated["plan"]


def test_what_only_a_hand_written_body_asks_for_is_labelled_from_the_same_table(catalog, namespace, orders_schema):
    created = MigrationContext(catalog, namespace)
    created.create_table("orders", schema=orders_schema, partition_by=["day(ts)"])
    created.commit()
    context = MigrationContext(catalog, namespace, dry_run=True)
    context.rename_partition_field("orders", "ts_day", "day")
    context.rename_table("orders", "orders_v2")
    labels = {op["operation"].split(" orders")[0]: op["risk"] for op in context.operations}
    assert labels["rename partition field"] == RISKS["rename_partition_field"]
    assert labels["rename table"] == RISKS["rename_table"]


def test_a_drop_from_an_empty_table_is_labelled_lower_by_plan_only(catalog, namespace, orders_schema):
    catalog.create_table("sales.orders", schema=orders_schema)
    context = MigrationContext(catalog, namespace, dry_run=True)
    context.drop_column("orders", "customer")
    context.drop_table("orders")
    assert [op["risk"] for op in context.operations] == [EMPTY_DROP_RISK, EMPTY_DROP_RISK]


@pytest.mark.parametrize(
    ("changes", "kind"),
    [
        ({"doc": "the amount"}, "set_column_doc"),
        ({"type": "decimal(14,2)"}, "promote_column"),
        ({"required": False}, "make_column_optional"),
    ],
)
def test_alter_column_is_labelled_by_what_it_changes(catalog, namespace, orders_schema, changes, kind):
    catalog.create_table("sales.orders", schema=orders_schema)
    context = MigrationContext(catalog, namespace, dry_run=True)
    context.alter_column("orders", "id" if "required" in changes else "amount", **changes)
    assert [op["risk"] for op in context.operations] == [RISKS[kind]]
