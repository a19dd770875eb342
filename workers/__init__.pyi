"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .boolean_models import BooleanModel as BooleanModel
from .boolean_models import model_names as model_names
from .builtin_models import build_model as build_model
from .builtin_models import model_of as model_of
from .builtin_students import build_student as build_student
from .builtin_students import student_of as student_of
from .config import BooleanTrialConfig as BooleanTrialConfig
from .config import SymmetryTrialConfig as SymmetryTrialConfig
from .equivariance import haar_orthogonal as haar_orthogonal
from .equivariance import orthogonal_equivariance_error as orthogonal_equivariance_error
from .equivariance import permutation_equivariance_error as permutation_equivariance_error
from .experiments import EXPERIMENTS as EXPERIMENTS
from .experiments import Experiment as Experiment
from .models import MLP as MLP
from .models import CLSTransformer as CLSTransformer
from .norms import matrix_norm as matrix_norm
from .status import TrialStatus as TrialStatus
from .student_registry import Student as Student
from .student_registry import student_names as student_names
from .students import InnerProductStudent as InnerProductStudent
from .students import SeqMLP as SeqMLP
from .students import SeqTransformer as SeqTransformer
from .students import check_student as check_student
from .train_boolean import train_pack as train_pack
from .trial_config import TrialConfig as TrialConfig
