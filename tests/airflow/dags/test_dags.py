"""The provider in a real Airflow: dag.test() on a SQLite metadata database and SQLite catalogs."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from iceberg_ops_provider.runner import MigrationRunner
from tests.airflow.conftest import EXAMPLES, catalog_at, xcom
from tests.support.migrations import write_migration

pytestmark = pytest.mark.slow


def _slow_migration(root) -> tuple:
    """Write 0001, which marks a file when it starts and waits (two minutes at most) for a second one."""
    started, release = root / "started", root / "release"
    write_migration(
        root / "migrations",
        "0001_slow.py",
        "import pathlib, time\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        "deadline = time.monotonic() + 120\n"
        f"while not pathlib.Path({str(release)!r}).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        'ctx.create_table("t", pa.schema([("n", pa.int64())]))',
    )
    return started, release


def _state(dag_run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def test_example_dag_migrates_then_loads_and_is_rerunnable(run_dag, iceberg_connection):
    first = run_dag("migrate_then_load")
    assert str(first.state) == "success", _state(first)
    summary = xcom(first, "migrate")
    assert summary["namespace"] == "demo" and summary["action"] == "upgrade"
    assert (summary["version_before"], summary["version_after"]) == (None, "0002")
    assert [(m["version"], m["status"]) for m in summary["migrations"]] == [("0001", "applied"), ("0002", "applied")]
    json.dumps(summary)  # small and JSON-able
    assert xcom(first, "report")["total_records"] == 6

    catalog = catalog_at(iceberg_connection)
    table = catalog.load_table("demo.orders")
    assert table.scan().to_arrow().num_rows == 6
    assert table.current_snapshot().summary["loaded-by"] == "migrate_then_load"
    runner = MigrationRunner(catalog, "demo", EXAMPLES / "migrations")
    assert [(r.version, r.status) for r in runner.history()] == [("0001", "applied"), ("0002", "applied")]

    second = run_dag("migrate_then_load")
    assert str(second.state) == "success"
    again = xcom(second, "migrate")
    assert again["version_before"] == "0002" and again["migrations"] == []
    assert xcom(second, "load") == {"inserted": 0, "updated": 0}


def test_templated_namespace_from_run_config(run_dag, iceberg_connection):
    dag_run = run_dag("migrate_then_load", namespace="shop")
    assert str(dag_run.state) == "success", _state(dag_run)
    assert xcom(dag_run, "migrate")["namespace"] == "shop"
    assert catalog_at(iceberg_connection).table_exists("shop.orders")


def test_retry_after_an_injected_failure_resumes_without_repeating(run_dag, iceberg_connection):
    migrations = iceberg_connection / "migrations"
    marks = iceberg_connection / "marks.log"
    write_migration(
        migrations,
        "0001_create.py",
        f'open({str(marks)!r}, "a").write("0001\\n")\nctx.create_table("t", pa.schema([("n", pa.int64())]))',
    )
    flag = iceberg_connection / "failed_once"
    write_migration(
        migrations,
        "0002_flaky.py",
        f"import pathlib\nflag = pathlib.Path({str(flag)!r})\n"
        f'open({str(marks)!r}, "a").write("0002\\n")\n'
        'if not flag.exists():\n    flag.touch()\n    raise RuntimeError("injected failure")\n'
        'ctx.set_properties("t", ok="yes")',
    )
    dag_run = run_dag("iceberg_ops_migrate", namespace="sales", migrations_dir=str(migrations))
    assert str(dag_run.state) == "success", _state(dag_run)
    ti = dag_run.get_task_instance("migrate")
    assert ti.try_number == 2
    assert marks.read_text().split() == ["0001", "0002", "0002"]  # 0001 ran once; 0002 failed, then ran
    summary = xcom(dag_run, "migrate")
    assert summary["version_before"] == "0001" and [m["version"] for m in summary["migrations"]] == ["0002"]
    runner = MigrationRunner(catalog_at(iceberg_connection), "sales", migrations)
    assert [(r.version, r.status) for r in runner.history()] == [("0001", "applied"), ("0002", "applied")]


def test_a_permanent_error_fails_the_task_at_once_without_retrying(run_dag, iceberg_connection):
    migrations = iceberg_connection / "migrations"
    migrations.mkdir()
    (migrations / "0001_bad name.py").write_text("")  # a discovery error: retrying cannot help
    dag_run = run_dag("iceberg_ops_migrate", namespace="sales", migrations_dir=str(migrations))
    assert str(dag_run.state) == "failed"
    assert dag_run.get_task_instance("migrate").try_number == 1  # retries=1 was not used


HOLDER = """
import sys
from pathlib import Path
from iceberg_ops_provider.catalogs import CatalogFactory
from iceberg_ops_provider.runner import MigrationRunner
root = Path(sys.argv[1])
catalog = CatalogFactory.build("sqlite", db_path=root / "catalog.db", warehouse_dir=root / "warehouse")
print([r.version for r in MigrationRunner(catalog, "sales", root / "migrations").upgrade()])
"""


def test_a_concurrent_run_holding_the_lock_fails_the_task_without_executing(run_dag, iceberg_connection, capfd):
    # Another run (a separate process) is in the middle of a slow migration of the same namespace.
    migrations = iceberg_connection / "migrations"
    started, release = _slow_migration(iceberg_connection)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(iceberg_connection)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), "the holding run never started"
        # The DAG's migrate task has retries=1: both attempts meet the held lock and execute nothing.
        dag_run = run_dag("iceberg_ops_migrate", namespace="sales", migrations_dir=str(migrations))
        assert str(dag_run.state) == "failed"
        captured = capfd.readouterr()
        assert "'sales' is being migrated by run" in captured.out + captured.err
    finally:
        release.touch()
        out, err = holder.communicate(timeout=120)
    assert holder.returncode == 0, err
    assert out.strip().splitlines()[-1] == "['0001']"
    catalog = catalog_at(iceberg_connection)
    runner = MigrationRunner(catalog, "sales", migrations)
    assert [(r.version, r.status) for r in runner.history()] == [("0001", "applied")]
    rerun = run_dag("iceberg_ops_migrate", namespace="sales", migrations_dir=str(migrations))
    assert str(rerun.state) == "success" and xcom(rerun, "migrate")["migrations"] == []


def test_the_lock_names_the_task_that_holds_it_and_the_unlock_action_releases_a_dead_runs_lock(
    run_dag, iceberg_connection
):
    migrations = iceberg_connection / "migrations"
    seen = iceberg_connection / "holder.json"
    # The migration looks at the lock while it holds it: the holder carries the task's identity.
    write_migration(
        migrations,
        "0001_look.py",
        "import json\nfrom iceberg_ops_provider.history.lock import NamespaceLock\n"
        'holder = NamespaceLock(ctx.catalog, "_iceberg_ops", ctx.namespace).info()\n'
        f"open({str(seen)!r}, 'w').write(json.dumps(holder.to_json()))",
    )
    dag_run = run_dag("iceberg_ops_migrate", namespace="sales", migrations_dir=str(migrations))
    assert str(dag_run.state) == "success"
    context = json.loads(seen.read_text())["context"]
    assert context["dag_id"] == "iceberg_ops_migrate" and context["task_id"] == "migrate"
    assert context["try_number"] == "1" and context["run_id"]

    runner = MigrationRunner(catalog_at(iceberg_connection), "sales", migrations)
    runner.lock.acquire("a-run-on-a-lost-worker")
    unlocked = run_dag("iceberg_ops_unlock", namespace="sales", migrations_dir=str(migrations))
    assert str(unlocked.state) == "success"
    assert runner.lock.info() is None
    events = runner.events()
    assert [event.event for event in events][-1] == "force_unlock"
    applied = next(event for event in events if event.event == "applied")  # the audit trail names the task
    assert applied.details["context"]["dag_id"] == "iceberg_ops_migrate"
    assert applied.details["context"]["task_id"] == "migrate" and applied.details["context"]["try_number"] == "1"


def test_on_kill_releases_the_lock_and_stops_the_run(iceberg_connection):
    import threading

    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    migrations = iceberg_connection / "migrations"
    started, release = _slow_migration(iceberg_connection)
    operator = IcebergMigrateOperator(task_id="migrate", namespace="sales", migrations_dir=str(migrations))
    errors: list[BaseException] = []

    def execute() -> None:
        try:
            operator.execute({})
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=execute)
    worker.start()
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    runner = MigrationRunner(catalog_at(iceberg_connection), "sales", migrations)
    assert runner.lock.info() is not None
    operator.on_kill()  # what Airflow calls on SIGTERM or execution_timeout
    assert runner.lock.info() is None
    release.touch()
    worker.join(60)
    assert errors and "was stopped" in str(errors[0])
    assert not runner.catalog.table_exists("sales.t")


def test_check_fails_on_pending_migrations_and_gates_the_load(run_dag, iceberg_connection):
    migrations = iceberg_connection / "migrations"
    write_migration(migrations, "0001_create.py", 'ctx.create_table("t", pa.schema([("n", pa.int64())]))')
    gated = run_dag("iceberg_ops_gate", namespace="sales", migrations_dir=str(migrations))
    assert str(gated.state) == "failed"
    states = _state(gated)
    assert states["check"] == "failed" and states["load"] == "upstream_failed"
    plan = run_dag("iceberg_ops_plan", namespace="sales", migrations_dir=str(migrations))
    assert [m["version"] for m in xcom(plan, "plan")["migrations"]] == ["0001"]
    assert not catalog_at(iceberg_connection).namespace_exists("_iceberg_ops")  # plan wrote nothing
    assert str(run_dag("iceberg_ops_migrate", namespace="sales", migrations_dir=str(migrations)).state) == "success"
    opened = run_dag("iceberg_ops_gate", namespace="sales", migrations_dir=str(migrations))
    assert _state(opened) == {"check": "success", "load": "success"}
    # With models, drift of the live tables from them fails the check too, as `iceberg-ops check` does.
    models = iceberg_connection / "models"
    models.mkdir()
    (models / "t.yaml").write_text("name: t\ncolumns:\n  - {name: n, type: long}\n  - {name: extra, type: string}\n")
    drifted = run_dag("iceberg_ops_gate", namespace="sales", migrations_dir=str(migrations), models_dir=str(models))
    assert _state(drifted)["check"] == "failed"


def test_secrets_are_registered_with_airflows_masker(iceberg_connection, monkeypatch):
    # Airflow redacts registered secrets when the supervisor writes task logs; dag.test() runs tasks
    # in-process without that step, so this checks what reaches the masker, and that a log line
    # holding the secrets comes out redacted.
    from airflow.sdk._shared.secrets_masker.secrets_masker import redact

    from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

    secret_key = "sup3r-s3cret-value-42"
    client_secret = "client-s3cret-value-43"
    connection = {
        "conn_type": "iceberg_ops",
        "login": "client-id",
        "password": client_secret,
        "extra": {
            "kind": "sqlite",
            "db_path": str(iceberg_connection / "catalog.db"),
            "warehouse_dir": str(iceberg_connection / "warehouse"),
            "s3.secret-access-key": secret_key,
            "s3.session-token": "session-token-value-44",
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_OPS_DEFAULT", json.dumps(connection))
    catalog = IcebergCatalogHook().get_conn()
    line = f"catalog properties: {dict(catalog.properties)} password={client_secret}"
    redacted = str(redact(line))
    for secret in (secret_key, client_secret, "session-token-value-44"):
        assert secret in line and secret not in redacted
    assert "***" in redacted


def test_the_repair_action_re_records_a_changed_file(iceberg_connection):
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    migrations = iceberg_connection / "migrations"
    path = write_migration(migrations, "0001_create.py", 'ctx.create_table("t", pa.schema([("n", pa.int64())]))')
    runner = MigrationRunner(catalog_at(iceberg_connection), "sales", migrations)
    runner.upgrade()
    path.write_text(path.read_text() + "EDITED = True\n")
    assert runner.status().changed == ["0001"]
    operator = IcebergMigrateOperator(
        task_id="repair", action="repair", namespace="sales", migrations_dir=str(migrations)
    )
    summary = operator.execute({})
    assert summary["migrations"][0]["rechecked"] == ["0001"]
    assert runner.status().changed == []


@pytest.mark.backends
def test_the_example_dag_runs_unchanged_on_s3_tables(run_dag, seaweedfs, unique_name, monkeypatch):
    from tests.support.servers import ACCESS_KEY, REGION, SECRET_KEY

    arn = seaweedfs.create_table_bucket(unique_name)
    connection = {
        "conn_type": "iceberg_ops",
        "host": seaweedfs.iceberg_uri,
        "extra": {
            "kind": "s3tables",
            "warehouse": arn,
            "region": REGION,
            "client.access-key-id": ACCESS_KEY,
            "client.secret-access-key": SECRET_KEY,
            **seaweedfs.s3_properties(),
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_ICEBERG_OPS_DEFAULT", json.dumps(connection))
    dag_run = run_dag("migrate_then_load")
    assert str(dag_run.state) == "success", _state(dag_run)
    summary = xcom(dag_run, "migrate")
    assert summary["version_after"] == "0002" and xcom(dag_run, "report")["total_records"] == 6
    from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook

    catalog = IcebergCatalogHook().get_conn()
    assert catalog.table_exists("iceberg_ops.migration_history")  # S3 Tables' default meta-namespace


def test_a_rollback_that_loses_data_fails_at_once_unless_allowed(iceberg_connection):
    from airflow.sdk.exceptions import AirflowFailException

    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    migrations = iceberg_connection / "migrations"
    write_migration(
        migrations,
        "0001_create.py",
        'ctx.create_table("t", pa.schema([("n", pa.int64())]))',
        'ctx.drop_table("t")',
    )
    runner = MigrationRunner(catalog_at(iceberg_connection), "sales", migrations)
    runner.upgrade()
    runner.catalog.load_table("sales.t").append(pa.table({"n": pa.array([1], pa.int64())}))

    def downgrade(**options):
        return IcebergMigrateOperator(
            task_id="down",
            action="downgrade",
            target="base",
            namespace="sales",
            migrations_dir=str(migrations),
            **options,
        ).execute({})

    with pytest.raises(AirflowFailException, match=r"loses data \(0001: drop table t\).*allow_destructive=True"):
        downgrade()
    assert runner.catalog.table_exists("sales.t")
    assert downgrade(allow_destructive=True)["version_after"] is None
    assert not runner.catalog.table_exists("sales.t")


def test_example_dag_adds_a_column_and_backfills_the_rows_loaded_before(run_dag, iceberg_connection):
    run = run_dag("migrate_and_backfill")
    assert str(run.state) == "success", _state(run)
    summary = xcom(run, "migrate")
    [migration] = summary["migrations"]
    assert migration["version"] == "0002" and migration["data_steps"][0]["rows_changed"] == 3000
    rows = catalog_at(iceberg_connection).load_table("payments_demo.payments").scan().to_arrow().to_pylist()
    assert len(rows) == 3000
    assert all(
        r["fee_cents"] == (round(r["amount_cents"] * 0.029) if r["amount_cents"] is not None else 0) for r in rows
    )
    again = run_dag("migrate_and_backfill")  # nothing left to do
    assert str(again.state) == "success" and xcom(again, "migrate")["migrations"] == []
