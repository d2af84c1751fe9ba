"""How risky each kind of migration operation is, as the operation classes declare it.

Autogenerate's ``# [risk]`` comments and ``plan``'s labels read :data:`RISKS`; ``plan`` labels a drop from a table
holding no rows :data:`EMPTY_DROP_RISK` (docs/contributing.md, "Adding a migration operation").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

__all__ = ["EMPTY_DROP_RISK", "ORDER", "RISKS", "Risk", "drop_risk", "highest_risk", "risk_of"]

Risk = Literal["safe", "review", "data", "destructive"]

_RISKS: dict[str, Risk] = {}  # filled as the operation classes are defined
RISKS: Mapping[str, Risk] = MappingProxyType(_RISKS)
"""The risk of each kind of operation, by kind (``"set_sort_order"``, ``"add_required_column"``, ...)."""

EMPTY_DROP_RISK: Risk = "review"
"""What ``plan`` labels a drop of a table or column when the table holds no rows."""

ORDER: Mapping[str, int] = MappingProxyType({"safe": 0, "review": 1, "data": 2, "destructive": 3})
"""The risks from lowest to highest: ``data`` changes rows (and can be restored while nothing else wrote)."""


def risk_of(kind: str) -> Risk:
    """The risk of one kind of operation (a key of :data:`RISKS`; ``KeyError`` for a kind no operation has)."""
    return RISKS[kind]


def drop_risk(kind: str, holds_rows: bool) -> Risk:
    """The risk of a drop (``drop_table``, ``drop_column``) of a table that does or does not hold rows."""
    return risk_of(kind) if holds_rows else EMPTY_DROP_RISK


def highest_risk(kinds: Iterable[str], default: Risk = "safe") -> Risk:
    """The highest risk of several kinds of operation made by one call (``alter_column`` with type and doc)."""
    return max((risk_of(kind) for kind in kinds), key=ORDER.__getitem__, default=default)
