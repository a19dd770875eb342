"""Training a *pack* of sparse-Boolean trials: stacked together, or one trial after the other.

A pack is what one Ray call trains: trials that share their shapes (workers/config.py,
``shape_key``), whose training sets are drawn together. Each trial trains with its own AdamW
state (fused where torch has it), from its own seeded initialisation, to its own end: it stops
when it fits its training set (train accuracy 1), when its loss or weights stop being finite
or explode, or after ``max_epochs``. Whether the pack trains stacked (workers/stacked_boolean.py,
all trials in one set of kernels) or one trial after the other (here) is decided by the
settings the pack shares and the device kind (workers/stacking.py); either way a trial's row
(epochs, losses, accuracies, norms) is a function of its settings, seed, code version, device
kind and thread count alone, bit for bit, whatever pack it runs in
(tests/workers/test_pack_invariance.py). A stacked pack is scored together
(:func:`workers.stacked_boolean.score_stacked`), a trial trained alone by :func:`score`; both
measure the same things on the same samples.

One by one, the one-layer transformer in float32 trains on the hand-written forward and
backward of workers/one_layer.py: per epoch a product over the ``(2T, .)`` tables and a pair
over the training set's T bits, no autograd graph. A step whose score range is beyond the
float32 matmul form (:func:`workers.models.score_range_safe`, 60) takes the same form in
float64 (safe to 489), and only beyond that the exact table path through autograd. Every other
model, and bfloat16 mixed precision, trains through autograd on the model itself.
"""

from __future__ import annotations

import copy
import math
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import torch

from attnsweep import tasks
from attnsweep.tasks.errors import TaskError
from attnsweep.workers import one_layer
from attnsweep.workers.adamw import AdamW
from attnsweep.workers.boolean_models import model_norms, plus_minus_one, problem, project
from attnsweep.workers.builtin_models import eval_bytes, model_of, uses_one_layer_step
from attnsweep.workers.config import BooleanTrialConfig
from attnsweep.workers.curves import Curve, CurvePlan, attach
from attnsweep.workers.margins import margin_columns, signed_margin

# Activation memory allowed for one evaluation chunk of one trial (bytes; workers/memory.py):
# chunks keep evaluation at T in the thousands within a fixed budget. The chunk depends on the
# trial's settings only, never on its pack, so that its scores do not either.
from attnsweep.workers.memory import EVAL_BUDGET_BYTES  # noqa: E402
from attnsweep.workers.models import logistic_loss, score_range_safe
from attnsweep.workers.pack import apply_faults, autocast, exploded, fail_row, finite_or_none
from attnsweep.workers.stacked import groups
from attnsweep.workers.stacked_boolean import fit_stacked, score_stacked
from attnsweep.workers.stacking import boolean_stacks
from attnsweep.workers.status import TrialStatus


def train_pack(
    configs: Sequence[BooleanTrialConfig],
    device: str | None = None,
    stacked: bool | None = None,
    curves: CurvePlan | None = None,
) -> list[dict]:
    """Train and score every trial of a pack.

    Args:
        configs: trials whose ``shape_key()`` are all equal (they may differ in seed,
            norm bound and fault).
        device: ``"cpu"``, ``"cuda"``, ...; None picks CUDA when available.
        stacked: train the trials together (True) or one after the other (False); None (what
            sweeps use) follows :func:`workers.stacking.boolean_stacks`. Benchmarks compare the two.
        curves: keep each trial's learning curve (workers/curves.py); None (default): none.

    Returns:
        One dict per trial, in order: ``status`` ("done", "failed" or "diverged"),
        ``error_type``, ``error``, ``support`` (list of int), ``redraws``, ``train_acc``,
        ``train_loss``, ``test_acc``, ``test_loss``, ``epochs`` (optimiser epochs run),
        ``converged`` (fit the training set), ``diverged_epoch``, the achieved norms
        (``norm_qk``, ``norm_v``, ``norm_hidden``, ``norm_readout``; None where the model
        has no such matrix), ``wall_s`` (the pack's wall seconds divided by its size),
        ``pack_size``, ``worker_host``, ``device``; with ``curves``, ``curve`` (the
        columns of :meth:`workers.curves.Curve.columns`: training loss and accuracy per kept epoch).

    Raises:
        ValueError: the configs do not share one shape key.
    """
    if not configs:
        return []
    key = configs[0].shape_key()
    if any(c.shape_key() != key for c in configs):
        raise ValueError("all trials of a pack must share shape_key()")
    t0 = time.perf_counter()
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rows = [_empty_row() for _ in configs]
    runnable = apply_faults(configs, rows)
    kept = [curves.curve(c.max_epochs) if curves is not None else None for c in configs]
    if runnable:
        pick = [configs[i] for i in runnable], [rows[i] for i in runnable], [kept[i] for i in runnable]
        _train_runnable(*pick, dev, stacked)
    if curves is not None:
        attach(rows, kept)
    wall = time.perf_counter() - t0
    host = socket.gethostname()
    for row in rows:
        row.update(wall_s=wall / len(configs), pack_size=len(configs), worker_host=host, device=str(dev))
    return rows


def _train_runnable(
    configs: list[BooleanTrialConfig],
    rows: list[dict],
    curves: list[Curve | None],
    dev: torch.device,
    stacked: bool | None = None,
) -> None:
    cfg = configs[0]
    batch, ok, errors = tasks.sample_training_sets(
        cfg.task,
        cfg.T,
        cfg.s,
        cfg.m,
        [c.seed for c in configs],
        reject_ambiguous=cfg.reject_ambiguous,
        max_redraws=cfg.max_redraws,
        device=dev,
    )
    for i, exc in errors.items():
        fail_row(rows[i], exc)
    if batch is None:
        return
    if boolean_stacks(cfg, dev.type) if stacked is None else stacked:
        for g in groups(len(ok), dev):
            cut = slice(g.start, g.stop)
            part = replace(
                batch, x=batch.x[cut], y=batch.y[cut], support=batch.support[cut], redraws=batch.redraws[cut]
            )
            pick = [ok[j] for j in g]
            _train_stacked([configs[i] for i in pick], [rows[i] for i in pick], [curves[i] for i in pick], part, dev)
        return
    for j, i in enumerate(ok):
        try:
            _fit(
                configs[i],
                rows[i],
                batch.x[j],
                batch.y[j],
                batch.support[j],
                int(batch.redraws[j]),
                dev,
                curves[i],
            )
        except Exception as exc:  # noqa: BLE001 - a trial's error fails its row, not the pack or the sweep
            fail_row(rows[i], exc)


def _train_stacked(
    configs: list[BooleanTrialConfig], rows: list[dict], curves: list[Curve | None], batch, dev: torch.device
) -> None:
    """Train the trials together and score them together (workers/stacked_boolean.py)."""
    chunk = eval_chunk(configs[0])
    try:
        models = [_model(c, dev) for c in configs]
        names = {k for k, _ in models[0].named_parameters() if trained(configs[0], k)}
        ends = fit_stacked(configs, models, names, batch.x, batch.y, chunk, dev, curves)
        with torch.no_grad():
            for model, end in zip(models, ends):
                every = dict(model.named_parameters())
                for k, v in end["params"].items():
                    every[k].copy_(v)
        live = [j for j, end in enumerate(ends) if end["diverged_epoch"] is None]
        x, y, support = batch.x, batch.y, batch.support
        if len(live) < len(configs):  # copies, so only when a trial is left out
            pick = torch.tensor(live, dtype=torch.long)
            x, y, support = x[pick], y[pick], support[pick]
        scored = score_stacked([configs[j] for j in live], [models[j] for j in live], names, x, y, support, chunk, dev)
    except Exception as exc:  # noqa: BLE001 - a pack-wide error fails its trials, not the sweep
        for row in rows:
            fail_row(row, exc)
        return
    measured: list = [_NOT_SCORED] * len(configs)
    for j, got in zip(live, scored):
        measured[j] = got
    for j, (c, row, end) in enumerate(zip(configs, rows, ends)):
        try:
            if isinstance(measured[j], BaseException):
                raise measured[j]
            params = {k: v for k, v in models[j].named_parameters() if trained(c, k)}
            fill_row(
                c,
                params,
                row,
                batch.support[j],
                int(batch.redraws[j]),
                end["epochs"],
                end["converged"],
                end["diverged_epoch"],
                measured[j],
            )
        except Exception as exc:  # noqa: BLE001 - a trial's error fails its row, not the pack or the sweep
            fail_row(row, exc)


def trained(c: BooleanTrialConfig, name: str) -> bool:
    """Whether the parameter ``name`` of a trial's model trains: all do but, with ``ln_affine``
    false, the gain and bias of the LayerNorm before each head (kept at 1 and 0, so the head's
    inputs have norm sqrt(d): Edelman et al., section 3, bound the inputs' norm)."""
    return c.ln_affine or not (name.startswith("blocks.") and ".ln1." in name)


def init_seed(c: BooleanTrialConfig) -> int:
    """The seed of a trial's initialisation. Restart 0 keeps the seed every trial had before
    restarts existed (so their rows are unchanged); restart r > 0 adds r, so one training set
    (drawn from ``seed`` alone) is trained from independent inits (docs/claims.md, "Restarts")."""
    parts = ("init", c.model, c.T, c.d, c.layers, c.heads, c.mlp_width, c.seed)
    return tasks.derive_seed(*parts) if c.restart == 0 else tasks.derive_seed(*parts, "restart", c.restart)


def _model(c: BooleanTrialConfig, dev: torch.device) -> torch.nn.Module:
    """The trial's freshly initialised model on ``dev`` (workers/boolean_models.py), a
    package's held to its contract (:func:`check_model`).

    Raises:
        TaskError: the model's package does not load, or its model breaks the contract.
        ValueError: the config is wrong for a package's model (checked here: spec validation
            does not import packages).
    """
    spec = model_of(c.model)
    if spec.paths is None:
        wrong = problem(spec, c)
        if wrong is None and c.norm_bound is not None and spec.project is None:
            wrong = f"model {spec.name!r} bounds no norm (its BooleanModel has no project): leave norm_bound out"
        if wrong:
            raise ValueError(wrong)
    with torch.random.fork_rng(devices=[]):
        # The CPU generator alone (the model is built on the CPU): torch.manual_seed would also
        # queue a CUDA seeding that records a traceback, most of a small model's build time.
        torch.default_generator.manual_seed(init_seed(c))
        model = spec.build(c)
    if spec.paths is None:
        check_model(spec.name, model, c.T)
    return model.to(dev)


def check_model(name: str, model: object, T: int) -> None:
    """Hold a package's model to the contract training reads (workers/boolean_models.py
    ``BooleanModel``): an ``nn.Module`` with parameters whose forward maps ``(2, T)`` +-1
    float32 to ``(2,)`` floating logits. The forward runs on a copy, on a fixed input, without
    gradients, so the model and the random streams are as they were.

    Raises:
        TaskError: it breaks the contract; the message names the model.
    """
    if not isinstance(model, torch.nn.Module):
        raise TaskError(f"model {name!r}: its build function gave a {type(model).__name__}, not a torch.nn.Module")
    if not any(True for _ in model.parameters()):
        raise TaskError(f"model {name!r}: its module has no parameters to train")
    x = torch.tensor([[1.0, -1.0] * T, [-1.0, 1.0] * T])[:, :T]
    try:
        with torch.no_grad():
            out = copy.deepcopy(model)(x)
    except Exception as exc:  # a broken plugin is named, whatever it raised
        raise TaskError(f"model {name!r}: its forward(x) raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(out, torch.Tensor) or out.shape != (2,) or not out.is_floating_point():
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise TaskError(f"model {name!r}: its forward gave {got} for x (2, {T}) float32, not (2,) floating logits")


def _state(logits: torch.Tensor, y: torch.Tensor, stops: Stops | None, loss: torch.Tensor | None = None) -> str:
    """``"fit"`` when ``stops`` is given and says the trial's stop rule is met, ``"diverged"``
    when the logistic loss is not finite, else ``"step"``."""
    if stops is not None and stops(logits, y):
        return "fit"
    if loss is None:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
    return "diverged" if not bool(torch.isfinite(loss)) else "step"


Stops = Callable[[torch.Tensor, torch.Tensor], bool]
"""Whether a trial's stop rule is met by the logits ``(m,)`` of its whole training set ``y`` ``(m,)``."""


def stop_rule(c: BooleanTrialConfig, params: Mapping[str, torch.Tensor]) -> Stops:
    """The stop rule of ``c`` (``stop``, workers/config.py) for the trial whose trained
    ``params`` these are (read when called): ``fit`` stops at the first epoch that classifies
    every sample right; ``margin`` at the first that does so with a normalised margin of at
    least ``margin_target`` (workers/margins.py); ``budget`` never."""

    def fits(logits: torch.Tensor, y: torch.Tensor) -> bool:
        if c.stop == "budget" or not bool(((logits > 0).float() == y).all()):
            return False
        if c.stop == "fit":
            return True
        with torch.no_grad():
            measures = model_norms(model_of(c.model), {k: v.detach()[None] for k, v in params.items()}, c)
            if "complexity" not in measures:
                raise ValueError(f"stop 'margin' needs a complexity term: model {c.model!r}'s norms give none")
            normalised = signed_margin(logits.double(), y) / measures["complexity"][0].double()
        return bool(normalised >= (c.margin_target or math.inf))

    return fits


class _Trial:
    """One trial's model, optimiser and training set, and the step that trains it."""

    def __init__(
        self,
        c: BooleanTrialConfig,
        x: torch.Tensor,
        y: torch.Tensor,
        dev: torch.device,
        model: torch.nn.Module | None = None,
    ):
        self.c, self.dev = c, dev
        self.model = _model(c, dev) if model is None else model
        self.spec = model_of(c.model)
        every = dict(self.model.named_parameters())
        self.params = {k: v for k, v in every.items() if trained(c, k)}  # what trains
        for k in every.keys() - self.params.keys():
            every[k].requires_grad_(False)
        self.opt = AdamW(list(self.params.values()), c.lr, c.weight_decay)
        self.fast = uses_one_layer_step(c)
        # What the hand-written step reads: every parameter, and the position codes where they
        # are a buffer (fixed or sinusoidal codes are read, never trained).
        self.tensors = {**every, "pos": self.model.pos} if self.fast else every
        self.bits, self.y = x, y  # (m, T) uint8, (m,)
        # Made once per training set: the bits as floats for the hand-written step, the one-hot
        # for the model's own one-layer paths.
        self.x = trial_input(self, x)
        self.x0: torch.Tensor | None = None  # 1 - self.x, made when first needed (_zeros)
        self.bound = torch.tensor([c.norm_bound or math.inf], device=dev)
        self.stops = stop_rule(c, self.params)
        # The logits of the last step's forward pass, kept only for a learning curve (set
        # by _fit when one is recorded): off, a step does exactly what it did without curves.
        self.keep_logits = False
        self.logits: torch.Tensor | None = None

    def scorer(self):
        """A function from samples (as :attr:`x` holds them) to their logits ``(n,)`` under
        the trial's current weights, without a graph: the one-layer tables are computed
        once for all the chunks it is called on."""
        if self.fast:
            with torch.no_grad():
                t = one_layer.tables(self.tensors, self.c.heads)
                if t.score_range <= score_range_safe(torch.float32):
                    return torch.no_grad()(lambda x: one_layer.head(self.tensors, t, x).logits)
                if t.score_range <= score_range_safe(torch.float64):
                    p64 = self._float64()
                    t64 = one_layer.tables(p64, self.c.heads)
                    return torch.no_grad()(lambda x: one_layer.head(p64, t64, x.double()).logits.float())
            return torch.no_grad()(self.model.forward_table)
        return torch.no_grad()(self.model)

    def _float64(self) -> dict[str, torch.Tensor]:
        """The tensors the hand-written step reads, as float64 copies."""
        return {k: v.detach().double() for k, v in self.tensors.items()}

    def _zeros(self, x: torch.Tensor) -> torch.Tensor:
        """``1 - x``: made once for the whole training set (the one-layer step's one-hot form
        needs it every epoch once its scores spread), else for the minibatch at hand."""
        if x is not self.x:
            return 1 - x
        if self.x0 is None:
            self.x0 = 1 - x
        return self.x0

    def step(self, x: torch.Tensor, y: torch.Tensor, stop_when_fit: bool = False) -> str:
        """One AdamW step on the samples ``x`` ``(b, .)``, ``y`` ``(b,)``, from one forward pass.

        Returns:
            ``"fit"`` (``stop_when_fit`` and the stop rule met on these samples: no step),
            ``"diverged"`` (the loss is not finite: no step) or ``"stepped"``.
        """
        self.opt.zero_grad()
        if self.fast:
            with torch.no_grad():
                t = one_layer.tables(self.tensors, self.c.heads)
                if t.score_range <= score_range_safe(torch.float32):
                    x0 = self._zeros(x) if t.kappa > one_layer.KAPPA_MAX else None
                    return self._hand_step(self.tensors, t, x, y, x0, stop_when_fit)
                if t.score_range <= score_range_safe(torch.float64):
                    return self._step_float64(x, y, stop_when_fit)
            logits = self.model.forward_table(x)  # scores too wide for the float64 matmul form: the exact path
        else:
            with autocast(self.dev, self.c.precision):
                logits = self.model(x).float()
        if self.keep_logits:
            self.logits = logits.detach()
        loss = logistic_loss(logits, y)
        state = _state(logits.detach(), y, self.stops if stop_when_fit else None, loss.detach())
        if state != "step":
            return state
        loss.backward()
        self.opt.step()
        return "stepped"

    def _step_float64(self, x: torch.Tensor, y: torch.Tensor, stop_when_fit: bool) -> str:
        """:meth:`step` on the hand-written form in float64, for scores too wide for it in
        float32 (range above ``score_range_safe(float32)``, 60; at most 489 here): the same
        exact formulas at twice the precision and exponent range, where the table path's
        autograd over ``(m, T, H)`` tensors took tens of times longer (BENCHMARKS.md). The
        gradients are rounded to the parameters' float32 for AdamW."""
        p64 = self._float64()
        t = one_layer.tables(p64, self.c.heads)
        x64 = x.double()  # per step, not kept: the bits are exact in any float
        x0 = 1 - x64 if t.kappa > one_layer.KAPPA_MAX else None
        return self._hand_step(p64, t, x64, y.double(), x0, stop_when_fit)

    def _hand_step(
        self,
        p: dict[str, torch.Tensor],
        t: one_layer.Tables,
        x: torch.Tensor,
        y: torch.Tensor,
        x0: torch.Tensor | None,
        stop_when_fit: bool,
    ) -> str:
        """One AdamW step from workers/one_layer.py's forward and backward on the tensors
        ``p`` (the parameters' own, or float64 copies) with their tables ``t``; the gradients
        are set in the parameters' dtype. Returns as :meth:`step`."""
        hd = one_layer.head(p, t, x, x0)
        if self.keep_logits:
            self.logits = hd.logits
        state = _state(hd.logits, y, self.stops if stop_when_fit else None)
        if state != "step":
            return state
        grads = one_layer.backward(p, t, hd, x, (torch.sigmoid(hd.logits) - y) / y.shape[0], x0)
        for name, param in self.params.items():
            # The same tensor when the dtypes agree and it is contiguous, as the fused AdamW
            # kernel needs (workers/stacked.py, StackedPack.step).
            param.grad = grads[name].to(param.dtype).contiguous()
        self.opt.step()
        return "stepped"

    def project(self) -> None:
        if self.c.norm_bound is None:
            return
        stacked = {k: v.data[None] for k, v in self.params.items()}  # (1, ...) views: projected in place
        project(self.spec, stacked, self.bound, self.c)

    def exploded(self) -> bool:
        return exploded(self.params.values())


def _fit(
    c: BooleanTrialConfig,
    row: dict,
    bits: torch.Tensor,
    y: torch.Tensor,
    support: torch.Tensor,
    redraws: int,
    dev: torch.device,
    curve: Curve | None = None,
) -> _Trial:
    """Train one trial on its training set ``bits`` ``(m, T)``, ``y`` ``(m,)`` and score it;
    ``curve`` (when given) notes the training set's loss and accuracy the loop measures.
    Returns the trained trial (its weights: what tests check the row against)."""
    trial = _Trial(c, bits, y, dev)
    trial.keep_logits = curve is not None
    trial.project()
    epochs, converged, diverged_epoch = 0, False, None
    bs = c.batch_size if c.batch_size and c.batch_size < c.m else None
    perm_gen = tasks.generator(tasks.derive_seed("batches", c.seed), dev) if bs else None
    chunk = eval_chunk(c)
    for epoch in range(c.max_epochs):
        if bs is None:
            state = trial.step(trial.x, y, stop_when_fit=True)
            if curve is not None and trial.logits is not None:  # of the weights after `epoch` epochs
                curve.note(epoch, *_measured(trial.logits, y))
            if state == "fit":
                converged = True
                break
            if state == "diverged":
                diverged_epoch = epoch
                break
        else:
            loss, acc, logits = _evaluate(trial, [(trial.x, y)], chunk, keep=c.stop == "margin")
            if curve is not None:
                curve.note(epoch, loss, acc)
            if acc >= 1.0 and c.stop != "budget" and (logits is None or trial.stops(logits, y)):
                converged = True
                break
            order = torch.randperm(c.m, generator=perm_gen, device=dev)
            for start in range(0, c.m, bs):
                idx = order[start : start + bs]
                if trial.step(trial.x[idx], y[idx]) == "diverged":
                    diverged_epoch = epoch
                    break
            if diverged_epoch is not None:
                break
        epochs += 1
        trial.project()
        if epoch == 0 and c.fault == "nan":
            with torch.no_grad():
                for v in trial.params.values():
                    v.fill_(math.nan)
        if trial.exploded():
            diverged_epoch = epoch
            break
    score(trial, row, y, support, redraws, epochs, converged, diverged_epoch)
    return trial


def _measured(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean logistic loss (float32) and accuracy (float64: right / m exactly, as the row's)
    as 0-d tensors, no host sync, of logits ``(m,)`` (float32 or float64) against labels ``y`` ``(m,)``."""
    logits = logits.float()
    return logistic_loss(logits, y), ((logits > 0).float() == y).double().mean()


def score(
    trial: _Trial,
    row: dict,
    y: torch.Tensor,
    support: torch.Tensor,
    redraws: int,
    epochs: int,
    converged: bool,
    diverged_epoch: int | None,
) -> None:
    """Fill a trained trial's row: its scores on its training set and on fresh test samples
    (in chunks fixed by its settings), its achieved norms and how training ended."""
    c, dev = trial.c, trial.dev
    chunk = eval_chunk(c)
    measured = _NOT_SCORED
    if diverged_epoch is None:
        train_loss, train_acc, logits = _evaluate(trial, [(trial.x, y)], chunk, keep=True)
        test = tasks.test_chunks(c.task, c.T, c.s, [c.seed], support[None], c.n_test, chunk, dev)
        test_loss, test_acc, _ = _evaluate(trial, ((trial_input(trial, x[0]), ty[0]) for x, ty in test), None)
        assert logits is not None
        measured = (train_loss, train_acc, test_loss, test_acc, float(signed_margin(logits.double(), y)))
    fill_row(c, trial.params, row, support, redraws, epochs, converged, diverged_epoch, measured)


_NOT_SCORED = (math.nan,) * 5
"""The scores of a trial that diverged: those of NaN weights would mean nothing."""


def fill_row(
    c: BooleanTrialConfig,
    params: Mapping[str, torch.Tensor],
    row: dict,
    support: torch.Tensor,
    redraws: int,
    epochs: int,
    converged: bool,
    diverged_epoch: int | None,
    measured: tuple[float, float, float, float, float],
) -> None:
    """Fill a trial's row from its trained ``params`` (name -> tensor, the trained ones) and
    its ``measured`` (train loss, train accuracy, test loss, test accuracy, training margin):
    those, its achieved norms, its normalised margin (workers/margins.py) and how training
    ended. Under the stop rule ``budget`` a trial counts as converged when it fits its
    training set at the end of its epochs."""
    train_loss, train_acc, test_loss, test_acc, margin = measured
    with torch.no_grad():
        stacked = {k: v.detach()[None] for k, v in params.items()}
        norms = model_norms(model_of(c.model), stacked, c)
    values = {k: finite_or_none(v[0]) for k, v in norms.items()}
    if c.stop == "budget" and diverged_epoch is None:
        converged = train_acc >= 1.0
    row.update(
        status=(TrialStatus.DIVERGED if diverged_epoch is not None else TrialStatus.DONE).value,
        support=support.tolist(),
        redraws=redraws,
        train_acc=_finite(train_acc),
        train_loss=_finite(train_loss),
        test_acc=_finite(test_acc),
        test_loss=_finite(test_loss),
        epochs=epochs,
        converged=converged,
        diverged_epoch=diverged_epoch,
        **{k: v for k, v in values.items() if k not in ("complexity", "input_norm")},
        **margin_columns(margin, values),
    )


def trial_input(trial: _Trial, bits: torch.Tensor) -> torch.Tensor:
    """Samples ``bits`` ``(n, T)`` in the form the trial's model takes: 0.0/1.0 floats ``(n,
    T)`` for the hand-written one-layer step (whose fall-back, the table path, takes them
    too), a built-in's own form (the transformer's one-hot ``(n, 2T)`` on its other one-layer
    paths, else the bits), a package's model +-1 float32 ``(n, T)``."""
    if trial.fast:
        return one_layer.bits_as_float(bits)
    paths = trial.spec.paths
    return paths.inputs(trial.c, bits) if paths is not None else plus_minus_one(bits)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def eval_chunk(cfg: BooleanTrialConfig) -> int:
    """Samples per evaluation chunk of one trial, so that its activations fit
    ``EVAL_BUDGET_BYTES`` (a function of the trial's settings only, never of its pack).

    A sample holds what :func:`workers.boolean_models.eval_bytes` says: the built-ins' own
    counts (a one-layer transformer its bits and their float or one-hot forms, a deeper one
    about 8 float32 tensors of ``(T+1, d)`` per layer, an MLP about 4 of width ``max(T,
    mlp_width)``), a package's model 4 bytes per activation it keeps.
    """
    return max(1, EVAL_BUDGET_BYTES // max(1, eval_bytes(cfg)))


def _evaluate(trial: _Trial, parts, chunk: int | None, keep: bool = False) -> tuple[float, float, torch.Tensor | None]:
    """Mean logistic loss and accuracy of one trial over ``(x, y)`` parts (x as the trial's
    model takes it), each cut into chunks of at most ``chunk`` samples (None: as given); with
    ``keep``, also every logit ``(n,)`` in order (else None)."""
    loss_sum = acc_sum = 0.0
    n = 0
    logits_of = trial.scorer()
    kept = []
    for x, y in parts:
        step = chunk or x.shape[0]
        for i in range(0, x.shape[0], step):
            logits = logits_of(x[i : i + step])
            yc = y[i : i + step]
            loss_sum += float(logistic_loss(logits, yc)) * yc.shape[0]
            acc_sum += float(((logits > 0).float() == yc).float().sum())
            n += yc.shape[0]
            if keep:
                kept.append(logits)
    return loss_sum / n, acc_sum / n, torch.cat(kept) if keep else None


def _empty_row() -> dict:
    return dict(
        status=TrialStatus.FAILED.value,
        error_type=None,
        error=None,
        support=None,
        redraws=None,
        train_acc=None,
        train_loss=None,
        test_acc=None,
        test_loss=None,
        epochs=None,
        converged=None,
        diverged_epoch=None,
        norm_qk=None,
        norm_v=None,
        norm_hidden=None,
        norm_readout=None,
        input_norm=None,
        margin=None,
        margin_normalised=None,
    )
