"""The one place that knows which Airflow it runs on: version flags and the names that moved between versions.

The official providers' pattern: every operator, sensor and trigger imports Airflow's exceptions and
configuration from here, so supporting another Airflow version changes this module alone.
"""

from __future__ import annotations

from airflow import __version__
from packaging.version import Version

__all__ = [
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowSensorTimeout",
    "AirflowSkipException",
    "conf",
    "default_deferrable",
]


def _base_version() -> tuple[int, int, int]:
    version = Version(__version__)
    return version.major, version.minor, version.micro


AIRFLOW_V_3_2_PLUS: bool = _base_version() >= (3, 2, 0)
"""Airflow 3.2 or later: the authoring exceptions live in ``airflow.sdk.exceptions``."""
AIRFLOW_V_3_3_PLUS: bool = _base_version() >= (3, 3, 0)
"""Airflow 3.3 or later."""

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

try:
    from airflow.sdk.configuration import conf
except ImportError:  # pragma: no cover - an Airflow whose task SDK has no configuration module
    from airflow.configuration import conf  # type: ignore[no-redef]


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` setting (``False`` when unset), read when a task is built."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)
