"""Models, the pack training loop and the code that runs on Ray workers.

Imports ``tasks`` and knows nothing of sweep specs, the results store or scheduling;
Ray appears only in :mod:`workers.entry`. Names load on first use (lazy_loader): trial
configs, experiments and memory estimates need no torch; models and training do.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "config": ["BooleanTrialConfig", "SymmetryTrialConfig"],
    "experiments": ["EXPERIMENTS", "Experiment"],
    "equivariance": ["haar_orthogonal", "orthogonal_equivariance_error", "permutation_equivariance_error"],
    "models": ["MLP", "CLSTransformer", "build_model"],
    "students": ["InnerProductStudent", "SeqMLP", "SeqTransformer", "build_student"],
    "norms": ["matrix_norm"],
    "status": ["TrialStatus"],
    "train": ["train_pack"],
})
