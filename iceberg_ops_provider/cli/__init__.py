"""The ``iceberg-ops`` command line, a thin front over the engine's verbs.

:data:`cli` is the click group and :func:`main` the console-script entry point
(``iceberg_ops_provider.cli:main``), both from :mod:`.main`, which assembles the group; the migration
commands live in :mod:`.migrate`, ``maintain`` in :mod:`.maintain` and ``move`` in :mod:`.move`.
"""

from __future__ import annotations

from iceberg_ops_provider.cli.main import cli, main

__all__ = ["cli", "main"]
