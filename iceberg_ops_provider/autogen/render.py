"""Render operations as a migration file for review (docs/autogenerate.md, The file it writes)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.schema import Schema

from iceberg_ops_provider.autogen.operations import Irreversible, Operation, Rendered
from iceberg_ops_provider.autogen.scaffolding import LINE_LENGTH, display_width, docstring, fitted_value, string_literal
from iceberg_ops_provider.core.types import iceberg_to_arrow_schema

__all__ = ["render_arrow_schema", "render_migration", "schema_literal"]

_PLAIN = ("bool_", "int32", "int64", "float32", "float64", "date32", "string", "binary")
_SIMPLE = {getattr(pa, name)(): f"pa.{name}()" for name in _PLAIN}
_SIMPLE |= {pa.time64("us"): 'pa.time64("us")', pa.timestamp("us"): 'pa.timestamp("us")'}
_SIMPLE[pa.timestamp("us", tz="UTC")] = 'pa.timestamp("us", tz="UTC")'


def _arrow_type(t: pa.DataType) -> str:
    if t in _SIMPLE:
        return _SIMPLE[t]
    if isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.uuid":
        return "pa.uuid()"
    if pa.types.is_decimal(t):
        return f"pa.decimal128({t.precision}, {t.scale})"
    if pa.types.is_fixed_size_binary(t):
        return f"pa.binary({t.byte_width})"
    if pa.types.is_list(t):
        return f"pa.list_({_arrow_field(t.value_field)})"
    if pa.types.is_map(t):
        return f"pa.map_({_arrow_field(t.key_field)}, {_arrow_field(t.item_field)})"
    if pa.types.is_struct(t):
        return "pa.struct([" + ", ".join(_arrow_field(t.field(i)) for i in range(t.num_fields)) + "])"
    raise ValueError(f"cannot render Arrow type {t}")


def _arrow_field(f: pa.Field) -> str:
    parts = [string_literal(f.name), _arrow_type(f.type)]
    if not f.nullable:
        parts.append("nullable=False")
    if f.metadata and b"doc" in f.metadata:
        parts.append(f'metadata={{"doc": {string_literal(f.metadata[b"doc"].decode())}}}')
    return f"pa.field({', '.join(parts)})"


def render_arrow_schema(schema: pa.Schema, indent: str) -> str:
    """Python source for ``schema``, one field per line, for a value whose line starts at ``indent``."""
    inner = "".join(f"{indent}        {_arrow_field(f)},\n" for f in schema)
    return f"pa.schema(\n{indent}    [\n{inner}{indent}    ]\n{indent})"


def schema_literal(schema: Schema) -> Rendered:
    """An Iceberg schema as Arrow-schema source (for ``create_table``), carrying the Arrow value too."""
    arrow = iceberg_to_arrow_schema(schema)
    return Rendered(lambda indent: render_arrow_schema(arrow, indent), arrow)


def render_migration(message: str, operations: list[Operation], *, source: str = "") -> str:
    """The text of a migration file performing ``operations``, as ruff's format and lint checks (defaults) want it.

    ``message`` is its description; ``source`` says where the operations came from (``models/orders.yaml``).
    """
    trees = [_parsed(op.render()) for op in operations]
    reasons, undo = _reversal(operations)
    undo_trees = [_parsed(step.render()) for step in undo]
    calls, undo_calls = [_code(tree) for tree in trees], [_code(tree) for tree in undo_trees]
    generated = "Generated from the table models" + (f" ({source})" if source else "")
    header = docstring(f"{message}\n\n{generated}. Review before applying.\n") + "\n\n"
    run = trees if reasons else trees + undo_trees  # the undoing steps are only comments when the downgrade refuses
    uses_arrow = any(isinstance(node, ast.Name) and node.id == "pa" for tree in run for node in ast.walk(tree))
    # One block: in a user's project both packages are third-party (ruff's isort wants no blank line).
    imports = "import pyarrow as pa\n" if uses_arrow else ""
    names = "BaseMigration, IrreversibleMigrationError" if reasons else "BaseMigration"
    imports += f"from iceberg_ops_provider.migration import {names}\n\n\n"
    labels = tuple(("", _Atom(string_literal(f"[{op.risk}] {op.describe()}"))) for op in operations)
    summary = _Bracketed("(", labels, ")", single_tuple=len(operations) == 1)
    lines = [
        "class Migration(BaseMigration):",
        f"    description = {fitted_value('    description = ', string_literal(message))}",
        *_lay_out(summary, 4, "operations = ", split=len(operations) > 1),  # two or more: one per line
        "",
        "    def upgrade(self, ctx):",
    ]
    if not operations:
        lines.append("        pass")
    for op, call in zip(operations, calls, strict=True):
        lines.append(f"        # {_comment(f'[{op.risk}] {op.describe()}')}")
        lines += _lay_out(call, 8)
    lines += ["", "    def downgrade(self, ctx):"]
    lines += _downgrade_body(reasons, undo_calls)
    return header + imports + "\n".join(lines) + "\n"


def _reversal(operations: list[Operation]) -> tuple[list[str], list[Operation]]:
    """Why some of ``operations`` cannot be undone, and the steps that undo the others, in reverse order."""
    reasons: list[str] = []
    steps: list[Operation] = []
    for op in reversed(operations):
        try:
            steps.extend(op.reverse())
        except Irreversible as why:
            reasons.append(str(why))
    return reasons, steps


def _downgrade_body(reasons: list[str], undo_calls: list[_Code]) -> list[str]:
    """The body of ``downgrade()``: the undoing steps, or a refusal naming every irreversible step."""
    body = [line for call in undo_calls for line in _lay_out(call, 8)]
    if not reasons:
        return body or ["        pass"]
    parts = tuple(reason + ("; " if i < len(reasons) - 1 else "") for i, reason in enumerate(reasons))
    refusal = _Bracketed("IrreversibleMigrationError(", (("", _Concatenation(parts)),), ")")
    lines = _lay_out(refusal, 8, "raise ")
    if body:
        lines.append("        # The steps that can be undone, in reverse order:")
        lines += [f"        # {line[8:]}" for line in body]
    return lines


# -- layout -------------------------------------------------------------------------------------
# The generated code is laid out the way ``ruff format`` lays it out by default, so that formatting
# the file changes nothing: an expression that fits on its line stays flat; one that does not is
# split inside its brackets, one item per line, with a trailing comma (a "magic" trailing comma,
# which tells the formatter to keep it split).


@dataclass(frozen=True)
class _Atom:
    """Code that is never split: a name, a number, a string literal."""

    text: str

    def flat(self) -> str:
        return self.text

    def broken(self, indent: int, head: str, tail: str) -> list[str] | None:
        return None


@dataclass(frozen=True)
class _Bracketed:
    """A call, list, tuple, set or dict: ``opener``, items with their prefix (``"name="``, ``"**"``...), ``closer``."""

    opener: str
    items: tuple[tuple[str, _Code], ...]
    closer: str
    single_tuple: bool = False

    def flat(self) -> str:
        inner = ", ".join(prefix + code.flat() for prefix, code in self.items)
        return f"{self.opener}{inner}{',' if self.single_tuple else ''}{self.closer}"

    def broken(self, indent: int, head: str, tail: str) -> list[str] | None:
        if not self.items:
            return None
        pad = " " * indent
        lines = [f"{pad}{head}{self.opener}"]
        for prefix, code in self.items:
            lines += _lay_out(code, indent + 4, prefix, ",")
        lines.append(f"{pad}{self.closer}{tail}")
        return lines


@dataclass(frozen=True)
class _Concatenation:
    """A string written as one literal when it fits, else as implicitly concatenated parts, one per line."""

    parts: tuple[str, ...]

    def flat(self) -> str:
        return string_literal("".join(self.parts))

    def broken(self, indent: int, head: str, tail: str) -> list[str] | None:
        if len(self.parts) < 2:
            return None
        pad = " " * indent
        lines = [f"{pad}{head if i == 0 else ''}{string_literal(part)}" for i, part in enumerate(self.parts)]
        lines[-1] += tail
        return lines


_Code = _Atom | _Bracketed | _Concatenation


def _lay_out(code: _Code, indent: int, head: str = "", tail: str = "", *, split: bool = False) -> list[str]:
    """The lines of ``head + code + tail`` starting at column ``indent``: flat if it fits (and not ``split``)."""
    flat = f"{' ' * indent}{head}{code.flat()}{tail}"
    if not split and display_width(flat) <= LINE_LENGTH:
        return [flat]
    return code.broken(indent, head, tail) or [flat]


def _comment(text: str) -> str:
    """``text`` fit for a ``#`` comment: on one line (unprintable characters escaped), no trailing blanks."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text).rstrip()


def _parsed(source: str) -> ast.expr:
    """The syntax tree of an operation's rendered call (``op.render()``, whatever its layout)."""
    return ast.parse(source.strip(), mode="eval").body


def _code(node: ast.expr) -> _Code:
    """The layout tree of an expression as ``Operation.render`` writes them; anything else is kept flat."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _Atom(string_literal(node.value))
    if isinstance(node, ast.Call):
        items = [("", _code(arg)) for arg in node.args] + [(f"{kw.arg}=", _code(kw.value)) for kw in node.keywords]
        return _Bracketed(f"{ast.unparse(node.func)}(", tuple(items), ")")
    if isinstance(node, ast.List | ast.Tuple):
        opener, closer = ("[", "]") if isinstance(node, ast.List) else ("(", ")")
        items = tuple(("", _code(element)) for element in node.elts)
        return _Bracketed(opener, items, closer, single_tuple=isinstance(node, ast.Tuple) and len(items) == 1)
    if isinstance(node, ast.Dict):
        pairs = zip(node.keys, node.values, strict=True)
        return _Bracketed("{", tuple((f"{_code(key).flat()}: ", _code(value)) for key, value in pairs if key), "}")
    return _Atom(ast.unparse(node))
