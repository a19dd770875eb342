"""Models, the pack training loop and the code that runs on Ray workers.

Imports ``tasks`` and knows nothing of sweep specs, the results store or scheduling;
Ray appears only in :mod:`workers.entry`.
"""

from workers.config import BooleanTrialConfig
from workers.models import MLP, CLSTransformer, build_model
from workers.norms import matrix_norm
from workers.status import TrialStatus
from workers.train import train_pack

__all__ = [
    "MLP", "BooleanTrialConfig", "CLSTransformer", "TrialStatus", "build_model", "matrix_norm", "train_pack",
]
