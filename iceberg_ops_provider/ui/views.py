"""What each page shows, gathered from the engine's verbs: the same dictionaries serve the HTML and the JSON.

A part that fails becomes an entry of the view's ``errors``, a catalog's failure worded from its facts alone
(:func:`~iceberg_ops_provider.catalogs.failure`), never from what a server said.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

# The engine's bound on catalog calls imports PyIceberg's REST client on first use, whatever the catalog's kind
# (a second on a busy machine): imported here, when the api-server builds the application.
import pyiceberg.catalog.rest  # noqa: F401
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from iceberg_ops_provider.catalogs import CatalogFailure, catalog_errors, deadline, failure
from iceberg_ops_provider.core.name_hints import existing_namespaces
from iceberg_ops_provider.core.threads import carrying_context
from iceberg_ops_provider.data_migration.progress_report import moves_into
from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError, IcebergOpsError, MissingExtraError
from iceberg_ops_provider.history.store import default_meta_namespace
from iceberg_ops_provider.hooks.catalog import failure_sentence
from iceberg_ops_provider.maintenance.health import TableHealthReport, table_health_report
from iceberg_ops_provider.maintenance.overview import table_overview
from iceberg_ops_provider.maintenance.table_status import TableStatus, table_status
from iceberg_ops_provider.runner.migration_runner import MigrationRunner
from iceberg_ops_provider.runner.report import audit_trail, version_table
from iceberg_ops_provider.ui.connections import CatalogConnection
from iceberg_ops_provider.ui.metadata_cache import clock_kind
from iceberg_ops_provider.ui.reads import Part, Reads
from iceberg_ops_provider.ui.settings import UiSettings
from iceberg_ops_provider.ui.table_list import TableQuery, table_list
from iceberg_ops_provider.ui.table_parts import shared_load, split_measures, table_parts

__all__ = ["MAX_ANSWER_BYTES", "TableNotFound", "catalog_view", "catalogs_view", "namespace_view", "table_view"]

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The most one catalog answer may hold: parsed JSON takes 10-40 times its size; 16 MiB holds ~10,000 snapshots."""


class TableNotFound(LookupError):
    """The table a page asks for does not exist (the application answers 404)."""


def _bounded(conn: CatalogConnection, read: Callable[[], T]) -> Callable[[], T]:
    """``read`` with every catalog request in it ended by one deadline, and its errors in this project's terms."""

    def bounded() -> T:
        with deadline(conn.timeout, max_answer_bytes=MAX_ANSWER_BYTES), catalog_errors(conn.spec):
            return read()

    return bounded


def page_error(conn: CatalogConnection, exc: BaseException) -> str:
    """What a page shows of a failed read: this project's words of its own errors, facts of the catalog's."""
    catalog_failure = isinstance(exc, CatalogConfigError | CatalogUnavailableError | MissingExtraError)
    if isinstance(exc, IcebergOpsError) and not catalog_failure:
        return f"{type(exc).__name__}: {exc}"
    facts = failure(exc, conn.spec)
    # The facts, not the exception: its text and traceback may hold a server's answer, or a URL's query.
    status = f", HTTP {facts.status}" if facts.status else ""
    log.warning("A read of connection %r failed: %s (%s%s)", conn.conn_id, facts.kind, facts.error, status)
    return failure_sentence(facts, conn.spec)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _catalog(reads: Reads, conn: CatalogConnection) -> Any:
    return reads.catalog(conn.conn_id, conn.fingerprint, conn.open)


def _runner(reads: Reads, conn: CatalogConnection, namespace: str, settings: UiSettings, *, files: bool = True):
    migrations = settings.migrations_dir if files else None
    return MigrationRunner(_catalog(reads, conn), namespace, migrations, conn.meta_namespace)


def _parts(reads: Reads, conn: CatalogConnection, settings: UiSettings, jobs: dict[str, Any]) -> dict[str, Part]:
    """The parts ``{name: (key tuple, read)}`` read side by side, each bounded by the connection's deadline."""
    bounded = {
        name: ((name, conn.conn_id, conn.fingerprint, *key), _bounded(conn, read)) for name, (key, read) in jobs.items()
    }
    words = partial(page_error, conn)
    return reads.many(bounded, ttl=settings.cache_seconds, timeout=conn.timeout, catalog=conn.conn_id, words=words)


def _finish(view: dict[str, Any], parts: dict[str, Part]) -> dict[str, Any]:
    view.update({name: part.value if part.ok else None for name, part in parts.items()})
    view["errors"] = {name: part.error for name, part in parts.items() if part.error}
    view["read_at"] = _iso(min((part.read_at for part in parts.values()), default=time.time()))
    return view


def _meta(catalog: Any, conn: CatalogConnection) -> str:
    """The namespace holding the catalog's migration history (not one of the namespaces a page lists)."""
    return conn.meta_namespace or default_meta_namespace(catalog)


def _listed(reads: Reads, conn: CatalogConnection) -> list[str]:
    catalog = _catalog(reads, conn)
    return existing_namespaces(catalog, hidden=(_meta(catalog, conn),))


CHECK_SECONDS = 5.0


def catalogs_view(connections: list[CatalogConnection], settings: UiSettings, reads: Reads) -> dict[str, Any]:
    """Every catalog connection, with whether its catalog answers (listing its namespaces).

    The checks run side by side, waited for :data:`CHECK_SECONDS` in all; a later visit picks up a slower answer.
    """
    asked_at = time.monotonic()
    started = [
        reads.start(
            ("probe", conn.conn_id, conn.fingerprint),
            _bounded(conn, lambda conn=conn: len(_listed(reads, conn))),
            ttl=settings.cache_seconds,
            timeout=conn.timeout,
            catalog=conn.conn_id,
            words=partial(page_error, conn),
        )
        for conn in connections
    ]
    catalogs = []
    deadline = time.monotonic() + CHECK_SECONDS
    for conn, entry in zip(connections, started, strict=True):
        # A check an earlier visit started is not waited for again: this visit shows it still running.
        wait = max(0.0, deadline - time.monotonic()) if entry.started >= asked_at else 0.0
        part = reads.result(entry, timeout=conn.timeout, catalog=conn.conn_id, wait=wait)
        facts = _probe_facts(conn, part)
        catalogs.append(
            {
                **conn.describe(),
                "answers": part.ok,
                "checking": part.pending,
                "namespaces": part.value if part.ok else None,
                "seconds": round(part.seconds, 3),
                "answered": None if part.pending else facts.answered,
                "status_class": facts.status_class,
                "error_kind": None if part.ok or part.pending else facts.kind,
                "error": part.error,
            }
        )
    return {"catalogs": catalogs, "read_at": _iso(time.time()), "problems": list(settings.problems)}


def _probe_facts(conn: CatalogConnection, part: Part) -> CatalogFailure:
    """Whether the catalog answered, its status class and the kind of its failure: facts, never its words."""
    if part.ok:
        return CatalogFailure("", True)
    if part.exception is not None:
        return failure(part.exception, conn.spec)
    return CatalogFailure("timeout", False, timeout=conn.timeout)  # not answering, by the page's own bound


def _namespace_summary(reads: Reads, conn: CatalogConnection, namespace: str, settings: UiSettings) -> dict[str, Any]:
    try:
        with catalog_errors(conn.spec):
            runner = _runner(reads, conn, namespace, settings)
            status = runner.status()
            tables = len(runner.catalog.list_tables(namespace))
    except Exception as exc:
        return {"namespace": namespace, "error": page_error(conn, exc)}
    return {
        "namespace": namespace,
        "current": status.current,
        **{key: len(getattr(status, key)) for key in ("applied", "failed", "changed", "missing", "broken")},
        "pending": len(status.pending) if status.files_compared else None,
        "locked": status.lock is not None,
        "lock_expired": status.lock is not None and status.lock.stale_cause() is not None,
        "interrupted": status.interrupted is not None,
        "tables": tables,
        "error": None,
    }


def _namespaces(reads: Reads, conn: CatalogConnection, settings: UiSettings) -> list[dict[str, Any]]:
    names = _listed(reads, conn)
    with ThreadPoolExecutor(max_workers=min(settings.parallelism, len(names)) or 1, thread_name_prefix="ui-ns") as pool:
        return list(pool.map(carrying_context(lambda name: _namespace_summary(reads, conn, name, settings)), names))


def catalog_view(conn: CatalogConnection, settings: UiSettings, reads: Reads) -> dict[str, Any]:
    """One catalog's namespaces (the meta-namespace left out), each with its version, pending and lock."""
    read = partial(_namespaces, reads, conn, settings)
    parts = _parts(reads, conn, settings, {"namespaces": ((_folder(settings),), read)})
    return _finish({"catalog": conn.describe(), "migrations_dir": _folder(settings)}, parts)


def _folder(settings: UiSettings) -> str | None:
    return str(settings.migrations_dir) if settings.migrations_dir is not None else None


def _history_of(reads: Reads, conn: CatalogConnection, namespace: str) -> str | None:
    """The meta-namespace, when ``namespace`` is it or inside it: it holds history, and has no migrations."""
    meta = _meta(_catalog(reads, conn), conn)
    return meta if namespace == meta or namespace.startswith(f"{meta}.") else None


def _migrations(reads: Reads, conn: CatalogConnection, namespace: str, settings: UiSettings) -> dict[str, Any]:
    meta = _history_of(reads, conn, namespace)
    if meta is not None:
        return {"status": None, "versions": [], "meta_namespace": meta}
    runner = _runner(reads, conn, namespace, settings)
    status = runner.status()
    scripts = runner.scripts(broken=[]) if runner.files_compared else []
    return {
        "status": status.to_json(),
        "lock": _lock_state(status),
        "versions": [row.to_json() for row in version_table(status, runner.history(), scripts)],
        "meta_namespace": runner.meta_namespace,
    }


def _audit(reads: Reads, conn: CatalogConnection, namespace: str, settings: UiSettings, offset: int, limit: int):
    if _history_of(reads, conn, namespace) is not None:
        return None
    return audit_trail(_runner(reads, conn, namespace, settings, files=False), offset=offset, limit=limit).to_json()


def _measure(reads: Reads, conn: CatalogConnection, moment: datetime) -> Callable[[Any], TableStatus]:
    """A table's status, its health measure kept per metadata location (and at most ``CLOCK_SECONDS``: clock facts).

    What is kept is the health report with only the partitions that call for compaction (all a status reads), so a
    list of thousands of tables keeps a small entry per table.
    """
    kind = clock_kind("status_report", moment.timestamp())

    def slim(table: Any) -> TableHealthReport:
        report = table_health_report(table, kept_snapshots=False)
        return replace(report, partitions=tuple(p for p in report.partitions if p.needs_compaction))

    def health(table: Any) -> TableHealthReport:
        name = ".".join(table.name())
        return reads.metadata.get(kind, conn.conn_id, name, table.metadata_location, lambda: slim(table))

    return lambda table: table_status(table, moment, health=health)


def _tables(
    reads: Reads, conn: CatalogConnection, namespace: str, settings: UiSettings, query: TableQuery
) -> dict[str, Any]:
    moment = datetime.now(UTC)
    try:
        return table_list(
            _catalog(reads, conn),
            namespace,
            query,
            page_size=settings.tables_page_size,
            parallelism=settings.parallelism,
            measure=_measure(reads, conn, moment),
            moment=moment,
        )
    except NoSuchNamespaceError:  # not created yet (its first migration creates it): nothing to show, no error
        return {"namespace": namespace, "tables": [], "errors": {}, "exists": False, **_no_tables(query, settings)}


def _no_tables(query: TableQuery, settings: UiSettings) -> dict[str, Any]:
    keys = {"sort": query.sort, "order": query.order, "filter": query.filter}
    return {**keys, "total": 0, "matched": 0, "page": 1, "pages": 1, "page_size": settings.tables_page_size}


def _lock_state(status: Any) -> dict[str, Any] | None:
    """The lock's state now: ``held``, or ``expired`` with the cause (``lease_expired``, ``process_gone``, ...)."""
    if status.lock is None:
        return None
    cause = status.lock.stale_cause()
    return {"state": "held" if cause is None else "expired", "stale_cause": cause}


def namespace_view(
    conn: CatalogConnection,
    namespace: str,
    settings: UiSettings,
    reads: Reads,
    *,
    page: int = 1,
    tables: TableQuery | None = None,
) -> dict[str, Any]:
    """A namespace: its versions and status, the lock and an unsettled run, a page of its audit trail, its tables.

    ``tables`` says which page of the tables to list, filtered and sorted how (default: the first, by name).
    """
    query = tables or TableQuery()
    limit = settings.events_page_size
    offset = (page - 1) * limit
    jobs = {
        "migrations": ((namespace, _folder(settings)), lambda: _migrations(reads, conn, namespace, settings)),
        "audit": ((namespace, offset, limit), lambda: _audit(reads, conn, namespace, settings, offset, limit)),
        "tables": (
            (namespace, *query.key(), settings.tables_page_size),
            lambda: _tables(reads, conn, namespace, settings, query),
        ),
    }
    parts = _parts(reads, conn, settings, jobs)
    return _finish(
        {"catalog": conn.describe(), "namespace": namespace, "migrations_dir": _folder(settings), "page": page}, parts
    )


def _load(reads: Reads, conn: CatalogConnection, identifier: str) -> Any:
    return _catalog(reads, conn).load_table(identifier)


def _table_facts(reads: Reads, conn: CatalogConnection, identifier: str) -> dict[str, Any]:
    table = _load(reads, conn, identifier)
    overview = table_overview(table).to_json()
    overview["location"] = table.metadata.location
    overview["metadata_location"] = table.metadata_location
    return {"overview": overview, "moves": [move.to_json() for move in moves_into(table)]}


def table_view(
    conn: CatalogConnection, namespace: str, name: str, settings: UiSettings, reads: Reads
) -> dict[str, Any]:
    """A table: what its metadata says, its health, policy, last maintenance and the moves into it, and more.

    Its schema, specs, refs and properties (``details``), snapshot timeline and metadata growth (``timeline``),
    file sizes and largest partitions (``files``), and its maintenance policy (``policy``).

    What is computed from the table's metadata is kept per metadata location (:mod:`.table_parts`).
    """
    identifier = f"{namespace}.{name}"
    load = shared_load(partial(_load, reads, conn, identifier))
    jobs = {
        "facts": ((identifier,), lambda: _table_facts(reads, conn, identifier)),
        **table_parts(reads.metadata, conn.conn_id, identifier, load, settings.parallelism),
    }
    parts = _parts(reads, conn, settings, jobs)
    missing = parts["facts"].exception
    if isinstance(missing, NoSuchTableError | NoSuchNamespaceError):
        raise TableNotFound(f"No table {identifier} in catalog {conn.conn_id!r}.")
    return split_measures(_finish({"catalog": conn.describe(), "namespace": namespace, "table": name}, parts))
