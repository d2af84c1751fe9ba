"""The data mover operators under a real Airflow (dag.test with an SQLite metadata database) and called directly."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from types import SimpleNamespace

import pyarrow as pa
import pytest
from airflow.sdk.exceptions import AirflowFailException
from pyiceberg.expressions import EqualTo

from iceberg_ops_provider.data_migration.state import MOVE_ID_KEY
from iceberg_ops_provider.operators.data_move import (
    IcebergDataMoveOperator,
    IcebergMovePlanOperator,
    IcebergMoveVerifyOperator,
    default_move_id,
)
from tests.airflow.conftest import catalog_at, xcom

# Written into the dags folder: dag.test() runs DAGs Airflow parsed from a file there.
MOVE_DAGS = '''
"""DAGs of tests/airflow/operators/test_data_move.py."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import dag

from iceberg_ops_provider.operators.data_move import (
    IcebergDataMoveOperator,
    IcebergMovePlanOperator,
    IcebergMoveVerifyOperator,
)

DEFAULTS = {"start_date": datetime(2026, 1, 1, tzinfo=UTC), "schedule": None, "catchup": False}
PARAMS = {"source": "sales.events", "target": "sales.copy", "where": "", "move_id": "", "fail_after_move": ""}
RETRY = {"retries": 1, "retry_delay": timedelta(seconds=0)}


def fail_first_try(context, result):
    """Fail the task once after its move committed (when the run config names a flag file)."""
    flag = context["params"]["fail_after_move"]
    if flag and not Path(flag).exists():
        Path(flag).touch()
        raise RuntimeError("injected failure after the move committed")


@dag(params=PARAMS, **DEFAULTS)
def iceberg_ops_data_move():
    IcebergDataMoveOperator(
        task_id="move",
        source="{{ params.source }}",
        target="{{ params.target }}",
        where="{{ params.where }}",
        move_id="{{ params.move_id }}",
        create_target=True,
        verify="count",
        commit_every_bytes=1,
        post_execute=fail_first_try,
        **RETRY,
    )


@dag(params=PARAMS, **DEFAULTS)
def iceberg_ops_move_fan_out():
    move_args = {"source": "{{ params.source }}", "target": "{{ params.target }}", "create_target": True}
    plan = IcebergMovePlanOperator(task_id="plan", commit_every_bytes=1, **move_args)
    move = IcebergDataMoveOperator.partial(
        task_id="move", commit_every_bytes=1, post_execute=fail_first_try, **move_args, **RETRY
    ).expand(units=plan.output)
    verify = IcebergMoveVerifyOperator(
        task_id="verify", move_id=plan.output["move_id"], trigger_rule="none_failed", **move_args
    )
    move >> verify


iceberg_ops_data_move()
iceberg_ops_move_fan_out()
'''


@pytest.fixture
def move_dags(airflow_db):
    """The test DAGs in the dags folder (before ``run_dag`` parses it)."""
    (airflow_db / "data_move_dags.py").write_text(MOVE_DAGS)
    return airflow_db


def _source(root, files: int = 3, rows: int = 50, properties: dict[str, str] | None = None):
    """``sales.events`` with ``files`` appends of ``rows`` rows (ids from 0, ``day`` 1..files)."""
    catalog = catalog_at(root)
    catalog.create_namespace_if_not_exists("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.int32()), pa.field("note", pa.string())])
    table = catalog.create_table("sales.events", schema, properties=properties or {})
    for n in range(files):
        batch = {"id": range(n * rows, (n + 1) * rows), "day": [n + 1] * rows, "note": [f"n{n}"] * rows}
        table.append(pa.table(batch, schema=schema))
    return catalog


def _rows(table) -> Counter:
    """The table's rows as a multiset of (id, day, note)."""
    data = table.scan().to_arrow()
    return Counter(zip(*(data.column(name).to_pylist() for name in ("id", "day", "note")), strict=True))


def _move_commits(table, move_id: str) -> list:
    """The target snapshots committed by ``move_id``."""
    return [s for s in table.snapshots() if s.summary and s.summary.additional_properties.get(MOVE_ID_KEY) == move_id]


def _mapped(dag_run, task_id: str) -> list:
    """The mapped instances of ``task_id``, by map index."""
    return sorted((ti for ti in dag_run.get_task_instances() if ti.task_id == task_id), key=lambda ti: ti.map_index)


def _moving(**kwargs):
    """A move operator from ``sales.events`` to ``sales.copy``, one source file per unit."""
    args = {"source": "sales.events", "target": "sales.copy", "create_target": True, "commit_every_bytes": 1}
    return IcebergDataMoveOperator(task_id="move", **{**args, **kwargs})


def test_a_move_task_moves_the_rows_and_its_retry_resumes_the_same_move(
    move_dags, run_dag, iceberg_connection, capfd, caplog
):
    catalog = _source(iceberg_connection)
    flag = iceberg_connection / "failed_once"

    dag_run = run_dag("iceberg_ops_data_move", fail_after_move=str(flag))

    assert str(dag_run.state) == "success"
    assert flag.exists() and dag_run.get_task_instance("move").try_number == 2  # failed after committing, retried
    target = catalog.load_table("sales.copy")
    assert _rows(target) == _rows(catalog.load_table("sales.events"))
    result = xcom(dag_run, "move")
    json.dumps(result)
    # The retry is the same task instance, so the same move: it found every unit committed.
    assert result["move_id"] == f"airflow:iceberg_ops_data_move:move:-1:{dag_run.logical_date.isoformat()}"
    assert result["complete"] and result["units_total"] == 3
    assert (result["units_committed"], result["rows"]) == (0, 0)
    assert len(_move_commits(target, result["move_id"])) == 3  # one commit per unit, none repeated
    # The engine logs each commit and its progress (rows, bytes, rate, ETA) on stdlib loggers, which the task's
    # logging forwards to the task log (dag.test runs the task in this process: pytest's log capture has them).
    captured = capfd.readouterr()
    log = captured.out + captured.err + caplog.text
    assert "Moving sales.events -> sales.copy" in log
    assert f"unit 3/3 of move {result['move_id']} committed: 50 rows" in log
    assert "move sales.events -> sales.copy: 150 rows" in log


def test_the_fan_out_plans_then_moves_each_unit_in_a_mapped_task_then_verifies(move_dags, run_dag, iceberg_connection):
    catalog = _source(iceberg_connection)
    flag = iceberg_connection / "failed_once"

    dag_run = run_dag("iceberg_ops_move_fan_out", fail_after_move=str(flag))

    assert str(dag_run.state) == "success"
    batches = xcom(dag_run, "plan")
    assert [len(batch) for batch in batches] == [1, 1, 1]
    move_id = f"airflow:iceberg_ops_move_fan_out:plan:-1:{dag_run.logical_date.isoformat()}"
    assert {unit["move_id"] for batch in batches for unit in batch} == {move_id}  # the plan's, carried by its units
    moves = _mapped(dag_run, "move")
    assert [ti.map_index for ti in moves] == [0, 1, 2]
    assert sorted(ti.try_number for ti in moves) == [1, 1, 2]  # one failed after committing its unit
    results = [ti.xcom_pull(task_ids="move", map_indexes=ti.map_index) for ti in moves]
    assert sum(result["rows"] for result in results) == 100  # the retry did not write its unit again
    assert sorted(result["units_skipped"] for result in results) == [0, 0, 1]
    report = xcom(dag_run, "verify")
    assert report["ok"] and report["method"] == "checksum" and report["source_rows"] == report["target_rows"] == 150
    target = catalog.load_table("sales.copy")
    assert _rows(target) == _rows(catalog.load_table("sales.events"))
    assert len(_move_commits(target, move_id)) == 3


def test_bad_input_or_a_failed_verification_fails_the_move_task_at_once(move_dags, run_dag, iceberg_connection):
    catalog = _source(iceberg_connection, files=1)
    bad = run_dag("iceberg_ops_data_move", where="no_such_column > 1")
    assert str(bad.state) == "failed"
    assert bad.get_task_instance("move").try_number == 1  # retries=1 was not used
    assert not catalog.table_exists("sales.copy")  # refused before anything was written

    # (A run's config stays in the DAG's params for the next run of this DagBag: give every param.)
    assert str(run_dag("iceberg_ops_data_move", where="", move_id="copy-1").state) == "success"
    catalog.load_table("sales.copy").delete("id < 10")  # rows of the move lost behind its back
    damaged = run_dag("iceberg_ops_data_move", where="", move_id="copy-1")  # nothing to move; verify="count" fails
    assert str(damaged.state) == "failed" and damaged.get_task_instance("move").try_number == 1
    report = damaged.get_task_instance("move").xcom_pull(task_ids="move", key="report")
    assert (report["ok"], report["method"], report["source_rows"], report["target_rows"]) == (False, "count", 50, 40)


def test_the_same_move_id_run_twice_writes_the_rows_once(iceberg_connection):
    catalog = _source(iceberg_connection)
    first = _moving(move_id="copy-1").execute({})
    again = _moving(move_id="copy-1").execute({})
    assert (first["rows"], first["units_committed"], first["complete"]) == (150, 3, True)
    assert (again["rows"], again["units_committed"], again["complete"]) == (0, 0, True)
    target = catalog.load_table("sales.copy")
    assert _rows(target) == _rows(catalog.load_table("sales.events"))
    assert len(_move_commits(target, "copy-1")) == 3
    replan = IcebergMovePlanOperator(
        task_id="plan", source="sales.events", target="sales.copy", move_id="copy-1", commit_every_bytes=1
    )
    assert replan.execute({}) == []  # nothing pending: a mapped move task would be skipped

    target.delete("id < 10")  # rows of the move lost behind its back
    with pytest.raises(AirflowFailException, match=r"VerificationFailedError: .*140 target rows"):
        _moving(move_id="copy-1", verify="count").execute({})


def _data_files(table) -> set[bytes]:
    """The contents of the table's current data files."""
    return {table.io.new_input(task.file.file_path).open().read() for task in table.scan().plan_files()}


@pytest.mark.parametrize("rewrite", [False, True])
def test_rewrite_chooses_between_copying_files_as_they_are_and_re_encoding_them(iceberg_connection, rewrite):
    # Source files compressed otherwise than the target writes: a re-encoded file cannot match one byte for byte.
    catalog = _source(iceberg_connection, properties={"write.parquet.compression-codec": "gzip"})
    result = _moving(move_id="copy", rewrite=rewrite).execute({})
    source, target = catalog.load_table("sales.events"), catalog.load_table("sales.copy")
    assert result["rows"] == 150 and _rows(target) == _rows(source)
    shared = _data_files(source) & _data_files(target)
    assert len(shared) == (0 if rewrite else 3)


def test_units_run_one_by_one_on_their_snapshot_then_the_rest_resumes_and_verify_catches_a_damaged_target(
    iceberg_connection,
):
    catalog = _source(iceberg_connection)
    planning = IcebergMovePlanOperator(
        task_id="plan",
        source="sales.events",
        target="sales.copy",
        create_target=True,
        commit_every_bytes=1,
        units_per_task=2,
    )
    batches = planning.execute({})
    assert [len(batch) for batch in batches] == [2, 1]
    move_id = batches[0][0]["move_id"]
    planned = _rows(catalog.load_table("sales.events"))
    extra = {"id": range(500, 510), "day": [9] * 10, "note": ["late"] * 10}
    catalog.load_table("sales.events").append(
        pa.table(extra, schema=catalog.load_table("sales.events").schema().as_arrow())
    )

    one = _moving(units=batches[1][0]).execute({})  # one unit's JSON, as .expand() hands out a plain list item
    twice = _moving(units=batches[1]).execute({})
    assert (one["rows"], one["units_committed"], one["complete"]) == (50, 1, False)
    assert (twice["rows"], twice["units_skipped"]) == (0, 1)
    rest = _moving(move_id=move_id).execute({})  # the whole move under the same id: only what is left
    assert (rest["rows"], rest["units_committed"], rest["complete"]) == (100, 2, True)
    assert _rows(catalog.load_table("sales.copy")) == planned  # the snapshot planned, not the rows appended since

    verifying = IcebergMoveVerifyOperator(task_id="verify", source="sales.events", target="sales.copy", move_id=move_id)
    report = verifying.execute({})
    assert report["ok"] and report["method"] == "checksum" and report["source_rows"] == report["target_rows"] == 150
    catalog.load_table("sales.copy").delete("id < 10")
    with pytest.raises(AirflowFailException, match="VerificationFailedError"):
        verifying.execute({})
    with pytest.raises(AirflowFailException, match=r"already finished copying sales\.events.*mode='incremental'"):
        planning.execute({})  # the same move again after the source moved on: refused, not copied twice


def test_the_plan_never_maps_more_move_tasks_than_airflow_allows(iceberg_connection, monkeypatch):
    _source(iceberg_connection, files=5)
    monkeypatch.setenv("AIRFLOW__CORE__MAX_MAP_LENGTH", "2")
    planning = IcebergMovePlanOperator(
        task_id="plan", source="sales.events", target="sales.copy", create_target=True, commit_every_bytes=1
    )
    assert [len(batch) for batch in planning.execute({})] == [3, 2]  # five units in two tasks, not five


def test_arguments_are_checked_where_they_are_given():
    with pytest.raises(ValueError, match="mode='upsert' is not a move mode; use one of append, overwrite"):
        _moving(mode="upsert")
    with pytest.raises(ValueError, match="verify='md5' is not a verification method"):
        _moving(verify="md5")
    with pytest.raises(ValueError, match="method='exact' is not a verification method"):
        IcebergMoveVerifyOperator(task_id="v", source="a.b", target="a.c", move_id="m", method="exact")
    with pytest.raises(ValueError, match="units_per_task=0 must be 1 or more"):
        IcebergMovePlanOperator(task_id="p", source="a.b", target="a.c", units_per_task=0)
    with pytest.raises(ValueError, match="commit_every_bytes=0 must be a positive"):
        _moving(commit_every_bytes=0)


def test_bad_input_at_run_time_is_a_permanent_failure(iceberg_connection):
    _source(iceberg_connection, files=2)
    batches = IcebergMovePlanOperator(
        task_id="plan", source="sales.events", target="sales.copy", create_target=True, commit_every_bytes=1
    ).execute({})
    unit = batches[0][0]
    failures = {
        "different moves": _moving(units=[unit, {**unit, "move_id": "another"}]),
        "differs from the move id its units carry": _moving(units=[unit], move_id="mine"),
        "different source snapshots": _moving(units=[unit, {**batches[1][0], "source_snapshot_id": 1}]),
        "is not a unit's JSON": _moving(units="plan.output"),
        "source table sales.nope does not exist": _moving(source="sales.nope"),
        "create_target=True": _moving(target="sales.absent", create_target=False),
        "no_such_column": _moving(columns=["id", "no_such_column"]),
        "move_id is empty": IcebergMoveVerifyOperator(
            task_id="v", source="sales.events", target="sales.copy", move_id=""
        ),
    }
    for message, operator in failures.items():
        with pytest.raises(AirflowFailException, match=message):
            operator.execute({})
    assert _moving(move_id="by-day", where=EqualTo("day", 1)).execute({})["rows"] == 50  # an expression works too
    with pytest.raises(AirflowFailException, match="MoveStateError"):  # the same id for another filter
        _moving(move_id="by-day", where="day = 2").execute({})


def test_the_parse_time_checks_know_what_the_engine_knows():
    from iceberg_ops_provider import data_migration
    from iceberg_ops_provider.operators import data_move

    assert data_move.MODES == data_migration.MODES
    assert data_move.VERIFY_METHODS == data_migration.VERIFY_METHODS
    assert data_move.DEFAULT_COMMIT_EVERY_BYTES == data_migration.DEFAULT_COMMIT_EVERY_BYTES


def test_the_default_move_id_names_the_task_instance_and_is_none_outside_one():
    ti = SimpleNamespace(dag_id="d", task_id="t", map_index=3, run_id="manual__x")
    when = datetime(2026, 11, 1, tzinfo=UTC)
    assert default_move_id({"ti": ti, "logical_date": when}) == "airflow:d:t:3:2026-11-01T00:00:00+00:00"
    assert default_move_id({"ti": ti, "logical_date": None}) == "airflow:d:t:3:manual__x"  # a run without one
    assert default_move_id({}) is None
