"""The catalog as the steps planned so far would leave it, in memory: a plan's later steps see the earlier.

:class:`PlannedCatalog` wraps the catalog and takes in what each step staged (tables changed or created, dropped,
renamed); everything else is asked of the real catalog, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.table import Table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.typedef import Identifier

    from iceberg_ops_provider.migration.commit_queue import CommitQueue
    from iceberg_ops_provider.migration.context import MigrationContext

__all__ = ["PlannedCatalog"]


def _key(identifier: str | Identifier) -> tuple[str, ...]:
    return tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)


class PlannedCatalog:
    """``catalog`` with the changes of the steps planned so far applied in memory (see the module)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self._tables: dict[tuple[str, ...], Table] = {}
        self._gone: set[tuple[str, ...]] = set()
        self._namespaces: set[tuple[str, ...]] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._catalog, name)

    def load_table(self, identifier: str | Identifier) -> Table:
        """The table as the planned steps leave it."""
        key = _key(identifier)
        if key in self._gone:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(key)} (an earlier step drops or renames it)")
        if key in self._tables:
            return self._tables[key]
        return self._catalog.load_table(key)

    def table_exists(self, identifier: str | Identifier) -> bool:
        """Whether the table exists once the planned steps ran."""
        try:
            self.load_table(identifier)
        except NoSuchTableError:
            return False
        return True

    def namespace_exists(self, namespace: str | Identifier) -> bool:
        """Whether the namespace exists once the planned steps ran."""
        return _key(namespace) in self._namespaces or self._catalog.namespace_exists(namespace)

    def apply(self, context: MigrationContext) -> None:
        """Take in what a step's dry run staged (call after its body; it must not be used after)."""
        self.apply_queue(context._staging.commits, context._staging.schemas.fold)

    def apply_queue(self, queue: CommitQueue, fold: Callable[[Identifier], None]) -> None:
        """Take in what ``queue`` holds, as if it were committed (a dry run's ``ctx.commit()`` calls this)."""
        for item in queue.items:
            key = tuple(item.identifier)
            if item.kind == "drop":
                self._tables.pop(key, None)
                self._gone.add(key)
            elif item.kind == "rename":
                target = tuple(item.target or ())
                table = self.load_table(key)
                self._gone.add(key)
                self._tables.pop(key, None)
                self._keep(target, table)
            elif (transaction := queue.pending.get(item.identifier)) is not None:
                fold(item.identifier)
                current = None if key in queue.created else self._find(key)
                self._keep(key, transaction.table_metadata, current)

    def _find(self, key: tuple[str, ...]) -> Table | None:
        try:
            return self.load_table(key)
        except NoSuchTableError:
            return None

    def _keep(self, key: tuple[str, ...], table_or_metadata: Any, current: Table | None = None) -> None:
        if isinstance(table_or_metadata, Table):
            metadata, location = table_or_metadata.metadata, table_or_metadata.metadata_location
            io = table_or_metadata.io
        else:
            metadata = table_or_metadata
            location = current.metadata_location if current is not None else ""
            if current is not None:
                io = current.io
            elif metadata.location.startswith("memory://"):  # a table the plan creates: nothing to read yet
                io = PyArrowFileIO()
            else:
                io = self._catalog._load_file_io(metadata.properties, metadata.location)
        self._tables[key] = Table(key, metadata, location, io, self)  # type: ignore[arg-type]
        self._gone.discard(key)
        self._namespaces.add(key[:-1])
