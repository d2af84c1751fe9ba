"""The project file ``iceberg-ops.yaml``: which catalog, namespace and folders a project uses.

Example::

    catalog:
      kind: sqlite            # sqlite | glue | rest | hive | s3tables; or `name: <catalog>`
      # options of that kind (uri, warehouse, region, db_path, ...)
      timeout: 60             # seconds a remote catalog may take to answer (any kind; default 60)
    namespace: sales
    migrations_dir: migrations
    models_dir: models
    meta_namespace: _iceberg_ops

Every key is optional until a command needs it. Relative paths resolve against the folder of the
file; the SQLite kind keeps its database in ``local_data/`` there unless told otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from iceberg_ops_provider.core.catalog import CatalogFactory, _configured_uri
from iceberg_ops_provider.core.timeouts import (
    DEFAULT_CATALOG_TIMEOUT,
    bound_catalog_requests,
    call_with_timeout,
    catalog_errors,
    check_timeout,
)
from iceberg_ops_provider.errors import CatalogConfigError, ProjectConfigError
from iceberg_ops_provider.history.store import DEFAULT_META_NAMESPACE

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["CONFIG_FILE", "ProjectConfig", "load_config"]

CONFIG_FILE = "iceberg-ops.yaml"
_KEYS = {"catalog", "namespace", "migrations_dir", "models_dir", "meta_namespace"}


@dataclass(frozen=True)
class ProjectConfig:
    """A project's settings, with command-line overrides applied.

    Attributes:
        path: The configuration file, or ``None`` when there is none.
        root: The folder relative paths resolve against.
        catalog: ``{"kind": ..., **options}`` or ``{"name": ..., **options}``; either may hold
            ``timeout`` (seconds).
        namespace: The namespace to migrate, if set.
        migrations_dir: The migrations folder.
        models_dir: The models folder.
        meta_namespace: Where history and locks live.
    """

    path: Path | None
    root: Path
    catalog: dict[str, Any] = field(default_factory=lambda: {"kind": "sqlite"})
    namespace: str | None = None
    migrations_dir: Path = Path("migrations")
    models_dir: Path = Path("models")
    meta_namespace: str = DEFAULT_META_NAMESPACE

    def require_namespace(self) -> str:
        """The namespace, or a clear error saying how to give one."""
        if not self.namespace:
            raise ProjectConfigError(
                f"No namespace given: pass --namespace NS or set `namespace:` in {self.path or CONFIG_FILE}."
            )
        return self.namespace

    @property
    def catalog_timeout(self) -> float:
        """Seconds the catalog may take to answer: ``catalog.timeout``, else the default (60)."""
        value = self.catalog.get("timeout", DEFAULT_CATALOG_TIMEOUT)
        try:
            return check_timeout(value, "catalog.timeout")
        except CatalogConfigError as exc:
            raise ProjectConfigError(f"{self.path or CONFIG_FILE}: {exc}") from exc

    @property
    def catalog_uri(self) -> str:
        """The catalog's ``uri`` when the configuration gives one (else empty), for messages."""
        uri = self.catalog.get("uri")
        return uri if isinstance(uri, str) else ""

    def build_catalog(self) -> Catalog:
        """Open the configured catalog, within :attr:`catalog_timeout`.

        Raises:
            ProjectConfigError: The ``memory`` kind (its state would be gone when the command exits).
            CatalogConfigError, MissingExtraError: From :class:`CatalogFactory`.
            CatalogUnavailableError: The catalog could not be reached or did not answer in time.
        """
        options = dict(self.catalog)
        timeout = self.catalog_timeout
        options["timeout"] = timeout
        if "name" in options:
            return self._load_named_catalog(options)
        kind = str(options.pop("kind", "sqlite")).lower()
        if kind == "memory":
            raise ProjectConfigError(
                "The 'memory' catalog cannot be used from the command line: its state is gone when the command "
                "exits. Use kind 'sqlite' for a local catalog."
            )
        if kind == "sqlite":
            options["db_path"] = self._resolve(options.get("db_path", Path("local_data") / "iceberg_catalog.db"))
            warehouse = options.get("warehouse_dir", Path("local_data") / "iceberg_warehouse")
            options["warehouse_dir"] = warehouse if "://" in str(warehouse) else self._resolve(warehouse)
        return CatalogFactory.build(kind, **options)

    @staticmethod
    def _load_named_catalog(options: dict[str, Any]) -> Catalog:
        """A catalog PyIceberg loads by name, bounded like the ones :class:`CatalogFactory` builds."""
        from pyiceberg.catalog import load_catalog

        name = str(options.pop("name"))
        timeout = float(options.pop("timeout"))
        properties = {key: str(value) for key, value in options.items()}
        endpoint = properties.get("uri") or _configured_uri(name) or f"(catalog {name!r})"
        with catalog_errors(endpoint, timeout):
            catalog = call_with_timeout(
                lambda: load_catalog(name, **properties),
                timeout,
                what=f"opening the catalog {name!r}",
                endpoint=endpoint,
            )
        bound_catalog_requests(catalog, timeout)
        return catalog

    def _resolve(self, path: Any) -> Path:
        candidate = Path(str(path)).expanduser()
        return candidate if candidate.is_absolute() else self.root / candidate

    def with_overrides(
        self,
        *,
        namespace: str | None = None,
        catalog_kind: str | None = None,
        catalog_name: str | None = None,
        db_path: str | None = None,
        warehouse: str | None = None,
        catalog_timeout: float | None = None,
    ) -> ProjectConfig:
        """This configuration with command-line options applied (they win over the file).

        The file's ``catalog.timeout`` survives ``--catalog``/``--catalog-name``: it is not an
        option of one kind. ``catalog_timeout`` (``--catalog-timeout``) wins over it.
        """
        if catalog_kind and catalog_name:
            raise ProjectConfigError("Pass either --catalog KIND or --catalog-name NAME, not both.")
        catalog = dict(self.catalog)
        timeout = catalog.get("timeout")
        if catalog_name:
            catalog = {"name": catalog_name}
        elif catalog_kind:
            same_kind = str(catalog.get("kind", "")).lower() == catalog_kind.lower()
            catalog = {**(catalog if same_kind else {}), "kind": catalog_kind}
            catalog.pop("name", None)
        if catalog_timeout is not None:
            timeout = catalog_timeout
        if timeout is not None:
            catalog["timeout"] = timeout
        if db_path or warehouse:
            if str(catalog.get("kind", "sqlite")).lower() != "sqlite" or "name" in catalog:
                raise ProjectConfigError("--db-path and --warehouse apply to the sqlite catalog only.")
            if db_path:
                catalog["db_path"] = str(Path(db_path).expanduser().resolve())
            if warehouse:
                catalog["warehouse_dir"] = warehouse if "://" in warehouse else str(Path(warehouse).resolve())
        return replace(self, catalog=catalog, namespace=namespace or self.namespace)


def _string(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ProjectConfigError(f"{path}: '{key}' must be a non-empty string, got {value!r}.")
    return value


def load_config(path: str | Path | None = None, *, required: bool = True) -> ProjectConfig:
    """Read ``iceberg-ops.yaml`` (``path``, default ``./iceberg-ops.yaml``).

    Args:
        path: The file.
        required: Raise when it does not exist; otherwise return defaults rooted in the working directory.

    Raises:
        ProjectConfigError: Missing file (when required), not YAML, unknown key or bad value; the
            message names the key.
    """
    file = Path(path) if path is not None else Path.cwd() / CONFIG_FILE
    if not file.is_file():
        if required:
            raise ProjectConfigError(
                f"Configuration file {file} not found. Run `iceberg-ops init` to create one, or pass --config PATH."
            )
        root = file.parent.resolve()
        return ProjectConfig(path=None, root=root, migrations_dir=root / "migrations", models_dir=root / "models")
    try:
        raw = yaml.safe_load(file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ProjectConfigError(f"{file}: not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(raw, dict):
        raise ProjectConfigError(f"{file}: expected a mapping of settings, got {type(raw).__name__}.")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise ProjectConfigError(f"{file}: unknown key(s) {unknown}; valid keys: {sorted(_KEYS)}.")
    catalog = raw.get("catalog") or {"kind": "sqlite"}
    if not isinstance(catalog, dict):
        raise ProjectConfigError(f"{file}: 'catalog' must be a mapping such as {{kind: sqlite}}, got {catalog!r}.")
    if "kind" in catalog and "name" in catalog:
        raise ProjectConfigError(f"{file}: 'catalog' takes either 'kind' or 'name', not both.")
    kind = catalog.get("kind")
    if kind is not None and str(kind).lower() not in CatalogFactory.KINDS:
        raise ProjectConfigError(
            f"{file}: catalog kind {kind!r} is unknown; valid kinds: {', '.join(CatalogFactory.KINDS)} "
            "(or `name:` for any catalog PyIceberg can load)."
        )
    for key, value in catalog.items():
        if isinstance(value, dict | list) or value is None:
            raise ProjectConfigError(f"{file}: catalog option {key!r} must be a single value, got {value!r}.")
    if "timeout" in catalog:
        try:
            check_timeout(catalog["timeout"], "catalog.timeout")
        except CatalogConfigError as exc:
            raise ProjectConfigError(f"{file}: {exc}") from exc
    root = file.parent.resolve()
    settings: dict[str, Any] = {"catalog": dict(catalog)}
    if "namespace" in raw:
        settings["namespace"] = _string(file, "namespace", raw["namespace"])
    if "meta_namespace" in raw:
        settings["meta_namespace"] = _string(file, "meta_namespace", raw["meta_namespace"])
    for key in ("migrations_dir", "models_dir"):
        if key in raw:
            folder = Path(_string(file, key, raw[key])).expanduser()
            settings[key] = folder if folder.is_absolute() else root / folder
        else:
            settings[key] = root / ("migrations" if key == "migrations_dir" else "models")
    return ProjectConfig(path=file.resolve(), root=root, **settings)
