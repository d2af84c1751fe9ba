"""``iceberg-ops lint``: the review rules on migration files, for a pre-commit hook or a CI step.

Exit 0 when every finding is allowed (or informational), 1 when some are not, 2 on a usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from iceberg_ops_provider.cli.errors import handles_errors
from iceberg_ops_provider.cli.settings import CATALOG_FLAGS, namespace_of, open_catalog
from iceberg_ops_provider.cli.shared import json_option

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = ["lint"]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@json_option
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "github"]),
    help="text (default), json (as --json), or github: GitHub Actions annotations on the files.",
)
@click.option(
    "--live",
    is_flag=True,
    help="Judge drops against the live tables of the project's catalog (implied by --catalog, --conn-id, ...): a "
    "drop from a table holding no rows is only reported.",
)
@click.option("--list-rules", is_flag=True, help="Print every rule's id, severity and title, and exit.")
@click.pass_obj
@handles_errors
def lint(settings: Settings, paths: tuple[Path, ...], output_format: str | None, live: bool, list_rules: bool) -> None:
    """Check migration files for changes a reviewer must accept: drops, renames, untracked writes, ...

    PATHS are migration files or folders (default: the project's migrations folder). A finding is
    accepted by `# iceberg-ops: allow=<rule-id> reason="..."` on its line, or by
    `allow = {"<rule-id>": "reason"}` on the Migration class.
    """
    from iceberg_ops_provider.lint import lint_paths, rule_list
    from iceberg_ops_provider.migration.discovery import migrations_folder

    if list_rules:
        click.echo(rule_list())
        return
    explicit = any(getattr(settings, name) for name in CATALOG_FLAGS)
    if not paths and settings.migrations_dir is not None and not (live or explicit):
        # No catalog needed: the folder as given (its namespace subfolder when --namespace names one).
        paths = (migrations_folder(settings.migrations_dir, settings.namespace or ""),)
    elif not paths:
        config = settings.migration_config(files="required")
        paths = (migrations_folder(config.migrations_dir, config.namespace),)
    for path in paths:
        if not path.exists():
            raise click.BadParameter(f"{path} does not exist.", param_hint="'PATHS'")
    catalog = open_catalog(settings, create=False) if live or explicit else None
    try:
        report = lint_paths(paths, catalog=catalog, namespace=namespace_of(settings) if catalog is not None else None)
    except (FileNotFoundError, ValueError) as exc:  # a path that is not a migration file
        raise click.BadParameter(str(exc), param_hint="'PATHS'") from exc
    if output_format == "github":
        click.echo(report.github())
    elif output_format == "json" or settings.as_json:
        settings.as_json = True
        settings.emit(report.to_json(), "")
    else:
        click.echo(report.text())
    if not report.ok:
        sys.exit(1)
