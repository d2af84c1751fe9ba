"""The ``iceberg-ops`` command line: the group :data:`cli`, its global options, and every command added to it.

Exit codes (``docs/errors.md`` lists them by error class): 0 success; 1 a check that found something, a
failed migration, or a state that stops the run (every transient error); 2 bad usage, configuration or
input; 3 a ``plan`` whose rollback reaches an irreversible migration; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import click

from iceberg_ops_provider import __version__
from iceberg_ops_provider.cli.errors import CommandLine
from iceberg_ops_provider.cli.lint import lint
from iceberg_ops_provider.cli.maintain import maintain
from iceberg_ops_provider.cli.migrate import COMMANDS
from iceberg_ops_provider.cli.move import move
from iceberg_ops_provider.cli.move_wap import audit_move, discard_move, publish_move
from iceberg_ops_provider.cli.policy import policy
from iceberg_ops_provider.cli.settings import Settings
from iceberg_ops_provider.cli.tags import restore, tag

__all__ = ["cli", "main"]


def _finite(param: click.Parameter, value: float | None) -> float | None:
    """Refuse ``nan`` and infinities, which a range check lets through."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds.", param=param)
    return value


@click.group(cls=CommandLine, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="iceberg-ops")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Project file (default ./iceberg-ops.yaml).",
)
@click.option("--namespace", help="Namespace to work on (overrides the project file).")
@click.option(
    "--migrations-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the migration files (overrides the project file's migrations_dir; without a project file, "
    "what upgrade, downgrade, stamp, plan, check and repair read, and what status and history compare).",
)
@click.option(
    "--catalog", "--catalog-kind", "catalog_kind", help="Catalog kind: sqlite, sql, glue, rest, hive or s3tables."
)
@click.option(
    "--catalog-uri",
    metavar="URL",
    help="The catalog's uri: the SQLAlchemy URL of a sql catalog (postgresql+psycopg://user@host:5432/db), the "
    "endpoint of a rest or hive one (overrides the file).",
)
@click.option("--catalog-name", help="Open any catalog PyIceberg can load by name (.pyiceberg.yaml / environment).")
@click.option(
    "--conn-id",
    metavar="NAME",
    help="Build the catalog from this Airflow connection, as the Airflow tasks do (needs apache-airflow; "
    "overrides the project file's catalog; not with --catalog or --catalog-name).",
)
@click.option("--db-path", help="SQLite catalog database (default local_data/ next to the project file).")
@click.option("--warehouse", help="Warehouse folder or URI of the sqlite or sql catalog.")
@click.option(
    "--catalog-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Seconds the catalog may take to answer before the command fails (default 60; overrides the file).",
)
@click.option(
    "--stale-after",
    type=click.FloatRange(min=1, max=7 * 24 * 3600),  # check_stale_after's range, refused before anything opens
    callback=lambda ctx, param, value: _finite(param, value),
    metavar="SECONDS",
    help="Lease of the migration lock: a lock not renewed for this long (its run died) is taken over (default 180).",
)
@click.option(
    "--meta-namespace",
    help="Where migration history and locks live (default _iceberg_ops; iceberg_ops on S3 Tables).",
)
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.option("-v", "--verbose", count=True, help="Show tracebacks.")
@click.pass_context
def cli(ctx: click.Context, **options: Any) -> None:
    """Version and operate Apache Iceberg tables: numbered migrations with history in your catalog."""
    # Thrift (Hive) logs each failed connection attempt, tracebacks included; without a handler
    # Python would print them next to the one-line error. Configured logging still receives them.
    thrift = logging.getLogger("thrift")
    if not any(isinstance(handler, logging.NullHandler) for handler in thrift.handlers):
        thrift.addHandler(logging.NullHandler())
    ours = logging.getLogger("iceberg_ops_provider")
    if not any(isinstance(handler, _Warnings) for handler in ours.handlers):
        ours.addHandler(_Warnings())
    ctx.obj = Settings(**options)


class _Warnings(logging.Handler):
    """Prints the package's warnings as ``warning: ...`` on stderr, except the runner's step lines (progress)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if not getattr(record, "progress", False):
            click.echo(f"warning: {record.getMessage()}", err=True)


for _verb in (audit_move, publish_move, discard_move):
    move.add_command(_verb)
for _command in (*COMMANDS, lint, maintain, move, policy, tag, restore):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="iceberg-ops")
