"""What the command modules share: option types, ``TABLE`` resolution, text tables and output.

Bad input is a click usage error naming the option (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from iceberg_ops_provider.cli.settings import namespace_of
from iceberg_ops_provider.core.name_hints import closest, did_you_mean, existing_namespaces, listed, missing_table

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.cli.settings import Settings

__all__ = [
    "FILE_SIZE",
    "OLDER_THAN",
    "SIZE",
    "AgeOrTime",
    "Size",
    "check_filter",
    "json_option",
    "pairs",
    "resolve_tables",
    "text_table",
]

_UNITS = {"": 1, "b": 1} | {  # k, kib: binary; kb: decimal
    unit: factor
    for power, prefix in enumerate("kmgt", 1)
    for unit, factor in ((prefix, 1024**power), (f"{prefix}ib", 1024**power), (f"{prefix}b", 1000**power))
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def _json_given(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and ctx.find_root().obj is not None:
        ctx.find_root().obj.as_json = True


json_option = click.option(
    "--json",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_json_given,
    help="Print machine-readable JSON (as --json before the command group does).",
)
"""``--json`` for a subcommand: the same as the global ``--json`` (``maintain health T --json``)."""


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain text table: a header row, a dashed rule, the rows (``None`` as empty); empty without rows."""
    if not rows:
        return ""
    cells = [[str(c) for c in headers], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


class Size(click.ParamType):
    """A positive number of bytes: ``134217728``, ``128MiB``, ``128M`` (binary), ``100MB`` (decimal), ``1GiB``.

    Args:
        maximum: The largest size accepted and how to write it (``(2**40, "1 TiB")``); default no bound.
        minimum: The smallest size accepted.
    """

    name = "size"

    def __init__(self, maximum: tuple[int, str] | None = None, minimum: int = 1) -> None:
        self.maximum = maximum
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The number of bytes, or a usage error naming the option."""
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            match = _SIZE.match(str(value))
            unit = match.group(2).lower() if match else ""
            if match is None or unit not in _UNITS:
                self.fail(
                    f"{value!r} is not a size: pass bytes (134217728) or a number with a unit such as 128MiB, "
                    "128M, 100MB or 1GiB.",
                    param,
                    ctx,
                )
            amount = float(match.group(1))
            if _UNITS[unit] == 1 and amount != int(amount):  # 0.5 bytes would silently become 0
                self.fail(f"{value!r} is not a whole number of bytes.", param, ctx)
            number = int(amount * _UNITS[unit])
        if number < self.minimum:
            self.fail(f"{value!r} must be at least {self.minimum} byte{'' if self.minimum == 1 else 's'}.", param, ctx)
        if self.maximum is not None and number > self.maximum[0]:
            self.fail(f"{value!r} is more than {self.maximum[1]}, the largest size accepted.", param, ctx)
        return number


class AgeOrTime(click.ParamType):
    """An age (``3d``, ``12h``, ``30m``, ``0s``) or a past ISO timestamp (naive ones are UTC), as a UTC datetime."""

    name = "age|timestamp"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        """The cut-off, or a usage error naming the option and the forms accepted."""
        if isinstance(value, datetime):
            return value
        from iceberg_ops_provider.maintenance.times import parse_older_than

        try:
            parsed = parse_older_than(str(value))
        except (ValueError, TypeError, OverflowError):
            parsed = None
        if parsed is None:
            self.fail(
                f"{value!r} is not an age or a time: pass an age such as 3d, 12h or 30m, or an ISO timestamp "
                "such as 2026-11-01T00:00:00+00:00.",
                param,
                ctx,
            )
        now = datetime.now(UTC)
        if parsed > now + timedelta(seconds=1):
            self.fail(
                f"{value!r} is in the future ({parsed.isoformat()}, now is {now.replace(microsecond=0).isoformat()}): "
                "everything would count as old. Pass an age (0s means now) or a past timestamp.",
                param,
                ctx,
            )
        return parsed


SIZE = Size()
FILE_SIZE = Size(maximum=(2**40, "1 TiB"))
"""A data file size: at most 1 TiB (a larger target is a typo, and no engine writes such files)."""
OLDER_THAN = AgeOrTime()


def pairs(values: Sequence[str], option: str, example: str = "old_name=new_name") -> dict[str, str]:
    """``["a=b", ...]`` as ``{"a": "b"}``; a usage error naming ``option`` (and showing ``example``) otherwise."""
    found: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        key, item = key.strip(), item.strip()
        if not sep or not key or not item:
            raise click.BadParameter(f"{value!r} is not NAME=VALUE (for example {example}).", param_hint=option)
        if key in found:
            raise click.BadParameter(f"{key!r} is given twice.", param_hint=option)
        found[key] = item
    return found


def check_filter(text: str | None, option: str = "--where") -> str | None:
    """``text`` when it parses as a PyIceberg filter (empty: ``None``); else a usage error saying where it stopped."""
    if text is None or not text.strip():
        return None
    from pyiceberg.expressions.parser import parse

    from iceberg_ops_provider.core.filters import FILTER_FORM, syntax_problem

    try:
        parse(text)
    except Exception as exc:
        raise click.BadParameter(
            f"{text!r} does not parse as a filter{syntax_problem(exc)}. {FILTER_FORM}", param_hint=f"'{option}'"
        ) from exc
    return text


def resolve_tables(
    settings: Settings, catalog: Catalog, table: str | None, every: bool, *, offers_all: bool = True
) -> list[str]:
    """The tables a maintenance command works on: ``TABLE``, or every table of a namespace with ``--all``.

    ``offers_all=False`` for a command that takes one table and has no ``--all``: its messages do not
    suggest that flag.

    Raises:
        click.BadParameter: No table or namespace given, or one that does not exist.
    """
    from pyiceberg.exceptions import NoSuchNamespaceError

    if every:
        namespace = table or namespace_of(settings)
        if not namespace:
            raise click.BadParameter("name the namespace whose tables to work on (or pass --namespace).", "'TABLE'")
        try:
            found = catalog.list_tables(namespace)
        except NoSuchNamespaceError:
            found = None
        if found is None and "." in namespace.strip(".") and catalog.table_exists(namespace):
            raise click.BadParameter(
                f"{namespace!r} is a table, not a namespace: leave out --all to work on that table.",
                param_hint="'TABLE'",
            )
        if found is None or (not found and not catalog.namespace_exists(namespace)):
            existing = existing_namespaces(catalog)
            raise click.BadParameter(
                f"namespace {namespace!r} does not exist in the catalog (existing namespaces: {listed(existing)})."
                + did_you_mean(closest(namespace, existing)),
                param_hint="'TABLE'",
            )
        return sorted(".".join(identifier) for identifier in found)
    if not table:
        either = ", or a namespace with --all" if offers_all else ""
        raise click.BadParameter(f"name a table (namespace.table){either}.", param_hint="'TABLE'")
    if "." not in table.strip("."):
        namespace = namespace_of(settings)
        if not (namespace and catalog.table_exists(f"{namespace}.{table}")) and catalog.namespace_exists(table):
            every_table = "pass --all to work on every table of it, or " if offers_all else ""
            raise click.BadParameter(
                f"{table!r} is a namespace: {every_table}name a table as {table}.TABLE.", param_hint="'TABLE'"
            )
        if not namespace:
            or_all = ", or --all for every table of a namespace" if offers_all else ""
            raise click.BadParameter(
                f"{table!r} has no namespace: name it as namespace.table (or pass --namespace{or_all}).",
                param_hint="'TABLE'",
            )
        table = f"{namespace}.{table}"
    if not catalog.table_exists(table):
        missing = missing_table(catalog, table)
        every_one = (
            f"; with --all, {missing.namespace} means every one of them"
            if missing.namespace_exists and offers_all
            else ""
        )
        raise click.BadParameter(
            f"table {table!r} does not exist in the catalog ({missing.detail}{every_one})."
            + did_you_mean(missing.guess),
            param_hint="'TABLE'",
        )
    return [table]
