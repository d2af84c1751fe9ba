"""The operations autogenerate writes, renders and reverses.

Each is defined once, in :mod:`~iceberg_ops_provider.migration.table_operations` and
:mod:`~iceberg_ops_provider.migration.column_operations`, where ``MigrationContext``, ``plan`` and
``lint`` read them too; the ones a model change can write are gathered here.
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

__all__ = [
    "AddColumn",
    "AddPartitionField",
    "AlterColumnType",
    "CreateTable",
    "DropColumn",
    "DropPartitionField",
    "DropTable",
    "Irreversible",
    "MakeColumnOptional",
    "MoveColumn",
    "Operation",
    "RemoveProperties",
    "RenameColumn",
    "Rendered",
    "RestoreColumn",
    "Risk",
    "SetColumnDoc",
    "SetIdentifierFields",
    "SetProperties",
    "SetSortOrder",
]
