"""Readiness checks: has a namespace reached a migration version, has data for a partition been committed.

What the Airflow sensors and triggers ask, answered from the catalog's metadata alone, without a lock
and without writing anything:

* :func:`namespace_version` reads a namespace's migration history (never creating the history table;
  a namespace never migrated is at base) and :func:`version_reached` compares versions numerically,
  as the runner orders them. :func:`resolve_version` turns ``head`` into the highest version of a
  migrations folder.
* :func:`partition_rows` plans a scan of a table (which reads manifests, never data files) and keeps
  the data files whose partition record holds the wanted values, or that may hold rows matching a
  row filter, optionally only those committed after a given snapshot. It returns a
  :class:`PartitionProbe`: rows (the sum of the files' record counts), files and the snapshot seen.

Partition values arrive as text (rendered templates) and are converted per the partition field's
transform by :mod:`iceberg_ops_provider.partition_values`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchNamespaceError
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
)

from iceberg_ops_provider.core.timeouts import catalog_endpoint, catalog_errors
from iceberg_ops_provider.discovery import discover
from iceberg_ops_provider.errors import IcebergOpsError
from iceberg_ops_provider.history.store import HistoryStore, default_meta_namespace
from iceberg_ops_provider.namespaces import check_namespace
from iceberg_ops_provider.partition_values import file_matches, pruning_filter, table_name, wanted_values
from iceberg_ops_provider.planning import classify

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = [
    "NamespaceVersion",
    "PartitionProbe",
    "check_wanted_version",
    "resolve_version",
    "namespace_version",
    "version_reached",
    "partition_rows",
    "probe_partition",
    "parse_after_snapshot",
    "describe_version_wait",
    "describe_partition_wait",
    "timeout_message",
    "is_transient",
    "describe_error",
]

_DIGITS = re.compile(r"^[0-9]+$")
_MAX_ERROR_TEXT = 500


# -- migrations ---------------------------------------------------------------------------------


def check_wanted_version(version: object) -> str:
    """``version`` when it is ``"head"`` or a version number written in digits (``"0003"``, ``"3"``).

    Raises:
        ValueError: Anything else, with what to pass instead.
    """
    if isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        return str(version)
    if not isinstance(version, str) or not (version == "head" or _DIGITS.match(version)):
        raise ValueError(
            f"version must be 'head' or a migration version such as '0003', got {version!r}; "
            "a namespace 'reaches' a version once that version or a higher one is applied."
        )
    return version


def resolve_version(version: str, migrations_dir: str | Path | None, namespace: str) -> str | None:
    """The version to wait for: ``version`` itself, or for ``head`` the highest version of the files.

    Args:
        version: ``"head"`` or a version number.
        migrations_dir: The migrations folder (``migrations_dir/<namespace>/`` when it exists), as the
            runner reads it; needed for ``head`` only.
        namespace: The namespace.

    Returns:
        The version, or ``None`` for ``head`` of a folder without migrations (base: nothing to wait for).

    Raises:
        ValueError: ``head`` without a folder, or a malformed version.
        MigrationDiscoveryError: The folder is missing or holds a bad migration file.
    """
    version = check_wanted_version(version)
    if version != "head":
        return version
    if migrations_dir is None or str(migrations_dir) == "":
        raise ValueError("version='head' needs migrations_dir (the folder whose newest migration is waited for).")
    scripts = discover(migrations_dir, namespace)
    return scripts[-1].version if scripts else None


@dataclass(frozen=True)
class NamespaceVersion:
    """Where a namespace's migrations stand, read from its history.

    Attributes:
        namespace: The namespace.
        current: The highest applied version, or ``None`` at base (never migrated, or all rolled back).
        failed: Versions whose latest attempt failed (a later run retries them).
    """

    namespace: str
    current: str | None
    failed: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for logs and messages: ``namespace 'sales' at 0002 (0003 failed in its last attempt)``."""
        text = f"namespace {self.namespace!r} at {self.current or 'base'}"
        if self.failed:
            text += f" ({', '.join(self.failed)} failed in its last attempt)"
        return text

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the sensor pushes to XCom)."""
        return {"namespace": self.namespace, "version": self.current, "failed": list(self.failed)}


def namespace_version(catalog: Catalog, namespace: str, meta_namespace: str | None = None) -> NamespaceVersion:
    """The current migration version of ``namespace``: no lock taken, nothing created.

    Args:
        catalog: The catalog.
        namespace: The namespace whose migrations are asked about.
        meta_namespace: Where the history lives (default: as the runner chooses for this catalog).

    Raises:
        CatalogConfigError: A malformed namespace name.
        CatalogUnavailableError: The catalog did not answer (transient).
    """
    meta_namespace = meta_namespace or default_meta_namespace(catalog)
    check_namespace("namespace", namespace)
    check_namespace("meta_namespace", meta_namespace)
    with catalog_errors(catalog_endpoint(catalog), None):
        try:
            rows = HistoryStore(catalog, meta_namespace).rows(namespace)
        except NoSuchNamespaceError:  # no meta-namespace yet: nothing was ever migrated here
            rows = []
    state = classify([], rows)
    return NamespaceVersion(namespace, state.current, tuple(state.failed))


def version_reached(current: str | None, wanted: str | None) -> bool:
    """Whether a namespace at ``current`` has reached ``wanted`` (``None``: base); versions compare as numbers."""
    if wanted is None:
        return True
    return current is not None and int(current) >= int(wanted)


def describe_version_wait(namespace: str, version: str | None) -> str:
    """What a migration wait is for, for messages."""
    return f"namespace {namespace!r} to reach migration version {version or 'base'}"


# -- partitions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionProbe:
    """The data files a partition check found, at one snapshot.

    Attributes:
        table: The table's identifier.
        snapshot_id: The snapshot the check read (``None``: the table has no snapshot yet).
        rows: The sum of the matching data files' record counts. Rows deleted by delete files still
            count, so with ``files_with_deletes`` above zero this is an upper bound.
        files: How many data files matched.
        files_with_deletes: How many of them have delete files applying to them.
    """

    table: str
    snapshot_id: int | None
    rows: int
    files: int
    files_with_deletes: int = 0

    def describe(self) -> str:
        """One line for logs and messages."""
        at = f"snapshot {self.snapshot_id}" if self.snapshot_id is not None else "no snapshot yet"
        text = f"{self.rows} row(s) in {self.files} data file(s) of {self.table} at {at}"
        if self.files_with_deletes:
            text += f" ({self.files_with_deletes} with delete files: fewer rows may be live)"
        return text

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the sensor pushes to XCom)."""
        return {
            "table": self.table,
            "snapshot_id": self.snapshot_id,
            "rows": self.rows,
            "files": self.files,
            "files_with_deletes": self.files_with_deletes,
        }


def parse_after_snapshot(value: object) -> int | None:
    """A snapshot id from a parameter: an integer, its digits as text, or ``None`` / ``""`` / ``"None"`` for none.

    ``"None"`` is accepted because a template of an absent value renders so.

    Raises:
        ValueError: Anything else.
    """
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value.strip())
    raise ValueError(f"after_snapshot must be a snapshot id (an integer), got {value!r}.")


def _row_filter(table: Table, where: str | None) -> BooleanExpression:
    """``where`` parsed and checked against the table's schema."""
    if where is None or not where.strip():
        return AlwaysTrue()
    from pyiceberg.expressions.parser import parse
    from pyiceberg.expressions.visitors import bind

    try:
        expression = parse(where)
    except Exception as exc:  # pyparsing's ParseException, whose own message recites the whole grammar
        raise ValueError(
            f"where={where!r} is not a PyIceberg row filter; write it like \"day = '2026-01-02' and amount > 0\" "
            "(=, !=, <, <=, >, >=, in (...), not in (...), is null, is not null, like 'a%', between ... and ..., "
            "combined with and, or, not; text in single quotes)."
        ) from exc
    try:
        bind(table.schema(), expression, case_sensitive=True)
    except ValueError as exc:
        raise ValueError(f"where={where!r} does not fit {table_name(table)}: {exc}") from exc
    return expression


def partition_rows(
    table: Table,
    partition: dict[str, Any] | None = None,
    where: str | None = None,
    after_snapshot: int | str | None = None,
) -> PartitionProbe:
    """Count the committed data for a partition and/or a row filter, from metadata only.

    Plans a scan of the current snapshot (manifests and their partition summaries, file metrics;
    no data file is opened) and keeps the data files that match:

    * ``partition``: the file's partition record holds every wanted value (keys are partition field
      names of the table's current spec; values converted per transform, see the module's
      documentation). Files written under an older spec without one of the fields do not match.
    * ``where``: the file may hold matching rows, judged as a scan judges it (partition values and
      column statistics). A file that may match counts whole.
    * Both: files matching both.
    * ``after_snapshot``: only files that were not in that snapshot's plan (committed since; files
      rewritten by a compaction since count as new).

    Args:
        table: The table, as loaded.
        partition: Wanted partition values by field name.
        where: A PyIceberg row filter string.
        after_snapshot: A snapshot id of the table.

    Returns:
        What matched; ``rows`` is the sum of the files' record counts, an upper bound when delete
        files apply to them (``files_with_deletes``).

    Raises:
        ValueError: Unknown partition fields (the message lists the table's), values a field cannot
            take, a malformed or mismatched ``where``, or an ``after_snapshot`` the table does not have.
    """
    wanted = wanted_values(table, partition) if partition else []
    row_filter = _row_filter(table, where)
    after = parse_after_snapshot(after_snapshot)
    if after is not None and table.snapshot_by_id(after) is None:
        raise ValueError(
            f"after_snapshot {after} is not a snapshot of {table_name(table)} (expired, or of another table); "
            "pass a snapshot id the table still has, or none."
        )
    name = table_name(table)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return PartitionProbe(name, None, 0, 0)
    scan_filter = And(row_filter, pruning_filter(table, wanted)) if wanted else row_filter
    tasks = [
        task
        for task in table.scan(row_filter=scan_filter, snapshot_id=snapshot.snapshot_id).plan_files()
        if file_matches(task, table, wanted)
    ]
    if after is not None:
        earlier = {task.file.file_path for task in table.scan(row_filter=scan_filter, snapshot_id=after).plan_files()}
        tasks = [task for task in tasks if task.file.file_path not in earlier]
    return PartitionProbe(
        table=name,
        snapshot_id=snapshot.snapshot_id,
        rows=sum(task.file.record_count for task in tasks),
        files=len(tasks),
        files_with_deletes=sum(1 for task in tasks if task.delete_files),
    )


def probe_partition(
    catalog: Catalog,
    table: str,
    partition: dict[str, Any] | None = None,
    where: str | None = None,
    after_snapshot: int | str | None = None,
) -> PartitionProbe:
    """Load ``table`` from ``catalog`` and run :func:`partition_rows` on it, catalog errors translated.

    Raises:
        NoSuchTableError: The table does not exist.
        CatalogUnavailableError: The catalog or its storage did not answer (transient).
        ValueError: See :func:`partition_rows`.
    """
    with catalog_errors(catalog_endpoint(catalog), None):
        loaded = catalog.load_table(table)
        return partition_rows(loaded, partition=partition, where=where, after_snapshot=after_snapshot)


def describe_partition_wait(
    table: str,
    partition: dict[str, Any] | None,
    where: str | None,
    min_rows: int,
    after_snapshot: int | str | None = None,
) -> str:
    """What a partition wait is for, for messages."""
    parts = []
    if partition:
        parts.append("partition " + ", ".join(f"{key}={value!r}" for key, value in partition.items()))
    if where:
        parts.append(f"rows matching {where!r}")
    text = f"at least {min_rows} row(s) in {' and '.join(parts) or 'the table'} of {table}"
    after = parse_after_snapshot(after_snapshot)
    return text + (f", committed after snapshot {after}" if after is not None else "")


# -- waiting --------------------------------------------------------------------------------------


def timeout_message(waiting_for: str, waited: float, last_seen: str | None, last_error: str | None = None) -> str:
    """The message of a wait that ran out: what was awaited, for how long, what was last seen."""
    seen = last_seen or "nothing (no check succeeded)"
    text = f"Timed out after {waited:g} s waiting for {waiting_for}; last seen: {seen}"
    if last_error:
        text += f"; last error: {last_error}"
    return text + "."


def is_transient(exc: BaseException) -> bool:
    """Whether checking again later may succeed, so a wait should go on rather than end.

    Transient: iceberg-ops errors saying so (a catalog that did not answer), connection errors and
    timeouts, server-side catalog errors, and storage errors (a manifest removed by an expiry between
    two reads). Anything else (no such table, a bad partition key or filter, bad credentials) is permanent.
    """
    from pyiceberg.exceptions import ServerError, ServiceUnavailableError

    if isinstance(exc, IcebergOpsError):
        return exc.transient
    if isinstance(exc, ServerError | ServiceUnavailableError | ConnectionError | TimeoutError):
        return True
    return isinstance(exc, OSError) and not isinstance(exc, PermissionError)


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line, shortened, for logs and event messages."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 3] + "..."
