"""A class a hostile catalog names for PyIceberg to import: it records being imported and being called.

Each import of this module and each :class:`Trap` built appends a line (``imported``, ``called``)
to the file ``$ICEBERG_OPS_TEST_TRAP`` names, so a test sees it from any process (the api-server's
too). A module's body runs when it is imported: an attacker's module would run its code then, so a
test that must import nothing a catalog names first drops this module (:func:`armed`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

VARIABLE = "ICEBERG_OPS_TEST_TRAP"
NAME = f"{__name__}.Trap"
"""The dotted name a property gives to import :class:`Trap`."""


def _record(event: str) -> None:
    target = os.environ.get(VARIABLE)
    if target:
        with open(target, "a") as file:
            file.write(event + "\n")


_record("imported")


class Trap:
    """Records that it was built (as a FileIO, a retry strategy, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _record("called")


class TrapLocationProvider:
    """A location provider that records being built, then places files as PyIceberg's simple one does."""

    def __new__(cls, table_location: str, table_properties: Any) -> Any:
        from pyiceberg.table.locations import SimpleLocationProvider

        _record("called")
        return SimpleLocationProvider(table_location, table_properties)


LOCATION_PROVIDER = f"{__name__}.TrapLocationProvider"
"""The dotted name a table property gives to import :class:`TrapLocationProvider`."""


def armed(record: Path) -> dict[str, str]:
    """Drop this module from ``sys.modules`` (so importing it again runs it), empty ``record``; the variable to set."""
    sys.modules.pop(__name__, None)
    record.write_text("")
    return {VARIABLE: str(record)}


def sprung(record: Path) -> list[str]:
    """What the trap recorded since :func:`armed`."""
    return record.read_text().split()
