"""Sparse-Boolean models, built in and from other packages, found by name: the extension point
that lets a user's own package add a model for the sparse-Boolean experiment without editing
attnsweep (docs/extending.md, "A model").

A package names each of its models in its ``pyproject.toml``::

    [project.entry-points."attnsweep.models"]
    conv = "my_models:CONV"

where ``my_models.CONV`` is a :class:`BooleanModel`. Installed beside attnsweep (also on every
Ray worker), the model is valid in a spec (``model: conv``), is initialised, trained, projected
onto its norm ball where it bounds norms, scored and sized for memory like a built-in one, and
trains stacked (``torch.func.vmap`` over ``functional_call``) where it says it can. attnsweep's
own models (``transformer``, ``mlp``; workers/builtin_models.py) are :class:`BooleanModel`
values too and go through the same lookup, :func:`workers.builtin_models.model_of`; they keep
their hand-written paths (:class:`BuiltInPaths`).

This module holds the contract and what spec validation reads (names, and :data:`DECLARED`: the
built-ins' settings and checks), importing nothing of the models' code, so that the trial config
(workers/config.py) can read it.

No torch at import: spec validation reads names alone, and within
:func:`workers.student_registry.without_loading` (``attnsweep validate``) no package is imported:
its model is sized by the err-high defaults (:data:`workers.memory.PLUGIN_DEFAULT_BLOCKS`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from attnsweep.tasks.errors import TaskError
from attnsweep.tasks.plugins import installed_names, load_one

if TYPE_CHECKING:  # torch loads only where a model is built
    import torch
    from torch import nn

ENTRY_POINTS = "attnsweep.models"
"""The entry-point group a package names its :class:`BooleanModel` values in."""
BUILT_IN = ("transformer", "mlp")
"""attnsweep's own sparse-Boolean models (workers/models.py); no package may use these names."""
NORM_COLUMNS = ("norm_qk", "norm_v", "norm_hidden", "norm_readout")
"""The achieved-norm columns of a trial's row a model's :attr:`BooleanModel.norms` may fill."""
MARGIN_TERMS = ("complexity", "input_norm")
"""What :attr:`BooleanModel.norms` may give beside :data:`NORM_COLUMNS`: the complexity term the
normalised margin divides by, and the inputs' norm B_X (workers/margins.py)."""
SHARED_SETTINGS = ("d", "layers", "heads", "mlp_width", "positions", "ln_affine")
"""The model settings of a trial config (workers/config.py) a model may read; one it does not
read must stay at its default (``positions: learned``, ``ln_affine: true``) where the default
changes what trains or what a row means."""

Config = Any
"""A :class:`workers.config.BooleanTrialConfig` (not imported: the config imports this module)."""
Params = Mapping[str, "torch.Tensor"]
"""Stacked parameters: name -> ``(trials, *shape)``, the trained ones only."""


@dataclass(frozen=True)
class BuiltInPaths:
    """attnsweep's own fast paths of a built-in model (hand-written steps, closed-form memory,
    measured CPU stacking rules). A package's model has none (:attr:`BooleanModel.paths` None)
    and takes the generic paths: ``±1`` float32 inputs, ``vmap`` over ``functional_call`` when
    stacked, memory from its parameter count and activations.

    Attributes:
        hand_step: ``cfg -> bool``: trains on the hand-written one-layer step (workers/one_layer.py).
        inputs: ``(cfg, bits (n, T) uint8) -> tensor``: what the model's forward takes, trained alone.
        stacked_inputs: ``bits (trials, m, T) uint8 -> tensor``: the training sets a stacked pack holds.
        stacked_logits: ``(pack, cfg, xs (slots, b, .)) -> (slots, b) float32``: a stacked forward.
        working_bytes: ``cfg -> bytes``: workers/memory.py's closed form.
        eval_bytes: ``cfg -> bytes``: one sample's activations when scored (sizes eval chunks).
        stacks_on_cpu: ``cfg -> bool``: the measured CPU rule of workers/stacking.py.
    """

    hand_step: Callable[[Config], bool]
    inputs: Callable[[Config, torch.Tensor], torch.Tensor]
    stacked_inputs: Callable[[torch.Tensor], torch.Tensor]
    stacked_logits: Callable[[Any, Config, torch.Tensor], torch.Tensor]
    working_bytes: Callable[[Config], int]
    eval_bytes: Callable[[Config], int]
    stacks_on_cpu: Callable[[Config], bool]


@dataclass(frozen=True)
class BooleanModel:
    """A model for the sparse-Boolean experiment: ``(b, T)`` inputs to ``(b,)`` logits.

    Attributes:
        name: what a spec writes in ``model`` (lower-case letters, digits, ``_``, at most 32).
        build: ``cfg -> nn.Module``: a freshly initialised model for the trial config ``cfg``
            (workers/config.py ``BooleanTrialConfig``: ``T``, ``d``, ``layers``, ``heads``,
            ``mlp_width``... as the spec gives them), its weights drawn from torch's global CPU
            generator (attnsweep seeds it per trial, so the draw is the trial's). Its
            ``forward(x)`` takes ``x`` ``(b, T)`` float32 with entries ``-1.0``/``+1.0`` (bit 1 is
            ``+1``) and returns the logits ``(b,)`` (float32; the label is 1 where the logit is
            above 0). To train stacked it runs under ``torch.func.vmap`` over
            ``functional_call``: no in-place changes of parameters, buffers or inputs, no
            Python branches on tensor values, no ``.item()``. attnsweep fails a trial whose
            model is no ``nn.Module``, has no parameters, or gives another shape, naming it.
        norms: ``(params, cfg) -> {column: (trials,) tensor}``: the achieved norms of stacked
            trained parameters (:data:`Params`), any of :data:`NORM_COLUMNS`, and, where the
            model has a margin bound, its ``complexity`` term and ``input_norm``
            (:data:`MARGIN_TERMS`; the row's ``margin_normalised`` is the margin over the
            complexity, workers/margins.py, and ``stop: margin`` needs it). None: every norm
            column and ``margin_normalised`` are null.
        project: ``(params, bound, cfg) -> None``: project stacked parameters in place onto
            the ball of radius ``bound`` ``(trials,)`` of the norms it bounds (``norm_kind``).
            None: the model bounds no norm and a trial with a ``norm_bound`` fails.
        stackable: a pack of its trials may train stacked under ``vmap`` (on a GPU always, on a
            CPU while a lane group's working set fits workers/stacking.py's limit); False: its
            trials train one by one, which any ``nn.Module`` can.
        param_count: ``cfg -> int``, for the memory estimate (workers/memory.py). None: counted
            by building it on torch's meta device (exact, no memory).
        activations: ``cfg -> int``: float32 values its forward keeps for the backward pass per
            training sample. None: :data:`workers.memory.PLUGIN_DEFAULT_BLOCKS` times the
            transformer's ``16 (T + 1) d layers``, to err high.
        settings: which of :data:`SHARED_SETTINGS` it reads (for the docs, and so that a trial
            that sets ``positions`` or ``ln_affine`` for a model without them is refused).
        check: ``cfg -> str | None``: what is wrong with a config for this model (a one-line
            message), or None.
        margin: whether its norms give a complexity term (``stop: margin`` needs one); None (a
            package's default): known once its norms run, where a trial without one fails.
        description: one line for the docs.
        label: how figures and tables name the model; None: its :attr:`name`.
        paper_role: which of the paper's models (Edelman et al.) it is, for the claims that
            compare attention with an MLP: ``"attention"`` (the built-in transformer) or
            ``"baseline"`` (the built-in MLP); None (a package's model): none of them
            (:func:`workers.builtin_models.paper_model` reads the built-ins').
        paths: the built-ins' own fast paths; a package leaves it None.
    """

    name: str
    build: Callable[[Config], nn.Module]
    norms: Callable[[Params, Config], dict[str, torch.Tensor]] | None = None
    project: Callable[[dict[str, torch.Tensor], torch.Tensor, Config], None] | None = None
    stackable: bool = True
    param_count: Callable[[Config], int] | None = None
    activations: Callable[[Config], int] | None = None
    settings: tuple[str, ...] = ("d", "layers", "heads", "mlp_width")
    check: Callable[[Config], str | None] | None = None
    margin: bool | None = None
    description: str = ""
    label: str | None = None
    paper_role: str | None = None
    paths: BuiltInPaths | None = None


# The built-ins: their functions import torch when called, never at import.


@dataclass(frozen=True)
class Declared:
    """What spec validation reads of a built-in model (:func:`problem`), without its code:
    its name, the settings it reads, its own check and whether it has a margin bound."""

    name: str
    settings: tuple[str, ...]
    check: Callable[[Config], str | None] | None
    margin: bool


def _heads_divide_d(c: Config) -> str | None:
    return f"heads must divide d (got d={c.d}, heads={c.heads})" if c.d % c.heads else None


DECLARED: dict[str, Declared] = {
    "transformer": Declared("transformer", ("d", "layers", "heads", "positions", "ln_affine"), _heads_divide_d, True),
    "mlp": Declared("mlp", ("layers", "mlp_width"), None, False),
}
"""The built-in models' declarations, by name (workers/builtin_models.py builds them from these)."""


def model_names() -> list[str]:
    """The names a spec may give ``model`` in the sparse-Boolean experiment: the built-in ones,
    then the entry points' names, read without loading them (and without torch).

    Raises:
        TaskError: an entry point's name is not a valid model name or is a built-in one.
    """
    return installed_names(entry_points, ENTRY_POINTS, BUILT_IN, "model")


@functools.cache
def plugin_model(name: str) -> BooleanModel:
    """The model an installed package names ``name``, loaded on its own (a thread, a timeout,
    its stdout sent to stderr: tasks/plugins.py): a broken entry point fails only the trials
    that use its model.

    Raises:
        TaskError: no entry point has that name, two do, or it does not load, is not a
            :class:`BooleanModel`, names another model or claims built-in paths. The message
            names the entry point.
    """
    model = load_one(entry_points(group=ENTRY_POINTS), ENTRY_POINTS, name, BooleanModel, "model")
    assert isinstance(model, BooleanModel)  # load_one checked it; for the type checker
    if model.paths is not None:
        raise TaskError(f"model {name!r} (entry point of group {ENTRY_POINTS!r}) sets paths, which only built-ins have")
    return model


def problem(model: BooleanModel | Declared, c: Config) -> str | None:
    """What is wrong with the trial config ``c`` for ``model`` (one line), or None: a setting of
    another model given (``positions``, ``ln_affine`` away from their defaults), ``stop: margin``
    without a complexity term, or the model's own :attr:`BooleanModel.check`. Spec validation
    asks it for the built-ins (a package is not imported there); the worker asks it for every
    trial before it trains."""
    if c.stop == "margin" and model.margin is False:
        return (
            f"stop 'margin' needs model 'transformer' (or a package's model whose norms give a complexity "
            f"term): the normalised margin is that of the attention head's capacity bound, which the "
            f"{model.name} has not (use 'fit' or 'budget')"
        )
    if "positions" not in model.settings and c.positions != "learned":
        return (
            f"positions {c.positions!r} is a setting of the transformer; the {model.name} has "
            "no position codes (leave it 'learned')"
        )
    if "ln_affine" not in model.settings and not c.ln_affine:
        return (
            f"ln_affine is a setting of the transformer; the {model.name} has no LayerNorm before a "
            "head (leave it true)"
        )
    return model.check(c) if model.check is not None else None


def plus_minus_one(bits: torch.Tensor) -> torch.Tensor:
    """0/1 bits (uint8 or float, any shape) as float32 -1.0/+1.0: what a package's model takes."""
    return 2.0 * bits.float() - 1.0


def project(model: BooleanModel, params: dict[str, torch.Tensor], bound: torch.Tensor, c: Config) -> None:
    """Project stacked ``params`` ``(trials, ...)`` in place onto the model's norm ball of radius
    ``bound`` ``(trials,)``.

    Raises:
        ValueError: the model bounds no norm (a package's without ``project``).
    """
    if model.project is None:
        raise ValueError(f"model {model.name!r} bounds no norm (its BooleanModel has no project): leave norm_bound out")
    model.project(params, bound, c)


def model_norms(model: BooleanModel, params: Params, c: Config) -> dict[str, torch.Tensor]:
    """The model's achieved norms and margin terms of stacked ``params``
    (:attr:`BooleanModel.norms`): name -> ``(trials,)``; empty where it gives none.

    Raises:
        ValueError: a package's norms name a column a row has not (the message lists those it has).
    """
    if model.norms is None:
        return {}
    norms = model.norms(params, c)
    unknown = sorted(set(norms) - set(NORM_COLUMNS) - set(MARGIN_TERMS))
    if unknown:
        raise ValueError(
            f"model {model.name!r}: its norms give {unknown}; a row has {list(NORM_COLUMNS)} and {list(MARGIN_TERMS)}"
        )
    return norms
