"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine works without Airflow; the fronts (``cli``, ``ui`` and the Airflow ``hooks``, ``operators``,
``sensors``, ``triggers``) translate between their users and it (``docs/architecture.md``).
"""

from __future__ import annotations

import os

# PyArrow's default allocator, mimalloc, returns freed pages to the system after a delay. At 0 (at once),
# every read batch's fresh buffers cost page faults: a sixth more CPU to decode a file in batches. Its own
# 10 ms keeps pages a batch frees for the next one, and a data step's peak stays below 512 MiB above its
# start (docs/data-steps.md, "Memory"). mimalloc reads the variable when PyArrow loads, so it applies where
# this package is imported first (the CLI, Airflow tasks); a value in the environment wins.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "10")

__version__ = "0.1.0"

__all__ = ["__version__"]
