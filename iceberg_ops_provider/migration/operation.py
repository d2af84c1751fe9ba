"""Migration operations as data: each kind of change defined once.

An operation class says what the context stages, its reverse, rendering, risk and lint rule; every reader uses
:data:`OPERATIONS` (docs/contributing.md, "Adding a migration operation").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from pyiceberg.types import IcebergType

from iceberg_ops_provider.core.type_strings import format_type
from iceberg_ops_provider.migration.risks import _RISKS, Risk, risk_of

if TYPE_CHECKING:
    from iceberg_ops_provider.migration.staging import TableStaging

__all__ = ["OPERATIONS", "Irreversible", "Operation", "Rendered"]


class Irreversible(Exception):
    """Raised by :meth:`Operation.reverse` for a step that cannot be undone; the message is the reason."""


_OPERATIONS: dict[str, type[Operation]] = {}
OPERATIONS: Mapping[str, type[Operation]] = MappingProxyType(_OPERATIONS)
"""Every operation class, by each kind it defines (``"drop_column"``, ``"add_required_column"``, ...)."""


@dataclass(frozen=True)
class Operation:
    """One change to one table; its class attributes are described in ``docs/contributing.md``.

    A class with no ``risks`` is a form of another, not registered; ``*names`` in ``arguments`` unpacks a field.
    """

    table: str
    risks: ClassVar[Mapping[str, Risk]] = {}
    method: ClassVar[str]
    arguments: ClassVar[tuple[str, ...]] = ("table",)
    described: ClassVar[str] = ""
    noted: ClassVar[str] = ""
    rule: ClassVar[str | None] = None
    rule_when: ClassVar[tuple[str, int] | None] = None  # a keyword (and position) that must be true for the rule
    rule_unless: ClassVar[tuple[str, int] | None] = None  # a keyword (and position) whose value, not None, exempts
    lint_arguments: ClassVar[tuple[str, str | None]] = ("table", "name")  # the parameters naming table and column
    changes_rows: ClassVar[bool] = False  # a data operation: it runs after the schema changes, and on resume

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        risks = cls.__dict__.get("risks", {})
        if risks and not hasattr(cls, "method"):
            cls.method = next(iter(risks))
        for kind, risk in risks.items():
            _OPERATIONS[kind] = cls
            _RISKS[kind] = risk

    @property
    def kind(self) -> str:
        """Its kind: a key of :data:`OPERATIONS` and of :data:`~iceberg_ops_provider.migration.risks.RISKS`."""
        return next(iter(self.risks))

    @property
    def risk(self) -> Risk:
        """How risky the step is (``safe``, ``review``, ``destructive``), from the table ``plan`` reads too."""
        return risk_of(self.kind)

    def tables(self) -> tuple[str, ...]:
        """The tables it names, the one it changes first (a copy also reads its source)."""
        return (self.table,)

    def note(self) -> str:
        """What ``plan`` lists for this step (``MigrationContext.operations``)."""
        return self.noted.format_map(vars(self)) if self.noted else self.describe()

    def planned_risk(self, staging: TableStaging) -> Risk:
        """The risk ``plan`` labels it with; a drop looks at the table (see ``TableStaging.drop_risk``)."""
        return self.risk

    def stage(self, staging: TableStaging) -> None:
        """Record the step with its risk, then stage it on the table's transaction.

        A migration resumed in its data steps has its schema changes in the tables already: they are
        recorded, not staged again.
        """
        staging.note(self.note(), self.planned_risk(staging))
        if not staging.resuming or self.changes_rows:
            self.build(staging)

    def build(self, staging: TableStaging) -> None:
        """Stage the change (checks first, then PyIceberg's update builders)."""
        raise NotImplementedError  # pragma: no cover - every concrete operation overrides it

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of :attr:`method` that perform this step."""
        given = (getattr(self, name[1:]) if name.startswith("*") else [getattr(self, name)] for name in self.arguments)
        return tuple(arg for args in given for arg in args), {}

    def describe(self) -> str:
        """A one-line human description."""
        return self.described.format_map(vars(self))

    def reverse(self) -> list[Operation]:
        """The steps that undo this one; :class:`Irreversible`, saying why, when it cannot be undone."""
        raise NotImplementedError  # pragma: no cover

    def apply(self, ctx: Any) -> None:
        """Perform the step on a ``MigrationContext``."""
        args, kwargs = self.call()
        getattr(ctx, self.method)(*args, **kwargs)

    def render(self, indent: str = "") -> str:
        """The step as one line of Python source (a schema's lines start at ``indent``); ``render`` lays it out."""
        args, kwargs = self.call()
        parts = [_literal(arg, indent) for arg in args] + [f"{k}={_literal(v, indent)}" for k, v in kwargs.items()]
        return f"ctx.{self.method}({', '.join(parts)})"

    def to_json(self) -> dict[str, str]:
        """JSON-able summary."""
        return dict(table=self.table, risk=self.risk, operation=type(self).__name__, description=self.describe())


def _literal(value: Any, indent: str = "") -> str:
    """Python source for a value, with double-quoted strings as the project's formatter writes them."""
    if isinstance(value, IcebergType):
        return json.dumps(format_type(value))
    if isinstance(value, Rendered):
        return value.render(indent)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        inner = ", ".join(_literal(item) for item in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


@dataclass(frozen=True)
class Rendered:
    """A value that renders as source code through a function of the indentation (used for schemas)."""

    renderer: Callable[[str], str] = field(compare=False, repr=False)
    value: Any = field(compare=False, default=None)

    def render(self, indent: str) -> str:
        """The source, for a value whose line starts at ``indent``."""
        return self.renderer(indent)
