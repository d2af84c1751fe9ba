"""One error, each front's words: Python names arguments (``mode='incremental'``), the command line its
options as typed (``--mode incremental``), from the same facts; the facts survive pickling."""

from __future__ import annotations

import pickle

import pytest

from iceberg_ops_provider.cli.wording import cli_message, size_option_text, usage_error
from iceberg_ops_provider.errors import MoveStateError
from iceberg_ops_provider.messages import Arg, Hint, Message, message, message_about


def _refusal() -> MoveStateError:
    return MoveStateError(
        message(
            "use {incremental} to go on, {create} for a new target, or another {move_id} ({where}); {step}.",
            incremental=Arg("mode", "incremental"),
            create=Arg("create_target", True),
            move_id=Arg("move_id"),
            where=Arg("where", "day >= '2026-11-01'"),
            step=Hint("compaction", "compaction (compact_small_files_streaming)", {"table": "sales.orders"}),
        )
    )


def test_python_and_the_command_line_word_the_same_facts():
    error = _refusal()

    assert str(error) == (
        "use mode='incremental' to go on, create_target=True for a new target, or another move_id "
        "(where=\"day >= '2026-11-01'\"); compaction (compact_small_files_streaming)."
    )
    assert cli_message(error) == (
        "use --mode incremental to go on, --create-target for a new target, or another --move-id "
        "(--where \"day >= '2026-11-01'\"); compaction (`iceberg-ops maintain compact sales.orders`)."
    )


def test_the_facts_survive_pickling_and_joining():
    error = pickle.loads(pickle.dumps(_refusal()))
    assert cli_message(error).startswith("use --mode incremental to go on") and "move_id=" not in str(error)

    joined = "problems:\n- " + Message.join("\n- ", [message("add it to {c}", c=Arg("columns", keyword=True)), "x"])
    assert str(joined) == "problems:\n- add it to columns=\n- x"
    assert cli_message(MoveStateError(joined)) == "problems: - add it to --columns - x"


def test_a_refusal_of_one_argument_is_a_usage_error_of_its_option():
    refused = ValueError(message("{s} is not one of binpack, sort", about="strategy", s=Arg("strategy")))

    usage = usage_error(refused)

    assert message_about(refused) == "strategy" and usage is not None
    assert usage.format_message() == "Invalid value for '--strategy': --strategy is not one of binpack, sort"
    assert usage_error(ValueError("plain")) is None


def test_sizes_are_written_as_the_size_options_take_them():
    assert [size_option_text(n) for n in (512 * 2**20, 8 * 2**20, 4096, 2**40, 1000000, 1536)] == [
        "512MiB",
        "8MiB",
        "4KiB",
        "1TiB",
        "1000000",
        "1536",
    ]


def test_braces_that_are_not_facts_stay_as_written():
    assert str(message("rename={'a': 'b'} and {missing} but {x}", x=Arg("mode", "append"))) == (
        "rename={'a': 'b'} and {missing} but mode='append'"
    )


def test_missing_airflow_names_where_the_connection_was_asked_for_in_each_front():
    from iceberg_ops_provider.errors import MissingAirflowError
    from iceberg_ops_provider.messages import Setting

    from_file = MissingAirflowError("lake", "airflow")
    assert "Airflow connection 'lake' (`airflow_conn_id:` in iceberg-ops.yaml) needs Apache Airflow" in str(from_file)
    assert str(from_file).endswith("without Airflow: `catalog:` in iceberg-ops.yaml, or a catalog object.")
    assert "--" not in str(from_file)

    flagged = MissingAirflowError("lake", "airflow", setting=Setting("airflow_conn_id", source="flags", flagged=True))
    assert flagged.conn_id == "lake" and flagged.install_command == "pip install apache-airflow"
    assert cli_message(flagged).startswith("Reading the Airflow connection 'lake' (--conn-id) needs Apache Airflow")
    assert cli_message(flagged).endswith("`catalog:` in iceberg-ops.yaml, or --catalog / --catalog-name.")


def test_files_that_disagree_with_history_name_the_arguments_that_allow_them():
    from iceberg_ops_provider.errors import MigrationIntegrityError
    from iceberg_ops_provider.operators.wording import operator_message
    from iceberg_ops_provider.runner.planning import NamespaceState, check_integrity

    state = NamespaceState((), {}, ("0002",), ("0001",), (), (), (), ("0001",))
    with pytest.raises(MigrationIntegrityError) as refused:
        check_integrity(state, "sales")
    error = refused.value
    assert error.kinds == ("out_of_order",) and error.problems == [
        "0001 is pending but numbered below the current version 0002"
    ]
    assert "allow_changed=True / allow_missing=True / allow_out_of_order=True" in str(error)
    assert "record the file as it is now with MigrationRunner.repair()." in str(error)
    assert "--allow-changed / --allow-missing / --allow-out-of-order" in cli_message(error)
    assert "action='repair'" in operator_message(error)


def test_the_operators_name_their_own_parameters_and_tasks():
    from iceberg_ops_provider.operators.wording import operator_words

    assert operator_words(Arg("conn_id", "lake")) == "iceberg_conn_id='lake'"
    assert operator_words(Arg("allow_destructive", True)) == "allow_destructive=True"
    assert operator_words(Hint("repair", "MigrationRunner.repair()")) == (
        "a task of IcebergMigrateOperator with action='repair'"
    )
    assert operator_words(Hint("set_sort_order", "ctx.set_sort_order(...)")) == "ctx.set_sort_order(...)"
