"""How risky each kind of migration operation is: the one table both sides of a migration read.

Autogenerate labels each step of a file it writes with this risk (the ``# [risk] ...`` comment and
the class's ``operations``), and ``plan``, which runs a migration's body against a context that
stages without committing, labels what the body asks for with the same risk. So a step of a
generated file has one label in the file and in ``plan``.

* ``safe``: adds or changes metadata without touching what existing readers see.
* ``review``: changes what readers or writers see (renames, promotions, partitioning, keys, a
  required column).
* ``destructive``: data becomes unreachable (dropped columns and tables).

One refinement, made only where the table can be looked at: ``plan`` labels a drop of a table, or
of a column of a table, that holds no rows :data:`EMPTY_DROP_RISK` (nothing is lost). A file is
written before it runs, so its comment keeps the drop's own risk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

__all__ = ["EMPTY_DROP_RISK", "RISKS", "Risk", "drop_risk", "highest_risk", "risk_of"]

Risk = Literal["safe", "review", "destructive"]

RISKS: Mapping[str, Risk] = MappingProxyType(
    {
        "create_table": "safe",
        "drop_table": "destructive",
        "rename_table": "review",
        "add_column": "safe",
        "add_required_column": "review",  # refused on a table with rows
        "drop_column": "destructive",
        "restore_column": "review",  # the column's old values reappear where data files still hold them
        "rename_column": "review",
        "promote_column": "review",
        "make_column_optional": "review",
        "set_column_doc": "safe",
        "move_column": "safe",
        "set_identifier_fields": "review",
        "add_partition_field": "review",
        "drop_partition_field": "review",
        "rename_partition_field": "review",
        "set_sort_order": "safe",
        "set_properties": "safe",
        "remove_properties": "safe",
    }
)
"""The risk of each kind of operation, by kind (``"set_sort_order"``, ``"add_required_column"``, ...)."""

EMPTY_DROP_RISK: Risk = "review"
"""What ``plan`` labels a drop of a table or column when the table holds no rows."""

_ORDER: Mapping[str, int] = {"safe": 0, "review": 1, "destructive": 2}


def risk_of(kind: str) -> Risk:
    """The risk of one kind of operation (a key of :data:`RISKS`).

    Raises:
        KeyError: A kind the table does not have.
    """
    return RISKS[kind]


def drop_risk(kind: str, holds_rows: bool) -> Risk:
    """The risk of a drop (``drop_table``, ``drop_column``) of a table that does or does not hold rows."""
    return risk_of(kind) if holds_rows else EMPTY_DROP_RISK


def highest_risk(kinds: Iterable[str], default: Risk = "safe") -> Risk:
    """The highest risk of several kinds of operation made by one call (``alter_column`` with type and doc)."""
    return max((risk_of(kind) for kind in kinds), key=_ORDER.__getitem__, default=default)
