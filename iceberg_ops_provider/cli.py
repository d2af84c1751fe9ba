"""The ``iceberg-ops`` command line: a thin front over the same engine calls as the Python API."""

from __future__ import annotations

import click

from iceberg_ops_provider import __version__

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="iceberg-ops")
def cli() -> None:
    """Version and operate Apache Iceberg tables: migrations, maintenance and data moves."""


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="iceberg-ops")
