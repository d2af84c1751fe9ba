"""Intent records and receipts: knowing, after any crash, what a migration committed.

The intent, written to the lock table before the first commit, lists the actions with their receipts; each table's
commit carries its receipt (:data:`RECEIPT_PROPERTY`); :func:`assess` reads them back (docs/recovery.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pyiceberg.exceptions import NoSuchTableError

from iceberg_ops_provider.errors import IntentRecordError
from iceberg_ops_provider.messages import Hint, message

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from iceberg_ops_provider.data_migration.state import MoveState
    from iceberg_ops_provider.data_steps.state import StepState

__all__ = ["INTENT_PROPERTY", "RECEIPT_PROPERTY", "Assessment", "Intent", "IntentAction", "assess"]

log = logging.getLogger(__name__)

INTENT_PROPERTY = "iceberg-ops.intent"
"""Lock table property holding the intent of the run that holds (or last held) the lock, as JSON."""

RECEIPT_PROPERTY = "iceberg-ops.last-migration"
"""Table property set in every migration commit: namespace, version, direction, run and step."""

ActionKind = Literal["commit", "create", "drop", "rename", "direct", "data"]


@dataclass(frozen=True)
class IntentAction:
    """One catalog change a migration is about to make.

    Attributes:
        table: The table's full name (``sales.orders``).
        kind: ``create`` or ``commit`` (a staged change; proven by its receipt), ``drop``, ``rename``,
            ``data`` (a data operation run in units, each unit's commit carrying the step id), or
            ``direct``: the migration reached the table (or the catalog) itself, through
            ``ctx.load_table()`` or ``ctx.catalog``, so what it wrote there cannot be proven either way.
        receipt: The receipt its commit carries (``create``/``commit``); a ``data`` action's step id.
        to: The new name, for ``rename``.
        fingerprint: A ``data`` action's definition (kind, table, ``where``, columns): a run resuming
            the step checks the migration still asks for the same one.
        operation: A ``data`` action's operation (``copy_rows``, ``delete_rows``, ...): which record of
            its progress the table keeps (a copy's is the data mover's, under the move id its step id names).
    """

    table: str
    kind: ActionKind
    receipt: str | None = None
    to: str | None = None
    fingerprint: str | None = None
    operation: str | None = None

    def label(self) -> str:
        """``sales.orders (drop)``."""
        if self.kind == "direct":
            return f"{self.table} (written directly by the migration, if at all: cannot be checked)"
        return f"{self.table} ({self.kind}{' to ' + self.to if self.to else ''})"

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class Intent:
    """What one run is about to commit for one migration.

    Attributes:
        actions: The changes, in commit order.
        complete: Whether the migration's body had finished when this was written (so ``actions`` is
            everything it does). A crash after committing every listed action of an incomplete
            intent is still a partial migration.
    """

    namespace: str
    version: str
    direction: Literal["upgrade", "downgrade"]
    run_id: str
    executed_by: str
    started_at: datetime
    actions: tuple[IntentAction, ...] = field(default=())
    complete: bool = False

    def covers(self, actions: list[IntentAction]) -> bool:
        """Whether every one of ``actions`` is already recorded."""
        return all(action in self.actions for action in actions)

    def with_actions(self, actions: list[IntentAction], *, complete: bool) -> Intent:
        """This intent with ``actions`` appended (those not yet listed), marked complete or not."""
        added = tuple(action for action in actions if action not in self.actions)
        return replace(self, actions=self.actions + added, complete=complete)

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        actions = [action.to_json() for action in self.actions]
        return {**asdict(self), "started_at": self.started_at.isoformat(), "actions": actions}

    def to_json_text(self) -> str:
        """The property value that stores it."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> Intent | None:
        """Read the intent from lock table properties; ``None`` when there is none.

        Raises:
            IntentRecordError: The record exists but cannot be read or makes no sense.
        """
        text = properties.get(INTENT_PROPERTY)
        if not text:
            return None
        try:
            data = json.loads(text)
            intent = cls(
                namespace=str(data["namespace"]),
                version=str(data["version"]),
                direction=data["direction"],
                run_id=str(data["run_id"]),
                executed_by=str(data.get("executed_by", "unknown")),
                started_at=datetime.fromisoformat(data["started_at"]),
                actions=tuple(
                    IntentAction(
                        table=a["table"],
                        kind=a["kind"],
                        receipt=a.get("receipt"),
                        to=a.get("to"),
                        fingerprint=a.get("fingerprint"),
                        operation=a.get("operation"),
                    )
                    for a in data.get("actions", [])
                ),
                complete=bool(data.get("complete", False)),
            )
            _validate(intent)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IntentRecordError(
                message(
                    f"The record of an interrupted migration run ({INTENT_PROPERTY} on the namespace's lock table) "
                    f"cannot be read ({type(exc).__name__}: {exc}): {text[:200]!r}. Nothing runs in this namespace "
                    "until a person checks its tables and records the outcome with {stamp}, which clears the record.",
                    stamp=Hint("stamp", "MigrationRunner.stamp('<version>')", {"version": "<version>"}),
                )
            ) from exc
        return intent


def _validate(intent: Intent) -> None:
    if not intent.version.isascii() or not intent.version.isdigit():
        raise ValueError(f"version {intent.version!r} is not a migration version")
    if intent.direction not in ("upgrade", "downgrade"):
        raise ValueError(f"direction {intent.direction!r} is not upgrade or downgrade")
    for action in intent.actions:
        if action.kind not in ("commit", "create", "drop", "rename", "direct", "data"):
            raise ValueError(f"action kind {action.kind!r} is unknown")
        if action.kind == "rename" and not action.to:
            raise ValueError(f"rename of {action.table!r} has no new name")
        if action.kind == "data" and not action.receipt:
            raise ValueError(f"data step on {action.table!r} has no step id")
        if action.kind == "direct":
            continue  # names what was reached ("the catalog (ctx.catalog)"), not a table
        for name in (action.table, action.to or action.table):
            if not isinstance(name, str) or any(not part for part in name.split(".")):
                raise ValueError(f"table name {name!r} is not valid")


def receipt(namespace: str, version: str, direction: str, run_id: str, step: int) -> str:
    """The receipt of one commit: unique to the run, the migration and the commit's position in it."""
    return f"namespace={namespace} version={version} direction={direction} run={run_id} step={step}"


@dataclass(frozen=True)
class Assessment:
    """What an interrupted migration committed, read from the tables.

    Attributes:
        committed: The actions that reached the catalog, in order (data steps: finished ones).
        not_committed: The actions that did not (data steps: not finished, perhaps started).
        complete: Whether the intent listed everything the migration does (its body had finished).
        direct: Tables (or the catalog) the migration reached itself; what it wrote there is unknown.
        data: The intent's data steps, each with whether its table records it finished.
    """

    committed: tuple[IntentAction, ...]
    not_committed: tuple[IntentAction, ...]
    complete: bool = True
    direct: tuple[IntentAction, ...] = ()
    data: tuple[tuple[IntentAction, bool], ...] = ()

    @property
    def outcome(self) -> Literal["all", "none", "partial", "resumable"]:
        """``all`` committed (and the body had finished), ``none`` (provably), ``resumable`` or ``partial``.

        ``resumable``: every schema change committed and a data step is unfinished; running the migration
        again finishes its data steps from where they stopped (each unit of a step commits once).
        """
        if self.complete and not self.not_committed:
            return "all"
        if not self.committed and not self.direct and not self.data:
            return "none"
        structural = [action for action in self.not_committed if action.kind != "data"]
        if self.data and self.complete and not structural and not self.direct:
            return "resumable"
        return "partial"

    def unfinished(self) -> list[str]:
        """Human labels of what did not, or may not, have reached the catalog."""
        labels = [action.label() for action in self.not_committed + self.direct]
        if not self.complete:
            labels.append("the rest of its body (it stopped before finishing)")
        return labels


def _identifier(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


def _done(catalog: Catalog, action: IntentAction) -> bool:
    """Whether ``action`` reached the catalog, judged from the tables as they are now."""
    if action.kind == "drop":
        return not catalog.table_exists(_identifier(action.table))
    if action.kind == "rename":
        return not catalog.table_exists(_identifier(action.table)) and catalog.table_exists(
            _identifier(action.to or "")
        )
    try:
        table = catalog.load_table(_identifier(action.table))
    except NoSuchTableError:
        return False
    return table.properties.get(RECEIPT_PROPERTY) == action.receipt


def assess(catalog: Catalog, intent: Intent) -> Assessment:
    """Find which of the intent's actions were committed.

    Actions commit in order, so the last one found done marks every earlier one done; each action is
    judged only while no later action has committed, so a later change to the same table cannot hide
    or fake an earlier one. Data steps run after every other change and are judged by their own record.
    """
    actions = tuple(action for action in intent.actions if action.kind not in ("direct", "data"))
    last_done = next((index for index in reversed(range(len(actions))) if _done(catalog, actions[index])), -1)
    data = tuple((action, _data_done(catalog, action)) for action in intent.actions if action.kind == "data")
    started = last_done >= 0 or any(_data_started(catalog, action) for action, _ in data)
    return Assessment(
        committed=actions[: last_done + 1] + tuple(action for action, done in data if done),
        not_committed=actions[last_done + 1 :] + tuple(action for action, done in data if not done),
        complete=intent.complete,
        direct=tuple(action for action in intent.actions if action.kind == "direct"),
        data=data if started else (),
    )


def _data_state(catalog: Catalog, action: IntentAction) -> StepState | MoveState | None:
    """The progress a data action's table records: a copy's move state, else the data step's state."""
    from pyiceberg.table.refs import MAIN_BRANCH

    from iceberg_ops_provider.data_migration.state import find_state
    from iceberg_ops_provider.data_steps.state import move_id_of, step_state

    try:
        table = catalog.load_table(_identifier(action.table))
    except NoSuchTableError:
        return None
    if action.operation == "copy_rows":
        return find_state(table.metadata, move_id_of(action.receipt or ""), MAIN_BRANCH)[0]
    return step_state(table, action.receipt or "")


def _restored(catalog: Catalog, action: IntentAction) -> bool:
    """Whether a ``restore_data`` action committed (it records its step id in its own commit)."""
    from iceberg_ops_provider.data_steps.restore import restored_by

    try:
        table = catalog.load_table(_identifier(action.table))
    except NoSuchTableError:
        return False
    return restored_by(table, action.receipt or "")


def _data_started(catalog: Catalog, action: IntentAction) -> bool:
    if action.operation == "restore_data":
        return _restored(catalog, action)
    return _data_state(catalog, action) is not None


def _data_done(catalog: Catalog, action: IntentAction) -> bool:
    if action.operation == "restore_data":
        return _restored(catalog, action)
    state = _data_state(catalog, action)
    return state is not None and state.complete
