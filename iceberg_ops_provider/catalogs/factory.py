""":class:`CatalogFactory`: a catalog from a kind and keyword arguments, in one call.

``CatalogFactory.build(kind, **options)`` is :func:`~.open.open_catalog` of
:func:`~.sources.from_options`; ``CatalogFactory.load(name, **properties)`` of
:func:`~.sources.from_name`. Every API of iceberg-ops takes any PyIceberg catalog: this is the
convenience for the kinds of the specification.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from iceberg_ops_provider.catalogs.kinds import KINDS, REMOTE_KINDS
from iceberg_ops_provider.catalogs.open import open_catalog
from iceberg_ops_provider.catalogs.sources import from_name, from_options

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.catalogs.spec import Access

__all__ = ["CatalogFactory"]


class CatalogFactory:
    """Build a PyIceberg catalog of one of the kinds of the specification, or any PyIceberg type.

    Example:
        >>> catalog = CatalogFactory.build("sqlite", db_path="catalog.db", warehouse_dir="warehouse")
    """

    KINDS: ClassVar[tuple[str, ...]] = KINDS
    """Every kind :meth:`build` accepts besides ``pyiceberg`` and PyIceberg's types, in the documentation's order."""

    REMOTE_KINDS: ClassVar[tuple[str, ...]] = REMOTE_KINDS
    """The kinds opened under a name that ``.pyiceberg.yaml`` and the environment may describe."""

    @classmethod
    def build(cls, kind: str, *, create: bool = True, access: Access | None = None, **options: Any) -> Catalog:
        """Open a catalog of ``kind`` with ``options`` (see ``docs/core.md`` for each kind's options).

        Args:
            kind: One of :attr:`KINDS`, ``pyiceberg`` (the options are ``load_catalog``'s properties,
                ``type`` and ``name`` included), or another catalog type PyIceberg knows.
            create: ``True``: a missing SQLite database, its folder, the warehouse folder and the
                catalog's tables are created. ``False``: nothing is created; a catalog that is not
                there is refused (``CatalogNotFoundError``).
            access: ``read``, ``write`` or ``create`` (see :func:`~.open.open_catalog`); given, it
                wins over ``create``.
            **options: The kind's options; every kind takes ``timeout``, the seconds one request to
                the catalog may take in all (default 60). Dotted names as ``**{"s3.endpoint": url}``.

        Raises:
            CatalogConfigError: An option the kind does not take, or a bad value (each named).
            UnknownCatalogKindError: A kind nobody knows.
            MissingExtraError: The kind's optional dependencies are missing.
            CatalogNotFoundError: Not creating, and there is no catalog where the options point.
            CatalogAuthError: The catalog refused the credentials, or none were found.
            CatalogUnavailableError: The catalog could not be reached, or did not answer in time.
        """
        return open_catalog(from_options(kind, **options), access=access or ("create" if create else "write"))

    @classmethod
    def load(cls, name: str | None = None, *, timeout: float | None = None, **properties: Any) -> Catalog:
        """Open a catalog of any type PyIceberg supports: ``load_catalog(name, **properties)``, bounded.

        ``.pyiceberg.yaml`` and ``PYICEBERG_CATALOG__<NAME>__*`` add their properties under ``name``;
        nothing is created (a SQL catalog's database and tables must exist).

        Example:
            >>> catalog = CatalogFactory.load("lake", type="sql", uri="sqlite:////data/c.db", warehouse="file:///data/w")
        """
        return open_catalog(from_name(name, properties, timeout=timeout), access="write")
