"""How the command line reads an Airflow connection for ``--conn-id`` and ``airflow_conn_id:``.

:func:`read_airflow_connection` is the reader handed to :class:`~iceberg_ops_provider.config.ProjectConfig`;
it maps a connection as :class:`~iceberg_ops_provider.hooks.catalog.IcebergCatalogHook` does (docs/cli.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from iceberg_ops_provider.cli.catalog_flags import setting_words
from iceberg_ops_provider.errors import MissingAirflowError, ProjectConfigError

if TYPE_CHECKING:
    from iceberg_ops_provider.catalogs import CatalogSpec
    from iceberg_ops_provider.messages import Setting

__all__ = ["read_airflow_connection", "without_airflow_logging"]


def read_airflow_connection(conn_id: str, setting: Setting) -> CatalogSpec:
    """The catalog of Airflow connection ``conn_id`` (given at ``setting``), described as the hook describes it.

    Airflow is imported here, when a connection is read, and only then.

    Raises:
        MissingAirflowError: Airflow is not installed.
        ProjectConfigError: The connection is not defined, or its ``AIRFLOW_CONN_<ID>`` variable
            could not be read.
    """
    try:
        from iceberg_ops_provider.hooks.catalog import IcebergCatalogHook
    except ImportError as exc:
        missing = exc.name or ""
        if missing == "airflow" or missing.startswith("airflow."):
            raise MissingAirflowError(conn_id, missing, setting=setting) from exc
        raise
    source = setting_words(setting)
    try:
        return IcebergCatalogHook(iceberg_conn_id=conn_id).catalog_spec()
    except Exception as exc:
        if any(cls.__name__ == "AirflowNotFoundException" for cls in type(exc).__mro__):
            variable = "AIRFLOW_CONN_" + conn_id.upper()
            if os.environ.get(variable):
                raise ProjectConfigError(
                    f"Airflow connection {conn_id!r} ({source}) could not be read from the "
                    f"environment variable {variable}: check that it holds the connection as JSON (for example "
                    '{"conn_type": "iceberg_ops", "extra": {"kind": "sqlite"}}) or as a URI.'
                ) from exc
            raise ProjectConfigError(
                f"Airflow connection {conn_id!r} is not defined ({source}). Define it "
                f"(`airflow connections add {conn_id} ...`, the environment variable {variable} holding its "
                "JSON or URI, or a secrets backend), or pass the id of an existing connection."
            ) from exc
        raise


def without_airflow_logging(read: Callable[[], object]) -> None:
    """Run ``read`` (which imports Airflow) and undo the logging Airflow sets up when imported.

    Airflow's root handler prints INFO records on stdout, where ``--json`` output goes: what Airflow prints
    while it loads goes to stderr, and its records below ERROR are dropped during the read (only a
    process-wide threshold holds, since Airflow resets its loggers' levels when first imported).
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    disabled = logging.root.manager.disable
    try:
        logging.disable(logging.WARNING)
        with contextlib.redirect_stdout(sys.stderr):
            read()
    finally:
        logging.disable(disabled)
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
