"""Which source columns a move takes, their names in the target, and the source's definitions in those names.

Paths: a field is addressed by the tuple of names from the top-level column down, the way PyIceberg
names nested fields (``("points", "element", "x")`` for field ``x`` of the structs in list ``points``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyiceberg.expressions import (
    BooleanExpression,
    BoundLiteralPredicate,
    BoundPredicate,
    BoundUnaryPredicate,
    LiteralPredicate,
    Reference,
    UnaryPredicate,
    UnboundPredicate,
)
from pyiceberg.expressions.visitors import visit
from pyiceberg.partitioning import INITIAL_PARTITION_SPEC_ID, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import INITIAL_SORT_ORDER_ID, UNSORTED_SORT_ORDER, SortField, SortOrder
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from iceberg_ops_provider.core.filters import ExpressionRewriter
from iceberg_ops_provider.core.name_hints import closest, did_you_mean
from iceberg_ops_provider.core.schema_diff import field_paths
from iceberg_ops_provider.errors import ReconciliationError
from iceberg_ops_provider.messages import Arg, message

__all__ = [
    "Selection",
    "select_columns",
    "target_schema_for",
    "target_spec_for",
    "target_sort_order_for",
    "rename_references",
]

logger = logging.getLogger(__name__)

Path = tuple[str, ...]


@dataclass(frozen=True)
class Selection:
    """The source columns a move takes and their names in the target.

    ``renames`` holds new names by source path (``("a", "b")`` for field ``b`` of struct ``a``; the
    value renames the last element only); ``paths`` the path of every source field, by field id.
    """

    source: Schema
    fields: tuple[NestedField, ...]
    renames: Mapping[Path, str]
    paths: Mapping[int, Path]

    @property
    def names(self) -> list[str]:
        """The selected top-level source column names, in source order."""
        return [f.name for f in self.fields]

    def target_path(self, path: Path) -> Path:
        """The target path of the source field at ``path`` (each renamed level replaced)."""
        return tuple(self.renames.get(path[: i + 1], name) for i, name in enumerate(path))


def _refused(text: str, about: str | None = None) -> ReconciliationError:
    """The error for ``text``, whose ``{columns}`` and ``{rename}`` name arguments (``about``: the bad one)."""
    return ReconciliationError(
        message(text, about=about, columns=Arg("columns", keyword=True), rename=Arg("rename", keyword=True))
    )


def select_columns(
    source: Schema, columns: Sequence[str] | None = None, rename: Mapping[str, str] | None = None
) -> Selection:
    """Check ``columns`` (top-level names) and ``rename`` (names or dotted struct paths) against the source schema.

    Raises:
        ReconciliationError: An unknown or nested name in ``columns``, an unknown name in ``rename``,
            a rename of a column left out by ``columns`` or of a list element or map key/value, or two
            source fields given the same target name.
    """
    available = ", ".join(f"`{f.name}`" for f in source.fields)
    paths = {field.field_id: path for path, field in field_paths(source).items()}
    if columns is None:
        selected = list(source.fields)
    else:
        wanted = list(dict.fromkeys(columns))
        if not wanted:
            raise _refused(
                f"{{columns}} is empty: name at least one source column (available: {available}).", "columns"
            )
        top = {f.name for f in source.fields}
        unknown = [c for c in wanted if c not in top]
        if unknown:
            raise _refused(
                f"{{columns}} names {_quoted(unknown)}, which the source does not have as top-level columns "
                f"(nested fields move with their column). Available columns: {available}."
                f"{did_you_mean(closest(unknown[0], top))}",
                "columns",
            )
        selected = [f for f in source.fields if f.name in wanted]
    names = [f.name for f in selected]
    renames = _check_renames(source, paths, names, rename or {}, available)
    selection = Selection(source=source, fields=tuple(selected), renames=renames, paths=paths)
    _check_unique_targets(selection)
    return selection


def _check_renames(
    source: Schema, paths: Mapping[int, Path], names: list[str], rename: Mapping[str, str], available: str
) -> dict[Path, str]:
    renames: dict[Path, str] = {}
    top = {f.name: f for f in source.fields}
    for key, new in rename.items():
        if key in top:
            path: Path = (key,)
        else:
            try:
                path = paths[source.find_field(key).field_id]
            except ValueError:
                raise _refused(
                    f"{{rename}} names `{key}`, which the source does not have. Available columns: {available} "
                    "(nested struct fields as dotted paths, for example `address.zip`)."
                    f"{did_you_mean(closest(key, top))}",
                    "rename",
                ) from None
            parent = source.find_field(".".join(path[:-1]))
            if not isinstance(parent.field_type, StructType):
                raise _refused(
                    f"{{rename}} names `{key}`, a list element or map key/value: only columns and struct fields "
                    "can be renamed.",
                    "rename",
                )
            prefix = ".".join(path[:-1]) + "."
            new = new.removeprefix(prefix)
        if path[0] not in names:
            raise _refused(
                f"{{rename}} names `{key}`, but {{columns}} leaves out `{path[0]}`: add `{path[0]}` to {{columns}} "
                "or drop the rename.",
                "rename",
            )
        renames[path] = new
    return renames


def _check_unique_targets(selection: Selection) -> None:
    """Two source fields renamed onto one target name (at the top level or inside one struct)."""
    seen: dict[tuple[Path, str], str] = {}
    for path in field_paths(Schema(*selection.fields)):
        parent, target = path[:-1], selection.renames.get(path, path[-1])
        if (parent, target) in seen:
            where = f" inside `{'.'.join(parent)}`" if parent else ""
            raise _refused(
                f"Source columns `{seen[parent, target]}` and `{'.'.join(path)}` would both become `{target}`{where}: "
                "fix {rename} so each target column receives one source column, or leave one out with {columns}.",
                "rename",
            )
        seen[parent, target] = ".".join(path)


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def target_schema_for(
    source: Schema,
    *,
    columns: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> Schema:
    """The schema of a new target table: the source's columns restricted to ``columns`` and renamed.

    Field ids stay the source's, so :func:`target_spec_for` and :func:`target_sort_order_for` can refer
    to them; the catalog assigns fresh ids when it creates the table and rebinds the partition spec and
    sort order through the names. Identifier fields are kept when moved; ``notes`` receives a line for
    each one left out.
    """
    selection = select_columns(source, columns, rename)
    fields = [_renamed_field(f, (f.name,), selection) for f in selection.fields]
    kept = {fid for fid, path in selection.paths.items() if path[0] in selection.names}
    identifiers = [i for i in source.identifier_field_ids if i in kept]
    dropped = [source.find_column_name(i) for i in source.identifier_field_ids if i not in kept]
    if dropped and notes is not None:
        notes.append(
            f"identifier fields {_quoted([str(d) for d in dropped])} are not moved: the target will not have them"
        )
    return Schema(*fields, identifier_field_ids=identifiers)


def _renamed_field(field: NestedField, path: Path, selection: Selection) -> NestedField:
    name, field_type = selection.renames.get(path, field.name), _renamed_type(field.field_type, path, selection)
    return field.model_copy(update={"name": name, "field_type": field_type})


def _renamed_type(field_type: IcebergType, path: Path, selection: Selection) -> IcebergType:
    if isinstance(field_type, StructType):
        return StructType(*(_renamed_field(c, (*path, c.name), selection) for c in field_type.fields))
    if isinstance(field_type, ListType):
        element = _renamed_type(field_type.element_type, (*path, "element"), selection)
        return ListType(field_type.element_id, element, element_required=field_type.element_required)
    if isinstance(field_type, MapType):
        key = _renamed_type(field_type.key_type, (*path, "key"), selection)
        value = _renamed_type(field_type.value_type, (*path, "value"), selection)
        return MapType(field_type.key_id, key, field_type.value_id, value, value_required=field_type.value_required)
    return field_type


def _target_field(
    source_id: int, what: str, selection: Selection, target: Schema
) -> tuple[str, str, NestedField | None]:
    """The source name, target name and target field of the column a partition or sort field uses."""
    path = selection.paths.get(source_id)
    if path is None:
        raise ReconciliationError(
            f"The source's {what} uses field id {source_id}, which the source schema does not have: "
            "pass the partition spec and sort order of the same table as the schema."
        )
    source_name = ".".join(path)
    target_name = ".".join(selection.target_path(path))
    try:
        return source_name, target_name, target.find_field(target_name)
    except ValueError:
        return source_name, target_name, None


def target_spec_for(
    source_spec: PartitionSpec,
    source: Schema,
    target: Schema,
    *,
    rename: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> PartitionSpec:
    """The source's partition spec expressed on the ``target`` schema (its columns found by their new names).

    Partition field names that follow the source column's name (``region``, ``ts_day``) follow its
    rename (``area``, ``event_ts_day``); ``notes`` receives a line for each.

    Raises:
        ReconciliationError: A partition field's source column is not moved, or its transform cannot
            apply to the target column's type.
    """
    selection = select_columns(source, None, rename)
    fields = []
    for pf in source_spec.fields:
        source_name, target_name, field = _target_field(pf.source_id, "partition spec", selection, target)
        if field is None:
            raise _refused(
                f"The source is partitioned by {pf.transform}(`{source_name}`) (partition field `{pf.name}`), "
                f"but `{target_name}` is not moved: add `{source_name}` to {{columns}}, or create the target "
                "yourself with the partition spec you want."
            )
        if not pf.transform.can_transform(field.field_type):
            raise ReconciliationError(
                f"Partition field `{pf.name}` applies {pf.transform} to `{source_name}`, which cannot apply to "
                f"the target column `{target_name}` of type {field.field_type}: create the target yourself."
            )
        name = _follow_rename(pf.name, source_name, target_name)
        if name != pf.name and notes is not None:
            notes.append(f"partition field `{pf.name}` is called `{name}` in the target")
        fields.append(PartitionField(source_id=field.field_id, field_id=pf.field_id, transform=pf.transform, name=name))
    return PartitionSpec(*fields, spec_id=INITIAL_PARTITION_SPEC_ID)


def _follow_rename(name: str, source_name: str, target_name: str) -> str:
    if source_name == target_name:
        return name
    if name == source_name:
        return target_name
    if name.startswith(source_name + "_"):
        return target_name + name[len(source_name) :]
    return name


def target_sort_order_for(
    source_order: SortOrder,
    source: Schema,
    target: Schema,
    *,
    rename: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
) -> SortOrder:
    """The source's sort order expressed on the ``target`` schema; sort fields on columns not moved are dropped.

    ``notes`` receives a line for each sort field dropped; no field left gives the unsorted order.
    """
    selection = select_columns(source, None, rename)
    fields = []
    for sf in source_order.fields:
        source_name, target_name, field = _target_field(sf.source_id, "sort order", selection, target)
        if field is None or not sf.transform.can_transform(field.field_type):
            line = f"sort field {sf.transform}(`{source_name}`) is dropped: `{target_name}` is not moved"
            if field is not None:
                line = f"sort field {sf.transform}(`{source_name}`) is dropped: it cannot apply to {field.field_type}"
            logger.info("%s", line)
            if notes is not None:
                notes.append(line)
            continue
        fields.append(
            SortField(
                source_id=field.field_id, transform=sf.transform, direction=sf.direction, null_order=sf.null_order
            )
        )
    if not fields:
        return UNSORTED_SORT_ORDER
    return SortOrder(*fields, order_id=INITIAL_SORT_ORDER_ID)


def rename_references(
    expr: BooleanExpression, source: Schema, target_name: Callable[[int, str], str]
) -> BooleanExpression:
    """Rewrite the column references of a filter on ``source`` into the target's column names.

    ``expr`` is unbound or bound to ``source``; ``target_name`` gives the target's dotted name for a
    source field (its id and the name used) and raises ``ReconciliationError`` when it is not moved.
    The result is unbound.
    """
    return visit(expr, _RenameReferences(source, target_name))


class _RenameReferences(ExpressionRewriter):
    def __init__(self, source: Schema, target_name: Callable[[int, str], str]) -> None:
        self.source = source
        self.target_name = target_name

    def visit_unbound_predicate(self, predicate: UnboundPredicate) -> BooleanExpression:
        name = predicate.term.name  # type: ignore[attr-defined]
        source = self.source
        try:
            field = source.find_field(name)
        except ValueError:
            columns = ", ".join(f"`{f.name}`" for f in source.fields)
            raise ReconciliationError(
                f"The filter uses column `{name}`, which the source does not have (columns: {columns})."
            ) from None
        term = Reference(self.target_name(field.field_id, name))
        if isinstance(predicate, UnaryPredicate):
            return type(predicate)(term)
        if isinstance(predicate, LiteralPredicate):
            return type(predicate)(term, predicate.literal)
        return type(predicate)(term, predicate.literals)  # type: ignore[attr-defined]

    def visit_bound_predicate(self, predicate: BoundPredicate) -> BooleanExpression:
        field = predicate.term.ref().field
        name = self.target_name(field.field_id, field.name)
        if isinstance(predicate, BoundUnaryPredicate):
            return predicate.as_unbound(name)
        if isinstance(predicate, BoundLiteralPredicate):
            return predicate.as_unbound(name, predicate.literal)
        return predicate.as_unbound(name, predicate.literals)  # type: ignore[attr-defined]
