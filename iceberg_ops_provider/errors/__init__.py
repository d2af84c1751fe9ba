"""The one exception hierarchy of iceberg-ops.

Every error the package raises on purpose derives from :class:`IcebergOpsError`, so callers can
catch everything iceberg-ops reports with one ``except`` clause. Where Python has a natural
built-in category (a bad value, a missing package, a bad type) the class derives from that
built-in as well, so ``except ValueError`` keeps working for code that expects it.

Every message says what was wrong and what to do about it. Where the "what to do" names an argument
of the call (``mode='incremental'``) or a step whose wording depends on the front, the message is a
:class:`~iceberg_ops_provider.messages.Message` whose facts each front words in its own language
(``str(error)`` is the Python wording).

The classes live in :mod:`.base` (the root, configuration, catalogs, types, schemas, models),
:mod:`.migrations` and :mod:`.operations` (maintenance, the data mover, Polaris); import them from here.
"""

from __future__ import annotations

from iceberg_ops_provider.errors.base import (
    CatalogAuthError,
    CatalogConfigError,
    CatalogNotFoundError,
    CatalogUnavailableError,
    ForbiddenPromotionError,
    IcebergOpsError,
    MissingAirflowError,
    MissingExtraError,
    ModelError,
    ProjectConfigError,
    ScaffoldingError,
    SchemaContractError,
    SchemaEvolutionError,
    SnapshotNotFoundError,
    TypeParseError,
    UnknownCatalogKindError,
    UnsupportedTypeError,
    UpsertError,
)
from iceberg_ops_provider.errors.migrations import (
    ConcurrentMigrationError,
    DryRunLimit,
    IntentRecordError,
    InvalidOperationError,
    IrreversibleMigrationError,
    MigrationDiscoveryError,
    MigrationError,
    MigrationFailedError,
    MigrationIntegrityError,
    MigrationNotRecordedError,
    MigrationTargetError,
    PartialMigrationError,
)
from iceberg_ops_provider.errors.operations import (
    ConfirmationRequiredError,
    DataMoveError,
    FileListingError,
    InvalidMoveError,
    MaintenanceConflictError,
    MaintenanceError,
    MoveConflictError,
    MoveStateError,
    PolarisAuthError,
    PolarisConflictError,
    PolarisError,
    PolarisForbiddenError,
    PolarisNotFoundError,
    PolarisRequestError,
    PolarisServerError,
    PolicyContentError,
    ReconciliationError,
    UnsafeLocationError,
    UnsupportedDeleteFilesError,
    VerificationFailedError,
)

__all__ = [
    "CatalogConfigError",
    "CatalogUnavailableError",
    "ConcurrentMigrationError",
    "ForbiddenPromotionError",
    "IcebergOpsError",
    "DryRunLimit",
    "IntentRecordError",
    "InvalidOperationError",
    "IrreversibleMigrationError",
    "ModelError",
    "ProjectConfigError",
    "ScaffoldingError",
    "MigrationDiscoveryError",
    "MigrationError",
    "MigrationFailedError",
    "MigrationIntegrityError",
    "MigrationNotRecordedError",
    "MigrationTargetError",
    "PartialMigrationError",
    "MissingExtraError",
    "SchemaContractError",
    "SchemaEvolutionError",
    "SnapshotNotFoundError",
    "TypeParseError",
    "UnknownCatalogKindError",
    "UnsupportedTypeError",
    "UpsertError",
    "CatalogAuthError",
    "CatalogNotFoundError",
    "MissingAirflowError",
    "ConfirmationRequiredError",
    "MaintenanceError",
    "UnsafeLocationError",
    "FileListingError",
    "UnsupportedDeleteFilesError",
    "MaintenanceConflictError",
    "DataMoveError",
    "InvalidMoveError",
    "ReconciliationError",
    "MoveStateError",
    "MoveConflictError",
    "VerificationFailedError",
    "PolarisError",
    "PolarisAuthError",
    "PolarisForbiddenError",
    "PolarisNotFoundError",
    "PolarisConflictError",
    "PolarisRequestError",
    "PolarisServerError",
    "PolicyContentError",
]

# Tracebacks, reprs and pickles name each class where users import it from, as before the split.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
