"""The one module that knows which Airflow it runs on (the official providers' ``version_compat.py``).

Every operator, sensor, trigger and page imports from here Airflow's exceptions, configuration and trigger
bases, which moved between versions, so supporting another Airflow version changes this module alone.
"""

from __future__ import annotations

from airflow import __version__
from airflow.configuration import conf  # the same on 3.1 to 3.3, workers and api-server alike
from airflow.triggers.base import BaseEventTrigger  # triggers an AssetWatcher accepts (core, not the SDK)
from packaging.version import Version

__all__ = [
    "AIRFLOW_V_3_2_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "BaseEventTrigger",
    "conf",
    "default_deferrable",
]

AIRFLOW_V_3_2_PLUS: bool = Version(Version(__version__).base_version) >= Version("3.2.0")
"""Airflow 3.2 or later: the authoring exceptions live in ``airflow.sdk.exceptions``."""

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        AirflowSkipException,
    )
else:  # pragma: no cover - Airflow 3.1
    from airflow.exceptions import (  # type: ignore[no-redef]
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowSensorTimeout,
        AirflowSkipException,
    )


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` (``False`` when unset), read when a task is built."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)
