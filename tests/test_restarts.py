"""Restarts: one training set from several inits, and the three learners read from their rows."""

from __future__ import annotations

import polars as pl

from attnsweep.orchestrator.spec import trial_id
from attnsweep.stats.critical import critical_sample_sizes
from attnsweep.stats.restarts import learners
from attnsweep.workers import BooleanTrialConfig
from attnsweep.workers.train_boolean import init_seed


def _row(m, seed, restart, acc, loss, status="done"):
    return dict(
        T=8,
        restart=restart,
        m=m,
        seed=seed,
        status=status,
        test_acc=acc,
        train_loss=loss,
        converged=True,
        train_acc=1.0,
    )


def test_any_and_best_of_r_pick_the_rows_the_definitions_name():
    rows = pl.DataFrame(
        [
            # seed 0, m 4: only restart 2 generalises, restart 1 has the lowest training loss.
            _row(4, 0, 0, 0.5, 0.3),
            _row(4, 0, 1, 0.6, 0.1),
            _row(4, 0, 2, 0.99, 0.2),
            # seed 1, m 4: restart 1 generalises and has the lowest loss; restart 2 diverged (nan loss).
            _row(4, 1, 0, 0.5, 0.3),
            _row(4, 1, 1, 0.97, 0.05),
            _row(4, 1, 2, None, float("nan"), "diverged"),
            # seed 0, m 8: every restart generalises; two tie on the lowest loss: the lower restart wins.
            _row(8, 0, 0, 0.96, 0.02),
            _row(8, 0, 1, 0.97, 0.01),
            _row(8, 0, 2, 0.98, 0.01),
            # seed 1, m 8: restart 2 was lost, so the group enters one init only.
            _row(8, 1, 0, 0.99, 0.01),
            _row(8, 1, 1, 0.2, 0.9),
        ]
    )
    out, cell = learners(rows, ["T", "restart"])
    assert cell == ["T", "learner"]
    got = {(r["learner"], r["m"], r["seed"]): r["test_acc"] for r in out.iter_rows(named=True)}
    assert got == {
        ("one init", 4, 0): 0.5,
        ("one init", 4, 1): 0.5,
        ("one init", 8, 0): 0.96,
        ("one init", 8, 1): 0.99,
        ("any of 3", 4, 0): 0.99,
        ("any of 3", 4, 1): 0.97,
        ("any of 3", 8, 0): 0.96,
        ("best of 3 by loss", 4, 0): 0.6,
        ("best of 3 by loss", 4, 1): 0.97,
        ("best of 3 by loss", 8, 0): 0.97,
    }


def _margin_row(m, seed, restart, acc, margin, train_acc=1.0, status="done"):
    return {**_row(m, seed, restart, acc, 0.1, status), "margin_normalised": margin, "train_acc": train_acc}


def test_best_of_r_by_margin_picks_the_fitting_restart_of_largest_normalised_margin():
    rows = pl.DataFrame(
        [
            # seed 0: restart 1 has the largest margin but does not fit; restart 2 fits with the larger margin.
            _margin_row(4, 0, 0, 0.5, 0.05),
            _margin_row(4, 0, 1, 0.6, 0.30, train_acc=0.98),
            _margin_row(4, 0, 2, 0.99, 0.12),
            # seed 1: none fits: the largest margin; a diverged restart (no margin) never wins.
            _margin_row(4, 1, 0, 0.5, -0.2, train_acc=0.9),
            _margin_row(4, 1, 1, 0.7, -0.1, train_acc=0.95),
            _margin_row(4, 1, 2, None, None, train_acc=None, status="diverged"),
            # seed 2: two tie on the largest margin: the lower restart wins.
            _margin_row(4, 2, 0, 0.8, 0.1),
            _margin_row(4, 2, 1, 0.96, 0.2),
            _margin_row(4, 2, 2, 0.97, 0.2),
        ]
    )
    out, _ = learners(rows, ["T", "restart"])
    got = {
        r["seed"]: r["test_acc"] for r in out.filter(pl.col("learner") == "best of 3 by margin").iter_rows(named=True)
    }
    assert got == {0: 0.99, 1: 0.7, 2: 0.96}
    # Rows without margins (trained before margins existed) have no margin learner.
    old, _ = learners(rows.drop("margin_normalised"), ["T", "restart"])
    assert "best of 3 by margin" not in old["learner"].to_list()


def test_rows_without_restarts_keep_the_cells_they_had():
    rows = pl.DataFrame([_row(4, 0, 0, 0.5, 0.3), _row(8, 0, 0, 0.99, 0.1)])
    out, cell = learners(rows, ["T", "restart"])
    assert cell == ["T"] and "restart" not in out.columns and out.height == 2


def test_best_of_r_can_reach_m_star_where_one_init_cannot():
    # 8 training sets at m = 16, 32, 64; restart 0 never generalises; restart 1 always does,
    # with the lower training loss from m = 32 on: best of 2 has m* between 16 and 32, any of 2
    # reaches the rate at the smallest m, one init never does.
    rows = []
    for seed in range(8):
        for m in (16, 32, 64):
            rows.append(_row(m, seed, 0, 0.5, 0.2))
            rows.append(_row(m, seed, 1, 0.99, 0.3 if m == 16 else 0.1))
    out, cell = learners(pl.DataFrame(rows), ["T", "restart"])
    table, _ = critical_sample_sizes(out, cell, n_boot=0)
    by = {r["learner"]: r for r in table.iter_rows(named=True)}
    assert by["one init"]["bound"] == "lower" and by["one init"]["m_star"] == 64
    assert by["any of 2"]["bound"] == "upper" and by["any of 2"]["m_star"] == 16
    assert by["best of 2 by loss"]["bound"] == "exact" and 16 < by["best of 2 by loss"]["m_star"] <= 32
    assert by["best of 2 by loss"]["m_star_grid"] == 32


def _config(**kw):
    return BooleanTrialConfig(task="and", T=16, s=3, m=32, seed=5, d=16, heads=2, max_epochs=20, n_test=200, **kw)


def test_restart_zero_keeps_the_trial_id_and_init_every_earlier_trial_had():
    assert trial_id(_config()) == trial_id(_config(restart=0))
    assert trial_id(_config(restart=1)) != trial_id(_config())
    assert len({init_seed(_config(restart=r)) for r in range(4)}) == 4


def test_a_restart_trains_the_seeds_training_set_from_another_init():
    from attnsweep.workers.train_boolean import train_pack

    alone = train_pack([_config()], device="cpu")[0]
    rows = train_pack([_config(restart=r) for r in range(3)], device="cpu")
    # Restart 0 in a pack of restarts is the trial trained alone, bit for bit.
    assert {k: v for k, v in rows[0].items() if k not in ("wall_s", "pack_size")} == {
        k: v for k, v in alone.items() if k not in ("wall_s", "pack_size")
    }
    # Same support (the data are the seed's), different trained weights (the init is not).
    assert rows[0]["support"] == rows[1]["support"] == rows[2]["support"]
    assert len({(r["train_loss"], r["norm_qk"]) for r in rows}) == 3


def test_restarts_share_a_pack():
    assert _config(restart=0).shape_key() == _config(restart=3).shape_key()


def _series(learner, direction, c, least=10.0, most=20.0):
    return dict(
        cells={"norm_bound": 1.0, "learner": learner},
        verdict="inconclusive",
        numbers=dict(
            direction=direction,
            c=dict(estimate=c, ci_lo=c - 0.1, ci_hi=c + 0.1),
            T=[4, 16, 64],
            log_deficit_aicc=dict(least=least, most=most, variants=8),
        ),
    )


def _cells(ms):
    return pl.DataFrame(dict(T=[4, 16, 64], m_star=ms, bound=["exact"] * 3))


def test_the_reading_follows_the_directions_of_one_init_and_best_of_r_by_margin():
    from attnsweep.presentation.samples_or_optimisation import reading

    cells = {n: _cells([10.0, 20.0, 40.0]) for n in ("one init", "any of 4")}
    cells["best of 4 by margin"] = _cells([5.0, 10.0, 20.0])

    def learners(best: str, oracle: str = "log") -> dict:
        return {
            "one init": _series("one init", "faster than log", 0.5),
            "any of 4": _series("any of 4", oracle, 0.1),
            "best of 4 by margin": _series("best of 4 by margin", best, 0.5 if best != "log" else 0.1),
        }

    both = reading(learners("faster than log"), cells)
    assert "the learner the margin bound speaks of still needs samples that grow faster than log T" in both
    assert "geometric mean of 0.50 over the 3 T" in both and "Even any of 4" not in both
    assert "Even any of 4 (an oracle" in reading(learners("faster than log", "faster than log"), cells)
    fixed = reading(learners("log"), cells)
    assert "optimisation from one initialisation is what makes it grow faster" in fixed
    assert "do not decide" in reading(learners("undecided"), cells)


def test_best_of_r_by_loss_after_a_first_fit_stop_is_read_as_what_it_is():
    from attnsweep.presentation.samples_or_optimisation import reading

    cells = {"one init": _cells([10.0, 20.0, 40.0]), "best of 4 by loss": _cells([5.0, 10.0, 20.0])}
    text = reading(
        {
            "one init": _series("one init", "faster than log", 0.5),
            "best of 4 by loss": _series("best of 4 by loss", "faster than log", 0.5),
        },
        cells,
    )
    assert "these rows do not separate optimisation from samples" in text
    # The old sentence claimed more than a pick among minimisers can show.
    assert "luck" not in text and "not one init's" not in text


def test_a_probe_that_fits_within_the_bound_names_the_cell_optimisation_limited():
    from attnsweep.presentation.samples_or_optimisation import probe_text

    cell = dict(T=4096, norm_bound=2.0, m_min=8192, m_max=8192)
    base = dict(status="done", max_epochs=1500, batch_size=1024, lr=3e-3, test_acc=0.99)
    fits = pl.DataFrame(
        [
            dict(base, train_acc=1.0, norm_qk=2.0, epochs=700),
            dict(base, train_acc=0.9, norm_qk=2.0, epochs=1500),
        ]
    )
    assert "1 of 2 fit their training set with a head within the bound" in probe_text(cell, fits)
    assert "optimisation-limited, not representation-limited" in probe_text(cell, fits)
    # A fit whose head left the bound does not count, and none fitting is named a limit with what was tried.
    none = pl.DataFrame(
        [
            dict(base, train_acc=1.0, norm_qk=2.5, epochs=700),
            dict(base, train_acc=0.9, norm_qk=2.0, epochs=1500),
        ]
    )
    text = probe_text(cell, none)
    assert "none fit within the budget" in text and "1500 epochs of minibatches of 1024, lr 0.003" in text


def test_the_headline_names_the_probe_cells_a_head_within_the_bound_fits():
    from attnsweep.presentation.samples_or_optimisation import probe_headline

    cells = pl.DataFrame(
        [
            dict(run_id="r", model="transformer", T=4096, norm_bound=2.0, m_min=8192, m_max=8192),
            dict(run_id="r", model="transformer", T=512, norm_bound=1.0, m_min=8192, m_max=8192),
            dict(run_id="r", model="transformer", T=64, norm_bound=1.0, m_min=8, m_max=512),
        ]
    )
    base = dict(run_id="r", model="transformer", m=8192, status="done", test_acc=1.0)
    rows = pl.DataFrame(
        [
            dict(base, T=4096, norm_bound=2.0, train_acc=1.0, norm_qk=2.0),  # fits within B = 2
            dict(base, T=512, norm_bound=1.0, train_acc=1.0, norm_qk=1.3),  # fits, outside B = 1
            dict(base, T=512, norm_bound=1.0, train_acc=0.97, norm_qk=1.0),
        ]
    )  # within, no fit
    text = probe_headline(cells, rows)
    assert "heads within the bound fit their training sets at T = 4096 (B = 2)" in text
    assert "no head within the bound fit at T = 512 (B = 1)" in text
    assert "T = 64" not in text  # a searched cell is not a probe
    assert probe_headline(cells.filter(pl.col("T") == 64), rows) == ""


def test_claims_other_than_l1_read_one_init_cells_only():
    # A restart run's any-of-R and best-of-R cells are learners of their own: R (and L2-L4)
    # compare one trained head per training set, as the paper does.
    from attnsweep.stats.boolean_cells import one_init

    m_star = pl.DataFrame(
        {
            "T": [128, 128, 128, 256],
            "learner": ["one init", "any of 4", "best of 4 by loss", None],
            "m_star": [60.0, 40.0, 90.0, 70.0],
        }
    )
    assert one_init(m_star)["m_star"].to_list() == [60.0, 70.0]
    assert one_init(m_star.drop("learner")).height == 4


def test_a_margin_run_is_analysed_with_the_margin_learner_and_each_cells_margins(tmp_path):
    # End to end: the rows the workers write carry margins, and the analysis reads them (a
    # column left out of the analysis' selection once made both silently absent).
    import io

    from rich.console import Console

    import attnsweep

    spec = {
        "name": "margin-restarts",
        "seeds": 3,
        "grid": {"T": [8, 16], "m": [16, 48], "restart": [0, 1]},
        "fixed": {
            "task": "and",
            "s": 2,
            "d": 16,
            "heads": 2,
            "n_test": 200,
            "lr": 0.01,
            "max_epochs": 300,
            "positions": "fixed",
            "norm_bound": 1.0,
            "ln_affine": False,
            "stop": "margin",
            "margin_target": 0.05,
        },
        "analysis": {"n_boot": 50},
    }
    store = tmp_path / "store"
    summary = attnsweep.run(spec, store=store, local=True, console=Console(file=io.StringIO()))
    rows = pl.read_parquet(store / "trials" / "**" / "*.parquet")
    done = rows.filter(pl.col("status") == "done")
    assert done.height and done["margin_normalised"].is_not_null().all()
    stopped = done.filter(pl.col("converged"))
    assert (stopped["margin_normalised"] >= 0.05).all() and (stopped["train_acc"] == 1.0).all()
    table = attnsweep.open_store(store).analyze(summary.run_id).m_star
    assert set(table["learner"]) == {"one init", "any of 2", "best of 2 by loss", "best of 2 by margin"}
    assert table["margin_success"].is_not_null().any()
