""":class:`CatalogFactory`: a catalog from a kind and keyword arguments, in one call."""

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
    REMOTE_KINDS: ClassVar[tuple[str, ...]] = REMOTE_KINDS

    @classmethod
    def build(cls, kind: str, *, create: bool = True, access: Access | None = None, **options: Any) -> Catalog:
        """Open a catalog of ``kind`` with ``options`` (see ``docs/core.md`` for each kind's options).

        ``create=False`` creates nothing and refuses a catalog that is not there; ``access`` (see
        :func:`~.open.open_catalog`) wins over ``create``. Every kind takes ``timeout`` (seconds, default 60).

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
        """Open any catalog PyIceberg supports: ``load_catalog(name, **properties)``, bounded; creates nothing.

        Example:
            >>> catalog = CatalogFactory.load("lake", type="sql", uri="sqlite:////data/c.db", warehouse="file:///data/w")
        """
        return open_catalog(from_name(name, properties, timeout=timeout), access="write")
