"""The operations a model change can write, which autogenerate renders and reverses.

Each is defined once, in :mod:`~iceberg_ops_provider.migration.table_operations` and
:mod:`~iceberg_ops_provider.migration.column_operations`, where ``MigrationContext``, ``plan`` and
``lint`` read them too.
"""

from __future__ import annotations

from iceberg_ops_provider.migration.column_operations import (
    AddColumn,
    AlterColumnType,
    DropColumn,
    MakeColumnOptional,
    MoveColumn,
    RenameColumn,
    RestoreColumn,
    SetColumnDoc,
    SetIdentifierFields,
)
from iceberg_ops_provider.migration.operation import Irreversible, Operation, Rendered
from iceberg_ops_provider.migration.risks import Risk
from iceberg_ops_provider.migration.table_operations import (
    AddPartitionField,
    CreateTable,
    DropPartitionField,
    DropTable,
    RemoveProperties,
    SetProperties,
    SetSortOrder,
)

_WRITTEN = (AddColumn, AlterColumnType, DropColumn, MakeColumnOptional, MoveColumn, RenameColumn, RestoreColumn)
_WRITTEN += (SetColumnDoc, SetIdentifierFields, AddPartitionField, CreateTable, DropPartitionField, DropTable)
_WRITTEN += (RemoveProperties, SetProperties, SetSortOrder)
__all__ = [*sorted(cls.__name__ for cls in _WRITTEN), "Irreversible", "Operation", "Rendered", "Risk"]
