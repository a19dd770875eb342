"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .boolean import AND as AND
from .boolean import PARITY as PARITY
from .boolean import BooleanBatch as BooleanBatch
from .boolean import bit_probability as bit_probability
from .boolean import boolean_tasks as boolean_tasks
from .boolean import draw_support as draw_support
from .boolean import is_ambiguous as is_ambiguous
from .boolean import labels as labels
from .boolean import sample_training_set as sample_training_set
from .boolean import sample_training_sets as sample_training_sets
from .boolean import task_of as task_of
from .boolean import test_chunks as test_chunks
from .errors import AmbiguityCheckTooLargeError as AmbiguityCheckTooLargeError
from .errors import AmbiguousTrainingSetError as AmbiguousTrainingSetError
from .errors import TaskError as TaskError
from .registry import BUILT_IN as BUILT_IN
from .registry import ENTRY_POINTS as ENTRY_POINTS
from .registry import BooleanTask as BooleanTask
from .registry import ambiguous_by_enumeration as ambiguous_by_enumeration
from .registry import plugin_tasks as plugin_tasks
from .registry import task_names as task_names
from .seeding import derive_seed as derive_seed
from .seeding import generator as generator
from .seq2seq import TEACHERS as TEACHERS
from .seq2seq import sample_dataset as sample_dataset
from .seq2seq import teacher_of as teacher_of
from .seq2seq import teacher_outputs as teacher_outputs
from .seq2seq import teacher_params as teacher_params
from .teachers import Teacher as Teacher
from .teachers import teacher_names as teacher_names
from .teachers import teacher_symmetries as teacher_symmetries
