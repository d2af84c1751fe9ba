"""IcebergPolicyMaintenanceOperator: the maintenance Apache Polaris policies ask for, table by table.

Runs :class:`~iceberg_ops_provider.polaris.dispatcher.PolicyDispatcher` over a namespace; ``docs/airflow.md``
says where the policy client's connection comes from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import AirflowException, AirflowFailException, AirflowNotFoundException
from iceberg_ops_provider.operators.lineage import IcebergLineageMixin, table_extra
from iceberg_ops_provider.operators.rendered import as_flag

if TYPE_CHECKING:
    from airflow.sdk import Context


__all__ = ["IcebergPolicyMaintenanceOperator"]


class IcebergPolicyMaintenanceOperator(IcebergLineageMixin, BaseOperator):
    """Run the maintenance that Polaris policies ask for on every table of a namespace.

    Args:
        namespace: The namespace whose tables are maintained (``a.b`` for nested ones; templated).
        iceberg_conn_id: The catalog's Airflow connection (templated).
        polaris_conn_id: A separate connection for Polaris's policy API; default: the catalog's (templated).
        dry_run: Report per table what would run, with which parameters, and what the functions would
            do; change nothing (templated; ``"true"``/``"false"`` accepted).
        overrides: Explicit arguments per policy type, which win over the policies, e.g.
            ``{"system.snapshot-expiry": {"retain_last": 3}}``.
        types: Only these policy types (default: all four).

    Returns (XCom): the namespace outcome: per table and policy type, the policy applied (name, where
    it is defined, inherited or not), every parameter with where it came from, the function's result,
    and errors. When some table failed, the same outcome is pushed under the key ``outcome`` before
    the task fails.

    Raises:
        AirflowFailException: A permanent failure (bad policy content, bad argument, a location outside
            a table, a refused credential): retrying cannot help.
        AirflowException: Only transient failures (a commit conflict, Polaris not answering): retried.
    """

    template_fields: Sequence[str] = ("namespace", "iceberg_conn_id", "polaris_conn_id", "dry_run")
    ui_color = "#d5f5e3"

    def __init__(
        self,
        *,
        namespace: str,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        polaris_conn_id: str | None = None,
        dry_run: bool | str = False,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        types: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.namespace = namespace
        self.iceberg_conn_id = iceberg_conn_id
        self.polaris_conn_id = polaris_conn_id
        self.dry_run = dry_run
        self.overrides = dict(overrides or {})
        self.types = list(types) if types is not None else None

    def policy_client(self, catalog_hook: IcebergCatalogHook) -> Any:
        """The Polaris policy client: from ``polaris_conn_id`` if given, else from the catalog's connection."""
        from iceberg_ops_provider.polaris.client import PolarisPolicyClient

        conn_id = self.polaris_conn_id or self.iceberg_conn_id
        hook = IcebergCatalogHook(iceberg_conn_id=self.polaris_conn_id) if self.polaris_conn_id else catalog_hook
        try:
            spec = hook.catalog_spec()
        except AirflowNotFoundException as exc:
            argument = "polaris_conn_id" if self.polaris_conn_id else "iceberg_conn_id"
            raise AirflowFailException(
                f"The connection {conn_id!r} ({argument}) is not defined in Airflow: check the name (a DAG param "
                "or template may have rendered it), or add the connection."
            ) from exc
        properties = spec.pyiceberg_properties()
        if (spec.catalog_type or "rest") != "rest" or not properties.get("uri"):
            raise AirflowFailException(
                f"Connection {conn_id!r} describes a {spec.catalog_type or spec.kind!r} catalog, which serves no "
                "Polaris policy API. "
                "Point iceberg_conn_id at the Polaris REST catalog, or pass polaris_conn_id: a connection whose "
                "host is Polaris's catalog API root (e.g. http://polaris:8181/api/catalog), login/password the "
                "client id and secret, and extra.warehouse the Polaris catalog name."
            )
        return PolarisPolicyClient.from_catalog_properties({**properties, "timeout": spec.timeout})

    def execute(self, context: Context) -> dict[str, Any]:
        """Resolve and run the namespace's policies; return the outcome's JSON for XCom."""
        from iceberg_ops_provider.errors import IcebergOpsError, MaintenanceError
        from iceberg_ops_provider.polaris.dispatcher import PolicyDispatcher

        self.record_lineage()
        dry_run = as_flag(self.dry_run)
        catalog: Any = None
        try:
            catalog_hook = IcebergCatalogHook(iceberg_conn_id=self.iceberg_conn_id)
            catalog = catalog_hook.catalog_for("write")
            dispatcher = PolicyDispatcher(self.policy_client(catalog_hook), catalog, dry_run=dry_run)
            outcome = dispatcher.run_namespace(self.namespace, self.overrides, self.types)
        except MaintenanceError as exc:
            result = getattr(exc, "result", None)
            if result is not None:
                payload = result.to_json()
                self.collect_lineage(lambda: self._record_maintained(catalog, payload))
                context["ti"].xcom_push(key="outcome", value=payload)
                self.log.error("policy maintenance of %s: %s", self.namespace, _summary(payload))
            if exc.transient:
                raise AirflowException(f"{type(exc).__name__}: {exc}") from exc
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
        except (IcebergOpsError, ValueError) as exc:
            if getattr(exc, "transient", False):
                raise
            raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc
        payload = outcome.to_json()
        suffix = " (dry run)" if dry_run else ""
        self.log.info("policy maintenance of %s%s: %s", self.namespace, suffix, _summary(payload))
        self.collect_lineage(lambda: self._record_maintained(catalog, payload))
        ran = _ran(payload)
        self.publish_asset_extras(
            context,
            {
                "namespace": self.namespace,
                "dry_run": dry_run,
                "tables": [{**table_extra(table), "ran": ran[table.table]} for table in self.lineage_outputs],
            },
            lambda table: {"namespace": self.namespace, "ran": ran[table.table]},
        )
        return payload

    def _record_maintained(self, catalog: Any, payload: Mapping[str, Any]) -> None:
        """Record every table some policy ran on as written, at its snapshot now (one load per table)."""
        from iceberg_ops_provider.lineage import table_lineage, written_statistics

        outputs = []
        for name, ran in _ran(payload).items():
            if not ran:
                continue
            table = catalog.load_table(name)
            snapshot_ids = [
                snapshot_id
                for item in (payload["tables"][name].get("policies") or {}).values()
                for result in item.get("results") or ()
                for snapshot_id in result.get("snapshot_ids") or ()
            ]
            rows, size, files = written_statistics(table, snapshot_ids) if snapshot_ids else (None, None, None)
            outputs.append(table_lineage(catalog, table, rows=rows, bytes=size, files=files))
        self.record_lineage(outputs=outputs)


def _ran(payload: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per table of an outcome, the policy types whose maintenance ran on it (a dry run runs none)."""
    from iceberg_ops_provider.polaris.outcomes import RAN

    return {
        name: [kind for kind, item in (table.get("policies") or {}).items() if item.get("action") == RAN]
        for name, table in (payload.get("tables") or {}).items()
    }


def _summary(payload: Mapping[str, Any]) -> str:
    """One entry per table: the action taken for each policy type."""
    parts = []
    for name, table in (payload.get("tables") or {}).items():
        actions = ", ".join(f"{kind}: {item.get('action')}" for kind, item in (table.get("policies") or {}).items())
        if table.get("error"):
            actions = f"failed: {table['error']}"
        parts.append(f"{name} [{actions or 'no policy'}]")
    return "; ".join(parts) or "no tables"
