"""Seeded, deterministic data generators for attnsweep's task families.

This package imports nothing else of the project: only torch and numpy.
"""

from tasks.boolean import (
    TASKS,
    BooleanBatch,
    bit_probability,
    draw_support,
    is_ambiguous,
    labels,
    sample_training_set,
    sample_training_sets,
    test_chunks,
)
from tasks.errors import AmbiguityCheckTooLargeError, AmbiguousTrainingSetError, TaskError
from tasks.seeding import derive_seed, generator

__all__ = [
    "TASKS",
    "AmbiguityCheckTooLargeError",
    "AmbiguousTrainingSetError",
    "BooleanBatch",
    "TaskError",
    "bit_probability",
    "derive_seed",
    "draw_support",
    "generator",
    "is_ambiguous",
    "labels",
    "sample_training_set",
    "sample_training_sets",
    "test_chunks",
]
