"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine (``catalogs``, ``core``, ``migration``, ``runner``, ``history``, ``autogen``,
``maintenance``, ``data_migration``, ``polaris``, ``partitions``) works without Airflow; the fronts
(``cli``, ``ui``, and on the Airflow side ``hooks``, ``operators``, ``sensors``, ``triggers``)
translate between their users and the engine. ``docs/architecture.md`` draws the layers. Importing
this package imports nothing heavy: each module imports what it needs.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
