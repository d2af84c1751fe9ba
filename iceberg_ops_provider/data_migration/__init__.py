"""Copy rows between Iceberg tables exactly once, resumably, streaming, at the machine's speed.

:class:`DataMover` plans a move over a pinned source snapshot and commits it in units, each with the move's
progress, so a killed or retried move neither loses nor repeats a row (``docs/data_mover.md``).
"""

from iceberg_ops_provider.data_migration.audit import AuditCheck, AuditReport
from iceberg_ops_provider.data_migration.mover import DEFAULT_COMMIT_EVERY_BYTES, MODES, DataMover
from iceberg_ops_provider.data_migration.publish import Discarded, Published
from iceberg_ops_provider.data_migration.results import VERIFY_METHODS, MovePlan, MoveResult, MoveUnit, VerifyReport

__all__ = [
    "DEFAULT_COMMIT_EVERY_BYTES",
    "AuditCheck",
    "AuditReport",
    "Discarded",
    "Published",
    "MODES",
    "VERIFY_METHODS",
    "DataMover",
    "MovePlan",
    "MoveResult",
    "MoveUnit",
    "VerifyReport",
]
