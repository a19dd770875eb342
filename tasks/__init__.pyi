"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .boolean import AND as AND, PARITY as PARITY, boolean_tasks as boolean_tasks, task_of as task_of, BooleanBatch as BooleanBatch, bit_probability as bit_probability, draw_support as draw_support, is_ambiguous as is_ambiguous, labels as labels, sample_training_set as sample_training_set, sample_training_sets as sample_training_sets, test_chunks as test_chunks
from .registry import BUILT_IN as BUILT_IN, ENTRY_POINTS as ENTRY_POINTS, BooleanTask as BooleanTask, task_names as task_names, ambiguous_by_enumeration as ambiguous_by_enumeration, plugin_tasks as plugin_tasks
from .errors import AmbiguityCheckTooLargeError as AmbiguityCheckTooLargeError, AmbiguousTrainingSetError as AmbiguousTrainingSetError, TaskError as TaskError
from .seeding import derive_seed as derive_seed, generator as generator
from .seq2seq import TEACHERS as TEACHERS, sample_dataset as sample_dataset, teacher_outputs as teacher_outputs, teacher_params as teacher_params
