"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine works without Airflow; the fronts (``cli``, ``ui`` and the Airflow ``hooks``, ``operators``,
``sensors``, ``triggers``) translate between their users and it (``docs/architecture.md``).
"""

from __future__ import annotations

import os

# PyArrow's default allocator, mimalloc, keeps the pages a thread freed until that thread allocates again:
# copy lanes that free a row group's buffers and then wait held hundreds of MiB the process no longer used.
# Returned at once, a data step's peak stays near what it holds (docs/data-steps.md, "Memory"). mimalloc
# reads the variable when PyArrow loads, so it applies where this package is imported first (the CLI,
# Airflow tasks); a value in the environment wins.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "0")

__version__ = "0.1.0"

__all__ = ["__version__"]
