"""Workers warm before the first pack arrives, while the driver plans; the driver stays light.

A sweep through ``attnsweep.run`` on a real embedded Ray, in a fresh process whose executor
and store are watched: the actors are asked for before the driver loads its own modules or
sets up the store; each actor has loaded torch and every experiment's training code before
its first pack; and the driver process never imports torch.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts a local Ray

_SCRIPT = r"""
import io, json, sys
from rich.console import Console
import attnsweep
from attnsweep.orchestrator import executors
from attnsweep.results import ResultsStore
from attnsweep.workers.entry import TRAINING_MODULES

events, out = [], {}
start, check, submit = executors.RayExecutor._start_actors, ResultsStore.check_writable, executors.RayExecutor.submit

def spy_start(self):
    start(self)
    events.append("actors requested")
    out["driver loaded then"] = "attnsweep.orchestrator.driver" in sys.modules

def spy_check(self, *args, **kwargs):
    events.append("store set up")
    return check(self, *args, **kwargs)

def loaded(worker):  # runs in an actor, queued behind its constructor
    return worker.packs, [m for m in TRAINING_MODULES if m in sys.modules]

def spy_submit(self, pack, isolated=False):
    if "first pack" not in events:
        import ray
        out["actors"] = ray.get([a.__ray_call__.remote(loaded) for a in self._actors])
        events.append("first pack")
    return submit(self, pack, isolated)

executors.RayExecutor._start_actors = spy_start
ResultsStore.check_writable = spy_check
executors.RayExecutor.submit = spy_submit
spec = dict(name="warm", seeds=4, grid=dict(T=[8], m=[16, 32]),
            fixed=dict(task="and", s=2, d=8, heads=2, max_epochs=5, n_test=100),
            resources=dict(num_workers=2))
summary = attnsweep.run(spec, sys.argv[1], console=Console(file=io.StringIO()))
out.update(events=events, done=summary.counts["done"], torch="torch" in sys.modules, modules=list(TRAINING_MODULES))
print("@@" + json.dumps(out))
"""


def test_workers_warm_while_the_driver_plans_and_the_driver_never_imports_torch(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "store")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("@@")[-1])
    assert out["done"] == 8
    assert out["events"] == ["actors requested", "store set up", "first pack"]
    assert out["driver loaded then"] is False  # the driver's modules load while the workers start
    assert len(out["actors"]) == 2
    for packs, loaded in out["actors"]:
        assert packs == 0 and loaded == out["modules"]  # warm before its first pack
    assert out["torch"] is False
