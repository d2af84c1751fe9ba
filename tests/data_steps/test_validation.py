"""validate_step's refusals, each before anything is committed: unknown columns (with the closest name),
a where on an unknown column, literals of the wrong type, functions of the wrong length or type."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from iceberg_ops_provider.data_steps import DataStep, run_step, validate_step
from iceberg_ops_provider.errors import InvalidDataStepError
from tests.data_steps.support import SCHEMA, make_table, read_rows

TABLE = ("sales", "orders")


@pytest.fixture
def table(catalog):
    return make_table(catalog, files_per_region=1, rows=20)


def _refused(table, step: DataStep) -> InvalidDataStepError:
    with pytest.raises(InvalidDataStepError) as raised:
        validate_step(table, step)
    return raised.value


def test_an_unknown_column_to_set_names_the_closest(table):
    error = _refused(table, DataStep("v/1", "update_rows", TABLE, None, {"vv": 1.0}))
    assert (error.table, error.column, error.closest) == ("sales.orders", "vv", "v")
    assert "Did you mean 'v'?" in str(error)


def test_a_where_on_an_unknown_column_names_the_closest(table):
    error = _refused(table, DataStep("v/2", "delete_rows", TABLE, "regoin = 'eu'"))
    assert (error.column, error.closest) == ("regoin", "region")


def test_a_where_that_does_not_parse(table):
    error = _refused(table, DataStep("v/3", "delete_rows", TABLE, "k >>> 3"))
    assert "does not parse" in str(error) and error.got == "k >>> 3"


def test_a_where_that_does_not_parse_says_where_it_stopped_not_the_parsers_grammar(table):
    error = _refused(table, DataStep("v/3b", "delete_rows", TABLE, "k >"))
    assert "does not parse as a filter at character 1." in str(error)
    assert "Write comparisons of a column with a literal" in str(error)
    assert "W:(" not in str(error) and len(str(error)) < 400


@pytest.mark.parametrize("where", ["", "   "])
def test_an_empty_where_is_refused_rather_than_read_as_every_row(catalog, table, where):
    step = DataStep("v/3c", "delete_rows", TABLE, where)
    error = _refused(table, step)
    assert (error.expected, error.got) == ("a filter, or None for every row", repr(where))
    assert "names no rows" in str(error)
    with pytest.raises(InvalidDataStepError):
        run_step(catalog, step)
    assert catalog.load_table(TABLE).scan().to_arrow().num_rows == 40  # nothing deleted


@pytest.mark.parametrize(
    ("column", "value", "expected"),
    [("k", "five", "long"), ("v", "1.5", "double"), ("k", 1.5, "long"), ("region", 3, "string"), ("k", True, "long")],
)
def test_a_literal_of_the_wrong_type(table, column, value, expected):
    error = _refused(table, DataStep("v/4", "update_rows", TABLE, None, {column: value}))
    assert (error.column, error.expected, error.got) == (column, expected, type(value).__name__)


def test_a_literal_of_the_wrong_type_says_what_the_column_takes(table):
    error = _refused(table, DataStep("v/4b", "update_rows", TABLE, None, {"k": "five"}))
    assert str(error).endswith("it takes integer values, not string")
    error = _refused(table, DataStep("v/4c", "update_rows", TABLE, None, {"v": "1.5"}))
    assert str(error).endswith("it takes float or integer values, not string")


def test_null_into_a_required_column(table):
    error = _refused(table, DataStep("v/5", "update_rows", TABLE, None, {"id": None}))
    assert error.column == "id" and "required" in str(error)


def test_a_backfill_of_a_required_column_or_of_two_columns(table):
    assert _refused(table, DataStep("v/6", "backfill", TABLE, None, {"id": 1})).got == "a required column"
    assert _refused(table, DataStep("v/7", "backfill", TABLE, None, {"k": 1, "v": 1.0})).got == "2 columns"


def test_a_delete_takes_no_assignment_and_an_update_needs_one(table):
    assert _refused(table, DataStep("v/8", "delete_rows", TABLE, "k = 1", {"k": 1})).expected == "no column"
    assert _refused(table, DataStep("v/9", "update_rows", TABLE, "k = 1")).expected == "at least one column"


def test_a_function_returning_the_wrong_length(table):
    step = DataStep("v/10", "update_rows", TABLE, None, {"v": lambda batch: pa.array([1.0])})
    error = _refused(table, step)
    assert error.column == "v" and error.got == "1 values" and error.expected.endswith("values")
    assert "it must return one value for each row of the batch" in str(error)


def test_a_function_returning_the_wrong_type(table):
    step = DataStep("v/11", "update_rows", TABLE, None, {"k": lambda batch: pc.cast(batch.column("id"), pa.string())})
    error = _refused(table, step)
    assert (error.column, error.expected, error.got) == ("k", "int64", "string")


def test_a_function_returning_no_array(table):
    error = _refused(table, DataStep("v/12", "update_rows", TABLE, None, {"v": lambda batch: [1.0] * batch.num_rows}))
    assert error.got == "list" and "return pyarrow.array(values)" in str(error)


def test_an_unknown_kind(table):
    error = _refused(table, DataStep("v/13", "truncate", TABLE))  # type: ignore[arg-type]
    assert error.got == "truncate"


def test_a_function_is_not_probed_on_an_empty_table(catalog):
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", SCHEMA)
    calls = []
    validate_step(table, DataStep("v/14", "update_rows", TABLE, None, {"v": lambda b: calls.append(b)}))
    assert calls == []


def test_run_step_refuses_before_any_commit(catalog, table):
    snapshots = len(table.metadata.snapshots)
    with pytest.raises(InvalidDataStepError):
        run_step(catalog, DataStep("v/15", "update_rows", TABLE, "k = 1", {"v": lambda batch: pa.array([1.0])}))
    assert len(table.refresh().metadata.snapshots) == snapshots


def test_a_function_returning_nulls_for_a_required_column(table):
    step = DataStep("v/16", "update_rows", TABLE, None, {"id": lambda batch: pa.nulls(batch.num_rows, pa.int64())})
    error = _refused(table, step)
    assert error.column == "id" and error.expected == "no null"


def test_a_function_that_returns_nulls_for_a_required_column_only_later_stops_before_that_unit(catalog, table):
    def nulls_past_the_probe(batch):
        ids = batch.column("id")
        return pc.if_else(pc.greater(ids, 36), pa.nulls(batch.num_rows, pa.int64()), ids)

    with pytest.raises(InvalidDataStepError, match="is required"):
        run_step(catalog, DataStep("v/17", "update_rows", TABLE, None, {"id": nulls_past_the_probe}), unit_bytes=1)
    assert sorted(read_rows(table)) == list(range(40))


@pytest.mark.parametrize("kind", ["delete_rows", "update_rows"])
@pytest.mark.parametrize("where", ["", "   "])
def test_a_blank_where_is_refused_rather_than_read_as_every_row(catalog, table, kind, where):
    assignments = {"k": 1} if kind == "update_rows" else {}
    error = _refused(table, DataStep("v/18", kind, TABLE, where, assignments))
    assert "which names no rows" in str(error) and error.got == repr(where)
    with pytest.raises(InvalidDataStepError):
        run_step(catalog, DataStep("v/18", kind, TABLE, where, assignments))
    assert sorted(read_rows(table)) == list(range(40))


def test_a_nested_column_is_refused_by_name(catalog):
    catalog.create_namespace("sales")
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("x", pa.int64())]))])
    table = catalog.create_table("sales.orders", schema)
    table.append(pa.Table.from_pylist([{"id": 1, "s": {"x": None}}], schema=schema))
    for kind in ("update_rows", "backfill"):
        error = _refused(table, DataStep("v/19", kind, TABLE, None, {"s.x": 1}))
        assert (error.column, error.expected) == ("s.x", "a top-level column")


def test_a_column_named_by_something_else_than_a_string(table):
    error = _refused(table, DataStep("v/20", "update_rows", TABLE, None, {5: 1}))
    assert (error.expected, error.got) == ("a column name (str)", "int")


def test_a_literal_beyond_the_column_range_names_the_column(table):
    error = _refused(table, DataStep("v/21", "update_rows", TABLE, None, {"k": 2**70}))
    assert (error.column, error.expected, error.got) == ("k", "long", "int")


def test_a_function_that_raises_on_the_probe_names_its_column(table):
    error = _refused(table, DataStep("v/22", "update_rows", TABLE, None, {"v": lambda batch: 1 / 0}))
    assert (error.column, error.got) == ("v", "ZeroDivisionError")
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_a_where_is_parsed_once_however_often_the_step_reads_it(table):
    where = "k in (" + ", ".join(str(i) for i in range(2000)) + ")"
    first, second = DataStep("v/23", "delete_rows", TABLE, where), DataStep("v/24", "delete_rows", TABLE, where)
    validate_step(table, first)
    assert first.expression() is second.expression()  # a long list's parse takes seconds
