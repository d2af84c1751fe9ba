"""Every example DAG under a real Airflow with the OpenLineage provider and its file transport.

The OpenLineage provider reads and caches its configuration once per process, and the rest of the
suite runs with it disabled, so the example DAGs run with ``dag.test()`` in one child process
configured for the file transport (its in-process API starts once for all of them). The events it
writes are then checked: each table named by its storage location, with its symlink, schema,
version (the snapshot ids now in the catalog), statistics and lifecycle change. The Polaris policy
API is the loopback server of ``tests/polaris/server.py`` (no JVM Polaris runs here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict

import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform

from iceberg_ops_provider.lineage import table_dataset
from tests.airflow.conftest import catalog_at
from tests.polaris.server import PolarisServer
from tests.support.lake import Lake

pytestmark = [pytest.mark.slow, pytest.mark.long]  # every example DAG run under Airflow with OpenLineage (20 s)

OL_NAMESPACE = "iceberg-ops-examples"
POLARIS_CATALOG, CLIENT_ID, CLIENT_SECRET = "prod", "airflow", "airflow-Secret-77"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])
RUNS = [
    {"dag_id": "migrate_then_load"},
    {"dag_id": "loaded_orders_report"},
    {"dag_id": "backfill_with_mover"},
    {"dag_id": "table_maintenance", "conf": {"namespace": "shop", "dry_run": False}},
    {"dag_id": "policy_maintenance", "conf": {"namespace": "pol", "polaris_conn_id": "polaris_policies"}},
]

# Runs in the child process: each DAG with dag.test(), then what the runs and their asset events left.
RUN_EXAMPLES = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.models.asset import AssetEvent
from airflow.utils.session import create_session

bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
with create_session() as session:  # the metadata database is shared with other tests: report new events only
    earlier = {event.id for event in session.query(AssetEvent)}
for spec in json.loads(sys.argv[2]):
    run = bag.get_dag(spec["dag_id"]).test(run_conf=spec.get("conf") or None)
    returned = {
        ti.task_id: ti.xcom_pull(task_ids=ti.task_id)
        for ti in run.get_task_instances() if ti.map_index < 0 and str(ti.state) == "success"
    }
    states = sorted({(ti.task_id, str(ti.state)) for ti in run.get_task_instances()})
    # One write per line: print() writes the newline apart, and a log line from another thread can land between.
    sys.stdout.write("RUN " + json.dumps({"dag_id": spec["dag_id"], "state": str(run.state), "states": states,
                                          "returned": returned}, default=str) + "\\n")
    sys.stdout.flush()
with create_session() as session:
    events = [
        {"uri": event.asset.uri, "extra": event.extra}
        for event in session.query(AssetEvent) if event.id not in earlier
    ]
sys.stdout.write("ASSET_EVENTS " + json.dumps(events, default=str) + "\\n")
sys.stdout.flush()
# Everything is reported (OpenLineage's file transport writes each event as it is sent). Spare the exit
# the full garbage collection of Airflow's heap (seconds); atexit handlers still run.
import gc
gc.freeze()
"""


def _small_files(catalog, name: str, sorted_desc: bool = False) -> None:
    """``name`` with twelve ten-row files: a compaction candidate."""
    table = catalog.create_table(name, SCHEMA)
    if sorted_desc:  # the health report then recommends a sorting compaction
        with table.update_sort_order() as order:
            order.desc("id", IdentityTransform())
    for n in range(12):
        table.append(pa.table({"id": pa.array(range(n * 10, n * 10 + 10), pa.int64()), "note": ["x"] * 10}))


def _polaris(server: PolarisServer) -> None:
    """Compaction for every table of namespace ``pol``."""
    server.add_catalog(POLARIS_CATALOG)
    server.add_client(CLIENT_ID, CLIENT_SECRET)
    server.add_table(POLARIS_CATALOG, "pol.clicks")
    content = json.dumps({"version": "2025-02-03", "enable": True, "config": {"target_file_size_bytes": 8 * 2**20}})
    server.put_policy(POLARIS_CATALOG, "pol", "compact", "system.data-compaction", content)
    server.attach(POLARIS_CATALOG, "pol", "compact", "namespace", "pol")


@pytest.fixture(scope="module")
def examples(airflow_db, tmp_path_factory):
    """Run every example DAG once with OpenLineage on; returns the catalog, runs, asset events and OL events."""
    root = tmp_path_factory.mktemp("lineage_examples")
    catalog = catalog_at(root)
    catalog.create_namespace("shop")
    _small_files(catalog, "shop.clicks", sorted_desc=True)
    catalog.create_namespace("pol")
    _small_files(catalog, "pol.clicks")
    before = {name: catalog.load_table(name).current_snapshot().snapshot_id for name in ("shop.clicks", "pol.clicks")}
    events_file = root / "openlineage.jsonl"
    with PolarisServer() as server:
        _polaris(server)
        connection = Lake(root).extra
        polaris = {
            "conn_type": "iceberg_ops",
            "host": server.base_url,
            "login": CLIENT_ID,
            "password": CLIENT_SECRET,
            "extra": {"kind": "rest", "warehouse": POLARIS_CATALOG},
        }
        env = {
            **os.environ,
            "AIRFLOW_CONN_ICEBERG_OPS_DEFAULT": json.dumps({"conn_type": "iceberg_ops", "extra": connection}),
            "AIRFLOW_CONN_POLARIS_POLICIES": json.dumps(polaris),
            "AIRFLOW__OPENLINEAGE__DISABLED": "false",
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(events_file), "append": True}
            ),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": OL_NAMESPACE,
        }
        done = subprocess.run(
            [sys.executable, "-c", RUN_EXAMPLES, str(airflow_db), json.dumps(RUNS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    lines = done.stdout.splitlines()
    reported = json.JSONDecoder().raw_decode  # the object at the line's start, whatever a log appended to it
    runs = {r["dag_id"]: r for r in (reported(line[4:])[0] for line in lines if line.startswith("RUN "))}
    assert len(runs) == len(RUNS), done.stderr[-5000:]
    asset_events = next(reported(line[13:])[0] for line in lines if line.startswith("ASSET_EVENTS "))
    by_job: dict[str, list[dict]] = defaultdict(list)
    for line in events_file.read_text().splitlines():
        event = json.loads(line)
        if event["eventType"] in ("COMPLETE", "FAIL"):
            by_job[event["job"]["name"]].append(event)
    return {"catalog": catalog, "before": before, "runs": runs, "asset_events": asset_events, "ol": by_job}


def _datasets(examples, job: str, side: str) -> list[dict]:
    """The ``inputs`` or ``outputs`` of every COMPLETE event of ``job`` (``dag_id.task_id``), in order."""
    events = examples["ol"][job]
    assert events, f"no OpenLineage event of {job}: {sorted(examples['ol'])}"
    assert all(event["eventType"] == "COMPLETE" and event["job"]["namespace"] == OL_NAMESPACE for event in events)
    return [dataset for event in events for dataset in event[side]]


def _table(dataset: dict) -> str:
    (identifier,) = dataset["facets"]["symlinks"]["identifiers"]
    assert identifier["type"] == "TABLE"
    return identifier["name"]


def _version(dataset: dict) -> int | None:
    version = dataset["facets"].get("version")
    return int(version["datasetVersion"]) if version else None


def _check_named_as_the_catalog_says(catalog, dataset: dict) -> None:
    """Named by the table's location, its catalog symlink and schema as they are in the catalog now."""
    table = catalog.load_table(_table(dataset))
    name = table_dataset(table.location())
    assert (dataset["namespace"], dataset["name"]) == (name.namespace, name.name)
    assert dataset["facets"]["symlinks"]["identifiers"][0]["namespace"] == catalog.properties["uri"]
    assert dataset["facets"]["catalog"]["framework"] == "iceberg" and dataset["facets"]["catalog"]["type"] == "sql"
    assert [field["name"] for field in dataset["facets"]["schema"]["fields"]] == table.schema().column_names
    version = _version(dataset)
    assert version is None or version in {snapshot.snapshot_id for snapshot in table.snapshots()}


def _current(catalog, name: str) -> int:
    return catalog.load_table(name).current_snapshot().snapshot_id


def test_every_example_dag_ran_and_its_datasets_are_named_as_the_catalog_says(examples):
    for dag_id, run in examples["runs"].items():
        assert run["state"] == "success", (dag_id, run["states"])
    datasets = [
        dataset
        for job, events in examples["ol"].items()
        if "." in job
        for event in events
        for dataset in event["inputs"] + event["outputs"]
    ]
    assert len(datasets) > 10
    for dataset in datasets:
        _check_named_as_the_catalog_says(examples["catalog"], dataset)


def test_the_migration_reports_the_table_it_created_and_the_load_updates_its_asset(examples):
    catalog = examples["catalog"]
    (created,) = _datasets(examples, "migrate_then_load.migrate", "outputs")
    assert _table(created) == "demo.orders"
    assert created["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"  # 0001 created, 0002 altered
    assert [f["name"] for f in created["facets"]["schema"]["fields"]] == ["id", "customer", "channel", "amount", "ts"]
    assert _version(created) is None  # the migrations left it without a snapshot; the load wrote the first
    assert _datasets(examples, "migrate_then_load.migrate", "inputs") == []

    (event,) = [e for e in examples["asset_events"] if e["uri"] == "iceberg://lake/demo/orders"]
    assert event["extra"] == {
        "table": "demo.orders",
        "snapshot_id": _current(catalog, "demo.orders"),
        "rows": 6,
        "inserted": 6,
        "updated": 0,
    }


def test_the_consumer_reads_the_load_event_and_the_table_at_its_snapshot(examples):
    catalog = examples["catalog"]
    report = examples["runs"]["loaded_orders_report"]["returned"]["read_load"]
    assert report["table"] == "demo.orders" and report["rows_at_snapshot"] == 6
    assert report["snapshot_id"] == _current(catalog, "demo.orders")
    (checked,) = _datasets(examples, "loaded_orders_report.health", "inputs")
    assert _table(checked) == "demo.orders" and _version(checked) == report["snapshot_id"]
    assert _datasets(examples, "loaded_orders_report.health", "outputs") == []  # a health report only reads


def test_the_backfill_reports_the_source_snapshot_read_and_the_target_snapshots_written(examples):
    catalog = examples["catalog"]
    source_snapshot, target = _current(catalog, "demo.events"), catalog.load_table("demo.events_v2")
    read = _datasets(examples, "backfill_with_mover.move", "inputs")
    written = _datasets(examples, "backfill_with_mover.move", "outputs")
    assert {_table(d) for d in read} == {"demo.events"} and {_version(d) for d in read} == {source_snapshot}
    assert {_table(d) for d in written} == {"demo.events_v2"}
    assert sum(d["outputFacets"]["outputStatistics"]["rowCount"] for d in written) == 1400  # two weeks x 100 a day
    assert sum(d["outputFacets"]["outputStatistics"]["fileCount"] for d in written) == len(target.inspect.files())
    assert _version(written[-1]) == target.current_snapshot().snapshot_id  # the last commit is the table now
    changes = [d["facets"].get("lifecycleStateChange", {}).get("lifecycleStateChange") for d in written]
    assert sorted(changes, key=str) == ["CREATE", *[None] * (len(written) - 1)]  # the move that created it; rows only
    planned = _datasets(examples, "backfill_with_mover.plan", "inputs")
    assert {(_table(d), _version(d)) for d in planned} == {("demo.events", source_snapshot)}
    assert _datasets(examples, "backfill_with_mover.plan", "outputs") == []
    compared = _datasets(examples, "backfill_with_mover.verify", "inputs")
    assert {_table(d) for d in compared} == {"demo.events", "demo.events_v2"}


def test_maintenance_reports_each_table_before_as_input_and_after_as_output(examples):
    catalog, before = examples["catalog"], examples["before"]
    (read,) = _datasets(examples, "table_maintenance.compact", "inputs")
    (written,) = _datasets(examples, "table_maintenance.compact", "outputs")
    assert _table(read) == _table(written) == "shop.clicks"
    assert _version(read) == before["shop.clicks"]
    assert _version(written) == _current(catalog, "shop.clicks") != before["shop.clicks"]
    statistics = written["outputFacets"]["outputStatistics"]
    assert (statistics["rowCount"], statistics["fileCount"]) == (120, 1)
    (checked,) = _datasets(examples, "table_maintenance.health", "inputs")
    assert (_table(checked), _version(checked)) == ("shop.clicks", before["shop.clicks"])
    assert _datasets(examples, "table_maintenance.health", "outputs") == []
    (cleaned,) = _datasets(examples, "table_maintenance.remove_orphan_files", "outputs")
    assert (_table(cleaned), _version(cleaned)) == ("shop.clicks", _current(catalog, "shop.clicks"))


def test_policy_maintenance_reports_the_tables_it_maintained(examples):
    catalog, before = examples["catalog"], examples["before"]
    assert _datasets(examples, "policy_maintenance.plan", "outputs") == []  # a dry run maintains nothing
    (maintained,) = _datasets(examples, "policy_maintenance.run", "outputs")
    assert _table(maintained) == "pol.clicks"
    assert _version(maintained) == _current(catalog, "pol.clicks") != before["pol.clicks"]
    assert maintained["outputFacets"]["outputStatistics"]["rowCount"] == 120


# Runs in a child process where the OpenLineage provider and client cannot be imported.
WITHOUT_OPENLINEAGE = """
import sys
from importlib.abc import MetaPathFinder

class NoOpenLineage(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("airflow.providers.openlineage", "openlineage")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

# The OpenLineage distribution stays installed here, and Airflow's provider discovery loads every
# installed provider's entry point: let it run first, then forget OpenLineage and refuse to import it.
from airflow.providers_manager import ProvidersManager

ProvidersManager().initialize_providers_configuration()
for loaded in [name for name in sys.modules if name.startswith(("airflow.providers.openlineage", "openlineage"))]:
    del sys.modules[loaded]
sys.meta_path.insert(0, NoOpenLineage())
from airflow.sdk.execution_time.context import OutletEventAccessors
from iceberg_ops_provider.assets import iceberg_asset
from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

outlet = iceberg_asset("lake", "shop.clicks")
operator = IcebergCompactOperator(task_id="compact", table="shop.clicks", min_input_files=2, outlets=[outlet])
events = OutletEventAccessors()
result = operator.execute(context={"outlet_events": events})
assert operator.get_openlineage_facets_on_complete(None) is None
assert not any(name.startswith(("openlineage", "airflow.providers.openlineage")) for name in sys.modules)
print("OK", result["rewritten_data_files_count"], events[outlet].extra["rows"])
"""


def test_the_operators_work_without_openlineage(iceberg_connection):
    catalog = catalog_at(iceberg_connection)
    catalog.create_namespace("shop")
    _small_files(catalog, "shop.clicks")
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OPENLINEAGE], env=dict(os.environ), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "OK 12 120"
    assert len(catalog.load_table("shop.clicks").inspect.files()) == 1


def test_the_rest_of_the_suite_runs_with_openlineage_disabled():
    from airflow.providers.openlineage import conf

    assert os.environ["AIRFLOW__OPENLINEAGE__DISABLED"].lower() == "true" and conf.is_disabled()
