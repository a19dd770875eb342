"""Every experiment's trial config has what the TrialConfig protocol promises (workers/trial_config.py):
the orchestrator reads m, seed and max_epochs of any trial and dumps it for its id and row."""

from __future__ import annotations

from attnsweep.orchestrator.spec import trial_id
from attnsweep.workers import EXPERIMENTS


def test_every_experiments_config_has_the_protocols_fields():
    for name, experiment in EXPERIMENTS.items():
        fields = experiment.config.model_fields
        assert {"m", "seed", "max_epochs"} <= set(fields), name
        config = experiment.config(**experiment.example)
        assert (config.m, config.seed) == (experiment.example["m"], experiment.example["seed"])
        assert config.model_dump(mode="json")["seed"] == experiment.example["seed"]
        assert len(trial_id(config)) == 16
