"""The cluster launcher configs pass Ray's own validation (what `ray up` applies before it
talks to any cloud), and the validator does reject a broken one."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", ["cluster.yaml", "deploy/cluster-onprem.yaml"])
def test_cluster_config_passes_rays_validation(path):
    raw = yaml.safe_load((ROOT / path).read_text())
    config = prepare_config(copy.deepcopy(raw))  # fills defaults as `ray up` does
    validate_config(config)
    assert "--dashboard-host=127.0.0.1" in " ".join(config["head_start_ray_commands"])
    if raw["provider"]["type"] != "local":
        workers = [t for name, t in config["available_node_types"].items() if name != config["head_node_type"]]
        assert all(t["min_workers"] == 0 for t in workers) and config["max_workers"] > 0


def test_a_broken_config_is_rejected():
    raw = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    raw["available_node_types"]["gpu_worker"]["min_workers"] = "none"
    with pytest.raises(Exception, match="min_workers"):
        validate_config(prepare_config(raw))
