"""Models, the pack training loop and the code that runs on Ray workers.

Imports ``tasks`` and knows nothing of sweep specs, the results store or scheduling;
Ray appears only in :mod:`workers.entry`.
"""

from workers.config import BooleanTrialConfig, SymmetryTrialConfig
from workers.experiments import EXPERIMENTS, Experiment
from workers.equivariance import haar_orthogonal, orthogonal_equivariance_error, permutation_equivariance_error
from workers.models import MLP, CLSTransformer, build_model
from workers.students import InnerProductStudent, SeqMLP, SeqTransformer, build_student
from workers.norms import matrix_norm
from workers.status import TrialStatus
from workers.train import train_pack

__all__ = [
    "EXPERIMENTS", "MLP", "BooleanTrialConfig", "CLSTransformer", "Experiment", "SymmetryTrialConfig",
    "InnerProductStudent", "SeqMLP", "SeqTransformer", "TrialStatus", "build_model", "build_student",
    "haar_orthogonal", "matrix_norm", "orthogonal_equivariance_error", "permutation_equivariance_error", "train_pack",
]
