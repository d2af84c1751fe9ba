"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine (``core``, the migration runner, autogenerate, the CLI) works without Airflow; the Airflow
adapters (``hooks``, ``operators``) translate between Airflow tasks and the engine. Importing this
package imports nothing heavy: each module imports what it needs.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
