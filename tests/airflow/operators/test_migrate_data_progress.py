"""``IcebergMigrateOperator``'s task log shows a data step's progress: a line per committed unit (rows,
bytes, rate, ETA), worded as the command line prints it; the plan task logs each data operation with its
estimate, and carries the estimate's numbers in its XCom. The operator runs for real on a SQLite catalog."""

from __future__ import annotations

import re

import pyarrow as pa

from iceberg_ops_provider.migration.data_run import UNIT_BYTES_PROPERTY
from tests.airflow.conftest import catalog_at
from tests.support.migrations import write_migration

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _orders(root):
    catalog = catalog_at(root)
    catalog.create_namespace("sales")
    table = catalog.create_table("sales.orders", SCHEMA, properties={UNIT_BYTES_PROPERTY: "1"})
    for n in range(3):
        ids = list(range(n * 10, (n + 1) * 10))
        table.append(pa.table({"id": ids, "v": ids}, schema=SCHEMA))
    write_migration(root / "migrations", "0001_fix.py", 'ctx.update_rows("orders", {"v": 0}, where="id >= 0")')
    return catalog


def test_the_task_log_shows_each_unit_of_a_data_step(iceberg_connection, task_log, capfd):
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    catalog = _orders(iceberg_connection)
    migrations = str(iceberg_connection / "migrations")

    planned = IcebergMigrateOperator(task_id="plan", action="plan", namespace="sales", migrations_dir=migrations)
    [step] = planned.execute({})["plan"]["steps"]
    [update] = step["operations"]
    assert update["risk"] == "data" and (update["estimate"]["files"], update["estimate"]["rows"]) == (3, 30)
    planned_log = task_log() + capfd.readouterr().out  # the operator's own lines, where structlog prints them
    assert re.search(
        r"plan:     \[data\] update v of orders where id >= 0 \(estimate: rewrites 3 files, [\d.,]+ KiB, 30 rows; "
        r"3 commits\)",
        planned_log,
    ), planned_log

    IcebergMigrateOperator(task_id="migrate", namespace="sales", migrations_dir=migrations).execute({})

    log = task_log()
    units = re.findall(r"sales: 0001: update v of orders where id >= 0: unit (\d)/3, (\d+) rows .*B/s", log)
    assert units == [("1", "10"), ("2", "20"), ("3", "30")], log
    assert re.search(r"unit 1/3, 10 rows written \(10 changed\), [\d.,]+ KiB read, .*/s, ETA \d+s", log), log
    assert {row["v"] for row in catalog.load_table("sales.orders").scan().to_arrow().to_pylist()} == {0}
