"""The stacked MLP's forward (workers/stacked_mlp.py): scored without a graph in runs of samples,
it gives the one-run forward's logits bit for bit."""

from __future__ import annotations

import pytest
import torch
from torch.func import stack_module_state

from attnsweep.workers.models import MLP
from attnsweep.workers.stacked_mlp import hidden_layers, mlp_logits


@pytest.fixture(autouse=True)
def _one_thread():
    """One intra-op thread, as a stacked pack trains (workers/stacked.py, ``reproducible``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _stack(T: int, width: int, layers: int, slots: int, seed: int) -> dict[str, torch.Tensor]:
    """Stacked float32 parameters of ``slots`` MLPs, moved off their initial values."""
    torch.manual_seed(seed)
    models = [MLP(T, width, layers) for _ in range(slots)]
    params, _ = stack_module_state(models)
    return {k: (v.detach() + 0.3 * torch.randn_like(v)).contiguous() for k, v in params.items()}


def _data(slots: int, m: int, T: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (slots, m, T), generator=g).float(), torch.randint(0, 2, (slots, m), generator=g).float()


@pytest.mark.parametrize(
    "T, n, width",
    [(8, 2000, 256), (16, 2000, 256), (64, 300, 256), (256, 129, 256), (32, 191, 256), (16, 128, 256), (16, 127, 256)]
    + [(16, 2000, 50), (24, 1500, 100), (16, 700, 32)],
)
def test_scoring_in_runs_of_samples_gives_the_forwards_logits_bit_for_bit(T, n, width):
    params = _stack(T, width, 1, 32, seed=T)
    x, _ = _data(32, n, T, seed=n)
    whole = mlp_logits(params, x)  # grad enabled: one run
    with torch.no_grad():
        assert torch.equal(mlp_logits(params, x), whole)


def test_hidden_layers():
    assert hidden_layers(_stack(4, 8, 3, 16, seed=0)) == 3
