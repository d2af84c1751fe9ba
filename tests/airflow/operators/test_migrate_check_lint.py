"""``IcebergMigrateOperator(action="check")`` lints the pending migrations and names the findings in its failure."""

from __future__ import annotations

import pytest

from tests.cli.test_lint_check import make_lake


def test_the_operator_check_names_the_findings(iceberg_connection):
    from airflow.exceptions import AirflowException

    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    lake = make_lake(iceberg_connection)  # the catalog the connection names
    operator = IcebergMigrateOperator(
        task_id="check", action="check", namespace="sales", migrations_dir=str(lake / "migrations")
    )
    with pytest.raises(AirflowException, match=r"0002_drop_legacy\.py:\d+: \[drop-column\].*\(lint\)"):
        operator.execute({})
