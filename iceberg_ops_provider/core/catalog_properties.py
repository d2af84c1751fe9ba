"""A catalog's properties as PyIceberg takes them, and PyIceberg's complaints about them in this project's terms.

PyIceberg takes a catalog's configuration as string properties, and reports a missing or malformed
one as a ``ValueError`` worded for its own command line. This module turns the options of
:class:`~iceberg_ops_provider.core.catalog.CatalogFactory`'s kinds into those properties, checked,
and PyIceberg's complaints into errors that name this project's settings. It sits below the modules
that build catalogs (:mod:`~iceberg_ops_provider.core.catalog`,
:mod:`~iceberg_ops_provider.core.pyiceberg_catalogs`) and the project configuration, which all use it:

* :func:`to_property_value`: an option or table property value as Iceberg's text (``true``/``false``,
  numbers and paths as text), refusing anything else with the option's name;
* :func:`sql_kind_properties`, :func:`remote_kind_properties` (with :func:`s3tables_properties`, the
  S3 Tables preset): a kind's options as properties, refusing options of other kinds and plain names
  PyIceberg does not know (almost always typos);
* :func:`configured_uri`: the ``uri`` that ``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__*`` give a
  catalog, as ``load_catalog`` would see it;
* :func:`pyiceberg_config_error`: PyIceberg's ``ValueError`` about a catalog's properties as a
  :class:`~iceberg_ops_provider.errors.CatalogConfigError` that names this project's settings.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from iceberg_ops_provider.errors import CatalogConfigError

__all__ = [
    "check_option_names",
    "configured_uri",
    "pyiceberg_config_error",
    "remote_kind_properties",
    "s3tables_properties",
    "sql_kind_properties",
    "to_property_value",
]

# Options of the SQL kinds besides db_path/warehouse_dir/name: SqlCatalog's own switches.
_SQL_SWITCHES = frozenset({"echo", "pool_pre_ping", "init_catalog_tables", "schema_version"})

# Which kinds take these options, for the message refusing them elsewhere.
_OWNERS = {"db_path": "'sqlite' kind", "warehouse_dir": "'sqlite', 'memory' and 'sql' kinds"}

# Plain (no dot, no dash) option names PyIceberg's remote catalogs understand. Keys with a dot or a
# dash (``s3.endpoint``, ``oauth2-server-uri``) are PyIceberg properties and pass through unchecked;
# a plain key outside this set is almost always a typo, so it is refused.
_REMOTE_PLAIN_KEYS = frozenset(
    {"name", "uri", "warehouse", "credential", "token", "scope", "audience", "resource", "prefix", "region", "ugi"}
)


def to_property_value(key: str, value: object, where: str) -> str:
    """An Iceberg property value (always a string): booleans as ``true``/``false``, numbers and paths as text.

    Raises:
        CatalogConfigError: ``None``, a container or another object; names ``key`` and ``where``.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float | os.PathLike):
        return os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    raise CatalogConfigError(
        f"Option {key!r} of {where} is {value!r} ({type(value).__name__}); "
        "values must be strings, numbers, booleans or paths."
    )


def _property_value(kind: str, key: str, value: object) -> str:
    return to_property_value(key, value, f"the {kind!r} catalog")


_SQL_NAMED = {
    "sqlite": frozenset({"db_path", "warehouse_dir", "name"}),
    "memory": frozenset({"warehouse_dir", "name"}),
    "sql": frozenset({"uri", "warehouse_dir", "warehouse", "name"}),
}
"""The options each SQL kind takes by name, besides SqlCatalog's switches and dotted PyIceberg properties."""


def _guess(key: str, valid: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def check_option_names(kind: str, keys: Iterable[str]) -> None:
    """Refuse option names ``kind`` does not take (almost always typos), naming the closest valid one.

    For the SQL kinds (``sqlite``, ``memory``, ``sql``) a plain (undotted) option must be one of the
    kind's own or SqlCatalog's switches; for the remote kinds (``glue``, ``rest``, ``hive``,
    ``s3tables``) a plain, undashed one must be one PyIceberg knows, and the SQL kinds' ``db_path``
    and ``warehouse_dir`` are refused. Dotted (and, for remote kinds, dashed) names are PyIceberg
    properties and pass. Other kinds are not checked.

    Raises:
        CatalogConfigError: The first name refused, the valid ones, and ``Did you mean ...?``.
    """
    kind = kind.lower()
    if kind in _SQL_NAMED:
        valid = _SQL_NAMED[kind] | _SQL_SWITCHES
        for key in keys:
            if "." not in key and key not in valid:
                raise CatalogConfigError(
                    f"Unknown option {key!r} for the {kind!r} catalog. Valid options: {', '.join(sorted(valid))}, "
                    f"or a dotted PyIceberg property such as 's3.endpoint'.{_guess(key, valid)}"
                )
        return
    if kind not in ("glue", "rest", "hive", "s3tables"):
        return
    for key in keys:
        if key in _OWNERS:
            raise CatalogConfigError(
                f"Option {key!r} belongs to the {_OWNERS[key]}; the {kind!r} catalog takes "
                "'warehouse' (a location or, for s3tables, the table bucket ARN) instead."
            )
        if "." not in key and "-" not in key and key not in _REMOTE_PLAIN_KEYS:
            raise CatalogConfigError(
                f"Unknown option {key!r} for the {kind!r} catalog. Plain options are: "
                f"{', '.join(sorted(_REMOTE_PLAIN_KEYS))}; anything else must be a PyIceberg property such as "
                f"'rest.sigv4-enabled' or 's3.endpoint'.{_guess(key, _REMOTE_PLAIN_KEYS)}"
            )


def sql_kind_properties(kind: str, options: Mapping[str, Any]) -> dict[str, str]:
    """The PyIceberg properties of a SQL kind (``sqlite``, ``memory``, ``sql``): its options left after its named ones.

    Raises:
        CatalogConfigError: A plain (undotted) option that is none of ``SqlCatalog``'s switches
            (:func:`check_option_names`), or a value that is not a string, number, boolean or path.
    """
    check_option_names(kind, [key for key in options if key not in _SQL_NAMED[kind]])
    return {key: _property_value(kind, key, value) for key, value in options.items()}


def remote_kind_properties(kind: str, options: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """The name, catalog type and PyIceberg properties of a remote kind's catalog (glue, rest, hive, s3tables).

    ``name`` is taken out of ``options`` (default: the kind). ``s3tables`` is the ``rest`` type with
    the preset of :func:`s3tables_properties`; ``region`` is ``client.region`` for the others; a REST
    catalog's SigV4 signing retries twice unless told otherwise.

    Raises:
        CatalogConfigError: An option of the SQL kinds, a plain (undotted, undashed) option that is
            not one of PyIceberg's (:func:`check_option_names`), a value that is not a string,
            number, boolean or path, or an ``s3tables`` catalog without region or warehouse.
    """
    check_option_names(kind, options)
    name = str(options.pop("name", kind))
    properties = {key: _property_value(kind, key, value) for key, value in options.items()}
    if kind == "s3tables":
        properties = s3tables_properties(properties)
        catalog_type = "rest"
    else:
        catalog_type = kind
        if "region" in properties:
            properties["client.region"] = properties.pop("region")
    if catalog_type == "rest":
        # PyIceberg's SigV4 signing retries a request 10 times by default, each retry waiting up to
        # the timeout again: a stalled endpoint would take 11 timeouts to report. Two retries.
        properties.setdefault("rest.sigv4.max-retries", "2")
    return name, catalog_type, properties


def s3tables_properties(properties: dict[str, str]) -> dict[str, str]:
    """REST + SigV4 as AWS S3 Tables expects it; explicit properties win over the preset."""
    region = properties.pop("region", None) or properties.get("rest.signing-region")
    if not region:
        raise CatalogConfigError(
            "The 's3tables' catalog needs region=... (for example region='us-east-1'): it signs "
            "requests for that region and derives the endpoint from it."
        )
    if "warehouse" not in properties:
        raise CatalogConfigError(
            "The 's3tables' catalog needs warehouse=<table bucket ARN>, for example "
            "'arn:aws:s3tables:us-east-1:123456789012:bucket/my-bucket'."
        )
    preset = {
        "uri": f"https://s3tables.{region}.amazonaws.com/iceberg",
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": region,
        "client.region": region,
    }
    return {**preset, **properties}


def configured_uri(name: str) -> str:
    """The uri ``.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*`` give catalog ``name``, as load_catalog sees it."""
    try:
        import pyiceberg.catalog

        config = pyiceberg.catalog._ENV_CONFIG.get_catalog_config(name) or {}
    except Exception:
        return ""
    uri = config.get("uri")
    return uri if isinstance(uri, str) else ""


# PyIceberg's own message for a missing uri names the flag of its own command line.
_URI_MISSING = re.compile(
    r"URI missing, please provide using --uri, the config or environment variable (PYICEBERG_CATALOG__\S+__URI)"
)
_URI_SETTING = (
    "`uri:` under `catalog:` in iceberg-ops.yaml, the Host of the Airflow connection, or uri= for CatalogFactory.build"
)


def pyiceberg_config_error(exc: ValueError, what: str, name: str) -> CatalogConfigError:
    """PyIceberg's ``ValueError`` about a catalog's properties, in this project's terms.

    PyIceberg writes for its own command line ("please provide using --uri"); iceberg-ops has no
    ``--uri``, so the message names the settings that give a catalog its ``uri`` instead.

    Args:
        exc: What ``load_catalog`` (or a catalog's constructor) raised.
        what: The catalog, for the message (``"the 'rest' catalog 'rest'"``).
        name: The catalog's name, which is also its section of ``.pyiceberg.yaml``.
    """
    text = " ".join(str(exc).split())
    found = _URI_MISSING.search(text)
    if found:
        text = (
            f"URI missing: give the catalog's `uri` ({_URI_SETTING}), or set {found.group(1)} or `uri` under "
            f"catalogs.{name.lower()} in .pyiceberg.yaml"
        )
    text = text.replace("--uri", "the `uri` option")
    return CatalogConfigError(f"Could not build {what}: {text}.".replace("..", "."))
