"""iceberg-ops: version and operate Apache Iceberg tables from Python, with no JVM.

The engine works without Airflow; the fronts (``cli``, ``ui`` and the Airflow ``hooks``, ``operators``,
``sensors``, ``triggers``) translate between their users and it (``docs/architecture.md``).
"""

from __future__ import annotations

import os

# PyArrow's default allocator, mimalloc, returns freed pages to the system after a delay: 1 s by default,
# which let a data step's peak pass 512 MiB above its start. At 0 (at once) every read batch's fresh buffers
# cost page faults, a sixth more CPU to decode a file in batches; at 10 ms the pages a batch frees serve the
# next one and the peak stays below 512 MiB (docs/data-steps.md, "Memory"). mimalloc reads the variable when
# PyArrow loads, so it applies where this package is imported first (the CLI, Airflow tasks); a value in the
# environment wins.
os.environ.setdefault("MIMALLOC_PURGE_DELAY", "10")

__version__ = "0.1.0"

__all__ = ["__version__"]
