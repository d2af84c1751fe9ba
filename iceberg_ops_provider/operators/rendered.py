"""Operator arguments as Jinja rendered them: a templated number arrives as text."""

from __future__ import annotations

__all__ = ["as_flag", "optional_int"]


def optional_int(value: int | str | None, name: str, what: str) -> int | None:
    """``value`` as a whole number, ``None`` when absent or rendered empty (``""``, ``"None"``).

    Raises:
        ValueError: Text that is not a whole number, naming the parameter ``name`` and ``what`` it holds.
    """
    if value is None or isinstance(value, int):
        return value
    text = str(value).strip()
    if text in ("", "None"):
        return None
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
