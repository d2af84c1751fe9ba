"""Copy rows between Iceberg tables exactly once, resumably, streaming, at the machine's speed.

:class:`DataMover` plans a move over a pinned source snapshot, copies it in units that each commit
their rows and the move's progress atomically (so a killed or retried move neither loses nor
repeats a row, and many workers can run units of one move at once), reconciles columns by name,
and verifies the result three ways (``count``, ``checksum``, ``sample``).
"""

from iceberg_ops_provider.data_migration.mover import DEFAULT_COMMIT_EVERY_BYTES, MODES, DataMover
from iceberg_ops_provider.data_migration.results import VERIFY_METHODS, MovePlan, MoveResult, MoveUnit, VerifyReport

__all__ = [
    "DEFAULT_COMMIT_EVERY_BYTES",
    "MODES",
    "VERIFY_METHODS",
    "DataMover",
    "MovePlan",
    "MoveResult",
    "MoveUnit",
    "VerifyReport",
]
