"""The data operations of a migration: rows deleted, updated, filled, rewritten, copied or restored.

Each is an :class:`~iceberg_ops_provider.migration.operation.Operation` like the schema changes, so ``plan``,
autogenerate's risk table and ``lint`` read the same definition. Staging one only records it; the migration's
schema changes commit first, then its data operations run in order as tracked steps
(:mod:`iceberg_ops_provider.data_steps`; a copy through the data mover), each resumable from its last
committed unit (docs/migrations.md, "Data operations").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from iceberg_ops_provider.errors import InvalidOperationError
from iceberg_ops_provider.migration.operation import Irreversible, Operation
from iceberg_ops_provider.migration.risks import Risk

if TYPE_CHECKING:
    from iceberg_ops_provider.migration.staging import TableStaging

__all__ = [
    "Backfill",
    "CopyRows",
    "DataOperation",
    "DeleteRows",
    "RestoreData",
    "RewritePartitions",
    "UpdateRows",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class DataOperation(Operation):
    """An operation on a table's rows: recorded when the body calls it, run once its schema changes committed."""

    step_kind: ClassVar[str]
    """The :class:`~iceberg_ops_provider.data_steps.DataStep` kind it runs as (``copy_rows`` runs the data mover)."""
    changes_rows: ClassVar[bool] = True
    lint_arguments: ClassVar[tuple[str, str | None]] = ("table", None)

    where: Any = None

    def build(self, staging: TableStaging) -> None:
        """Record the step; it runs after the migration's schema changes commit.

        Raises:
            InvalidOperationError: ``where`` is an empty or blank string.
        """
        if isinstance(self.where, str) and not self.where.strip():
            # A filter rendered from an empty template would otherwise reach every row, past lint's
            # delete-all-rows and update-all-rows rules, which only look for a missing where.
            raise InvalidOperationError(
                f"{self.kind} on {staging.label(staging.identifier(self.table))}: where is {self.where!r}, which "
                "names no rows. Write the filter (\"region = 'eu'\"), or pass where=None to mean every row."
            )
        staging.request_data(self)

    def assignments(self) -> Mapping[str, Any]:
        """The columns it sets, each to a literal or a function of a ``pyarrow.RecordBatch``."""
        return _EMPTY

    def reverse(self) -> list[Operation]:
        """Restoring the table's rows to the tag taken before this migration's first data step on it."""
        return [RestoreData(self.table)]


@dataclass(frozen=True)
class DeleteRows(DataOperation):
    """Delete the rows matching ``where`` (SQL semantics: a row whose ``where`` is null stays)."""

    risks: ClassVar[Mapping[str, Risk]] = {"delete_rows": "destructive"}
    step_kind: ClassVar[str] = "delete_rows"
    arguments: ClassVar[tuple[str, ...]] = ("table", "where")
    described: ClassVar[str] = "delete rows of {table} where {where}"
    rule: ClassVar[str | None] = "delete-all-rows"
    rule_unless: ClassVar[tuple[str, int] | None] = ("where", 1)

    def describe(self) -> str:
        """``delete rows of sales.orders where region = 'eu'``; ``delete every row of ...`` without a ``where``."""
        return f"delete every row of {self.table}" if self.where is None else super().describe()


@dataclass(frozen=True)
class UpdateRows(DataOperation):
    """Set columns of the rows matching ``where`` (every row without one) to literals or computed values."""

    risks: ClassVar[Mapping[str, Risk]] = {"update_rows": "data"}
    step_kind: ClassVar[str] = "update_rows"
    arguments: ClassVar[tuple[str, ...]] = ("table", "values", "where")
    described: ClassVar[str] = "update {columns} of {table} where {where}"
    rule: ClassVar[str | None] = "update-all-rows"
    rule_unless: ClassVar[tuple[str, int] | None] = ("where", 2)

    values: Mapping[str, Any] = field(default_factory=dict)

    def assignments(self) -> Mapping[str, Any]:
        """The columns set, by name."""
        return self.values

    def describe(self) -> str:
        """``update total of sales.orders where region = 'eu'``; ``... of every row`` without a ``where``."""
        if self.where is None:
            return f"update {', '.join(self.values)} of every row of {self.table}"
        return self.described.format(columns=", ".join(self.values), table=self.table, where=self.where)

    def render(self, indent: str = "") -> str:
        """The call as source; a computed value renders as the function's name."""
        values = ", ".join(f"{name!r}: {_value_source(value)}" for name, value in self.values.items())
        where = f", where={self.where!r}" if self.where is not None else ""
        return f"ctx.update_rows({self.table!r}, {{{values}}}{where})"


@dataclass(frozen=True)
class Backfill(DataOperation):
    """Fill ``column`` where it is null (and ``where`` holds) with a literal or computed values."""

    risks: ClassVar[Mapping[str, Risk]] = {"backfill": "data"}
    step_kind: ClassVar[str] = "backfill"
    arguments: ClassVar[tuple[str, ...]] = ("table", "column", "value", "where")
    described: ClassVar[str] = "backfill {column} of {table} where it is null"

    column: str = ""
    value: Any = None

    def assignments(self) -> Mapping[str, Any]:
        """The one column filled."""
        return {self.column: self.value}

    def describe(self) -> str:
        """``backfill tier of sales.orders where it is null``, ``... and amount >= 30`` with a ``where``."""
        return super().describe() + (f" and {self.where}" if self.where is not None else "")

    def render(self, indent: str = "") -> str:
        """The call as source; a computed value renders as the function's name."""
        where = f", where={self.where!r}" if self.where is not None else ""
        return f"ctx.backfill({self.table!r}, {self.column!r}, {_value_source(self.value)}{where})"


@dataclass(frozen=True)
class RewritePartitions(DataOperation):
    """Rewrite data files into the table's current partition spec and sort order; rows unchanged."""

    risks: ClassVar[Mapping[str, Risk]] = {"rewrite_partitions": "safe"}
    step_kind: ClassVar[str] = "rewrite_partitions"
    arguments: ClassVar[tuple[str, ...]] = ("table", "where")
    described: ClassVar[str] = "rewrite the files of {table} into its current partition spec and sort order"

    def reverse(self) -> list[Operation]:
        """Nothing: the rows are the same, in the layout of the spec the rollback leaves."""
        return []


@dataclass(frozen=True)
class CopyRows(DataOperation):
    """Copy the rows of ``source`` matching ``where`` into ``table`` (the target) with the data mover.

    ``columns`` selects source columns (default all); ``rename`` maps source names to the target's.
    """

    risks: ClassVar[Mapping[str, Risk]] = {"copy_rows": "data"}
    step_kind: ClassVar[str] = "copy_rows"

    source: str = ""
    columns: tuple[str, ...] | None = None
    rename: Mapping[str, str] = field(default_factory=dict)

    def tables(self) -> tuple[str, ...]:
        """The target, then the source."""
        return (self.table, self.source)

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``ctx.copy_rows(source, target, ...)``, with only the keywords given."""
        given = {"where": self.where, "columns": list(self.columns) if self.columns is not None else None}
        given["rename"] = dict(self.rename) or None
        return (self.source, self.table), {key: value for key, value in given.items() if value is not None}

    def describe(self) -> str:
        """``copy rows of sales.orders into sales.archive where day < '2026-01-01'``."""
        what = ", ".join(self.columns) if self.columns is not None else "rows"
        renamed = f" (renamed: {', '.join(f'{a} as {b}' for a, b in self.rename.items())})" if self.rename else ""
        where = f" where {self.where}" if self.where is not None else ""
        return f"copy {what}{renamed} of {self.source} into {self.table}{where}"


@dataclass(frozen=True)
class RestoreData(Operation):
    """Bring a table's rows back to the tag taken before this migration's first data step on it."""

    risks: ClassVar[Mapping[str, Risk]] = {"restore_data": "destructive"}
    changes_rows: ClassVar[bool] = True
    lint_arguments: ClassVar[tuple[str, str | None]] = ("table", None)
    described: ClassVar[str] = "restore the rows of {table} as they were before this migration's data steps"

    def build(self, staging: TableStaging) -> None:
        """Record the restore; it runs after the rollback's schema changes commit."""
        staging.request_data(self)

    def reverse(self) -> list[Operation]:
        """A restore is not redone: the upgrade that runs again repeats its own data steps."""
        raise Irreversible("restoring a table's rows is undone by running the migration's upgrade again")


def _value_source(value: Any) -> str:
    """A literal as source, a function by its name (``compute_total``)."""
    if callable(value):
        return getattr(value, "__name__", "<function>")
    return repr(value)
