"""``iceberg-ops lint``: the review rules on migration files, for a pre-commit hook or a CI step.

Exit 0 when every finding is allowed (or informational), 1 when some are not, 2 on a usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from iceberg_ops_provider.cli.errors import handles_errors
from iceberg_ops_provider.cli.settings import namespace_of, open_catalog
from iceberg_ops_provider.cli.shared import json_option

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

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
@click.option(
    "--list-rules", is_flag=True, help="Print every rule's id, severity and title (JSON: all of it), and exit."
)
@click.pass_obj
@handles_errors
def lint(settings: Settings, paths: tuple[Path, ...], output_format: str | None, live: bool, list_rules: bool) -> None:
    """Check migration files for changes a reviewer must accept: drops, renames, untracked writes, ...

    PATHS are migration files or folders, a folder's immediate subfolders included (default: the
    project's migrations folder). A finding is accepted by `# iceberg-ops: allow=<rule-id> reason="..."`
    on its line, or by `allow = {"<rule-id>": "reason"}` on the Migration class.
    """
    from iceberg_ops_provider.lint import lint_paths, rule_list, rules_json

    as_json = output_format == "json" or (settings.as_json and output_format != "github")
    if list_rules:
        settings.as_json = as_json
        settings.emit(rules_json(), rule_list())
        return
    explicit = settings.catalog_flags.any_given()
    paths = paths or (_project_folder(settings, live or explicit),)
    for path in paths:
        if not path.exists():
            raise click.BadParameter(f"{path} does not exist.", param_hint="'PATHS'")
    catalog = _live_catalog(settings) if live or explicit else None
    try:
        report = lint_paths(paths, catalog=catalog, namespace=namespace_of(settings) if catalog is not None else None)
    except (FileNotFoundError, ValueError) as exc:  # a path that is not a migration file
        raise click.BadParameter(str(exc), param_hint="'PATHS'") from exc
    if not report.files:
        click.echo(
            f"warning: no migration file in {', '.join(map(str, paths))}: lint reads NNNN_slug.py files (four or more "
            "digits, an underscore, a slug) in each folder given and in the folders directly in it.",
            err=True,
        )
    if output_format == "github":
        click.echo(report.github())
    elif as_json:
        settings.as_json = True
        settings.emit(report.to_json(), "")
    else:
        click.echo(report.text())
    if not report.ok:
        sys.exit(1)


def _project_folder(settings: Settings, live: bool) -> Path:
    """The migrations folder to lint when no path is given: ``--migrations-dir``, else the project file's.

    Its namespace subfolder when the namespace names one. Only judging live needs the catalog.

    Raises:
        ProjectConfigError: No path, no ``--migrations-dir`` and no project file.
    """
    from iceberg_ops_provider.config import CONFIG_FILE
    from iceberg_ops_provider.errors import ProjectConfigError
    from iceberg_ops_provider.migration.discovery import migrations_folder

    if settings.migrations_dir is not None and not live:
        return migrations_folder(settings.migrations_dir, settings.namespace or "")
    file = settings.config_path or Path.cwd() / CONFIG_FILE
    if settings.migrations_dir is None and not file.exists():
        raise ProjectConfigError(
            f"No migration files given and no project file ({file}): `iceberg-ops lint` needs only the migration "
            "files, no catalog. Pass their paths (iceberg-ops lint migrations/) or --migrations-dir DIR."
        )
    config = settings.migration_config(files="required")
    return migrations_folder(config.migrations_dir, config.namespace)


def _live_catalog(settings: Settings) -> Catalog | None:
    """The catalog to judge findings against; ``None``, with a warning, when it cannot be reached.

    Any other error (a catalog database that does not exist, credentials refused) is raised.
    """
    from iceberg_ops_provider.errors import CatalogUnavailableError

    try:
        return open_catalog(settings, access="read")
    except Exception as exc:
        error = settings.translate(exc)
        if not isinstance(error, CatalogUnavailableError):
            raise
        reason = " ".join(str(error).split())
        click.echo(
            f"warning: {reason} The findings are not judged live: each keeps its rule's severity.",
            err=True,
        )
        return None
