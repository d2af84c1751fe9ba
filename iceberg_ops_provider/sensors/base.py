"""What the iceberg-ops sensors share: deferral as Airflow is set up, reschedule mode otherwise, clear timeouts.

A sensor checks once on the worker; if the check does not pass, it defers to its trigger with an
absolute deadline, or waits as any Airflow sensor does. A transient error is logged and the wait goes
on; a permanent one fails the task at once. A wait that runs out says what was awaited and last seen.
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from iceberg_ops_provider.core.polling import describe_error, is_transient, timeout_message
from iceberg_ops_provider.errors import IcebergOpsError
from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
from iceberg_ops_provider.hooks.version_compat import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    AirflowSkipException,
    default_deferrable,
)

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

    from iceberg_ops_provider.triggers.polling import CheckResult


__all__ = ["DEFERRAL_GRACE", "IcebergCatalogSensor"]

DEFERRAL_GRACE = timedelta(minutes=5)
"""Airflow's own limit on a deferral is the trigger's deadline plus this: the trigger ends the wait
itself, with a clear message, and Airflow's limit only catches a trigger that never reports."""


class IcebergCatalogSensor(BaseSensorOperator):
    """Base of the iceberg-ops sensors: one metadata check per poke, deferrable as Airflow is set up.

    Args:
        iceberg_conn_id: The Airflow connection of the catalog (templated in subclasses).
        deferrable: Wait in the triggerer instead of on a worker. Default: Airflow's ``[operators]
            default_deferrable`` setting (``False`` unless set), as Airflow's own sensors.
        mode: ``poke`` or ``reschedule`` when not deferred; ``reschedule`` by default.
        poke_interval: Seconds between checks (on the worker or in the triggerer).
        **kwargs: The rest of ``BaseSensorOperator``'s arguments (``timeout``, ``soft_fail``, ...).
    """

    def __init__(
        self,
        *,
        iceberg_conn_id: str = IcebergCatalogHook.default_conn_name,
        deferrable: bool | None = None,
        mode: str | None = None,
        poke_interval: timedelta | float = 60,
        **kwargs: Any,
    ) -> None:
        super().__init__(mode=mode or "reschedule", poke_interval=poke_interval, **kwargs)
        deferrable = default_deferrable() if deferrable is None else deferrable
        if deferrable and not self.poke_interval > 0:
            raise ValueError(
                f"{type(self).__name__} {self.task_id!r}: poke_interval must be above zero seconds when deferrable "
                f"(the trigger checks every poke_interval seconds), got {poke_interval!r}."
            )
        self.iceberg_conn_id = iceberg_conn_id
        self.deferrable = deferrable
        self._hook: IcebergCatalogHook | None = None
        self._last_seen: str | None = None
        self._last_error: str | None = None
        self._checked_before = False

    @abstractmethod
    def prepare(self) -> None:
        """Check and convert the rendered arguments before the first check (a ``ValueError`` fails the task)."""

    @abstractmethod
    def waiting_for(self) -> str:
        """What the sensor waits for, for messages."""

    @abstractmethod
    def check(self, hook: IcebergCatalogHook) -> CheckResult:
        """Check once: whether the wait is over, what was seen (JSON-able), and that seen in words."""

    @abstractmethod
    def trigger(self, **polling: Any) -> BaseTrigger:
        """The trigger that goes on waiting in the triggerer, given ``polling`` (its connection, deadline, ...)."""

    def transient(self, exc: BaseException, first_check: bool) -> bool:
        """Whether the wait goes on after ``exc``; ``first_check``: no check of this wait ran before."""
        return is_transient(exc)

    def execute(self, context: Context) -> Any:
        """Check once, then defer to the trigger or wait as a classic sensor; return what the last check saw."""
        try:
            self.prepare()
        except (ValueError, IcebergOpsError) as exc:
            if isinstance(exc, IcebergOpsError) and exc.transient:
                raise
            raise AirflowFailException(f"{type(self).__name__}: {exc}") from exc
        self._checked_before = self._rescheduled(context)
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise AirflowSensorTimeout(self._timeout_message()) from exc
        started_at = datetime.now(UTC)
        try:
            first = self.poke(context)
        except AirflowFailException as exc:
            if self.soft_fail or self.never_fail:
                raise AirflowSkipException(f"Skipping (soft_fail/never_fail): {exc}") from exc
            raise
        if first:
            return first.xcom_value
        self.defer(
            trigger=self.trigger(
                iceberg_conn_id=self.iceberg_conn_id,
                deadline=started_at + timedelta(seconds=self.timeout),
                poll_interval=self.poke_interval,
                started_at=started_at,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) + DEFERRAL_GRACE,
        )

    def poke(self, context: Context) -> PokeReturnValue:
        """One metadata check; a transient error counts as "not yet", a permanent one fails the task."""
        try:
            if self._hook is None:
                self._hook = IcebergCatalogHook(iceberg_conn_id=self.iceberg_conn_id)
            done, seen, seen_text = self.check(self._hook)
        except Exception as exc:
            first_check, self._checked_before = not self._checked_before, True
            if not self.transient(exc, first_check):
                raise AirflowFailException(f"Stopped waiting for {self.waiting_for()}: {describe_error(exc)}") from exc
            self._last_error = describe_error(exc)
            self._hook = None  # open the catalog afresh at the next check
            self.log.warning("Check failed, trying again at the next poke: %s", self._last_error)
            return PokeReturnValue(False)
        self._checked_before = True
        self._last_seen, self._last_error = seen_text, None
        self.log.info("%s %s; seen: %s", "Done waiting for" if done else "Waiting for", self.waiting_for(), seen_text)
        return PokeReturnValue(done, seen if done else None)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resume after the trigger: return what it saw, or raise its timeout or failure with its message.

        Raises:
            AirflowSensorTimeout: The deadline passed (the message says what was awaited and seen).
            AirflowFailException: A permanent error ended the wait.
        """
        if not event or "status" not in event:
            raise AirflowException(f"The trigger of {self.task_id} ended without saying why (event {event!r}).")
        message = str(event.get("message", ""))
        if event["status"] == "success":
            self.log.info("%s", message)
            return event.get("seen")
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(message)
        raise AirflowFailException(message)

    def _rescheduled(self, context: Context) -> bool:
        """Whether this try of a rescheduled sensor follows earlier checks of the same wait."""
        if self.deferrable or not self.reschedule:
            return False
        ti = context.get("ti") if hasattr(context, "get") else None
        first = getattr(ti, "get_first_reschedule_date", None)
        if first is None:
            return False
        try:
            return first(context) is not None
        except Exception:  # no reschedule record to read (a task run outside a DAG run)
            return False

    def _timeout_message(self) -> str:
        return timeout_message(self.waiting_for(), self.timeout, self._last_seen, self._last_error)
