"""The public names of the package, for type checkers and IDEs; lazy_loader reads the same
list at run time (``lazy.attach_stub`` in __init__.py), so there is one list."""

from .config import BooleanTrialConfig as BooleanTrialConfig, SymmetryTrialConfig as SymmetryTrialConfig
from .experiments import EXPERIMENTS as EXPERIMENTS, Experiment as Experiment
from .equivariance import haar_orthogonal as haar_orthogonal, orthogonal_equivariance_error as orthogonal_equivariance_error, permutation_equivariance_error as permutation_equivariance_error
from .models import MLP as MLP, CLSTransformer as CLSTransformer, build_model as build_model
from .students import InnerProductStudent as InnerProductStudent, SeqMLP as SeqMLP, SeqTransformer as SeqTransformer, build_student as build_student
from .norms import matrix_norm as matrix_norm
from .status import TrialStatus as TrialStatus
from .train import train_pack as train_pack
