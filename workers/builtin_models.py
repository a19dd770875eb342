"""attnsweep's own sparse-Boolean models as registry entries (workers/boolean_models.py): the CLS
transformer and the MLP (workers/models.py) with their norms, projections, closed-form sizes
(parameter counts, activations, working sets: the memory estimate's per-model terms,
workers/memory.py), labels, roles in the paper and hand-written paths, and the lookup every
caller uses, :func:`model_of`, which gives a built-in model or loads a package's. Also what the
memory estimate and the stacking rule read of any model: :func:`param_count`,
:func:`working_bytes`, :func:`eval_bytes`; and what figures and the paper's claims read:
:func:`model_label`, :func:`paper_model`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnsweep.tasks.errors import TaskError
from attnsweep.workers.boolean_models import (
    DECLARED,
    BooleanModel,
    BuiltInPaths,
    Config,
    Params,
    model_names,
    plugin_model,
)
from attnsweep.workers.memory import (
    PLUGIN_DEFAULT_BLOCKS,
    TRANSFORMER_ACTS_PER_TOKEN,
    boolean_batch,
    working_set_bytes,
)
from attnsweep.workers.stacking_rules import mlp_stacks_on_cpu, transformer_stacks_on_cpu
from attnsweep.workers.student_registry import names_only

if TYPE_CHECKING:  # torch loads only where a model is built or trained: validate reads sizes alone
    import torch
    from torch import nn


def _transformer_build(c: Config) -> nn.Module:
    from attnsweep.workers.models import CLSTransformer

    return CLSTransformer(c.T, c.d, c.layers, c.heads, c.positions)


def _mlp_build(c: Config) -> nn.Module:
    from attnsweep.workers.models import MLP as MLPModule

    return MLPModule(c.T, c.mlp_width, c.layers)


def _transformer_norms(params: Params, c: Config) -> dict[str, torch.Tensor]:
    from attnsweep.workers.margins import head_measures

    return head_measures(params, c.d, c.heads, c.norm_kind)


def _mlp_norms(params: Params, c: Config) -> dict[str, torch.Tensor]:
    from attnsweep.workers.norms import mlp_norms

    return mlp_norms(dict(params), c.norm_kind)


def _transformer_project(params: dict[str, torch.Tensor], bound: torch.Tensor, c: Config) -> None:
    from attnsweep.workers.norms import project_transformer

    project_transformer(params, bound, c.heads, c.norm_kind)


def _mlp_project(params: dict[str, torch.Tensor], bound: torch.Tensor, c: Config) -> None:
    from attnsweep.workers.norms import project_mlp

    project_mlp(params, bound, c.norm_kind)


def _transformer_params(c: Config) -> int:
    # CLSTransformer: token table 2d, positions (T + 1) d, [CLS] d; per block W_Q, W_K, W_V
    # 3 d^2 (no biases), two LayerNorms 4d, the feed-forward layer d x 4d x d with biases
    # 8 d^2 + 5d; final LayerNorm 2d, readout d + 1. heads does not enter (heads split d).
    return (c.T + 1) * c.d + 6 * c.d + c.layers * (11 * c.d * c.d + 9 * c.d) + 1


def _mlp_params(c: Config) -> int:
    # MLP: (T + 1) w into the first hidden layer, w^2 + w per further one, readout w + 1.
    w = c.mlp_width
    return (c.T + 1) * w + (c.layers - 1) * (w * w + w) + w + 1


def _transformer_activations(c: Config) -> int:
    # One layer, on the hand-written step's tables (workers/one_layer.py): 16 d + 4 (H + d) a
    # sample; deeper, TRANSFORMER_ACTS_PER_TOKEN (T + 1) d per layer.
    if c.layers == 1:
        return 16 * c.d + 4 * (c.heads + c.d)
    return TRANSFORMER_ACTS_PER_TOKEN * (c.T + 1) * c.d * c.layers


def _mlp_activations(c: Config) -> int:
    return 4 * max(c.T, c.mlp_width) * c.layers


def _layered_working_bytes(c: Config, n_params: int, acts: int) -> int:
    # The bits as float32 (m, T + 1) and a batch's activations in training; scoring, half a
    # layer's activations a sample.
    train = c.m * (c.T + 1) + boolean_batch(c) * acts
    return working_set_bytes(n_params, train, c.n_test, acts // max(c.layers, 1) // 2)


def _transformer_working_bytes(c: Config) -> int:
    """The transformer's working set (bytes). One layer: its parameters, its training set's
    bits as float32 ``(m, T)`` twice (``1 - X`` where the step takes the one-hot form) and the
    rows gathered from it per minibatch, the hand-written step's tables (about 12 arrays of
    ``2T x (H + d)`` floats: LayerNorm input and output, scores and values, exponentials, and
    their gradients; workers/one_layer.py) and per sample ``16 d + 4 (H + d)`` floats. A step
    whose scores spread beyond the float32 matmul form (range above 60,
    workers/train_boolean.py) holds the minibatch's bits in float64 twice (``x`` and ``1 - x``)
    while it runs: ``16 b (T + 1)`` bytes more for a minibatch of ``b``, counted for every
    one-layer trial, since whether its scores will spread is not known before it trains.
    Deeper: ``16 (T + 1) d`` floats per sample and layer, its data the bits as float32.
    Scoring: chunks of at most ``EVAL_BUDGET_BYTES`` (workers/memory.py)."""
    n_params, acts = _transformer_params(c), _transformer_activations(c)
    if c.layers != 1:
        return _layered_working_bytes(c, n_params, acts)
    batch = boolean_batch(c)
    rows = 2 * (c.T + 1)
    tables = 12 * rows * (c.heads + c.d)
    data = (2 * c.m + batch) * (c.T + 1)  # the bits as floats, 1 - X (one-hot form), a minibatch
    data += 4 * batch * (c.T + 1)  # a float64 step's x and 1 - x: 16 b (T + 1) bytes, 4 float32 each
    return working_set_bytes(n_params, tables + data + batch * acts, c.n_test, rows + 16 * c.d)


def _mlp_working_bytes(c: Config) -> int:
    """The MLP's working set (bytes): ``4 max(T, mlp_width)`` floats per sample and layer, its
    data the bits as float32; scoring in chunks of at most ``EVAL_BUDGET_BYTES``."""
    return _layered_working_bytes(c, _mlp_params(c), _mlp_activations(c))


def _one_layer_step(c: Config) -> bool:
    return c.layers == 1 and c.precision == "float32"


def _transformer_inputs(c: Config, bits: torch.Tensor) -> torch.Tensor:
    from attnsweep.workers.models import CLSTransformer

    return CLSTransformer.encode(bits) if c.layers == 1 else bits


def _transformer_stacked_logits(pack: Any, c: Config, xs: torch.Tensor) -> torch.Tensor:
    # A transformer of any depth through its general forward, of one layer through the exact
    # table form (O(m T H), no data-dependent branch).
    return pack.call(xs, path="table" if c.layers == 1 else "general").float()


def _mlp_stacked_logits(pack: Any, c: Config, xs: torch.Tensor) -> torch.Tensor:
    from attnsweep.workers.stacked_mlp import mlp_logits

    return mlp_logits(pack.params, xs).float()


def _transformer_eval_bytes(c: Config) -> int:
    # One layer: its bits (uint8, twice while converted) and them as float32 (T,) on the
    # hand-written step, its one-hot (2T,) on the model's own paths (counted for both); deeper:
    # about 8 float32 tensors of (T+1, d) per layer.
    if c.layers == 1:
        return 4 * (2 * (c.T + 1) + 16 * c.d) + 2 * (c.T + 1)
    return 8 * 4 * (c.T + 1) * c.d * c.layers


def _mlp_eval_bytes(c: Config) -> int:
    return 4 * 4 * max(c.T, c.mlp_width) * c.layers  # about 4 float32 tensors of width max(T, mlp_width)


TRANSFORMER = BooleanModel(
    "transformer",
    _transformer_build,
    norms=_transformer_norms,
    project=_transformer_project,
    param_count=_transformer_params,
    activations=_transformer_activations,
    settings=DECLARED["transformer"].settings,
    check=DECLARED["transformer"].check,
    margin=DECLARED["transformer"].margin,
    description="the CLS transformer of Edelman et al. (CLSTransformer): token and position embeddings, "
    "pre-LayerNorm attention blocks, a readout of the [CLS] position",
    label="transformer",
    paper_role="attention",
    paths=BuiltInPaths(
        hand_step=_one_layer_step,
        inputs=_transformer_inputs,
        stacked_inputs=lambda x: x,
        stacked_logits=_transformer_stacked_logits,
        working_bytes=_transformer_working_bytes,
        eval_bytes=_transformer_eval_bytes,
        stacks_on_cpu=transformer_stacks_on_cpu,
    ),
)
MLP = BooleanModel(
    "mlp",
    _mlp_build,
    norms=_mlp_norms,
    project=_mlp_project,
    param_count=_mlp_params,
    activations=_mlp_activations,
    settings=DECLARED["mlp"].settings,
    check=DECLARED["mlp"].check,
    margin=DECLARED["mlp"].margin,
    description="the MLP baseline (MLP): the bits as +-1, layers GELU hidden layers of mlp_width, a logit",
    label="MLP",
    paper_role="baseline",
    paths=BuiltInPaths(
        hand_step=lambda c: False,
        inputs=lambda c, bits: bits,  # the MLP maps its bits to +-1 itself
        stacked_inputs=lambda x: x.float(),
        stacked_logits=_mlp_stacked_logits,
        working_bytes=_mlp_working_bytes,
        eval_bytes=_mlp_eval_bytes,
        stacks_on_cpu=mlp_stacks_on_cpu,
    ),
)
BUILT_IN_MODELS: dict[str, BooleanModel] = {m.name: m for m in (TRANSFORMER, MLP)}
"""attnsweep's own sparse-Boolean models, by name (:data:`BUILT_IN` names them)."""


def paper_model(role: str) -> str:
    """The name of the built-in model that plays ``role`` among the paper's models (Edelman et
    al.; :attr:`BooleanModel.paper_role`): ``"attention"`` -> ``"transformer"``, ``"baseline"``
    -> ``"mlp"``. A package's model plays none.

    Raises:
        ValueError: no built-in model plays ``role`` (the message names the roles there are).
    """
    for model in BUILT_IN_MODELS.values():
        if model.paper_role == role:
            return model.name
    roles = [m.paper_role for m in BUILT_IN_MODELS.values() if m.paper_role is not None]
    raise ValueError(f"paper role must be one of {roles}, got {role!r}")


def model_label(name: str) -> str:
    """How figures and tables name the model ``name``: a built-in's
    :attr:`BooleanModel.label` (``"transformer"``, ``"MLP"``), else ``name`` itself (a
    package's model is not imported for it). Raises nothing."""
    model = BUILT_IN_MODELS.get(name)
    if model is None or model.label is None:
        return name
    return model.label


def model_of(name: str) -> BooleanModel:
    """The sparse-Boolean model called ``name``: a built-in one, or a package's loaded alone.

    Raises:
        TaskError: no model has that name (the message lists those that do), or its package's
            entry point does not load (the message names the entry point).
    """
    if name in BUILT_IN_MODELS:
        return BUILT_IN_MODELS[name]
    names = model_names()
    if name not in names:
        raise TaskError(f"model must be one of {names}, got {name!r}")
    return plugin_model(name)


def loaded_or_none(name: str) -> BooleanModel | None:
    """:func:`model_of`, or None inside :func:`workers.student_registry.without_loading` for a
    package's model or where it does not load (the caller then errs high; a broken entry point
    fails its trials on the worker, not the sizing of packs). Raises nothing."""
    if name in BUILT_IN_MODELS:
        return BUILT_IN_MODELS[name]
    if names_only():
        return None
    try:
        return model_of(name)
    except BaseException as exc:  # noqa: BLE001 - sys.exit() too: reported where the trial runs
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None


def param_count(c: Config) -> int:
    """The parameter count of the trial's model: the built-ins' closed forms, a package's own
    :attr:`BooleanModel.param_count`, else its parameters counted on torch's meta device, else
    (not loaded, or it does not build there) :data:`workers.memory.PLUGIN_DEFAULT_BLOCKS`
    transformers of the trial's sizes, to err high. Raises nothing for a package's model."""
    model = loaded_or_none(c.model)
    if model is not None and model.paths is not None:
        assert model.param_count is not None
        return model.param_count(c)
    counted = _plugin_param_count(model, c) if model is not None else None
    if counted is not None:
        return counted
    return PLUGIN_DEFAULT_BLOCKS * _transformer_params(c)


def _plugin_param_count(model: BooleanModel, c: Config) -> int | None:
    try:
        if model.param_count is not None:
            return int(model.param_count(c))
        import torch

        with torch.device("meta"):
            return sum(p.numel() for p in model.build(c).parameters())
    except BaseException as exc:  # noqa: BLE001 - sys.exit() too: reported where the trial runs
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None


def activations(c: Config) -> int:
    """Float32 values one training sample of the trial's model keeps for the backward pass: its
    entry's :attr:`BooleanModel.activations` (the built-ins' closed forms), else :data:`workers.memory.PLUGIN_DEFAULT_BLOCKS`
    times the transformer's ``16 (T + 1) d layers``. Raises nothing."""
    model = loaded_or_none(c.model)
    if model is not None and model.activations is not None:
        try:
            return int(model.activations(c))
        except BaseException as exc:  # noqa: BLE001 - sys.exit() too: reported where the trial runs
            if isinstance(exc, KeyboardInterrupt):
                raise
            pass
    return PLUGIN_DEFAULT_BLOCKS * TRANSFORMER_ACTS_PER_TOKEN * (c.T + 1) * c.d * c.layers


def working_bytes(c: Config) -> int:
    """The most memory one sparse-Boolean trial uses while it trains or is scored (bytes): a
    built-in's own closed form (its entry's :attr:`BuiltInPaths.working_bytes`); a package's
    model the generic terms (:func:`workers.memory.working_set_bytes`): its parameters (4 float32 values each: weight, gradient, AdamW's
    two moments), its training set as ``m (T + 1)`` float32 and a batch's activations
    (:func:`activations`); scoring, chunks of at most ``EVAL_BUDGET_BYTES``. Raises nothing for
    a package's model."""
    model = loaded_or_none(c.model)
    if model is not None and model.paths is not None:
        return model.paths.working_bytes(c)
    n_params, acts = param_count(c), activations(c)
    return working_set_bytes(n_params, c.m * (c.T + 1) + boolean_batch(c) * acts, c.n_test, acts)


def eval_bytes(c: Config) -> int:
    """Bytes one sample of a trial holds when it is scored (sizes its evaluation chunks,
    workers/train_boolean.py ``eval_chunk``): a built-in's own count, a package's model
    ``4 x`` :func:`activations`."""
    model = loaded_or_none(c.model)
    if model is not None and model.paths is not None:
        return model.paths.eval_bytes(c)
    return 4 * activations(c)


def uses_one_layer_step(cfg: Config) -> bool:
    """Whether a trial trains on the hand-written one-layer step (workers/one_layer.py): the
    built-in transformer's (:attr:`BuiltInPaths.hand_step`)."""
    paths = model_of(cfg.model).paths
    return paths is not None and paths.hand_step(cfg)


def build_model(
    model: str, T: int, d: int, layers: int, heads: int, mlp_width: int, positions: str = "learned"
) -> nn.Module:
    """The model a trial names, built through :func:`model_of` from these settings (a package's
    model reads them as it would a trial config's).

    Raises:
        TaskError: unknown model name (the message lists the models there are), or a package's
            model that does not load.
    """
    from types import SimpleNamespace

    settings = SimpleNamespace(T=T, d=d, layers=layers, heads=heads, mlp_width=mlp_width, positions=positions)
    return model_of(model).build(settings)
