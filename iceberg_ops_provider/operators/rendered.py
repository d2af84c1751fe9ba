"""Operator arguments as Jinja rendered them: a templated number arrives as text."""

from __future__ import annotations

__all__ = ["as_flag", "optional_int", "optional_text"]


def optional_text(value: object) -> object:
    """``value``, or ``None`` when a template rendered it empty (``""``, ``"None"``: an unset param)."""
    if isinstance(value, str) and value.strip() in ("", "None"):
        return None
    return value


def optional_int(value: int | str | None, name: str, what: str) -> int | None:
    """``value`` as a whole number, ``None`` when absent or rendered empty (``""``, ``"None"``).

    Raises:
        ValueError: Text that is not a whole number, naming the parameter ``name`` and ``what`` it holds.
    """
    if value is None or isinstance(value, int):
        return value
    if optional_text(value) is None:
        return None
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not {what} (a whole number).") from None


def as_flag(value: bool | str, field: str = "dry_run") -> bool:
    """A boolean argument that may arrive rendered from a template (``"True"``, ``"false"``).

    Raises:
        ValueError: Anything but a bool or the words true/false.
    """
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"{field}={value!r} is not true or false.")
