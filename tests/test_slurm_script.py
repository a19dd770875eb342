"""deploy/slurm-sweep.sbatch as written, on this machine: no SLURM here, so `scontrol` and `srun`
are stand-ins (the allocation's two node names; srun runs its command here), and the script's
own commands run for real: a head by `attnsweep head start`, a Ray worker node joining it with
every port left to the system, a sweep over both, and both stopped when the script ends.
What SLURM itself does (placing the steps on other nodes, its signals, its cgroups) is not
shown by this test; docs/slurm.md says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_local_head import _kill_all, _scan

from attnsweep.results import ResultsStore

pytestmark = [
    pytest.mark.slow,  # a head, a worker node and a sweep: about a minute
    pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc (Linux)"),
]

REPO = Path(__file__).resolve().parents[1]
SPEC = (
    "name: slurmsweep\nseeds: 2\ngrid: {T: [8], m: [16, 32]}\n"
    "fixed: {task: and, s: 1, d: 8, heads: 2, n_test: 100, max_epochs: 20}\n"
    "execution: {pack_size: 1}\nresources: {num_workers: 2}\n"
)
SRUN = """#!/usr/bin/env bash
# srun's options dropped (-w NODE takes two words), its command run here
while [[ $# -gt 0 && $1 == -* ]]; do
  if [[ $1 == -w ]]; then shift 2; else shift; fi
done
exec "$@"
"""
SCONTROL = '#!/usr/bin/env bash\n[[ "$*" == "show hostnames nodeA,nodeB" ]] && printf "nodeA\\nnodeB\\n"\n'


def test_the_sbatch_script_runs_a_sweep_over_a_head_and_a_worker_node_then_stops_both(tmp_path):
    root = Path(tempfile.mkdtemp(prefix="ahs", dir="/tmp"))  # short: Ray's sockets live under it
    job = f"t{os.getpid()}"
    head_dir, worker_dir = root / f"ray-{job}", root / f"ray-{job}-1"
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    (tmp_path / "spec.yaml").write_text(SPEC)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SLURM"))}
    env.update(
        PATH=f"{shims}{os.pathsep}{env['PATH']}",
        VENV=str(Path(sys.executable).parent.parent),
        SPEC=str(tmp_path / "spec.yaml"),
        STORE=str(tmp_path / "store"),
        RAY_DIR_ROOT=str(root),
        SLURM_JOB_ID=job,
        SLURM_JOB_NODELIST="nodeA,nodeB",
        SLURMD_NODENAME="nodeA",
        SLURM_CPUS_PER_TASK="1",
        COLUMNS="200",
    )
    try:
        done = subprocess.run(
            ["bash", str(REPO / "deploy" / "slurm-sweep.sbatch")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rows = ResultsStore(tmp_path / "store").scan_trials().collect()
        assert rows.height == 4 and set(rows["status"]) == {"done"}
        # Trials ran on the worker node too: its Ray logged a pack worker of its own.
        logs = list(worker_dir.glob("session_*/logs/worker-*.out"))
        assert any("PackWorker" in log.read_text(errors="replace") for log in logs), logs
        assert f"stopped Ray in {head_dir}: " in done.stdout
        # Nothing of either node is left once the script has ended.
        assert _scan(head_dir) == {} and _scan(worker_dir) == {}
    finally:
        _kill_all([*_scan(head_dir), *_scan(worker_dir)])
        shutil.rmtree(root, ignore_errors=True)
