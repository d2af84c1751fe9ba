"""How a runner commits a migration's changes to several tables, and why, in words for people."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from iceberg_ops_provider.core.atomic.changes import CommitMode
from iceberg_ops_provider.core.atomic.commit import atomic_commit_mode

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["ATOMIC_MODES", "CommitModeProbe", "commit_mode_label", "explain_commit_mode", "transactions_url"]

ATOMIC_MODES: tuple[CommitMode, ...] = ("sql-transaction", "rest-transaction")
"""The modes in which a migration's table changes and its history record are one all-or-nothing commit."""


class CommitModeProbe:
    """The multi-table commit a catalog offers, asked once and remembered."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._known: CommitMode | None = None

    def mode(self, *, atomic_commits: bool) -> CommitMode | None:
        """How a migration's changes to several tables are committed (``None``: not known, asked again next time)."""
        if not atomic_commits:
            return "per-table"
        if self._known is None:
            self._known = atomic_commit_mode(self.catalog, probe=True)
        return self._known


def explain_commit_mode(catalog: Catalog, mode: CommitMode | None, *, atomic_commits: bool) -> str:
    """Why a runner on ``catalog`` commits as ``mode`` (what :meth:`CommitModeProbe.mode` answered) says, for people."""
    if mode == "sql-transaction":
        return (
            "PyIceberg's SQL catalog: one database transaction takes each migration's table changes and "
            "its history record (sql-transaction)"
        )
    if mode == "rest-transaction":
        return (
            f"the REST catalog serves POST {transactions_url(catalog)}: one request takes each "
            "migration's table changes and its history record (rest-transaction)"
        )
    if not atomic_commits:
        return "all-or-nothing commits are turned off (atomic_commits=False)"
    if mode is None:
        return (
            "the REST catalog could not be asked whether it serves transactions/commit; migrations commit "
            "table by table until it answers"
        )
    url = transactions_url(catalog)
    if url:
        return f"the REST catalog does not serve POST {url}"
    return f"{type(catalog).__name__} has no multi-table commit"


def commit_mode_label(mode: CommitMode | None) -> Literal["atomic", "per-table", "unknown"]:
    """What the status calls ``mode``: ``atomic``, ``per-table``, or ``unknown`` when the catalog could not say."""
    if mode is None:
        return "unknown"
    return "atomic" if mode in ATOMIC_MODES else "per-table"


def transactions_url(catalog: Catalog) -> str:
    """The ``transactions/commit`` URL of a REST catalog; empty for any other catalog."""
    from pyiceberg.catalog.rest import RestCatalog

    if not isinstance(catalog, RestCatalog):
        return ""
    from iceberg_ops_provider.core.atomic.rest import transactions_url as rest_transactions_url

    return rest_transactions_url(catalog)
