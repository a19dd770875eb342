"""workers/adamw.py against torch.optim.AdamW, and a worker's first pack without torch's compiler."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from attnsweep.workers.adamw import AdamW


def _params(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    # A matrix, a transposed (non-contiguous) view's copy, a stacked slot axis and a scalar.
    shapes = [(5, 7), (7, 5), (3, 4, 6), ()]
    return [torch.randn(s, generator=g).requires_grad_() for s in shapes]


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_every_step_matches_torch_adamw_fused_bit_for_bit(weight_decay):
    ours, theirs = _params(0), _params(0)
    opt = AdamW(ours, lr=3e-3, weight_decay=weight_decay)
    ref = torch.optim.AdamW(theirs, lr=3e-3, weight_decay=weight_decay, fused=True)
    g = torch.Generator().manual_seed(1)
    for step in range(25):
        grads = [torch.randn(p.shape, generator=g) * (10.0 ** (step % 3 - 1)) for p in ours]
        opt.zero_grad()
        ref.zero_grad(set_to_none=True)
        for p, q, gr in zip(ours, theirs, grads, strict=True):
            p.grad, q.grad = gr.clone(), gr.clone()
        if step == 7:  # a parameter without a gradient is left alone, its state too
            ours[3].grad = theirs[3].grad = None
        opt.step()
        ref.step()
        for p, q in zip(ours, theirs, strict=True):
            assert torch.equal(p, q), step
    for p, q in zip(ours, theirs, strict=True):
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(opt.state[p][name], ref.state[q][name]), name
    assert float(opt.state[ours[0]]["step"]) == 25.0 and float(opt.state[ours[3]]["step"]) == 24.0


@pytest.mark.slow
def test_a_workers_first_pack_does_not_import_torchs_compiler():
    code = (
        "import sys\n"
        "from attnsweep.workers import BooleanTrialConfig, SymmetryTrialConfig, train_pack\n"
        "from attnsweep.workers.train_symmetry import train_symmetry_pack\n"
        "c = [BooleanTrialConfig(task='parity', T=8, s=2, m=16, seed=i, max_epochs=3, n_test=100) for i in range(2)]\n"
        "train_pack(c, 'cpu'); train_pack(c, 'cpu', stacked=False)\n"
        "s = [SymmetryTrialConfig(teacher='equivariant', n=3, k=2, d=4, m=8, seed=i, max_epochs=3, n_test=16,\n"
        "     n_q=2, model='transformer', equivariance='none') for i in range(2)]\n"
        "train_symmetry_pack(s, 'cpu', stacked=True); train_symmetry_pack(s, 'cpu', stacked=False)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stderr[-2000:]
