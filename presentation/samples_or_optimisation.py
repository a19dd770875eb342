"""Why the bounded class's m* grows faster than log T: samples, optimisation or representation.

Two kinds of rows ask it (docs/claims.md, section 1a):

* restarts (stats/restarts.py): one training set trained from R inits and read as three or
  four learners, *one init*, *any of R*, *best of R by loss* and, where the rows carry margins,
  *best of R by margin*, each an L1 series of its own. Where training stops at the first fit,
  every restart that fits is already an empirical-risk minimiser and the loss picks among them
  by a number the theorem does not use: such rows cannot separate optimisation from samples.
  Trained past the fit to a normalised margin (stop rule ``margin``), best of R by margin is the
  learner the margin bound speaks of: if it grows like log T where one init grows faster, one
  init's optimisation is what makes m* grow; if it grows faster too, so does the bound's learner;
* representability probes: a cell tried at one large m only, with a long budget. A head within
  the bound that fits its training set there shows the class represents the target at that T
  (the cell is optimisation-limited, not representation-limited); none fitting after the budget
  is a representability limit as far as that budget and optimiser can tell.

Markdown lines for findings.md (presentation/findings_boolean.py ``render``).
"""

from __future__ import annotations

import math

import polars as pl

from attnsweep.presentation.markdown import md_text
from attnsweep.presentation.series import l1_series, series_cells, series_kind
from attnsweep.stats.boolean_cells import ATTENTION, m_star_ratio
from attnsweep.stats.critical import format_m_star
from attnsweep.stats.norm_use import TOLERANCE
from attnsweep.stats.restarts import BY_MARGIN, LEARNER, ONE_INIT

FIT = 1.0
"""Training accuracy that counts as fitting the training set (every sample right)."""


def restart_groups(claims: list[dict]) -> list[tuple[dict, dict[str, dict]]]:
    """The L1 series of restart runs, grouped by the settings they share: ``(shared, {learner:
    series})`` per group, in the order L1 lists them."""
    _, series = l1_series(claims)
    groups: dict[tuple, tuple[dict, dict[str, dict]]] = {}
    for s in series:
        learner = s["cells"].get(LEARNER)
        if learner is None:
            continue
        shared = {k: v for k, v in s["cells"].items() if k != LEARNER}
        groups.setdefault(tuple(sorted(shared.items(), key=lambda kv: kv[0])), (shared, {}))[1][learner] = s
    return list(groups.values())


def restart_lines(claims: list[dict], union: pl.DataFrame, ci: float = 0.95) -> list[str]:
    """Per restart group: m* per T for each learner, each learner's growth against T, and the
    answer to "samples or optimisation" as strongly as those numbers allow. [] without restarts."""
    groups = restart_groups(claims)
    if not groups or LEARNER not in union.columns:
        return []
    lines = [
        "### Samples or optimisation: restarts",
        "",
        "Each training set trained from R initialisations (the `restart` setting: the data are the seed's, "
        "only the init differs) and read as learners over the same rows: *one init* (restart 0), "
        "*any of R* (some restart generalises: an oracle that sees the test set), *best of R by loss* (the "
        "restart with the lowest final training loss) and, where the rows carry margins, *best of R by margin* "
        "(the restart that fits with the largest normalised margin: the learner the margin bound speaks of). "
        "Where training stopped at the first fit, every restart that fits is already a minimiser of training "
        "error, and the loss picks among them by a number the theorem does not use; docs/claims.md, section 1a.",
        "",
    ]
    for shared, by in groups:
        names = sorted(by, key=_learner_order)
        kind = series_kind(union, {**shared, LEARNER: names[0]})
        label = kind["label"].split(" (")[0]
        cells = {n: series_cells(union, {**shared, LEARNER: n}).sort("T") for n in names}
        ts = sorted({int(t) for part in cells.values() for t in part["T"].to_list()})
        lines += [
            f"**{md_text(label)}**" + (f" ({md_text(_others(shared))})" if _others(shared) else ""),
            "",
            "| T | " + " | ".join(f"m* {md_text(n)}" for n in names) + " |",
            "|---:|" + "---:|" * len(names),
        ]
        for t in ts:
            row = [str(t)]
            for n in names:
                hit = cells[n].filter(pl.col("T") == t)
                row.append(format_m_star(hit["m_star"][0], hit["bound"][0]) if hit.height else "-")
            lines.append("| " + " | ".join(row) + " |")
        lines += ["", *[f"- {md_text(_growth_text(n, by[n]))}" for n in names]]
        lines += ["", md_text(reading(by, cells, ci)), ""]
    return lines


def reading(by: dict[str, dict], cells: dict[str, pl.DataFrame], ci: float = 0.95) -> str:
    """The answer of one restart group, made from its numbers: how the best-of-R learner grows
    against one init (best of R by margin where the rows carry margins, else by loss, with what
    that design cannot tell), and how much the best restart saves in samples (the geometric mean
    of m*(best) / m*(one init) over the T where both are values,
    :func:`stats.boolean_cells.m_star_ratio`)."""
    one = by.get(ONE_INIT)
    best_name = _best(by)
    if one is None or best_name is None:
        return "The restarts lack one init or best of R here: no reading."
    best = by[best_name]
    d_one = one["numbers"].get("direction", "undecided")
    d_best = best["numbers"].get("direction", "undecided")
    c_one, c_best = one["numbers"].get("c") or {}, best["numbers"].get("c") or {}
    ratio = m_star_ratio(cells[best_name], cells[ONE_INIT], ci)
    q = ratio["geomean"]
    saved = ""
    if ratio["n_T"]:
        # An upper end at infinity: some resample drew a cell whose best of R lies beyond the grid.
        hi = "no upper limit" if q.get("ci_hi") is not None and math.isinf(q["ci_hi"]) else f"{q.get('ci_hi') or 0:.2f}"
        interval = "" if q.get("ci_lo") is None or math.isnan(q["ci_lo"]) else f", {ci:.0%} CI {q['ci_lo']:.2f} .. {hi}"
        saved = (
            f" m*({best_name}) / m*(one init) has a geometric mean of {q['estimate']:.2f} over the {ratio['n_T']} "
            f"T where both are values{interval}."
        )
    exps = f"(c = {_c(c_best)} for {best_name}, {_c(c_one)} for one init)"
    if not best_name.endswith(BY_MARGIN):
        stops = set(cells[best_name]["stop"].drop_nulls().to_list()) if "stop" in cells[best_name].columns else set()
        why = (
            "Training stopped at the first fit, so every restart that fits is already a minimiser of training error and "
            "the lowest loss picks among them by a number the theorem does not use: these rows do not separate "
            "optimisation from samples."
            if stops <= {"fit"}
            else "These rows carry no normalised margin, so the learner the margin bound speaks of is not read here."
        )
        return f"{best_name.capitalize()} {_said(d_best)} {exps}. {why}" + saved
    oracle = next((n for n in by if n.startswith("any of")), None)
    d_any = by[oracle]["numbers"].get("direction", "undecided") if oracle else None
    if d_best == "log" and d_one == "faster than log":
        what = (
            f"{best_name.capitalize()} grows like log T where one init grows faster {exps}: trained to the same "
            "normalised margin, choosing among R inits by the largest margin brings m* to log growth over these T, so "
            "optimisation from one initialisation is what makes it grow faster."
        )
    elif d_best == "faster than log":
        what = (
            f"{best_name.capitalize()} grows faster than log T {exps} (one init {_said(d_one)}): every restart trains "
            "past its fit to the same normalised margin, so the bound's term C / gamma is the same at every T, and "
            "the learner the margin bound speaks of still needs samples that grow faster than log T over these T."
        )
        if d_any == "faster than log" and oracle is not None:
            what += (
                f" Even {oracle} (an oracle that sees the test set) grows faster than log T "
                f"(c = {_c(by[oracle]['numbers'].get('c') or {})}): no choice among these {oracle.removeprefix('any of ')} "
                "inits would give log growth."
            )
    else:
        what = f"The rows do not decide how {best_name} grows against log T (direction: {d_best}) {exps}."
    return what + saved


def _best(by: dict[str, dict]) -> str | None:
    """The best-of-R learner a reading rests on: by margin where there is one, else by loss."""
    names = [n for n in by if n.startswith("best of")]
    return next((n for n in names if n.endswith(BY_MARGIN)), names[0] if names else None)


def _said(direction: str) -> str:
    """A learner's direction as a predicate: "grows faster than log T", "grows like log T", or
    "has no decided direction against log T"."""
    return {"faster than log": "grows faster than log T", "log": "grows like log T"}.get(
        direction, "has no decided direction against log T"
    )


def _growth_text(name: str, s: dict) -> str:
    n = s["numbers"]
    T = n.get("T") or []
    span = f"T = {min(T):g}..{max(T):g}, {len(T)} cells with an exact m*" if T else "no T with an exact m*"
    deficit = n.get("log_deficit_aicc") or {}
    direction = n.get("direction", "undecided")
    if direction == "faster than log" and deficit:
        direction += f" (the log law trails by {deficit['least']:.0f} to {deficit['most']:.0f} AICc)"
    law = n.get("law") if n.get("law") in ("log", "polylog", "linear", "power") else "not named"
    return f"{name}: c = {_c(n.get('c') or {})} of a T^c; {direction}; growth law {law}; L1 {s['verdict']} ({span})"


def _c(q: dict) -> str:
    if not q or q.get("estimate") is None:
        return "-"
    lo, hi = q.get("ci_lo"), q.get("ci_hi")
    return f"{q['estimate']:.2f}" + (f" ({lo:.2f} .. {hi:.2f})" if lo is not None and hi is not None else "")


def _learner_order(name: str) -> tuple[int, str]:
    rank = 0 if name == ONE_INIT else 1 if name.endswith(BY_MARGIN) else 2 if name.startswith("best of") else 3
    return (rank, name)


def _others(shared: dict) -> str:
    skip = ("positions", "norm_bound", "ln_affine", "max_epochs", "model")
    return ", ".join(f"{k}={v}" for k, v in shared.items() if k not in skip)


def probe_lines(union: pl.DataFrame, rows: pl.DataFrame) -> list[str]:
    """Representability probes: each transformer cell of the union tried at one m only (a
    yes-or-no question at that m, not an m* search), with what its trained trials reached on
    their own training sets and the reading the rows allow. [] when there is none."""
    if not _probe_cells(union, rows):
        return []
    lines = [
        "### Representability probes",
        "",
        "Cells tried at one large m only, with a long budget: does a head within the bound fit its training "
        "set there? One that fits shows the class represents the target at that T (the cell is "
        "optimisation-limited, not representation-limited); none fitting after the budget is a "
        "representability limit as far as that budget and optimiser can tell.",
        "",
    ]
    for cell, mine in _probe_cells(union, rows):
        lines.append(f"- {md_text(probe_text(cell, mine))}")
    return [*lines, ""]


def _probe_cells(union: pl.DataFrame, rows: pl.DataFrame | None) -> list[tuple[dict, pl.DataFrame]]:
    """Each probe cell of ``union`` (a transformer cell tried at one m only), by T, with its
    trial rows at that m; [] when there is none."""
    needed = {"m_min", "m_max", "T", "model"}
    if union.is_empty() or not needed <= set(union.columns) or rows is None or rows.is_empty():
        return []
    # The paper's question (samples or optimisation?) is about the transformer: another model's probes are not read.
    probes = union.filter((pl.col("m_min") == pl.col("m_max")) & (pl.col("model") == ATTENTION))
    out = []
    for cell in probes.sort("T").iter_rows(named=True):
        mine = rows.filter(
            (pl.col("run_id") == cell["run_id"]) & (pl.col("T") == cell["T"]) & (pl.col("m") == cell["m_min"])
        )
        if "norm_bound" in mine.columns and cell.get("norm_bound") is not None:
            mine = mine.filter(pl.col("norm_bound") == cell["norm_bound"])
        out.append((cell, mine))
    return out


def _fits_within(cell: dict, rows: pl.DataFrame) -> tuple[int, int]:
    """(trials that fit their training set with ||W_Q W_K^T|| within the cell's bound, trials
    trained) among a probe cell's rows."""
    trained = rows.filter(pl.col("status") == "done")
    fit = trained.filter(pl.col("train_acc") >= FIT)
    bound = cell.get("norm_bound")
    if bound is not None and "norm_qk" in fit.columns:
        fit = fit.filter(pl.col("norm_qk") <= bound * (1 + TOLERANCE))
    return fit.height, trained.height


def probe_headline(union: pl.DataFrame, rows: pl.DataFrame | None) -> str:
    """One sentence for the headline on the bounded probe cells: where a head within the bound
    fits at the large m, the class represents the target; "" where the runs hold no probe."""
    fitted: list[str] = []
    not_fitted: list[str] = []
    ms: set[int] = set()
    for cell, mine in _probe_cells(union, rows):
        if cell.get("norm_bound") is None:
            continue
        within, trained = _fits_within(cell, mine)
        if not trained:
            continue
        ms.add(cell["m_min"])
        (fitted if within else not_fitted).append(f"T = {cell['T']} (B = {cell['norm_bound']:g})")
    if not fitted and not not_fitted:
        return ""
    at = "m = " + ", ".join(str(m) for m in sorted(ms))
    text = ""
    if fitted:
        text = (
            f"At {at}, heads within the bound fit their training sets at {' and '.join(fitted)}: the class "
            "represents the target there, so its faster growth is one of samples or optimisation, not of "
            "representation."
        )
    if not_fitted:
        text += (" " if text else "") + (
            f"At {at}, no head within the bound fit at {' and '.join(not_fitted)} in its budget."
        )
    return text


def probe_text(cell: dict, rows: pl.DataFrame) -> str:
    """One probe cell as a sentence: what was tried, what the trials reached, the reading."""
    trained = rows.filter(pl.col("status") == "done")
    bound = cell.get("norm_bound")
    tried = (
        f"T = {cell['T']}, B = {bound:g}" if bound is not None else f"T = {cell['T']}, no bound"
    ) + f", m = {cell['m_min']}: {trained.height} training sets"
    if trained.is_empty():
        return tried + ", none trained"
    first = trained.row(0, named=True)
    budget = (
        f"{first['max_epochs']} epochs"
        + (f" of minibatches of {first['batch_size']}" if first.get("batch_size") else " full batch")
        + f", lr {first['lr']:g}"
    )
    within, _ = _fits_within(cell, trained)
    accs = ", ".join(f"{a:.3f}" for a in trained["train_acc"].to_list())
    epochs = ", ".join(str(e) for e in trained["epochs"].to_list())
    tested = ", ".join(f"{a:.3f}" for a in trained["test_acc"].to_list())
    text = f"{tried} ({budget}); training accuracy {accs} after {epochs} epochs; test accuracy {tested}"
    if within:
        return (
            text + f": {within} of {trained.height} fit their training set with a head within the bound, "
            "so the class represents the target at this T: the cell is optimisation-limited, not "
            "representation-limited"
        )
    return (
        text + ": none fit within the budget, a representability limit as far as this budget and optimiser can "
        "tell (a longer budget or another optimiser could still find a head)"
    )


def restart_headline(claims: list[dict], union: pl.DataFrame) -> str:
    """One sentence for the headline: what restarts of the theorem's class show, from the best
    of R series' direction and exponent (by margin where the rows carry margins, else by loss
    with what that design cannot tell); "" where the runs hold no such restarts."""
    found = []
    for shared, by in restart_groups(claims):
        if not series_kind(union, {**shared, LEARNER: next(iter(by))})["theory"]:
            continue
        best_name = _best(by)
        if best_name is not None and ONE_INIT in by:
            found.append((best_name, by))
    found.sort(key=lambda f: not f[0].endswith(BY_MARGIN))  # the margin learner's rows first
    texts = []
    for best_name, by in found:
        best, one = by[best_name]["numbers"], by[ONE_INIT]["numbers"]
        T = best.get("T") or []
        where = f"T = {min(T):g}..{max(T):g}" if T else "its T"
        r = best_name.removeprefix("best of ").split(" ")[0]
        c = f"c = {_c(best.get('c') or {})} against {_c(one.get('c') or {})} for one init"
        grows = {"faster than log": "grows faster than log T", "log": "grows like log T"}.get(
            best.get("direction", "undecided"), "does not decide against log T"
        )
        if best_name.endswith(BY_MARGIN):
            texts.append(
                f"Trained from {r} initialisations past the fit to the same normalised margin and judged by the "
                f"restart of largest margin (the learner the margin bound speaks of), its m* {grows} over {where} ({c})."
            )
        else:
            # Training stopped at the first fit: every restart that fits is already a minimiser of training
            # error, so the pick by loss says nothing of optimisation's part.
            texts.append(
                f"Judged by the restart of lowest training loss among {r} that stopped at their first fit, its m* "
                f"{grows} over {where} ({c}); every restart that fits is already a minimiser of training error, so "
                "this design does not separate optimisation from samples."
            )
    return " ".join(texts)
