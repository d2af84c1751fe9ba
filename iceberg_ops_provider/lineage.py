"""How lineage names an Iceberg table: the dataset identity OpenLineage-Spark gives it, without Airflow.

OpenLineage identifies an Iceberg table by its storage location, split as its naming specification
splits object-store and file-system paths: ``s3://bucket`` + ``path/to/table``, ``gs://bucket`` +
``path``, ``abfss://container@account.dfs.core.windows.net`` + ``path``, ``hdfs://namenode:port`` +
``/path``, ``file`` + ``/path``. The catalog's own name for the table (``namespace.table``) travels
beside it as a symlink whose namespace names the catalog: its URI, stripped of any credentials.
Producers and consumers that follow these rules (Spark, Flink, this provider) then name the same
table the same way.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["DatasetName", "catalog_namespace", "table_dataset"]

_SAME_SCHEME = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}


@dataclass(frozen=True)
class DatasetName:
    """A lineage dataset identity.

    Attributes:
        namespace: Where the dataset lives (``s3://bucket``, ``file``, a catalog URI, ...).
        name: The dataset within that namespace (a path, or ``namespace.table`` for a symlink).
    """

    namespace: str
    name: str


def table_dataset(location: str) -> DatasetName:
    """The dataset identity of a table stored at ``location`` (its ``table.location()``).

    Raises:
        ValueError: ``location`` is empty.
    """
    if not location or not location.strip():
        raise ValueError("A table location is needed to name the table for lineage; the table reported none.")
    parts = urlsplit(location.strip())
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or len(scheme) == 1:  # a local path (or a Windows drive letter)
        path = parts.path if scheme == "file" else location.strip()
        return DatasetName("file", posixpath.normpath(path) if path.startswith("/") else path.rstrip("/"))
    scheme = _SAME_SCHEME.get(scheme, scheme)
    # In abfss, container@account is the namespace itself; anywhere else user info is credentials.
    netloc = parts.netloc if scheme in ("abfs", "abfss", "wasb", "wasbs") else parts.netloc.rsplit("@", 1)[-1]
    path = parts.path.rstrip("/")
    if scheme == "hdfs":
        return DatasetName(f"hdfs://{netloc}", path or "/")
    return DatasetName(f"{scheme}://{netloc}", path.lstrip("/"))


def catalog_namespace(catalog_type: str, properties: Mapping[str, Any], catalog_name: str = "") -> str:
    """The symlink namespace of a table's catalog: the catalog's URI without credentials.

    REST and Hive catalogs are named by their ``uri``, SQL catalogs by their database URI (user name
    and password removed), Glue by ``arn:aws:glue:<region>`` (the account is not known without a
    call to AWS), and any other catalog by ``<type>://<catalog name>``.
    """
    kind = catalog_type.lower()
    uri = str(properties.get("uri") or "")
    if kind == "glue":
        region = properties.get("glue.region") or properties.get("client.region") or properties.get("region_name")
        return f"arn:aws:glue:{region}" if region else "arn:aws:glue"
    if uri:
        return _without_credentials(uri)
    return f"{kind}://{catalog_name}" if catalog_name else f"{kind}://"


def _without_credentials(uri: str) -> str:
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri.rstrip("/")
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=host, query="", fragment="")).rstrip("/")
