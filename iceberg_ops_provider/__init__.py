"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine (``core``, migrations, maintenance, the data mover) works without Airflow; the Airflow
adapters (``hooks``, ``operators``) translate between Airflow tasks and the engine. Importing this
package imports nothing heavy: each module imports what it needs.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
