"""Seeded, deterministic data generators: sparse Boolean functions and seq2seq teachers.

This package imports nothing else of the project: only torch and numpy. Names load on
first use (lazy_loader), so :class:`TaskError` is there without torch.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "boolean": ["AND", "PARITY", "boolean_tasks", "task_of", "BooleanBatch", "bit_probability", "draw_support", "is_ambiguous", "labels",
                "sample_training_set", "sample_training_sets", "test_chunks"],
    "registry": ["BUILT_IN", "ENTRY_POINTS", "BooleanTask", "task_names", "ambiguous_by_enumeration", "plugin_tasks"],
    "errors": ["AmbiguityCheckTooLargeError", "AmbiguousTrainingSetError", "TaskError"],
    "seeding": ["derive_seed", "generator"],
    "seq2seq": ["TEACHERS", "sample_dataset", "teacher_outputs", "teacher_params"],
})
