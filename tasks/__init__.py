"""Seeded, deterministic data generators: sparse Boolean functions and seq2seq teachers.

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
from tasks.seq2seq import TEACHERS, sample_dataset, teacher_outputs, teacher_params

__all__ = [
    "TASKS",
    "TEACHERS",
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
    "sample_dataset",
    "sample_training_set",
    "sample_training_sets",
    "teacher_outputs",
    "teacher_params",
    "test_chunks",
]
