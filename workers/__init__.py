"""Models, the pack training loop and the code that runs on Ray workers.

Imports ``tasks`` and knows nothing of sweep specs, the results store or scheduling;
Ray appears only in :mod:`workers.entry`.
"""

from workers.config import BooleanTrialConfig, SymmetryTrialConfig
from workers.experiments import EXPERIMENTS, Experiment
from workers.models import MLP, CLSTransformer, build_model
from workers.norms import matrix_norm
from workers.status import TrialStatus
from workers.train import train_pack

__all__ = [
    "EXPERIMENTS", "MLP", "BooleanTrialConfig", "CLSTransformer", "Experiment", "SymmetryTrialConfig",
    "TrialStatus", "build_model", "matrix_norm", "train_pack",
]
