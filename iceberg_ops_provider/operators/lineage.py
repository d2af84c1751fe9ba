"""OpenLineage datasets and asset event extras of the operators, made from the engine's :class:`TableLineage`.

OpenLineage is an optional extra: it is imported only inside the functions that build its objects,
which return ``None`` when it is not installed. A table is named as OpenLineage-Spark names Iceberg
tables (see :mod:`iceberg_ops_provider.lineage`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from iceberg_ops_provider.lineage import DatasetName, SchemaField, TableLineage

__all__ = [
    "LIFECYCLE_STATES",
    "IcebergLineageMixin",
    "input_dataset",
    "operator_lineage",
    "output_dataset",
    "table_extra",
]

log = logging.getLogger(__name__)

LIFECYCLE_STATES = {"create": "CREATE", "alter": "ALTER", "drop": "DROP", "rename": "RENAME", "overwrite": "OVERWRITE"}
"""The OpenLineage ``lifecycleStateChange`` of each table change."""


def _openlineage() -> SimpleNamespace | None:
    """The OpenLineage classes used here, or ``None`` when the OpenLineage provider is not installed."""
    try:
        from airflow.providers.common.compat.openlineage import facet
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.generated.catalog_dataset import CatalogDatasetFacet
        from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
        from openlineage.client.generated.storage_dataset import StorageDatasetFacet
    except ImportError:
        return None
    return SimpleNamespace(
        **vars(facet),  # Identifier, InputDataset, OutputDataset, SchemaDatasetFacet, ...
        OperatorLineage=OperatorLineage,
        CatalogDatasetFacet=CatalogDatasetFacet,
        DatasetVersionDatasetFacet=DatasetVersionDatasetFacet,
        StorageDatasetFacet=StorageDatasetFacet,
    )


def _schema_field(ol: SimpleNamespace, field: SchemaField) -> Any:
    return ol.SchemaDatasetFacetFields(
        name=field.name,
        type=field.type,
        description=field.doc,
        fields=[_schema_field(ol, child) for child in field.fields],
    )


def _name(table: TableLineage) -> DatasetName:
    """The dataset identity: from the location; the catalog's name when the location is unknown."""
    return table.dataset or table.symlink


def _facets(ol: SimpleNamespace, table: TableLineage, *, changed: bool) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "symlinks": ol.SymlinksDatasetFacet(
            identifiers=[ol.Identifier(namespace=table.symlink.namespace, name=table.symlink.name, type="TABLE")]
        ),
        "catalog": ol.CatalogDatasetFacet(
            framework="iceberg",
            type=table.catalog_type,
            name=table.catalog_name,
            metadataUri=table.catalog_uri,
            warehouseUri=table.warehouse,
        ),
    }
    if table.file_format:
        facets["storage"] = ol.StorageDatasetFacet(storageLayer="iceberg", fileFormat=table.file_format)
    if table.schema:
        facets["schema"] = ol.SchemaDatasetFacet(fields=[_schema_field(ol, field) for field in table.schema])
    if table.snapshot_id is not None:
        facets["version"] = ol.DatasetVersionDatasetFacet(datasetVersion=str(table.snapshot_id))
    state = LIFECYCLE_STATES.get(table.change or "")
    if changed and state:
        before = table.previous_symlink
        previous = ol.PreviousIdentifier(namespace=before.namespace, name=before.name) if before else None
        facets["lifecycleStateChange"] = ol.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=ol.LifecycleStateChange[state], previousIdentifier=previous
        )
    return facets


def input_dataset(table: TableLineage) -> Any:
    """The OpenLineage ``InputDataset`` of a table read at ``table.snapshot_id``; ``None`` without OpenLineage."""
    ol = _openlineage()
    if ol is None:
        return None
    name = _name(table)
    return ol.InputDataset(namespace=name.namespace, name=name.name, facets=_facets(ol, table, changed=False))


def output_dataset(table: TableLineage) -> Any:
    """The OpenLineage ``OutputDataset`` of a table written (or changed); ``None`` without OpenLineage."""
    ol = _openlineage()
    if ol is None:
        return None
    name = _name(table)
    statistics = {}
    if any(value is not None for value in (table.rows, table.bytes, table.files)):
        statistics["outputStatistics"] = ol.OutputStatisticsOutputDatasetFacet(
            rowCount=table.rows, size=table.bytes, fileCount=table.files
        )
    return ol.OutputDataset(
        namespace=name.namespace, name=name.name, facets=_facets(ol, table, changed=True), outputFacets=statistics
    )


def operator_lineage(inputs: Iterable[TableLineage], outputs: Iterable[TableLineage]) -> Any:
    """An ``OperatorLineage`` of the tables read and written; ``None`` when OpenLineage is not installed."""
    ol = _openlineage()
    if ol is None:
        return None
    return ol.OperatorLineage(
        inputs=[input_dataset(table) for table in inputs], outputs=[output_dataset(table) for table in outputs]
    )


def table_extra(table: TableLineage) -> dict[str, Any]:
    """The asset event extra of a table: ``table``, ``snapshot_id``, and ``rows`` / ``change`` when known."""
    known = {"rows": table.rows, "change": table.change, "previous_table": table.previous_table}
    return {"table": table.table, "snapshot_id": table.snapshot_id} | {k: v for k, v in known.items() if v is not None}


class IcebergLineageMixin:
    """What every operator of this provider shares for lineage: the tables its run read and wrote.

    ``execute()`` records them, also what a run that fails part way committed (OpenLineage's listener
    reports failures with the same method). There is no ``get_openlineage_facets_on_start``: naming a
    table needs its storage location, which only the catalog knows, and that method must not call it.
    """

    lineage_inputs: tuple[TableLineage, ...] = ()
    """The tables the last run read (each at the snapshot it read)."""
    lineage_outputs: tuple[TableLineage, ...] = ()
    """The tables the last run wrote or changed (each at its snapshot afterwards)."""

    def record_lineage(self, inputs: Iterable[TableLineage] = (), outputs: Iterable[TableLineage] = ()) -> None:
        """Set the tables this run read and wrote."""
        self.lineage_inputs = tuple(inputs)
        self.lineage_outputs = tuple(outputs)

    def collect_lineage(self, build: Callable[[], None]) -> None:
        """Run ``build`` (which reads the catalog and calls :meth:`record_lineage`); a failure is only logged."""
        try:
            build()
        except Exception as exc:
            log.warning("Lineage of this task is incomplete: %s: %s", type(exc).__name__, exc)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The OpenLineage inputs and outputs ``execute()`` recorded (no catalog call); ``None`` without OpenLineage."""
        return operator_lineage(self.lineage_inputs, self.lineage_outputs)

    def publish_asset_extras(
        self,
        context: Mapping[str, Any],
        summary: Mapping[str, Any],
        per_table: Mapping[str, Any] | Callable[[TableLineage], Mapping[str, Any]] | None = None,
    ) -> None:
        """Attach metadata to the event of every Asset among the task's outlets.

        An outlet built by :func:`~iceberg_ops_provider.assets.iceberg_asset` that names a table this run
        wrote gets that table's :func:`table_extra` plus ``per_table`` (a mapping, or a function of the
        table); any other Asset gets ``summary``.
        """
        from airflow.sdk import Asset

        from iceberg_ops_provider.assets import asset_table

        events = context.get("outlet_events")
        outlets: Sequence[Any] = getattr(self, "outlets", None) or ()
        if events is None or not outlets:
            return
        written = {table.table: table for table in self.lineage_outputs}
        for outlet in outlets:
            if not isinstance(outlet, Asset):
                continue
            named = asset_table(outlet)
            table = written.get(named[1]) if named is not None else None
            if table is None:
                events[outlet].extra = dict(summary)
                continue
            more = per_table(table) if callable(per_table) else per_table
            events[outlet].extra = {**table_extra(table), **(more or {})}
