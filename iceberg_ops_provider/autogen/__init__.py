"""Autogenerate: compare declared table models with live tables and write migrations for review.

``models`` reads the model files, ``compare`` lists the operations a table needs, ``render`` writes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NoSuchTableError

from iceberg_ops_provider.autogen.compare import compare_table
from iceberg_ops_provider.autogen.models import ColumnModel, TableModel, load_model, load_models
from iceberg_ops_provider.autogen.operations import Irreversible, Operation
from iceberg_ops_provider.autogen.render import render_migration

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "ColumnModel",
    "Irreversible",
    "Operation",
    "TableModel",
    "autogenerate",
    "compare_table",
    "load_model",
    "load_models",
    "render_migration",
]


def autogenerate(catalog: Catalog, namespace: str, models: Iterable[TableModel]) -> list[Operation]:
    """The operations that make the live tables of ``namespace`` match ``models``, in model order.

    Reads the catalog only; raises what :func:`compare_table` raises.
    """
    operations: list[Operation] = []
    for model in models:
        try:
            table = catalog.load_table((*namespace.split("."), model.name))
        except NoSuchTableError:
            table = None
        operations.extend(compare_table(model, table))
    return operations
