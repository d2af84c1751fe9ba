"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine works without Airflow; the fronts (``cli``, ``ui`` and the Airflow ``hooks``, ``operators``,
``sensors``, ``triggers``) translate between their users and it (``docs/architecture.md``).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
