"""The arguments of :func:`~iceberg_ops_provider.maintenance.compaction.compact_small_files_streaming`, checked.

Each refusal names the argument as an :class:`~iceberg_ops_provider.errors.Arg`, so each front words it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.table import TableProperties

from iceberg_ops_provider.core.filters import bind_filter
from iceberg_ops_provider.errors import MaintenanceError
from iceberg_ops_provider.maintenance.binpack import min_input_files_problem
from iceberg_ops_provider.messages import Arg, Hint, message

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["STRATEGIES", "check_arguments", "check_batching"]

STRATEGIES = ("binpack", "sort")


def _identifier(table: Table) -> str:
    return ".".join(table.name())


def check_arguments(
    table: Table,
    target_file_size_bytes: int | None,
    min_input_files: int,
    where: str | BooleanExpression | None,
    strategy: str,
) -> tuple[int, BooleanExpression]:
    """Validate the arguments; returns the target size and the bound-checked filter."""
    from pyiceberg.table import Table

    if not isinstance(table, Table):
        raise TypeError(f"table must be a pyiceberg Table (from catalog.load_table), got {type(table).__name__}.")
    if strategy not in STRATEGIES:
        raise ValueError(
            message(
                f"{{strategy}} must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}.",
                about="strategy",
                strategy=Arg("strategy"),
            )
        )
    problem = min_input_files_problem(min_input_files)
    if problem is not None:
        raise ValueError(
            message(f"{{min_input_files}} {problem}.", about="min_input_files", min_input_files=Arg("min_input_files"))
        )
    if target_file_size_bytes is None:
        raw = table.metadata.properties.get(TableProperties.WRITE_TARGET_FILE_SIZE_BYTES)
        try:
            target = int(raw) if raw is not None else TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT
        except ValueError as exc:
            raise ValueError(
                message(
                    f"Table property {TableProperties.WRITE_TARGET_FILE_SIZE_BYTES}={raw!r} is not an integer; fix "
                    "it with a property update or pass {target_file_size_bytes}.",
                    target_file_size_bytes=Arg("target_file_size_bytes"),
                )
            ) from exc
        source = f"the table property {TableProperties.WRITE_TARGET_FILE_SIZE_BYTES}"
    else:
        if isinstance(target_file_size_bytes, bool) or not isinstance(target_file_size_bytes, int):
            raise ValueError(
                f"target_file_size_bytes must be an integer number of bytes, got {target_file_size_bytes!r}."
            )
        target, source = target_file_size_bytes, "target_file_size_bytes"
    if target < 1:
        raise ValueError(f"{source} must be a positive number of bytes, got {target}.")
    if where is None:
        expression: BooleanExpression = AlwaysTrue()
    elif isinstance(where, str):
        try:
            expression = parse(where)
        except Exception as exc:
            raise ValueError(
                message(
                    f"{{where}} is not a filter PyIceberg can parse: {exc}", about="where", where=Arg("where", where)
                )
            ) from exc
    elif isinstance(where, BooleanExpression):
        expression = where
    else:
        raise ValueError(f"where must be a filter string or a pyiceberg BooleanExpression, got {type(where).__name__}.")
    try:
        expression = bind_filter(expression, table.schema())
    except Exception as exc:
        raise ValueError(
            message(
                f"{{where}} does not fit the schema of {_identifier(table)}: {exc}. "
                f"Columns: {', '.join(f.name for f in table.schema().fields)}.",
                about="where",
                where=Arg("where", where),
            )
        ) from exc
    if strategy == "sort" and table.sort_order().is_unsorted:
        name = _identifier(table)
        namespace, _, bare = name.rpartition(".")
        raise ValueError(
            message(
                f"{{sort}} sorts by the table's sort order, and {name} has none. Set one ({{set_one}}) or use "
                "{binpack}.",
                about="strategy",
                sort=Arg("strategy", "sort"),
                set_one=Hint(
                    "set_sort_order",
                    "with table.update_sort_order(), or ctx.set_sort_order() in a migration",
                    {"table": name, "name": bare, "namespace": namespace},
                ),
                binpack=Arg("strategy", "binpack"),
            )
        )
    if table.format_version > 2:
        raise MaintenanceError(
            f"{_identifier(table)} is a format v{table.format_version} table; PyIceberg 0.12 writes v1 and v2 only."
        )
    return target, expression


def check_batching(commit_every_bytes: int | None, max_concurrent_groups: int | None) -> None:
    """Refuse a ``commit_every_bytes`` or ``max_concurrent_groups`` that is not a count of the right size."""
    counts = (("commit_every_bytes", commit_every_bytes, 0), ("max_concurrent_groups", max_concurrent_groups, 1))
    for name, value, least in counts:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(
                message(
                    f"{{name}} must be an integer of at least {least}, got {value!r}.",
                    about=name,
                    name=Arg(name),
                )
            )
