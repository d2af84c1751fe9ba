"""The command line's words for what the engine's messages name: its options, as typed.

The engine's errors name what to change as facts (:class:`~iceberg_ops_provider.errors.Arg`,
:class:`~iceberg_ops_provider.errors.Hint`); this module is the one place that words them for the
shell: :data:`OPTIONS` maps each argument to its option, :data:`HINTS` says each step as a command.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.catalogs import redact_url
from iceberg_ops_provider.cli.catalog_flags import setting_words
from iceberg_ops_provider.messages import MISSING, Arg, Fact, Setting, message_about, python_words, worded

if TYPE_CHECKING:
    from iceberg_ops_provider.cli.settings import Settings

__all__ = [
    "HINTS",
    "OPTIONS",
    "Option",
    "age_text",
    "cli_message",
    "cli_words",
    "global_options",
    "maintenance_command",
    "move_command",
    "size_option_text",
    "usage_error",
]


@dataclass(frozen=True)
class Option:
    """How an engine argument is typed on the command line.

    ``kind``: ``value`` (``--mode incremental``), ``size`` (``512MiB``), ``flag`` (``--create-target`` for
    ``True``) or ``inverse`` (``--keep-files`` for ``delete_files=False``).
    """

    flag: str
    kind: str = "value"


OPTIONS: dict[str, Option] = {
    # maintain
    "where": Option("--where"),
    "strategy": Option("--strategy"),
    "min_input_files": Option("--min-input-files"),
    "target_file_size_bytes": Option("--target-file-size", "size"),
    "dry_run": Option("--dry-run", "flag"),
    "older_than": Option("--older-than"),
    "retain_last": Option("--retain-last"),
    "delete_files": Option("--keep-files", "inverse"),
    "location": Option("--location"),
    "check_nested_tables": Option("--no-check-nested-tables", "inverse"),
    "target_manifest_size_bytes": Option("--target-manifest-size", "size"),
    "thresholds": Option("--threshold"),
    # move
    "columns": Option("--columns"),
    "rename": Option("--rename"),
    "mode": Option("--mode"),
    "move_id": Option("--move-id"),
    "create_target": Option("--create-target", "flag"),
    "commit_every_bytes": Option("--commit-every-bytes", "size"),
    "verify": Option("--verify"),
    "parallelism": Option("--parallelism"),
    "sample_size": Option("--sample-size"),
    "source_snapshot_id": Option("--source-snapshot-id"),
    "rewrite": Option("--rewrite", "flag"),
    "method": Option("--method"),
    "seed": Option("--seed"),
    "branch": Option("--branch"),
    "not_null": Option("--not-null"),
    "unique": Option("--unique"),
    "no_rows_where": Option("--no-rows-where"),
    "min_rows": Option("--min-rows"),
    "max_rows": Option("--max-rows"),
    "scope": Option("--scope"),
    # migrations
    "namespace": Option("--namespace"),
    "meta_namespace": Option("--meta-namespace"),
    "allow_changed": Option("--allow-changed", "flag"),
    "allow_missing": Option("--allow-missing", "flag"),
    "allow_out_of_order": Option("--allow-out-of-order", "flag"),
    "allow_destructive": Option("--yes", "flag"),
    "autogenerate_from_models": Option("--autogenerate", "flag"),
    "target_table": Option("--target-table"),
    # tag, restore
    "snapshot_id": Option("--snapshot"),
    "max_age": Option("--max-age"),
}
"""Each argument of the engine's verbs, ``DataMover`` and catalogs that an option sets, and how."""

HINTS: dict[str, str] = {
    "set_sort_order": (
        'in a migration: ctx.set_sort_order("{name}", ["<column>"]) in the file '
        '`iceberg-ops --namespace {namespace} revision -m "sort order"` writes, then '
        "`iceberg-ops --namespace {namespace} upgrade`"
    ),
    "compaction": "compaction (`iceberg-ops maintain compact {table}`)",
    "run_move_first": "run `{command}` first",
    "threshold": "--threshold {name}=BYTES",
    "sql_warehouse": "--warehouse (a folder, created if missing, or a URI such as s3://bucket/warehouse)",
    "create_catalog": "`iceberg-ops upgrade` creates a new catalog there",
    "force_unlock": "`iceberg-ops unlock`",
    "repair": "`iceberg-ops repair`",
    "stamp": "`iceberg-ops stamp {version}`",
    "stamp_command": "`iceberg-ops stamp`",
    "new_namespace": "`iceberg-ops upgrade` creates a new one",
    "catalog_without_airflow": "`catalog:` in iceberg-ops.yaml, or --catalog / --catalog-name",
    "give_namespace": "pass --namespace NS or set `namespace:` in {file}",
    "create_project_file": "Run `iceberg-ops init` to create one, or pass --config PATH",
    "project_file_itself": "pass the project file itself, e.g. --config {file}",
}
"""Each step the engine's messages advise (by :attr:`Hint.key`), as what to type; ``{...}`` from its details."""

_BINARY_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_MAINTAIN = {
    "compact": "compact",
    "rewrite_manifests": "manifests",
    "expire_snapshots": "expire",
    "remove_orphan_files": "orphans",
}
"""A health report's action and the ``maintain`` command that performs it."""


def _in_units(amount: int, units: Sequence[tuple[str, int]], last: str) -> str:
    """``amount`` in the largest of ``units`` that divides it, else as it is followed by ``last``."""
    return next((f"{amount // size}{unit}" for unit, size in units if amount and amount % size == 0), f"{amount}{last}")


def size_option_text(size: int) -> str:
    """``size`` bytes as the size options take them: ``512MiB``, ``4KiB``, or bytes when no unit divides it."""
    return _in_units(size, _BINARY_UNITS, "")


def _quote(text: str) -> str:
    """``text`` as a shell word: bare when safe, in double quotes when it holds single quotes (a filter)."""
    quoted = shlex.quote(text)
    if quoted != text and "'" in text and not any(char in text for char in '"$`\\!'):
        return f'"{text}"'
    return quoted


def _option_words(argument: str, value: Any) -> str | None:
    """``argument=value`` as typed on the command line (``None``: no option sets it)."""
    option = OPTIONS.get(argument)
    if option is None:
        return None
    if value is MISSING:
        return option.flag
    if option.kind == "flag":
        return option.flag if value else f"no {option.flag}"
    if option.kind == "inverse":
        return f"no {option.flag}" if value else option.flag
    if option.kind == "size" and isinstance(value, int) and not isinstance(value, bool):
        return f"{option.flag} {size_option_text(value)}"
    if isinstance(value, Mapping):
        return " ".join(f"{option.flag} {_quote(f'{key}={item}')}" for key, item in value.items())
    return f"{option.flag} {_quote(','.join(map(str, value)) if isinstance(value, list | tuple) else str(value))}"


def cli_words(fact: Fact) -> str:
    """A fact of an engine message as the command line words it (Python's words when no option sets it)."""
    if isinstance(fact, Setting):
        return setting_words(fact)
    if isinstance(fact, Arg):
        return _option_words(fact.name, fact.value) or python_words(fact)
    template = HINTS.get(fact.key)
    if template is None:
        return fact.python
    details = dict(fact.details)
    if fact.key == "threshold" and details.get("name") == "target_file_size_bytes":
        return "--target-file-size SIZE"
    if fact.key == "run_move_first" and "command" not in details:  # without the options of a command line
        details["command"] = move_command(details.get("source", "SOURCE"), details.get("target", "TARGET"), {})
    try:
        return template.format(**details)
    except (KeyError, IndexError):
        return fact.python


def cli_message(error: BaseException, words: Callable[[Fact], str] = cli_words) -> str:
    """``error``'s message in the command line's words (``words``: :func:`cli_words`), on one line."""
    return " ".join(worded(error, words).split())


def usage_error(error: BaseException) -> click.BadParameter | None:
    """Click's usage error of the option whose value ``error`` refuses (``None`` when it names no option)."""
    argument = message_about(error)
    option = OPTIONS.get(argument) if argument else None
    if option is None:
        return None
    usage = click.BadParameter(cli_message(error), param_hint=f"'{option.flag}'")
    usage.__cause__ = error
    return usage


def age_text(seconds: float) -> str:
    """An age as ``--older-than`` and ``--max-age`` take it: ``5d``, ``12h``, ``30m``, ``45s``."""
    return _in_units(max(0, round(seconds)), (("d", 86400), ("h", 3600), ("m", 60)), "s")


def global_options(settings: Settings) -> list[str]:
    """The global options of this invocation that name the catalog, as typed (a password in a URI hidden)."""
    given = [
        ("--config", settings.config_path),
        ("--conn-id", settings.conn_id),
        ("--catalog", settings.catalog_kind),
        ("--catalog-name", settings.catalog_name),
        ("--catalog-uri", redact_url(settings.catalog_uri) if settings.catalog_uri else None),
        ("--db-path", settings.db_path),
        ("--warehouse", settings.warehouse),
    ]
    return [f"{flag} {shlex.quote(str(value))}" for flag, value in given if value]


def move_command(
    source: str,
    target: str,
    arguments: Mapping[str, Any],
    *,
    target_options: Mapping[str, Any] | None = None,
    prefix: Sequence[str] = (),
) -> str:
    """The ``iceberg-ops move`` command that runs a move, with ``--create-target``: to paste as it is.

    ``arguments`` are the mover's (empty ones and ``mode='append'`` left out), ``target_options`` the
    ``--target-*`` options given, ``prefix`` the global options to repeat.
    """
    words = ["iceberg-ops", *prefix, "move", _quote(source), _quote(target)]
    for name, value in arguments.items():
        if value is None or value == [] or value == {} or (name == "mode" and value == "append"):
            continue
        typed = _option_words(name, value)
        if typed is not None:
            words.append(typed)
    for name, value in (target_options or {}).items():
        if value:
            text = redact_url(str(value)) if name == "target_catalog_uri" else str(value)
            words.append(f"--{name.replace('_', '-')} {_quote(text)}")
    words.append("--create-target")
    return " ".join(words)


def maintenance_command(
    action: str, params: Mapping[str, Any], table: str, *, at: datetime, prefix: Sequence[str] = ()
) -> str | None:
    """A health report's recommendation as the ``iceberg-ops maintain`` command that performs it (else ``None``).

    A cut-off time becomes the age it was ``at`` the report (``--older-than 5d``); ``prefix``: global options.
    """
    command = _MAINTAIN.get(action)
    if command is None:
        return None
    words = ["iceberg-ops", *prefix, "maintain", command, _quote(table)]
    for name, value in params.items():
        if value is None or (name == "delete_files" and value is True):
            continue
        if name == "older_than" and isinstance(value, datetime):
            words.append(f"--older-than {age_text((at - value).total_seconds())}")
            continue
        typed = _option_words(name, value)
        if typed is None:
            return None  # a parameter no option sets: the command would not do what the report says
        words.append(typed)
    return " ".join(words)
