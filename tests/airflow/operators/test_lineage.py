"""OpenLineage datasets of the operators: the facets built from a table's lineage, and what each operator
reports when its ``execute()`` is called directly on a real SQLite catalog (no DAG run needed)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from openlineage.client.serde import Serde

from iceberg_ops_provider.lineage import table_dataset, table_lineage
from iceberg_ops_provider.operators.lineage import input_dataset, operator_lineage, output_dataset
from tests.airflow.conftest import catalog_at
from tests.support.migrations import write_migration

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("place", pa.struct([("city", pa.string())]))])


def _batch(start: int, count: int) -> pa.Table:
    rows = {"id": range(start, start + count), "place": [{"city": "x"}] * count}
    return pa.table(rows, schema=SCHEMA)


@pytest.fixture
def catalog(iceberg_connection):
    """The catalog of the ``iceberg_ops_default`` connection, with ``shop.clicks``: six one-row files."""
    built = catalog_at(iceberg_connection)
    built.create_namespace("shop")
    clicks = built.create_table("shop.clicks", SCHEMA)
    for n in range(6):
        clicks.append(_batch(n, 1))
    return built


def _json(dataset) -> dict:
    return Serde.to_dict(dataset)


def _version(dataset) -> str | None:
    version = dataset.facets.get("version")
    return version.datasetVersion if version is not None else None


def _current(catalog, name: str) -> str:
    return str(catalog.load_table(name).current_snapshot().snapshot_id)


# -- facets of one table ----------------------------------------------------------------------------


def test_an_output_carries_names_catalog_schema_version_change_and_statistics(catalog, iceberg_connection):
    table = catalog.load_table("shop.clicks")
    lineage = table_lineage(catalog, table, rows=6, bytes=1234, files=1, change="rename", previous_table="shop.old")
    data = _json(output_dataset(lineage))

    name = table_dataset(table.location())
    assert (data["namespace"], data["name"]) == (name.namespace, name.name) == ("file", table.location()[7:])
    facets = data["facets"]
    catalog_uri = f"sqlite:///{iceberg_connection / 'catalog.db'}"
    assert facets["symlinks"]["identifiers"] == [{"namespace": catalog_uri, "name": "shop.clicks", "type": "TABLE"}]
    assert {k: facets["catalog"][k] for k in ("framework", "type", "name", "metadataUri", "warehouseUri")} == {
        "framework": "iceberg",
        "type": "sql",
        "name": "sqlite",
        "metadataUri": catalog_uri,
        "warehouseUri": (iceberg_connection / "warehouse").as_uri(),
    }
    assert facets["storage"] == {**facets["storage"], "storageLayer": "iceberg", "fileFormat": "parquet"}
    fields = facets["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [("id", "long"), ("place", "struct")]
    assert [(f["name"], f["type"]) for f in fields[1]["fields"]] == [("city", "string")]
    assert facets["version"]["datasetVersion"] == _current(catalog, "shop.clicks")
    assert facets["lifecycleStateChange"]["lifecycleStateChange"] == "RENAME"
    assert facets["lifecycleStateChange"]["previousIdentifier"] == {"namespace": catalog_uri, "name": "shop.old"}
    statistics = data["outputFacets"]["outputStatistics"]
    assert (statistics["rowCount"], statistics["size"], statistics["fileCount"]) == (6, 1234, 1)


def test_an_input_has_no_lifecycle_or_statistics_and_a_table_without_snapshot_no_version(catalog):
    empty = catalog.create_table("shop.empty", SCHEMA)
    data = _json(input_dataset(table_lineage(catalog, empty, change="create")))
    assert "lifecycleStateChange" not in data["facets"] and "version" not in data["facets"]
    assert "outputFacets" not in data and not data.get("inputFacets")
    assert _json(output_dataset(table_lineage(catalog, empty)))["outputFacets"] == {}  # nothing written known


def test_a_table_whose_location_is_unknown_is_named_by_its_catalog_name(catalog):
    from iceberg_ops_provider.lineage import dropped_table_lineage

    gone = _json(output_dataset(dropped_table_lineage(catalog, "shop.gone", None)))
    assert gone["name"] == "shop.gone" and gone["namespace"].startswith("sqlite:///")
    assert gone["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    assert "schema" not in gone["facets"]


# -- what each operator reports -----------------------------------------------------------------------


def test_a_compaction_reports_the_table_before_as_input_and_after_as_output_with_what_it_wrote(catalog):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    before = _current(catalog, "shop.clicks")
    operator = IcebergCompactOperator(task_id="compact", table="shop.clicks", min_input_files=2)
    operator.execute(context={})
    lineage = operator.get_openlineage_facets_on_complete(None)

    (read,), (written,) = lineage.inputs, lineage.outputs
    assert (read.namespace, read.name) == (written.namespace, written.name)
    assert _version(read) == before and _version(written) == _current(catalog, "shop.clicks") != before
    statistics = written.outputFacets["outputStatistics"]
    (data_file,) = catalog.load_table("shop.clicks").inspect.files().to_pylist()
    assert (statistics.rowCount, statistics.fileCount, statistics.size) == (6, 1, data_file["file_size_in_bytes"])


@pytest.mark.parametrize(
    ("operator_class", "arguments"),
    [
        ("IcebergExpireSnapshotsOperator", {"older_than": "0d", "retain_last": 1}),
        ("IcebergRewriteManifestsOperator", {}),
        ("IcebergRemoveOrphanFilesOperator", {}),
    ],
)
def test_other_maintenance_reports_the_table_as_input_and_output_at_its_snapshot_after(
    catalog, operator_class, arguments
):
    from iceberg_ops_provider.operators import maintenance

    before = _current(catalog, "shop.clicks")
    operator = getattr(maintenance, operator_class)(task_id="t", table="shop.clicks", **arguments)
    operator.execute(context={})
    lineage = operator.get_openlineage_facets_on_complete(None)
    (read,), (written,) = lineage.inputs, lineage.outputs
    assert _version(read) == before and _version(written) == _current(catalog, "shop.clicks")
    assert "outputStatistics" not in written.outputFacets  # they write no rows


def test_a_dry_run_and_a_health_report_only_read(catalog):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator, IcebergTableHealthOperator

    for operator in (
        IcebergCompactOperator(task_id="c", table="shop.clicks", min_input_files=2, dry_run=True),
        IcebergTableHealthOperator(task_id="h", table="shop.clicks"),
    ):
        operator.execute(context={})
        lineage = operator.get_openlineage_facets_on_complete(None)
        assert [_version(d) for d in lineage.inputs] == [_current(catalog, "shop.clicks")] and lineage.outputs == []


def test_an_operator_that_stopped_early_or_never_ran_reports_nothing_and_does_not_crash(catalog):
    from airflow.sdk.exceptions import AirflowFailException

    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    never = IcebergCompactOperator(task_id="never", table="shop.clicks")
    assert never.get_openlineage_facets_on_complete(None).inputs == []
    missing = IcebergCompactOperator(task_id="missing", table="shop.nothing")
    with pytest.raises(AirflowFailException, match="does not exist"):
        missing.execute(context={})
    lineage = missing.get_openlineage_facets_on_complete(None)
    assert (lineage.inputs, lineage.outputs) == ([], [])


def test_a_migration_reports_each_table_it_touched_with_its_lifecycle_change(catalog, iceberg_connection):
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    folder = iceberg_connection / "migrations"
    catalog.create_namespace("sales")
    for name in ("old", "moved"):
        catalog.create_table(f"sales.{name}", SCHEMA).append(_batch(0, 2))
    old_location = catalog.load_table("sales.old").location()
    write_migration(
        folder,
        "0001_reshape.py",
        'ctx.create_table("orders", pa.schema([("id", pa.int64())]))\n'
        'ctx.drop_table("old")\n'
        'ctx.rename_table("moved", "moved_v2")\n'
        'ctx.add_column("moved_v2", "note", "string")',
    )
    operator = IcebergMigrateOperator(task_id="migrate", namespace="sales", migrations_dir=str(folder))
    summary = operator.execute(context={})
    assert summary["migrations"][0]["tables"] == [
        {"table": "sales.orders", "change": "create"},
        {"table": "sales.old", "change": "drop", "location": old_location},
        {"table": "sales.moved_v2", "change": "rename", "previous": "sales.moved"},
    ]

    lineage = operator.get_openlineage_facets_on_complete(None)
    assert lineage.inputs == []
    by_table = {d.facets["symlinks"].identifiers[0].name: d for d in lineage.outputs}
    changes = {name: d.facets["lifecycleStateChange"].lifecycleStateChange.value for name, d in by_table.items()}
    assert changes == {"sales.orders": "CREATE", "sales.old": "DROP", "sales.moved_v2": "RENAME"}
    assert by_table["sales.old"].name == table_dataset(old_location).name  # named by where it was
    moved = by_table["sales.moved_v2"]
    assert moved.facets["lifecycleStateChange"].previousIdentifier.name == "sales.moved"
    assert _version(moved) == _current(catalog, "sales.moved_v2")
    assert [f.name for f in moved.facets["schema"].fields] == ["id", "place", "note"]


def test_a_failed_migration_reports_what_it_committed_before_failing(catalog, iceberg_connection):
    from iceberg_ops_provider.operators.migrate import IcebergMigrateOperator

    folder = iceberg_connection / "migrations"
    write_migration(folder, "0001_orders.py", 'ctx.create_table("orders", pa.schema([("id", pa.int64())]))')
    write_migration(folder, "0002_boom.py", 'raise RuntimeError("boom")')
    operator = IcebergMigrateOperator(task_id="migrate", namespace="sales", migrations_dir=str(folder))
    with pytest.raises(Exception, match="boom"):
        operator.execute(context={})
    (created,) = operator.get_openlineage_facets_on_complete(None).outputs
    assert created.facets["symlinks"].identifiers[0].name == "sales.orders"


def test_a_move_reports_the_source_at_the_snapshot_it_read_and_the_target_at_its_last_commit(catalog):
    from iceberg_ops_provider.operators.data_move import (
        IcebergDataMoveOperator,
        IcebergMovePlanOperator,
        IcebergMoveVerifyOperator,
    )

    move = {"source": "shop.clicks", "target": "shop.copy", "create_target": True, "commit_every_bytes": 1}
    source_snapshot = _current(catalog, "shop.clicks")
    plan = IcebergMovePlanOperator(task_id="plan", move_id="m1", **move)
    plan.execute(context={})
    planned = plan.get_openlineage_facets_on_complete(None)
    assert [_version(d) for d in planned.inputs] == [source_snapshot] and planned.outputs == []

    mover = IcebergDataMoveOperator(task_id="move", move_id="m1", mode="overwrite", **move)
    result = mover.execute(context={})
    moved = mover.get_openlineage_facets_on_complete(None)
    (read,), (written,) = moved.inputs, moved.outputs
    assert _version(read) == source_snapshot == str(result["source_snapshot_id"])
    assert _version(written) == str(result["target_snapshot_ids"][-1])
    assert written.facets["symlinks"].identifiers[0].name == "shop.copy"
    assert written.facets["lifecycleStateChange"].lifecycleStateChange.value == "CREATE"  # it created shop.copy
    statistics = written.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.size, statistics.fileCount) == (
        result["rows"],
        result["bytes_written"],
        result["files_written"],
    ) and result["rows"] == 6

    verify = IcebergMoveVerifyOperator(task_id="verify", move_id="m1", mode="overwrite", **move)
    verify.execute(context={})
    compared = verify.get_openlineage_facets_on_complete(None)
    assert [_version(d) for d in compared.inputs] == [source_snapshot, _current(catalog, "shop.copy")]

    again = IcebergDataMoveOperator(task_id="again", move_id="m2", mode="overwrite", **move)
    again.execute(context={})
    (rewritten,) = again.get_openlineage_facets_on_complete(None).outputs
    assert rewritten.facets["lifecycleStateChange"].lifecycleStateChange.value == "OVERWRITE"  # it existed


def test_a_move_that_fails_part_way_reports_the_units_it_committed(catalog):
    from iceberg_ops_provider.operators.data_move import IcebergDataMoveOperator

    source = catalog.load_table("shop.clicks")
    source_snapshot = _current(catalog, "shop.clicks")
    last_file = max(task.file.file_path for task in source.scan().plan_files())
    Path(last_file.removeprefix("file://")).unlink()  # the move fails on it, after the other units committed
    mover = IcebergDataMoveOperator(
        task_id="move",
        source="shop.clicks",
        target="shop.copy",
        move_id="m1",
        create_target=True,
        commit_every_bytes=1,
        rewrite=True,
    )
    with pytest.raises(Exception, match="No such file"):
        mover.execute(context={})
    target = catalog.load_table("shop.copy")
    assert len(target.scan().to_arrow()) == 5

    lineage = mover.get_openlineage_facets_on_complete(None)
    (read,), (written,) = lineage.inputs, lineage.outputs
    assert _version(read) == source_snapshot
    assert written.facets["symlinks"].identifiers[0].name == "shop.copy"
    assert _version(written) == _current(catalog, "shop.copy")
    assert written.outputFacets["outputStatistics"].rowCount == 5


def test_a_compaction_that_fails_part_way_reports_the_groups_it_committed(catalog):
    from iceberg_ops_provider.errors import MaintenanceConflictError
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator
    from tests.support.tables import small_files_table

    table = small_files_table(catalog, "shop.parts", appends=4, rows=4, partitioned=True)
    before = _current(catalog, "shop.parts")
    b_files = sorted(task.file.file_path for task in table.scan().plan_files() if task.file.partition[0] == "b")
    Path(b_files[-1].removeprefix("file://")).unlink()  # group 'b' fails after group 'a' committed
    operator = IcebergCompactOperator(task_id="compact", table="shop.parts", min_input_files=2)
    with pytest.raises(MaintenanceConflictError) as error:
        operator.execute(context={})
    assert error.value.result.committed_groups_count == 1
    assert "because a file they read was missing (removed by a concurrent expiry, or lost" in str(error.value)

    lineage = operator.get_openlineage_facets_on_complete(None)
    (read,), (written,) = lineage.inputs, lineage.outputs
    assert _version(read) == before and _version(written) == _current(catalog, "shop.parts") != before
    assert written.outputFacets["outputStatistics"].rowCount == 8  # group 'a': two 'a' rows in each of 4 appends


def test_a_failed_operator_that_committed_nothing_reports_no_output(catalog):
    from iceberg_ops_provider.operators.maintenance import IcebergCompactOperator

    operator = IcebergCompactOperator(task_id="compact", table="shop.clicks", min_input_files=2, strategy="nope")
    with pytest.raises(Exception, match="nope"):
        operator.execute(context={})
    lineage = operator.get_openlineage_facets_on_complete(None)
    assert [_version(d) for d in lineage.inputs] == [_current(catalog, "shop.clicks")] and lineage.outputs == []


def test_lineage_is_none_for_no_tables_only_without_openlineage(catalog):
    assert operator_lineage([], []).inputs == []  # installed here: an empty lineage, not None
