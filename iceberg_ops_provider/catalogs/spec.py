"""The one description of a catalog: :class:`CatalogSpec`, where it came from (:class:`Source`), what is wrong with it.

A spec is immutable, holds its secrets apart, and never fails to exist: a source that cannot be parsed
gives a spec carrying :class:`SpecProblem` values, which opening it reports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from iceberg_ops_provider.catalogs.redact import display_url, secret_forms
from iceberg_ops_provider.errors import CatalogConfigError
from iceberg_ops_provider.messages import Message, Setting, message

__all__ = ["DEFAULT_CATALOG_TIMEOUT", "Access", "CatalogSpec", "Source", "SourceKind", "SpecProblem", "check_timeout"]

DEFAULT_CATALOG_TIMEOUT = 60.0
"""Seconds one request to a catalog may take in all, unless configured otherwise."""

_MAX_TIMEOUT = 7 * 24 * 3600

SourceKind = Literal["python", "file", "connection", "flags"]

Access = Literal["read", "write", "create"]
"""``read``: nothing changes; ``write``: tables that exist change, nothing is created; ``create``: a missing
database, its folder, the warehouse folder and the catalog's tables are created."""


@dataclass(frozen=True)
class Source:
    """Where a spec came from (``where``: a file or connection id; ``flags``: set on the command line).

    A message names the setting to change in the reader's terms; ``role`` is ``target`` for a move's second catalog.
    """

    kind: SourceKind = "python"
    where: str = ""
    role: str = "catalog"
    flags: frozenset[str] = frozenset()

    def setting(self, key: str) -> Setting:
        """The fact naming setting ``key`` of this source, for a message."""
        return Setting(key, self.kind, self.where, self.role, key in self.flags)


@dataclass(frozen=True)
class SpecProblem:
    """Why a spec cannot be opened: the setting, what is wrong, and the error to raise when it has its own class."""

    key: str
    text: Message
    error: CatalogConfigError | None = field(default=None, compare=False)


def check_timeout(value: object) -> float | None:
    """``value`` as seconds above zero and at most a week (a number, or its text), else ``None``."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= _MAX_TIMEOUT:  # and NaN
        return None
    return float(value)


@dataclass(frozen=True)
class CatalogSpec:
    """How to open one catalog, and where that was said.

    ``properties`` may be shown (secret values as ``***``); ``secrets`` holds the properties with a secret,
    whole, never shown. ``env_config``: ``.pyiceberg.yaml`` and the environment add properties under ``name``.
    """

    kind: str
    name: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)
    secrets: Mapping[str, Any] = field(default_factory=dict, repr=False)
    timeout: float = DEFAULT_CATALOG_TIMEOUT
    source: Source = Source()
    problems: tuple[SpecProblem, ...] = ()
    database: Path | None = None
    warehouse_dir: Path | None = None
    env_config: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))
        object.__setattr__(self, "secrets", MappingProxyType(dict(self.secrets)))

    @property
    def catalog_type(self) -> str | None:
        """PyIceberg's catalog type (``sql``, ``rest``, ``glue``, ...); ``None`` when PyIceberg infers it."""
        value = self.properties.get("type")
        return str(value) if value else None

    def pyiceberg_properties(self) -> dict[str, Any]:
        """The properties to open the catalog with, secrets included."""
        return {**self.properties, **self.secrets}

    def endpoint(self) -> str:
        """Where the catalog lives, to show: a URI without password or query, a database file, or a name."""
        if self.database is not None:
            return str(self.database)
        uri = self.properties.get("uri") or self.properties.get("glue.endpoint")
        if isinstance(uri, str) and uri.strip():
            return display_url(uri.strip())
        region = self.properties.get("client.region") or self.properties.get("glue.region")
        what = f"{self.catalog_type or self.kind} catalog {self.name or '(default)'!r}"
        return f"({what}{f' in {region}' if region else ''})"

    def setting(self, key: str) -> Setting:
        """The fact naming setting ``key`` where this spec came from (``db_path=``, ``db_path:`` in a file, ...)."""
        return self.source.setting(key)

    def secret_values(self) -> tuple[str, ...]:
        """Every text form of every secret, for a log masker."""
        return secret_forms(self.secrets)

    def fingerprint(self) -> str:
        """Changes whenever anything that opens the catalog changes (secrets included; they cannot be read back)."""
        data = [self.kind, self.name, self.pyiceberg_properties(), self.timeout, str(self.database)]
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:32]

    def with_timeout(self, seconds: float, *, flagged: bool = False) -> CatalogSpec:
        """This spec with another timeout (given on the command line when ``flagged``)."""
        source = replace(self.source, flags=self.source.flags | {"timeout"}) if flagged else self.source
        return replace(self, timeout=seconds, source=source)

    def with_problem(self, key: str, text: str | Message, error: CatalogConfigError | None = None) -> CatalogSpec:
        """This spec with one more problem."""
        problem = SpecProblem(key, text if isinstance(text, Message) else message(text), error)
        return replace(self, problems=(*self.problems, problem))

    def config_error(self) -> CatalogConfigError:
        """The error of opening a spec with problems: each problem, naming where it was set."""
        first = self.problems[0]
        if first.error is not None:
            return first.error
        joined = Message.join("; ", [problem.text for problem in self.problems])
        return CatalogConfigError(Message(joined.parts, about=first.key))

    def describe(self) -> dict[str, Any]:
        """What may be shown of the spec: kind, type, name, endpoint, timeout, where it came from, problems."""
        return {
            "kind": self.kind,
            "type": self.catalog_type,
            "name": self.name,
            "endpoint": self.endpoint(),
            "timeout": self.timeout,
            "source": self.source.kind,
            "problems": [str(problem.text) for problem in self.problems],
        }
