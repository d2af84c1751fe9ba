"""The operators' words for what the engine's messages name: their parameters, and tasks to run.

Python's words (``str(error)``) name most of the operators' parameters; :data:`PARAMETERS` names those
that differ and :data:`HINTS` says each step as a task would take it.
"""

from __future__ import annotations

from iceberg_ops_provider.messages import Arg, Fact, Hint, python_words, worded

__all__ = ["HINTS", "PARAMETERS", "operator_message", "operator_words"]

PARAMETERS: dict[str, str] = {"conn_id": "iceberg_conn_id"}
"""An engine argument and the operators' parameter that sets it, where the two names differ."""

HINTS: dict[str, str] = {
    "force_unlock": "a task of IcebergMigrateOperator with action='unlock'",
    "repair": "a task of IcebergMigrateOperator with action='repair'",
    "new_namespace": "A task with action='upgrade' creates a new one",
}
"""Each step the engine's messages advise (by :attr:`Hint.key`) as an operator's task, where that differs."""


def operator_words(fact: Fact) -> str:
    """A fact of an engine message as the operators word it (Python's words, with their parameter names)."""
    if isinstance(fact, Arg) and fact.name in PARAMETERS:
        return python_words(Arg(PARAMETERS[fact.name], fact.value, fact.keyword))
    if isinstance(fact, Hint) and fact.key in HINTS:
        return HINTS[fact.key].format(**fact.details)
    return python_words(fact)


def operator_message(error: BaseException) -> str:
    """The message an operator fails its task with: the error's type and its message in the operators' words."""
    return f"{type(error).__name__}: {worded(error, operator_words)}"
