"""The ``iceberg-ops`` command line, a thin front over the engine's verbs: the group :data:`cli` and :func:`main`."""

from __future__ import annotations

from iceberg_ops_provider.cli.main import cli, main

__all__ = ["cli", "main"]
