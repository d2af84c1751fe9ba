"""Data steps: tracked, resumable, exactly-once changes of a table's rows (delete, update, backfill, rewrite).

A step runs in units of whole data files, each one commit on ``main`` that replaces exactly its files and
records the step's state (docs/data-steps.md). The engine layer of the migration context's data operations.
"""

from iceberg_ops_provider.data_steps.definition import DataStep, Estimate, StepProgress, StepResult
from iceberg_ops_provider.data_steps.runner import estimate_step, run_step
from iceberg_ops_provider.data_steps.state import StepState, step_state
from iceberg_ops_provider.data_steps.validation import validate_step

__all__ = [
    "DataStep",
    "Estimate",
    "StepProgress",
    "StepResult",
    "StepState",
    "estimate_step",
    "run_step",
    "step_state",
    "validate_step",
]
