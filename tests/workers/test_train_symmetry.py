"""Packed training of symmetry trials: equivariance of the students, faults, packing."""

import pytest
import torch

from attnsweep.workers import SymmetryTrialConfig
from attnsweep.workers.train_symmetry import train_symmetry_pack


def cfg(**kw):
    base = dict(teacher="equivariant", n=4, k=2, d=4, m=16, seed=0, n_test=64, max_epochs=60, n_q=4)
    return SymmetryTrialConfig(**{**base, **kw})


def test_inner_product_student_is_equivariant_at_round_off_every_trial():
    rows = train_symmetry_pack([cfg(equivariance="orthogonal", seed=s) for s in range(3)])
    for r in rows:
        assert r["status"] == "done"
        assert r["eq_error_max"] < 1e-10  # float64: round-off only
        assert r["perm_error_max"] < 1e-10
        assert r["eq_error32_max"] < 1e-4  # float32 round-off is about 1e-7
        assert 0 <= r["test_error"] < 1.5


def test_generic_transformer_is_not_equivariant():
    rows = train_symmetry_pack([cfg(seed=s) for s in range(2)])
    assert all(r["eq_error_median"] > 1e-3 for r in rows)


def test_packed_equals_alone():
    configs = [cfg(seed=s) for s in range(3)]
    packed = train_symmetry_pack(configs)
    for c, p in zip(configs, packed, strict=True):
        (alone,) = train_symmetry_pack([c])
        assert alone["epochs"] == p["epochs"]
        assert alone["test_error"] == pytest.approx(p["test_error"], rel=1e-4, abs=1e-7)


def test_faults_stay_in_their_trial():
    rows = train_symmetry_pack([cfg(seed=0), cfg(seed=1, fault="raise"), cfg(seed=2, fault="nan")])
    assert [r["status"] for r in rows] == ["done", "failed", "diverged"]
    assert rows[1]["error_type"] == "TrialFault"
    assert rows[2]["diverged_epoch"] == 0  # its weights turned NaN in the step of epoch 0


def test_mismatched_pack_is_refused():
    with pytest.raises(ValueError, match="shape_key"):
        train_symmetry_pack([cfg(), cfg(m=8)])


def test_rotate_rows_maps_each_row_by_its_samples_rotation_in_float64():
    from attnsweep.workers.equivariance import haar_orthogonal
    from attnsweep.workers.train_symmetry import rotate_rows

    P, m, r, d = 2, 3, 4, 5
    t = torch.randn(P, m, r, d, dtype=torch.float64)
    Q = haar_orthogonal(d, P * m, torch.Generator().manual_seed(0), dtype=torch.float64).view(P, m, d, d)
    expected = torch.stack(
        [torch.stack([torch.stack([Q[a, b] @ t[a, b, i] for i in range(r)]) for b in range(m)]) for a in range(P)]
    )
    torch.testing.assert_close(rotate_rows(t, Q), expected, rtol=1e-13, atol=1e-13)
