"""The JSON answers of the application, as OpenAPI documents them.

The top of each answer is typed here; the engine's reports inside it are documented by their own
``to_json()`` (docs/migrations.md, docs/maintenance/table_health_report.md, docs/ui.md) and typed as
objects, so a new field of a report reaches the JSON without a change here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["CatalogResponse", "CatalogsResponse", "NamespaceResponse", "TableResponse"]


class CatalogInfo(BaseModel):
    """A catalog connection, without any of its secrets."""

    conn_id: str
    conn_type: str = Field(description="`iceberg_ops` or `iceberg`.")
    kind: str = Field(description="The catalog kind (`sqlite`, `rest`, `glue`, ...; PyIceberg's type for `iceberg`).")
    endpoint: str = Field(description="Where the catalog lives, without any password; empty for embedded kinds.")
    timeout: float = Field(description="Seconds each catalog call may take (the connection's `timeout`).")
    meta_namespace: str | None = Field(description="Where migration history and locks live, if the connection sets it.")


class CatalogState(CatalogInfo):
    """A catalog connection and whether its catalog answers."""

    answers: bool = Field(description="Whether listing its namespaces succeeded within the timeout.")
    checking: bool = Field(
        description="Whether the check is still running: the page waits at most 5 s in all, and a later visit "
        "shows its answer."
    )
    namespaces: int | None = Field(description="Top-level namespaces, when it answers.")
    seconds: float = Field(description="How long the answer took (or the wait, when it did not answer).")
    answered: bool | None = Field(
        default=None, description="Whether the catalog's address answered at all (`null` while checking)."
    )
    status_class: str | None = Field(
        default=None, description="The HTTP status class of its answer when it failed (`4xx`, `5xx`), if any."
    )
    error_kind: str | None = Field(
        default=None,
        description="What the failure was: `timeout`, `unreachable`, `credentials`, `not-a-catalog`, `redirect`, "
        "`too-large`, `compressed`, `import`, `setting`, `configuration`, `missing`, ... (never what the server said).",
    )
    error: str | None = Field(description="Why it does not answer, naming the catalog, in the pages' own words.")


class CatalogsResponse(BaseModel):
    """Every catalog connection the user may read."""

    catalogs: list[CatalogState]
    read_at: str = Field(description="When this was read (ISO 8601, UTC).")
    problems: list[str] = Field(description="Bad `[iceberg_ops]` options that fell back to their defaults.")


class NamespaceSummary(BaseModel):
    """A namespace at a glance (counts are of versions)."""

    namespace: str
    current: str | None = Field(default=None, description="The current version, `null` at base.")
    applied: int | None = None
    pending: int | None = Field(default=None, description="`null` when the migration files are not known to the pages.")
    failed: int | None = None
    changed: int | None = None
    missing: int | None = None
    broken: int | None = None
    locked: bool | None = None
    lock_expired: bool | None = Field(
        default=None, description="The lock's holder is gone (its lease ran out): the next run takes it over."
    )
    interrupted: bool | None = Field(default=None, description="An interrupted run is not settled yet.")
    tables: int | None = None
    error: str | None = Field(default=None, description="Why this namespace could not be read.")


class CatalogResponse(BaseModel):
    """A catalog's namespaces."""

    catalog: CatalogInfo
    migrations_dir: str | None = Field(
        description="`[iceberg_ops] ui_migrations_dir`, where pending migrations are read."
    )
    namespaces: list[NamespaceSummary] | None
    errors: dict[str, str] = Field(description="`{part: error}` for the parts that could not be read.")
    read_at: str


class NamespaceResponse(BaseModel):
    """A namespace: its migrations, a page of its audit trail, its tables.

    The meta-namespace has no migrations (`status` is `null`) and no audit; `tables.exists` is `false` for a
    namespace not created yet. The audit page has `total`, `offset`, `limit` and `origins`.
    """

    catalog: CatalogInfo
    namespace: str
    migrations_dir: str | None
    page: int = Field(description="The page of the audit trail, 1 the newest.")
    migrations: dict[str, Any] | None = Field(
        description="`status` (`MigrationRunner.status().to_json()`), `lock` (`null` when free, else `state`: "
        "`held` or `expired`, and `stale_cause`: `lease_expired`, `process_gone`, `run_ended` or `null`), "
        "`versions` (one row each), `meta_namespace`."
    )
    audit: dict[str, Any] | None = Field(description="`audit_trail().to_json()`: a page of events, newest first.")
    tables: dict[str, Any] | None = Field(
        description="One page of the tables: `tables` (each `table_overview().to_json()` with `name` (the table's "
        "own name, which may hold a `.`), `metadata_location`, "
        "`policy` (`state`: `on`, `off`, `quiet_hours`, `invalid`; `keys_set`; `message`) and `status` "
        "(`TableStatus.to_json()`: `state` one of `unreadable`, `policy_error`, `over_budget`, `due`, `healthy`, "
        "`disabled`, with `needs`, `held`, `score`, `compaction_bytes`, `max_rewrite_bytes`)), `errors` (tables "
        "that could not be loaded), `exists`, `total`, `matched`, `sort`, `order`, `filter`, `page`, `pages`, "
        "`page_size`."
    )
    errors: dict[str, str]
    read_at: str


class TriggerLink(BaseModel):
    """The maintenance DAG a user may trigger for a table, and the run config that names the table."""

    dag_id: str = Field(description="`[iceberg_ops] ui_maintenance_dag`.")
    conf: dict[str, Any] = Field(
        description='The run config to trigger it with (`{"namespace": ..., "tables": ["<namespace>.<table>"]}`).'
    )


class TableResponse(BaseModel):
    """A table: what its metadata says, its health, its last maintenance, the moves into it."""

    catalog: CatalogInfo
    namespace: str
    table: str
    facts: dict[str, Any] | None = Field(description="`overview` (table_overview) and `moves` (moves_into).")
    health: dict[str, Any] | None = Field(
        description="`table_health_report().to_json()`: recommendations with the parameters the maintenance DAG uses; "
        "`budget`: the due compaction's bytes (`compaction_bytes`), the policy's `max_rewrite_bytes` and `over_budget`."
    )
    maintenance: dict[str, Any] | None = Field(
        description="`maintenance_history().to_json()`: the last compactions, manifest rewrites and expiries."
    )
    details: dict[str, Any] | None = Field(
        default=None,
        description="`table_details().to_json()`: schema fields, partition specs, sort orders, properties, refs.",
    )
    timeline: dict[str, Any] | None = Field(
        default=None,
        description="`snapshot_timeline().to_json()`: the newest snapshots (`rows`) and the metadata log (`growth`).",
    )
    files: dict[str, Any] | None = Field(
        default=None,
        description="`file_layout().to_json()`: the file-size histogram and the largest partitions against the median.",
    )
    policy: dict[str, Any] | None = Field(
        default=None, description="`table_policy().to_json()`: each policy key's effective value and its source."
    )
    trigger: TriggerLink | None = Field(
        default=None, description="The maintenance DAG the user may trigger for this table, `null` otherwise."
    )
    errors: dict[str, str]
    read_at: str
