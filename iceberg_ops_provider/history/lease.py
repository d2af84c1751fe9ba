"""Keep a migration lock's lease alive while its run works, from a background thread."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from iceberg_ops_provider.history.lock import LockInfo, LockLostError

if TYPE_CHECKING:
    from iceberg_ops_provider.history.lock import NamespaceLock

__all__ = ["LeaseKeeper"]

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews a held lock's lease every quarter of its length until stopped, also during long migration bodies.

    A renewal that finds the lock in other hands marks the lease lost: :meth:`check` then raises, and
    the run stops before its next commit. A renewal that fails for another reason (a catalog hiccup)
    is logged and tried again at the next tick; the lease is four ticks long.

    Args:
        lock: The namespace lock.
        held: The lock this run holds.
        interval: Seconds between renewals (default: a quarter of the lease).
    """

    def __init__(self, lock: NamespaceLock, held: LockInfo, interval: float | None = None) -> None:
        self.lock = lock
        self.held = held
        self.interval = interval if interval is not None else max(0.2, held.stale_after / 4)
        self.lost: LockLostError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"iceberg-ops-lease-{lock.namespace}", daemon=True)

    def start(self) -> LeaseKeeper:
        """Start renewing."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop renewing (waits for a renewal in flight, briefly)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, self.interval))

    def check(self) -> None:
        """Raise if the lease was lost.

        Raises:
            LockLostError: Another run took the lock over, or it was force-released.
        """
        if self.lost is not None:
            raise self.lost

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.held = self.lock.renew(self.held)
            except LockLostError as exc:
                self.lost = exc
                log.error("%s", exc)
                return
            except Exception as exc:  # a transient catalog failure: the next tick tries again
                log.warning("could not renew the migration lock lease of %r: %s", self.lock.namespace, exc)
