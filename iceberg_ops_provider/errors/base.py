"""The root of the hierarchy, and the errors of configuration, catalogs, types, schemas and models."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import ClassVar


class IcebergOpsError(Exception):
    """Base class of every error iceberg-ops raises on purpose.

    Attributes:
        transient: Whether trying again later may succeed (a held lock, a commit conflict, a silent catalog);
            the command line maps it to exit codes, the Airflow operators to retry or fail at once.
    """

    transient: ClassVar[bool] = False


class CatalogConfigError(IcebergOpsError, ValueError):
    """A catalog was asked for with options that cannot work (bad name, bad value, wrong kind).

    Attributes:
        reason: What kind of problem, for a front that words it itself: ``configuration`` (an option),
            ``missing`` (no catalog where the settings point), ``not-a-catalog``, ``no-warehouse``,
            ``redirect`` (not followed), ``too-large`` (an answer past the bound), ``compressed`` (though
            asked for none), ``import`` (a class to import named), ``setting`` (how requests are
            authenticated or signed), ``credentials`` (refused or missing).
        status: The HTTP status of the answer behind it, when there was one.
        endpoint: Where the catalog lives (never a password), when known.
    """

    def __init__(
        self, message: object, *, reason: str = "configuration", status: int | None = None, endpoint: str = ""
    ) -> None:
        self.reason = reason
        self.status = status
        self.endpoint = endpoint
        super().__init__(message)


class CatalogUnavailableError(IcebergOpsError, ConnectionError):
    """The catalog (or its storage) did not answer in time, or could not be reached.

    Attributes:
        endpoint: What was called (a URL, a database, a service), as far as it is known.
        timeout: The bound that was exceeded, in seconds, when the error is a timeout.
        reason: ``timeout``, ``unreachable`` (refused, unknown host, reset), ``unavailable`` (an
            answer saying so: 503), or ``busy`` (a database locked by another writer).
        status: The HTTP status of the answer, when there was one.
        request: The request (method and path), when known.
    """

    transient: ClassVar[bool] = True

    def __init__(
        self,
        message: object,
        *,
        endpoint: str = "",
        timeout: float | None = None,
        reason: str | None = None,
        status: int | None = None,
        request: str = "",
    ) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.reason = reason or ("timeout" if timeout is not None else "unreachable")
        self.status = status
        self.request = request
        super().__init__(message)


_KIND_OF_DATABASE = {"postgres": "sql", "postgresql": "sql", "pg": "sql", "mysql": "sql", "sqlalchemy": "sql"}
"""Databases named as a catalog kind, and the kind that opens a catalog held in one."""


class UnknownCatalogKindError(CatalogConfigError):
    """``CatalogFactory.build`` was given a kind it does not know.

    The message lists ``valid_kinds``, names the closest, and ends with ``advice`` (the Python API's
    by default; a front accepting fewer kinds gives its own list and advice).

    Attributes:
        valid_kinds: The kinds that exist (for whoever raised it).
        guess: The kind meant: the closest spelling, or ``sql`` for a database's name (``postgres``); else ``None``.
    """

    PYTHON_ADVICE: ClassVar[str] = (
        "A catalog type of PyIceberg's own opens with CatalogFactory.load(name, type=..., ...); "
        "anything else, build the catalog yourself and pass the catalog object."
    )

    def __init__(self, kind: str, valid_kinds: Sequence[str], *, advice: object = None, setting: object = None) -> None:
        from iceberg_ops_provider.messages import message

        self.kind = kind
        self.valid_kinds = tuple(valid_kinds)
        lower = str(kind).lower()
        close = difflib.get_close_matches(lower, self.valid_kinds, n=1, cutoff=0.6)
        self.guess = _KIND_OF_DATABASE.get(lower) or (close[0] if close else None)
        guess = f" Did you mean {self.guess!r}?" if self.guess else ""
        if lower in _KIND_OF_DATABASE:
            guess += " A PostgreSQL or MySQL database holds a sql catalog, its SQLAlchemy URL the catalog's uri."
        where = message(" ({setting})", setting=setting) if setting is not None else ""
        text = message(f"Unknown catalog kind {kind!r}") + where + f". Valid kinds are: {', '.join(self.valid_kinds)}."
        super().__init__(text + f"{guess} " + (self.PYTHON_ADVICE if advice is None else advice))  # type: ignore[operator]


class MissingExtraError(IcebergOpsError, ImportError):
    """An optional dependency is not installed.

    Attributes:
        extra: The ``iceberg-ops`` extra that installs it.
        install_command: The exact command that fixes the problem.
    """

    def __init__(self, what: str, extra: str, missing_module: str | None) -> None:
        self.extra = extra
        self.install_command = f"pip install 'iceberg-ops[{extra}]'"
        missing = f" (module {missing_module!r} could not be imported)" if missing_module else ""
        super().__init__(
            f"{what} needs the optional dependencies of the {extra!r} extra{missing}. "
            f"Install them with: {self.install_command}",
            name=missing_module,
        )


class UnsupportedTypeError(IcebergOpsError, TypeError):
    """A column has an Arrow type that an Iceberg table cannot hold.

    Attributes:
        column: Dotted path of the offending column (``""`` when converting a bare type).
    """

    def __init__(self, column: str, arrow_type: str, hint: str) -> None:
        self.column = column
        where = f"Column {column!r}" if column else "The type"
        super().__init__(f"{where} has Arrow type {arrow_type}, which Iceberg cannot store. {hint}")


class TypeParseError(IcebergOpsError, ValueError):
    """A type given as a string (``"decimal(12,2)"``, ``"list<string>"``) could not be parsed."""


class SchemaContractError(IcebergOpsError, ValueError):
    """Arrow data does not satisfy a table's schema.

    Attributes:
        violations: Every problem found, not only the first.
    """

    def __init__(self, table: str, violations: Sequence[object]) -> None:
        self.violations = list(violations)
        lines = "\n".join(f"  - {violation}" for violation in self.violations)
        super().__init__(
            f"The data does not match the schema of {table} ({len(self.violations)} problem(s)):\n{lines}\n"
            "Cast or rename the columns of the data, or evolve the table's schema first."
        )


class SchemaEvolutionError(IcebergOpsError, ValueError):
    """A schema change was refused because it would break readers or lose data."""


class ForbiddenPromotionError(SchemaEvolutionError):
    """A column type change that the Iceberg specification does not allow.

    Attributes:
        column: Dotted path of the column.
    """

    def __init__(self, column: str, old_type: object, new_type: object, reason: str) -> None:
        self.column = column
        super().__init__(
            f"Cannot change column {column!r} from {old_type} to {new_type}: {reason} "
            "Iceberg allows only int -> long, float -> double and widening a decimal's precision at the "
            "same scale. To change the type otherwise, add a new column, backfill it and drop the old one."
        )


class SnapshotNotFoundError(IcebergOpsError, LookupError):
    """A snapshot id or timestamp does not name a snapshot of the table."""


class UpsertError(IcebergOpsError, ValueError):
    """An upsert was asked for with data or keys that cannot work."""


class ModelError(IcebergOpsError, ValueError):
    """A table model file (``models/*.yaml``) is malformed; the message names the file and the key."""


class ProjectConfigError(IcebergOpsError, ValueError):
    """``iceberg-ops.yaml`` (or a command-line option) is missing, malformed or contradictory."""


class ScaffoldingError(IcebergOpsError):
    """Scaffolding refused to write, usually because the file already exists."""


class CatalogAuthError(CatalogConfigError):
    """The catalog (or its storage) refused the credentials (401, 403, a bad signature), or none could be found.

    Trying again does not help: the credentials, their permissions or the signing settings must change.

    Attributes:
        endpoint: What refused (a URL, a bucket, a service), as far as it is known.
        settings: The options and environment variables to check, most likely first.
    """

    def __init__(
        self, message: object, *, endpoint: str = "", settings: Sequence[str] = (), status: int | None = None
    ) -> None:
        self.settings = tuple(settings)
        super().__init__(message, reason="credentials", status=status, endpoint=endpoint)


class CatalogNotFoundError(CatalogConfigError):
    """A catalog opened only to read (``create=False``) does not exist: nothing was created.

    PyIceberg's SQL catalog would create an empty SQLite catalog and answer as if it were the real one;
    a command that only reads refuses instead, naming the setting and what to do.

    Attributes:
        path: The database file that does not exist.
    """

    def __init__(self, message: object, *, path: str = "") -> None:
        self.path = path
        super().__init__(message, reason="missing", endpoint=path)


class MissingAirflowError(MissingExtraError):
    """An Airflow connection was asked for where Airflow is not installed.

    Attributes:
        setting: Where its id was given (a :class:`~iceberg_ops_provider.messages.Setting`), when known.
        install_command: The command that installs Airflow.
    """

    def __init__(self, conn_id: str, missing_module: str | None, *, setting: object = None) -> None:
        from iceberg_ops_provider.messages import Hint, Setting, message

        self.conn_id = conn_id
        self.setting = setting if setting is not None else Setting("airflow_conn_id", source="file")
        self.extra = ""
        self.install_command = "pip install apache-airflow"
        missing = f" (module {missing_module!r} could not be imported)" if missing_module else ""
        ImportError.__init__(
            self,
            message(
                f"Reading the Airflow connection {conn_id!r} ({{setting}}) needs Apache Airflow{missing}. "
                f"Install it with: {self.install_command}; or describe the catalog without Airflow: {{without}}.",
                setting=self.setting,
                without=Hint("catalog_without_airflow", "`catalog:` in iceberg-ops.yaml, or a catalog object"),
            ),
            name=missing_module,
        )
