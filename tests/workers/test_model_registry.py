"""The sparse-Boolean model registry (workers/boolean_models.py, workers/builtin_models.py): the built-in transformer and MLP
go through it with their rows unchanged bit for bit, a package's model (a real distribution's
metadata and module on the import path) is named, sized, trained alone and stacked, and a broken
one fails only its own trials, in-process here and in a real sweep on a local Ray."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnsweep.tasks.errors import TaskError
from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers import boolean_models as registry
from attnsweep.workers import builtin_models as builtins
from attnsweep.workers.stacking import boolean_stacks
from attnsweep.workers.student_registry import without_loading
from attnsweep.workers.train_boolean import train_pack

ROOT = Path(__file__).resolve().parents[2]
BAGPOS = ROOT / "examples" / "attnsweep-bagpos" / "attnsweep_bagpos" / "__init__.py"

# A module whose build gives logits of the wrong shape, one that is no nn.Module, and one
# whose import raises: each an entry point of its own.
BROKEN = """\
import torch
from torch import nn
from attnsweep.workers.boolean_models import BooleanModel

class PerPosition(nn.Module):
    def __init__(self, T):
        super().__init__()
        self.w = nn.Parameter(torch.ones(T))
    def forward(self, x):
        return x * self.w  # (b, T), not (b,)

WIDE = BooleanModel(name="wide", build=lambda cfg: PerPosition(cfg.T))
NOT_A_MODULE = BooleanModel(name="not_a_module", build=lambda cfg: "a string")
"""


def _package(site: Path, module: str, source: str, entry_points: str) -> None:
    """What ``pip install`` leaves for a one-module distribution: the module and its metadata."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture()
def site(tmp_path, monkeypatch) -> Path:
    """An import-path folder holding the example's bagpos model, a broken module and a module
    whose import raises, put first on ``sys.path``; the registry's caches are cleared."""
    site = tmp_path / "site"
    site.mkdir()
    _package(site, "bagpos_pkg", BAGPOS.read_text(), "[attnsweep.models]\nbagpos = bagpos_pkg:BAGPOS\n")
    _package(
        site,
        "broken_pkg",
        BROKEN,
        "[attnsweep.models]\nwide = broken_pkg:WIDE\nnot_a_module = broken_pkg:NOT_A_MODULE\n",
    )
    _package(site, "raises_pkg", "raise ImportError('no such thing')\n", "[attnsweep.models]\nraises = raises_pkg:X\n")
    monkeypatch.syspath_prepend(str(site))
    registry.plugin_model.cache_clear()
    yield site
    registry.plugin_model.cache_clear()


def _config(model: str, seed: int = 0, **kw) -> BooleanTrialConfig:
    base = dict(task="and", T=8, s=2, m=32, seed=seed, model=model, d=8, heads=2, max_epochs=40, n_test=200)
    return BooleanTrialConfig(**{**base, **kw})


def test_the_built_ins_are_registry_entries_and_validation_lists_the_names():
    assert builtins.model_of("transformer") is builtins.TRANSFORMER and builtins.model_of("mlp") is builtins.MLP
    assert registry.model_names()[:2] == ["transformer", "mlp"]
    with pytest.raises(ValueError, match=r"model\n  Value error, must be one of \['transformer', 'mlp'"):
        _config("conv")
    with pytest.raises(TaskError, match=r"model must be one of \['transformer', 'mlp'.*got 'conv'"):
        builtins.model_of("conv")


def test_a_package_model_is_named_validated_and_sized(site):
    names = registry.model_names()  # the built-ins first, then the entry points in the order found
    assert names[:2] == ["transformer", "mlp"] and sorted(names[2:]) == ["bagpos", "not_a_module", "raises", "wide"]
    c = _config("bagpos")  # valid: its name comes from the entry point
    T, d = c.T, c.d
    built = T * d + (d * d + d) + (d + 1)  # codes, hidden layer, readout
    assert builtins.param_count(c) == built  # counted on the meta device
    acts = T + 3 * d  # its own activations
    assert builtins.working_bytes(c) == max(
        4 * (4 * built + c.m * (T + 1) + c.m * acts), 4 * 4 * built + 200 * 4 * acts
    )
    assert boolean_stacks(c) and boolean_stacks(c, "cuda")
    with without_loading():  # validate: no package imported, the estimate errs high
        default = 4 * builtins.param_count(_config("transformer"))
        assert builtins.param_count(c) == default > built
    # A broken package is sized by the err-high default, never an error while packs are sized.
    assert builtins.param_count(_config("raises")) == default


def test_a_package_model_trains_alone_and_stacked(site):
    configs = [_config("bagpos", seed, norm_bound=0.5) for seed in (0, 1)]
    alone, stacked = train_pack(configs, "cpu", stacked=False), train_pack(configs, "cpu", stacked=True)
    for a, b in zip(alone, stacked, strict=True):
        assert a["status"] == b["status"] == "done", (a["error"], b["error"])
        assert a["epochs"] == b["epochs"] and a["train_acc"] == b["train_acc"] and a["test_acc"] == b["test_acc"]
        # The norm it reports is the one it bounds, projected onto the ball of 0.5.
        assert 0 < a["norm_readout"] <= 0.5 * (1 + 1e-6)
        assert a["norm_qk"] is None and a["norm_v"] is None and a["norm_hidden"] is None
        assert a["margin"] is not None and a["margin_normalised"] is None  # no complexity term


def test_a_package_model_gives_a_trial_its_row_whatever_its_pack(site):
    # Stacked (as it says it may be) in packs of 1, 2 and 8, in another slot, beside a copy of
    # itself: the row of seed 3 is the same, bit for bit, as the built-ins' are
    # (tests/workers/test_pack_invariance.py).
    configs = [_config("bagpos", seed, T=16, m=24, lr=1e-2, max_epochs=25) for seed in range(12)]
    alone = train_pack([configs[3]], "cpu")[0]
    assert alone["status"] == "done"
    volatile = ("wall_s", "pack_size", "worker_host")
    for pack, slot in (([configs[3], configs[9]], 0), (configs[4:11] + [configs[3]], 7), ([configs[3]] * 2, 1)):
        row = train_pack(pack, "cpu")[slot]
        assert {k: v for k, v in row.items() if k not in volatile} == {
            k: v for k, v in alone.items() if k not in volatile
        }


def test_a_broken_package_fails_only_its_own_trials(site):
    for model, message in (
        ("wide", "model 'wide': its forward gave (2, 8) torch.float32 for x (2, 8) float32, not (2,) floating logits"),
        ("not_a_module", "model 'not_a_module': its build function gave a str, not a torch.nn.Module"),
        ("raises", "entry point 'raises' (raises_pkg:X) of group 'attnsweep.models' does not load"),
    ):
        for stacked in (False, True):
            rows = train_pack([_config(model, seed) for seed in (0, 1)], "cpu", stacked=stacked)
            assert [r["status"] for r in rows] == ["failed", "failed"]
            assert all(message in r["error"] for r in rows), rows[0]["error"]
    ok = train_pack([_config("transformer")], "cpu")  # the built-in beside them is untouched
    assert ok[0]["status"] == "done"


def test_a_package_model_without_a_projection_refuses_a_norm_bound(site):
    (site / "nobound_pkg.py").write_text(
        BAGPOS.read_text()
        + "\nNOBOUND = BooleanModel(name='nobound', build=lambda cfg: BagOfPositions(cfg.T, cfg.d))\n"
    )
    _package(
        site,
        "nobound_pkg",
        (site / "nobound_pkg.py").read_text(),
        "[attnsweep.models]\nnobound = nobound_pkg:NOBOUND\n",
    )
    rows = train_pack([_config("nobound", norm_bound=1.0), _config("nobound", 1, norm_bound=1.0)], "cpu")
    assert all("model 'nobound' bounds no norm" in r["error"] for r in rows)
    rows = train_pack([_config("nobound")], "cpu")
    assert rows[0]["status"] == "done" and rows[0]["norm_readout"] is None  # no norms given: null


@pytest.mark.slow  # 8 settings x 2 T x 2 m x 2 seeds, alone and stacked: about 2 minutes on 2 cores
def test_built_in_rows_are_those_before_the_registry_bit_for_bit():
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import builtin_grid
    finally:
        sys.path.remove(str(Path(__file__).parent))
    golden = json.loads(builtin_grid.GOLDEN.read_text())
    if golden["environment"] != builtin_grid.environment():
        pytest.skip(f"rows stored on {golden['environment']}, not this machine's {builtin_grid.environment()}")
    got = builtin_grid.rows()
    assert len(got) == len(golden["rows"]) == 128
    for i, (want, row) in enumerate(zip(golden["rows"], got, strict=True)):
        assert row == want, (i, {k: (want[k], row.get(k)) for k in want if want[k] != row.get(k)})


SPEC = """\
name: models
seeds: 2
grid:
  model: [transformer, bagpos, wide, raises]
  m: [8, 32]
fixed: {task: and, T: 8, s: 2, d: 8, heads: 2, lr: 1e-2, max_epochs: 60, n_test: 200}
execution: {pack_size: 2}
analysis: {n_boot: 50}
"""


@pytest.mark.slow  # a sweep on a local Ray, in a subprocess of the CLI
def test_a_sweep_beside_broken_models_records_their_failures_and_analyses_the_rest(site, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    env = {**os.environ, "PYTHONPATH": str(site), "RAY_USAGE_STATS_ENABLED": "0", "COLUMNS": "200"}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "attnsweep.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    shown = cli("validate", str(spec), "--show")
    assert shown.returncode == 0, shown.stderr
    assert "wide" in shown.stdout and "raises" in shown.stdout  # named from the entry points, not imported
    run = cli("run", str(spec), "--store", "store", "--no-analyze")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "done 8, failed 8" in run.stderr, run.stderr[-2000:]
    rows = cli(
        "query", "SELECT model, status, error FROM trials ORDER BY model", "--store", "store", "--format", "json"
    )
    assert rows.returncode == 0, rows.stderr
    got = json.loads(rows.stdout)
    by: dict[str, set] = {}
    for r in got:
        by.setdefault(r["model"], set()).add((r["status"], r["error"] and r["error"].split(": ", 1)[0]))
    assert by["transformer"] == {("done", None)} and by["bagpos"] == {("done", None)}
    assert {s for s, _ in by["wide"]} == {"failed"} and {s for s, _ in by["raises"]} == {"failed"}
    assert all("model 'wide'" in r["error"] for r in got if r["model"] == "wide")
    assert all("entry point 'raises'" in r["error"] for r in got if r["model"] == "raises")
    analysed = cli("analyze", "--store", "store", "--format", "json")
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    cells = json.loads(analysed.stdout)
    models = {c["model"] for c in cells}
    assert {"transformer", "bagpos"} <= models, models
    assert all(c["m_star"] is None or math.isfinite(c["m_star"]) or c["m_star"] > 0 for c in cells)


def test_the_built_ins_declare_their_labels_and_roles_in_the_paper(site, monkeypatch):
    for module in ("bagpos_pkg", "raises_pkg"):  # imported by earlier tests
        monkeypatch.delitem(sys.modules, module, raising=False)
    assert (builtins.TRANSFORMER.label, builtins.TRANSFORMER.paper_role) == ("transformer", "attention")
    assert (builtins.MLP.label, builtins.MLP.paper_role) == ("MLP", "baseline")
    assert builtins.paper_model("attention") == "transformer" and builtins.paper_model("baseline") == "mlp"
    with pytest.raises(ValueError, match=r"paper role must be one of \['attention', 'baseline'\], got 'conv'"):
        builtins.paper_model("conv")
    assert builtins.model_label("transformer") == "transformer" and builtins.model_label("mlp") == "MLP"
    # A package's model: its name, its package not imported for it (one whose import raises too).
    assert builtins.model_label("bagpos") == "bagpos" and builtins.model_label("raises") == "raises"
    assert not {"bagpos_pkg", "raises_pkg"} & set(sys.modules)
    plain = registry.BooleanModel("conv", lambda c: None)
    assert plain.label is None and plain.paper_role is None  # a package need not give them


def test_the_paper_claims_models_are_the_registries_built_ins_with_those_roles():
    # stats names the models the paper's claims are about (it reads no registry): they must be
    # the built-ins the registries give those roles.
    from attnsweep.stats.boolean_cells import ATTENTION, BASELINE
    from attnsweep.stats.symmetry import GENERIC, GENERIC_MLP
    from attnsweep.workers.builtin_models import BUILT_IN_MODELS, paper_model
    from attnsweep.workers.builtin_students import MLP, TRANSFORMER

    assert (paper_model("attention"), paper_model("baseline")) == (ATTENTION, BASELINE)
    assert {m.paper_role for m in BUILT_IN_MODELS.values()} == {"attention", "baseline"}
    assert (TRANSFORMER.name, MLP.name) == (GENERIC, GENERIC_MLP)
