"""Findings in one migration file, read from its source: nothing in it runs, no catalog is needed.

Each call on the context argument in ``upgrade()``/``downgrade()`` is one finding; allowances are read from
``# iceberg-ops: allow=...`` comments and the class's ``allow`` (docs/lint.md).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from iceberg_ops_provider.core.name_hints import closest, did_you_mean
from iceberg_ops_provider.lint.rules import RULES, Severity
from iceberg_ops_provider.migration.operation import OPERATIONS, Operation

__all__ = ["Allowance", "Finding", "SourceFile", "read_source"]

_PRAGMA_SPLIT = re.compile(r"#\s*iceberg-ops\s*:")
_ALLOW = re.compile(
    r"""^\s*allow\s*=\s*(?P<ids>[A-Za-z0-9_,\s-]+?)(?:\s+reason\s*=\s*(?P<q>["'])(?P<reason>.*?)(?P=q))?\s*$"""
)

# The operations a rule reviews, by the context method that stages them (each operation names its rule).
_CALLS: dict[str, type[Operation]] = {op.method: op for op in OPERATIONS.values() if op.rule is not None}
# The operations on a table's rows, which run after every schema change of their migration.
_DATA_CALLS = frozenset(op.method for op in OPERATIONS.values() if op.changes_rows)
_DIRECT = ("catalog", "load_table")
_ROWS_OF_TABLE = ("delete-all-rows", "update-all-rows")  # rules about every row of a table


@dataclass(frozen=True)
class Finding:
    """One thing a migration file does that a reviewer must know, at ``line`` (1: about the whole file).

    ``function`` is ``upgrade`` or ``downgrade`` (``None``: the file or class); ``table`` and ``column`` are
    the operation's when the source gives them as literals; ``allowed``, the reason of an allowance accepting it.
    """

    path: str
    line: int
    rule: str
    severity: Severity
    message: str
    fix: str
    function: str | None = None
    table: str | None = None
    column: str | None = None
    allowed: str | None = None

    @property
    def fails(self) -> bool:
        """Whether it fails the lint: not allowed and not informational."""
        return self.allowed is None and self.severity != "info"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return asdict(self)


@dataclass(frozen=True)
class Allowance:
    """A rule a file allows, with the reason, on one line (``line``) or the whole file (``None``); written at ``at``."""

    rule: str
    reason: str
    line: int | None
    at: int = 1
    where: str = ""


@dataclass
class SourceFile:
    """What the source of one migration file says: its findings (allowances not yet applied) and allowances."""

    path: Path
    findings: list[Finding] = field(default_factory=list)
    allowances: list[Allowance] = field(default_factory=list)
    spans: dict[int, range] = field(default_factory=dict)
    """For each finding's line, the lines of the statement it is in (an allowance on any of them counts)."""

    def add(
        self,
        line: int,
        rule_id: str,
        message: str,
        *,
        function: str | None = None,
        table: str | None = None,
        column: str | None = None,
        span: range | None = None,
        severity: Severity | None = None,
        fix: str | None = None,
    ) -> None:
        """Record a finding of rule ``rule_id`` at ``line``, with the rule's severity and fix unless given."""
        rule = RULES[rule_id]
        severity, fix = severity or rule.severity, fix or rule.fix
        self.findings.append(Finding(str(self.path), line, rule_id, severity, message, fix, function, table, column))
        self.spans[line] = span or range(line, line + 1)

    def allowed(self) -> list[Finding]:
        """The findings, each with the reason of the allowance that accepts it (if any), and the unused allowances."""
        result = []
        used: set[Allowance] = set()
        for finding in self.findings:
            lines = self.spans.get(finding.line, range(finding.line, finding.line + 1))
            accepting = [
                each
                for each in self.allowances
                if each.rule == finding.rule and (each.line is None or each.line in lines)
            ]
            used.update(accepting[:1])
            result.append(replace(finding, allowed=accepting[0].reason) if accepting else finding)
        return result + [_unused(self.path, each) for each in self.allowances if each not in used]


def _unused(path: Path, allowance: Allowance) -> Finding:
    """The ``unused-allowance`` finding of ``allowance``, which accepts no finding of ``path``."""
    rule = RULES["unused-allowance"]
    if allowance.line is None:
        why = f"the file has no {allowance.rule} finding"
    else:
        why = (
            f"no {allowance.rule} finding is on that line; an allowance goes on a line of the operation's call, "
            "on line 1 for the rules about the whole file, or on the Migration class"
        )
    message = f"the allowance of {allowance.rule} on {allowance.where} accepts no finding: {why}"
    return Finding(str(path), allowance.at, rule.id, rule.severity, message, rule.fix)


def read_source(path: Path) -> SourceFile:
    """The findings and allowances of the migration file at ``path``."""
    found = SourceFile(path)
    try:
        source = path.read_bytes()  # as Python reads it: a byte-order mark or a coding line decide the encoding
        tree = ast.parse(source, filename=str(path))
        with tokenize.open(path) as stream:
            text = stream.read()
        _read_pragmas(found, text)
        migration = _last_class(tree, "Migration")
        if migration is None:
            return found
        _read_class_allowances(found, migration)
        methods, irreversible, made = _methods(tree, migration, set()), _irreversible_names(tree), _Made()
        for name in ("upgrade", "downgrade"):  # upgrade() first: a downgrade() is judged by what it made
            if name in methods:
                made = _read_body(found, methods[name], irreversible, made)
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None) or 1
        found.findings.clear()
        found.allowances.clear()
        found.add(line, "unreadable-file", f"{path.name} cannot be parsed: {type(exc).__name__}: {exc}")
    return found


def _last_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    """The class ``name`` the module binds: Python binds the last definition (of a class, of a method)."""
    return next((n for n in reversed(tree.body) if isinstance(n, ast.ClassDef) and n.name == name), None)


def _methods(tree: ast.Module, cls: ast.ClassDef, seen: set[str]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """``upgrade`` and ``downgrade`` as ``cls`` has them: its own, else those of a base class of the same file."""
    seen.add(cls.name)
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for base in reversed(cls.bases):  # the first base wins, as in Python's method resolution
        defined = _last_class(tree, base.id) if isinstance(base, ast.Name) else None
        if defined is not None and defined.name not in seen:
            found.update(_methods(tree, defined, seen))
    found.update(
        (node.name, node)
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in ("upgrade", "downgrade")
    )
    return found


def _irreversible_names(tree: ast.Module) -> set[str]:
    """The names ``IrreversibleMigrationError`` is imported as in the file (``import ... as IME``)."""
    imported = (alias for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names)
    return {"IrreversibleMigrationError"} | {
        alias.asname for alias in imported if alias.name == "IrreversibleMigrationError" and alias.asname
    }


def _read_pragmas(found: SourceFile, text: str) -> None:
    try:
        comments = [
            (t.start[0], t.string)
            for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, IndentationError):
        return
    for line, comment in comments:
        for body in _PRAGMA_SPLIT.split(comment)[1:]:  # a comment may hold several allowances
            allow = _ALLOW.match(body)
            ids = [part.strip() for part in allow.group("ids").split(",")] if allow else []
            if allow is None or not all(ids):
                why = f"the comment {comment.strip()!r} is not an allowance iceberg-ops reads"
                found.add(line, "malformed-allowance", why)
                continue
            reason = (allow.group("reason") or "").replace('\\"', '"').replace("\\'", "'").strip()
            for rule_id in ids:
                _allowance(found, rule_id, reason, line, where=f"line {line}", at=line)


def _allowance(found: SourceFile, rule_id: str, reason: str, line: int | None, *, where: str, at: int) -> None:
    """Record the allowance of ``rule_id`` on ``line`` (``None``: the whole file), written at line ``at``."""
    if not rule_id:
        found.add(at, "malformed-allowance", f"the allowance on {where} names no rule")
    elif rule_id not in RULES:
        found.add(
            at,
            "unknown-rule",
            f"the allowance on {where} names {rule_id!r}, which is not a rule.{did_you_mean(closest(rule_id, RULES))}",
        )
    elif (why := RULES[rule_id].not_allowable) is not None:
        found.add(at, "not-allowable", f"the allowance on {where} names {rule_id}, which cannot be allowed: {why}")
    elif not reason:
        found.add(at, "allowance-without-reason", f"the allowance of {rule_id} on {where} gives no reason")
    else:
        found.allowances.append(Allowance(rule_id, reason, line, at, where))


def _read_class_allowances(found: SourceFile, migration: ast.ClassDef) -> None:
    for node in migration.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if not any(isinstance(t, ast.Name) and t.id == "allow" for t in targets) or node.value is None:  # type: ignore[union-attr]
            continue
        try:
            value = ast.literal_eval(node.value)  # type: ignore[union-attr]
        except ValueError:
            value = None
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            why = 'the class attribute allow must be a literal {"<rule-id>": "reason"}'
            found.add(node.lineno, "malformed-allowance", why)
            continue
        for rule_id, reason in value.items():
            where = f"the Migration class (line {node.lineno})"
            _allowance(found, rule_id, reason.strip(), None, where=where, at=node.lineno)


@dataclass(frozen=True)
class _Spellings:
    """The names a body reaches the context by: the context itself, aliases, bound methods."""

    contexts: frozenset[str]
    methods: dict[str, str]

    def names_context(self, node: ast.AST) -> bool:
        """Whether ``node`` is the context (``ctx`` or an alias of it)."""
        return isinstance(node, ast.Name) and node.id in self.contexts

    def attribute(self, node: ast.AST) -> str | None:
        """The context attribute ``node`` reaches: ``ctx.drop_column``, ``getattr(ctx, "drop_column")``."""
        if isinstance(node, ast.Attribute) and self.names_context(node.value):
            return node.attr
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
        if called and len(node.args) >= 2 and self.names_context(node.args[0]):  # type: ignore[attr-defined]
            return _literal(node.args[1])  # type: ignore[attr-defined]
        return None

    def method(self, call: ast.Call) -> str | None:
        """The context method ``call`` calls, however it is spelled."""
        if isinstance(call.func, ast.Name):
            return self.methods.get(call.func.id)
        return self.attribute(call.func)


def _spellings(function: ast.FunctionDef | ast.AsyncFunctionDef, ctx: str) -> _Spellings:
    """Follow plain assignments in the body: ``x = ctx``, ``drop = ctx.drop_column``, ``getattr(ctx, ...)``."""
    spellings = _Spellings(frozenset({ctx}), {})
    assignments = [
        (target.id, node.value)
        for node in ast.walk(function)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    ]
    while True:  # until nothing new: ``y = x`` after ``x = ctx``
        contexts, methods = set(spellings.contexts), dict(spellings.methods)
        for name, value in assignments:
            if spellings.names_context(value):
                contexts.add(name)
            elif (method := spellings.attribute(value)) is not None:
                methods[name] = method
            elif isinstance(value, ast.Name) and value.id in spellings.methods:
                methods[name] = spellings.methods[value.id]
        if contexts == spellings.contexts and methods == spellings.methods:
            return spellings
        spellings = _Spellings(frozenset(contexts), methods)


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _walk(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[ast.AST, range]]:
    """Every node of ``function``'s body with the lines of the statement holding it."""
    for statement in function.body:
        for node in ast.walk(statement):  # the statement itself first
            if isinstance(node, ast.stmt):
                span = range(node.lineno, (node.end_lineno or node.lineno) + 1)
            yield node, span


@dataclass
class _Made:
    """What a body makes itself: the tables it creates and the columns it adds, by literal name.

    Also the tables it drops or renames away (``gone``, as of the call being read), and its data
    operations with the tables gone when each was called.
    """

    tables: set[str | None] = field(default_factory=set)
    columns: set[tuple[str | None, str | None]] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    data: list[tuple[str, str, int, range, bool]] = field(default_factory=list)
    """Each data operation on a literal table: method, table, line, span, whether the table was gone then."""

    def table(self, table: str | None) -> bool:
        return table is not None and table in self.tables

    def column(self, table: str | None, column: str | None) -> bool:
        """Whether the body added ``column`` to ``table``, or created ``table``."""
        return table is not None and ((table, column) in self.columns or self.table(table))


def _read_body(
    found: SourceFile, function: ast.FunctionDef | ast.AsyncFunctionDef, irreversible: set[str], upgrade: _Made
) -> _Made:
    """Record the findings of ``function``; return what it makes (``upgrade``: what upgrade() made)."""
    arguments = [*function.args.posonlyargs, *function.args.args]
    ctx, name = arguments[1].arg if len(arguments) > 1 else "ctx", function.name
    spellings = _spellings(function, ctx)
    direct_lines: set[int] = set()
    made = _Made()
    for node, span in _walk(function):
        method = spellings.method(node) if isinstance(node, ast.Call) else None
        if isinstance(node, ast.Call) and method is not None and method not in _DIRECT:
            _read_call(found, node, method, name, span, made, upgrade)
        elif isinstance(node, ast.expr) and (reached := spellings.attribute(node)) in _DIRECT:
            if node.lineno not in direct_lines:
                direct_lines.add(node.lineno)
                why = f"{name}() reaches tables through {ctx}.{reached}: its writes are not tracked"
                found.add(node.lineno, "direct-write", why, function=name, span=span)
        elif isinstance(node, ast.Raise) and name == "downgrade" and _raises_irreversible(node, irreversible):
            why = "downgrade() raises IrreversibleMigrationError: a rollback stops here"
            found.add(node.lineno, "irreversible-downgrade", why, function=name, span=span)
    for method, table, line, span, gone_then in made.data:
        if gone_then or table in made.gone:
            when = "earlier" if gone_then else "later"
            why = (
                f"{name}() calls {method} on {table}, which it drops or renames {when}: "
                f"{RULES['data-on-dropped-table'].effect}"
            )
            found.add(line, "data-on-dropped-table", why, function=name, table=table, span=span)
    return made


def _read_call(
    found: SourceFile, call: ast.Call, method: str, function: str, span: range, made: _Made, upgrade: _Made
) -> None:
    """Record the finding of one call on the context, if it makes one; note what it creates or adds in ``made``."""
    _track_tables(call, method, made, span)
    if method == "set_properties":
        _policy_values(found, call, function, span)
    if method == "add_column":
        made.columns.add((_argument(call, 0, "table"), _argument(call, 1, "name")))
    if method not in _CALLS:
        return
    operation = _CALLS[method]
    rule_id = operation.rule or ""
    if operation.rule_when is not None and not _maybe_true(call, *operation.rule_when):
        return
    if operation.rule_unless is not None and _maybe_given(call, *operation.rule_unless):
        return
    table_keyword, second_keyword = operation.lint_arguments
    table = _argument(call, 0, table_keyword)
    column = _argument(call, 1, second_keyword) if second_keyword is not None else None
    # What this body made itself no reader has seen: dropping, renaming, requiring or emptying it loses nothing.
    if (rule_id in ("add-required-column", "drop-table", *_ROWS_OF_TABLE) and made.table(table)) or (
        rule_id in ("drop-column", "rename-column") and made.column(table, column)
    ):
        if rule_id == "rename-column":
            made.columns.add((table, _argument(call, 2, "new")))
        return
    shown = _shown(call, 0, table_keyword), _shown(call, 1, second_keyword) if second_keyword is not None else None
    message = f"{function}() calls {method} on {_target(rule_id, *shown)}: {RULES[rule_id].effect}"
    judged: dict[str, Any] = {}  # the rule's severity and fix unless the upgrade made what this removes
    if function == "downgrade" and (
        (rule_id == "drop-table" and upgrade.table(table))
        or (rule_id == "drop-column" and (table, column) in upgrade.columns)
    ):
        made_by = "creates" if rule_id == "drop-table" else "adds"
        message = (
            f"downgrade() calls {method} on {_target(rule_id, *shown)}, which upgrade() {made_by}: it removes what "
            "the upgrade made; only what was written to it since is lost, and a downgrade asks for confirmation "
            "before that"
        )
        judged = {"severity": "info", "fix": "nothing to fix: a rollback removes what the upgrade made"}
    found.add(call.lineno, rule_id, message, function=function, table=table, column=column, span=span, **judged)


def _policy_values(found: SourceFile, call: ast.Call, function: str, span: range) -> None:
    """A finding for each literal maintenance policy value of a ``set_properties`` call its key does not accept."""
    from iceberg_ops_provider.errors import MaintenancePolicyError
    from iceberg_ops_provider.maintenance.policy import check_policy_properties

    given = _given(call, 1, "properties")
    if not isinstance(given, ast.Dict):
        return
    literal = {
        key.value: value.value
        for key, value in zip(given.keys, given.values, strict=True)
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Constant)
    }
    try:
        check_policy_properties(literal, table=_argument(call, 0, "table") or "")
    except MaintenancePolicyError as exc:
        table = _argument(call, 0, "table")
        for key, value, accepted, closest in exc.problems:
            what = (
                f"{key}={value!r} is not accepted: it takes {accepted}"
                if accepted
                else f"{key!r} is no maintenance policy key" + (f" (did you mean {closest!r}?)" if closest else "")
            )
            found.add(
                call.lineno,
                "maintenance-policy-value",
                f"{function}() calls set_properties on {_target('maintenance-policy-value', table, None)}: {what}",
                function=function,
                table=table,
                span=span,
            )


def _track_tables(call: ast.Call, method: str, made: _Made, span: range) -> None:
    """Note the tables a call creates, drops or renames away, and a data operation with what is gone by then."""
    if method == "create_table":
        created = _argument(call, 0, "name")
        made.tables.add(created)
        made.gone.discard(created or "")
    elif method == "drop_table" and (dropped := _argument(call, 0, "name")) is not None:
        made.gone.add(dropped)
    elif method == "rename_table":
        old, new = _argument(call, 0, "old"), _argument(call, 1, "new")
        if old is not None:
            made.gone.add(old)
        made.gone.discard(new or "")
    elif method in _DATA_CALLS and (table := _argument(call, 0, "table")) is not None:
        made.data.append((method, table, call.lineno, span, table in made.gone))


def _argument(call: ast.Call, position: int, keyword: str) -> str | None:
    """The literal text of a call's argument given by ``position`` or by ``keyword``."""
    return _literal(_given(call, position, keyword))


def _given(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    """A call's argument given by ``position`` or by ``keyword``, or ``None``."""
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _shown(call: ast.Call, position: int, keyword: str) -> str | None:
    """How a message names an argument: its text when a literal, else ``<its source>`` (named at run time)."""
    given = _given(call, position, keyword)
    if given is None:
        return None
    literal = _literal(given)
    return literal if literal is not None else f"<{ast.unparse(given)}>"


def _maybe_true(call: ast.Call, keyword: str, position: int) -> bool:
    """Whether the argument may be true: anything but a literal false (a variable counts, it may be)."""
    given = _given(call, position, keyword) or next((k.value for k in call.keywords if k.arg is None), None)
    return given is not None and not (isinstance(given, ast.Constant) and not given.value)


def _maybe_given(call: ast.Call, keyword: str, position: int) -> bool:
    """Whether the argument may be given a value: anything but absent or a literal ``None`` (``**kwargs`` may)."""
    given = _given(call, position, keyword)
    if given is None:
        return any(k.arg is None for k in call.keywords)
    return not (isinstance(given, ast.Constant) and given.value is None)


def _raises_irreversible(node: ast.Raise, names: set[str]) -> bool:
    raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return (isinstance(raised, ast.Name) and raised.id in names) or (
        isinstance(raised, ast.Attribute) and raised.attr == "IrreversibleMigrationError"
    )


def _target(rule_id: str, table: str | None, column: str | None) -> str:
    """What an operation names: ``orders.legacy``, ``orders (to orders_v2)``; ``<name>`` for one given at run time."""
    target = table or "a table"
    if column is not None:
        target = f"{target} (to {column})" if rule_id == "rename-table" else f"{target}.{column}"
    return target
