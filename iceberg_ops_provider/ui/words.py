"""The pages' words for the engine's facts about tables, policies, locks and moves: each a badge ``(text, tone)``.

The engine states facts (a table's state and needs, a policy's state, a lock's stale cause, a move's state);
these tables are the only place the pages word them, so every page says the same thing the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOCK_CAUSES", "NEEDS", "health_badges", "lock_badge", "move_badge", "need_text", "policy_badge"]

NEEDS: dict[str, str] = {
    "compact": "compaction due",
    "rewrite_manifests": "manifest rewrite due",
    "expire_snapshots": "expiry due",
    "remove_orphan_files": "orphan removal advised",
}
"""Each action a health report can call for, in plain words."""

_STATES: dict[str, tuple[str, str]] = {
    "unreadable": ("unreadable", "bad"),
    "policy_error": ("policy invalid", "bad"),
    "healthy": ("healthy", "ok"),
    "disabled": ("policy off", "neutral"),
}

_POLICIES: dict[str, tuple[str, str]] = {
    "on": ("on", "ok"),
    "off": ("off", "neutral"),
    "quiet_hours": ("quiet hours now", "info"),
    "invalid": ("invalid", "bad"),
}

LOCK_CAUSES: dict[str, str] = {
    "lease_expired": "its lease ran out without being renewed: the run holding it is gone or stalled",
    "process_gone": "its process no longer runs on this host",
    "run_ended": "its run ended without releasing it",
}
"""Why a stale lock is stale, in plain words (the next run takes it over)."""


def need_text(need: str) -> str:
    """An action a table needs, in plain words (``compact``: ``compaction due``)."""
    return NEEDS.get(need, f"{need.replace('_', ' ')} due")


def health_badges(status: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A table's status (``TableStatus.to_json()``) as badges; none when it was not measured."""
    if not status:
        return []
    state = status["state"]
    if state in _STATES:
        return [_STATES[state]]
    badges = [(need_text(need), "warn") for need in status.get("needs") or []]
    if state == "over_budget":
        badges.append(("over budget", "bad"))
    if status.get("held") == "quiet_hours":
        badges.append(("quiet hours", "info"))
    return badges


def policy_badge(policy: dict[str, Any]) -> tuple[str, str]:
    """A policy's state (``PolicyState.to_json()``) as a badge."""
    return _POLICIES.get(policy["state"], (policy["state"], "neutral"))


def lock_badge(lock: dict[str, Any] | None) -> tuple[str, str]:
    """A held lock's state (the view's ``lock``) as a badge: ``held``, or ``expired`` when it is stale."""
    return ("expired", "bad") if lock and lock.get("state") == "expired" else ("held", "info")


def move_badge(move: dict[str, Any]) -> tuple[str, str]:
    """A move's state (``MoveProgress.to_json()``) as a badge: ``complete``, ``broken`` or ``in progress``."""
    state = move.get("state") or ("complete" if move.get("complete") else "in_progress")
    return {"complete": ("complete", "ok"), "broken": ("broken", "bad")}.get(state, ("in progress", "warn"))
