"""A benchmark process's own memory: its resident size now and its peak since the last reset.

The peak is ``VmHWM`` of ``/proc/self/status``, reset by writing 5 to ``/proc/self/clear_refs``.
``ru_maxrss`` would not do: Linux carries a parent's peak into a child across fork and exec, so a
child of a parent that once held 1 GiB reports 1 GiB whatever it does itself.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

__all__ = ["memory", "reset_peak"]


def reset_peak() -> None:
    """Make the peak the current resident size, where the kernel allows it."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def memory(pid: int | str = "self") -> tuple[int, int]:
    """Resident bytes of process ``pid`` now and at its peak (since the last reset); zeros if unreadable."""
    current = peak = 0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024
    return current, peak
