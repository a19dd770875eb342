"""attnsweep's own symmetry students as registry entries (workers/student_registry.py): the
generic transformer and the MLP (their modules in workers/students.py) with their closed-form
sizes and declared forms (:class:`~workers.student_registry.BuiltInForms`: width setting,
permutation-equivariant form, config check), the inner-product student that ``equivariance:
orthogonal`` picks whatever the model, and the lookup every caller uses, :func:`student_of`.
Also what the memory estimate (workers/memory.py) and training read of any trial's student:
:func:`form_of`, :func:`width_of`, :func:`param_count`, :func:`activations`.

No torch at import (the builds import workers/students.py when called): spec validation
(workers/config.py) reads the forms, and ``validate`` sizes packs from the closed forms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnsweep.tasks.errors import TaskError
from attnsweep.workers.memory import FLOAT_BYTES, PARAM_COPIES, PLUGIN_DEFAULT_BLOCKS, TRANSFORMER_ACTS_PER_TOKEN
from attnsweep.workers.student_registry import (
    BuiltInForms,
    Config,
    Student,
    plugin_activations,
    plugin_param_count,
    plugin_student,
    student_names,
)

if TYPE_CHECKING:  # torch loads only where a student is built
    from torch import nn

EQUIVARIANCES = ("none", "orthogonal", "augment", "permutation")
"""The values of a trial's ``equivariance``."""
INNER_PRODUCT_HIDDEN = 16
"""Hidden units of each pair-score MLP of the inner-product student (workers/students.py)."""


def _transformer_build(n: int, k: int, d: int, width: int, heads: int) -> nn.Module:
    from attnsweep.workers.students import SeqTransformer

    return SeqTransformer(n, k, d, width, heads, positional=True)


def _position_free_build(n: int, k: int, d: int, width: int, heads: int) -> nn.Module:
    from attnsweep.workers.students import SeqTransformer

    return SeqTransformer(n, k, d, width, heads, positional=False)


def _mlp_build(n: int, k: int, d: int, width: int, heads: int) -> nn.Module:
    from attnsweep.workers.students import SeqMLP

    return SeqMLP(n, k, d, width)


def _inner_product_build(n: int, k: int, d: int, width: int, heads: int) -> nn.Module:
    from attnsweep.workers.students import InnerProductStudent

    return InnerProductStudent(n, k, d, heads=heads, hidden=INNER_PRODUCT_HIDDEN)


def _position_free_params(n: int, k: int, d: int, w: int, heads: int) -> int:
    # SeqTransformer without positions: input projection d w + w, five LayerNorms 10 w, self-
    # and cross-attention 2 x 4 w^2 (no biases), feed-forward 8 w^2 + 5 w, readout w d + d.
    return 16 * w * w + 2 * d * w + 16 * w + d


def _transformer_params(n: int, k: int, d: int, w: int, heads: int) -> int:
    return _position_free_params(n, k, d, w, heads) + n * w  # and its (n, w) positions


def _transformer_activations(n: int, k: int, d: int, w: int, heads: int) -> int:
    return TRANSFORMER_ACTS_PER_TOKEN * (n + k) * w  # one block over the n + k rows


def _mlp_params(n: int, k: int, d: int, w: int, heads: int) -> int:
    # SeqMLP, two hidden layers of width w: (n + k) d w + w, w^2 + w, readout w n d + n d.
    return (n + k) * d * w + w + (w * w + w) + w * n * d + n * d


def _mlp_activations(n: int, k: int, d: int, w: int, heads: int) -> int:
    return 4 * w


def _inner_product_params(n: int, k: int, d: int, w: int, heads: int) -> int:
    # Two pair-score MLPs of 5 H hidden each, the head weights a and c 2 H, and lambda;
    # whatever n, k, d and the width.
    return 10 * heads * INNER_PRODUCT_HIDDEN + 2 * heads + 1


def _inner_product_activations(n: int, k: int, d: int, w: int, heads: int) -> int:
    return 16 * (n + k) ** 2 * heads  # its (n + k)^2 Gram matrices over 16 hidden units, per head


def _heads_divide_width(c: Config) -> str | None:
    return f"heads must divide width (got width={c.width}, heads={c.heads})" if c.width % c.heads else None


TRANSFORMER = Student(
    "transformer",
    _transformer_build,
    param_count=_transformer_params,
    activations=_transformer_activations,
    description="generic transformer with learned positions (SeqTransformer)",
    forms=BuiltInForms(
        width="width",
        permutation=Student(
            "transformer",
            _position_free_build,
            param_count=_position_free_params,
            activations=_transformer_activations,
            description="the generic transformer without positions, permutation-equivariant over X",
            forms=BuiltInForms(width="width", check=_heads_divide_width),
        ),
        check=_heads_divide_width,
    ),
)
MLP = Student(
    "mlp",
    _mlp_build,
    param_count=_mlp_params,
    activations=_mlp_activations,
    description="flattened-input MLP, two hidden layers of mlp_width (SeqMLP)",
    forms=BuiltInForms(width="mlp_width"),
)
INNER_PRODUCT = Student(
    "inner_product",
    _inner_product_build,
    param_count=_inner_product_params,
    activations=_inner_product_activations,
    description="the inner-product student (InnerProductStudent), O(d)-equivariant by construction; "
    "equivariance 'orthogonal' trains it whatever the model",
    forms=BuiltInForms(width="width"),
)
"""Not a ``model`` a spec names: the student of ``equivariance: orthogonal``."""
BUILT_IN_STUDENTS: dict[str, Student] = {s.name: s for s in (TRANSFORMER, MLP)}
"""attnsweep's own generic students, by name (workers/student_registry.py ``BUILT_IN`` names them)."""


def student_of(name: str) -> Student:
    """The student called ``name``; a package's student is loaded alone, so another package's
    broken entry point does not stop this one.

    Raises:
        TaskError: no student has that name (the message lists those that do), or its
            package's entry point does not load (the message names the entry point).
    """
    if name in BUILT_IN_STUDENTS:
        return BUILT_IN_STUDENTS[name]
    names = student_names()
    if name not in names:
        raise TaskError(f"model must be one of {names}, got {name!r}")
    return plugin_student(name)


def permutation_models() -> str:
    """The built-in students that have a permutation-equivariant form, as a message names them
    (``'transformer'``; ``'a' or 'b'`` for two)."""
    names = [s.name for s in BUILT_IN_STUDENTS.values() if s.forms is not None and s.forms.permutation is not None]
    return " or ".join(repr(name) for name in names)


def built_in_form(model: str, equivariance: str) -> Student | None:
    """The built-in student a trial of ``model`` and ``equivariance`` trains, without loading
    any package: :data:`INNER_PRODUCT` for ``orthogonal`` whatever the model, a built-in
    student's permutation form for ``permutation``, else the built-in student; None for a
    package's student, or a built-in one without a permutation form. Raises nothing."""
    if equivariance == "orthogonal":
        return INNER_PRODUCT
    student = BUILT_IN_STUDENTS.get(model)
    if student is None or equivariance != "permutation":
        return student
    return student.forms.permutation if student.forms is not None else None


def form_of(model: str, equivariance: str) -> Student:
    """The student a trial of ``model`` and ``equivariance`` trains: ``orthogonal``
    -> :data:`INNER_PRODUCT` (the model name is checked but not used); ``permutation`` -> the
    named student's permutation-equivariant form; ``none`` and ``augment`` -> the named
    student (augmentation belongs to training, not to the model), a package's loaded alone.

    Raises:
        ValueError: unknown equivariance, or ``permutation`` for a student without such a form.
        TaskError: unknown model (the message lists those there are), or a package's student
            that does not load (the message names it).
    """
    if equivariance not in EQUIVARIANCES:
        raise ValueError(f"equivariance must be one of {list(EQUIVARIANCES)}, got {equivariance!r}")
    student = student_of(model)
    if equivariance == "orthogonal":
        return INNER_PRODUCT
    if equivariance == "permutation":
        if student.forms is None or student.forms.permutation is None:
            raise ValueError(
                f"model must be {permutation_models()} when equivariance='permutation' (the MLP has no "
                f"permutation-equivariant form), got {model!r}"
            )
        return student.forms.permutation
    return student


def width_of(c: Config) -> int:
    """The width a trial's student is built and sized at: the setting its form names
    (:attr:`BuiltInForms.width`: the MLP's ``mlp_width``), else the trial's ``width`` (a
    package's student). Raises nothing."""
    form = built_in_form(c.model, c.equivariance)
    setting = form.forms.width if form is not None and form.forms is not None else "width"
    return int(getattr(c, setting))


def param_count(c: Config) -> int:
    """The parameter count of a symmetry trial's student (:func:`built_in_form`): a built-in
    form's closed form, a package's own (workers/student_registry.py
    :func:`~workers.student_registry.plugin_param_count`: its ``param_count``, else counted on
    torch's meta device), else (inside ``without_loading``, or it does not load)
    :data:`workers.memory.PLUGIN_DEFAULT_BLOCKS` transformers at ``max(width, d)``, to err high.
    Checked against built students in tests/workers/test_memory.py. Raises nothing."""
    return _sized(c, "param_count", plugin_param_count, _transformer_params)


def activations(c: Config) -> int:
    """Float32 values one training sample keeps for the backward pass in a symmetry trial's
    student: a built-in form's closed form, a package's own ``activations``, or where it gives
    none or does not load :data:`workers.memory.PLUGIN_DEFAULT_BLOCKS` transformer blocks at
    ``max(width, d)``. Raises nothing."""
    return _sized(c, "activations", plugin_activations, _transformer_activations)


def _sized(c: Config, what: str, of_package, transformer) -> int:
    """A size of the trial's student (``what``: its entry's ``param_count`` or ``activations``):
    a built-in form's closed form, a package's own (``of_package``), else
    :data:`workers.memory.PLUGIN_DEFAULT_BLOCKS` times the ``transformer``'s at ``max(width, d)``."""
    n, k, d, width, heads = c.n, c.k, c.d, width_of(c), c.heads
    form = built_in_form(c.model, c.equivariance)
    if form is not None:
        closed = getattr(form, what)
        assert closed is not None  # every built-in form gives its closed forms
        return closed(n, k, d, width, heads)
    given = of_package(c.model, n, k, d, width, heads)
    if given is not None:
        return given
    return PLUGIN_DEFAULT_BLOCKS * transformer(n, k, d, max(width, d), heads)


def working_bytes(cfg: Config) -> int:
    """The most memory one symmetry trial uses while it trains (bytes).

    Data: X, K and Y of m training and ``n_test`` test samples, ``(2n + k) d`` floats each
    (augmentation holds a rotated copy and one ``d x d`` rotation per sample). Parameters
    (:data:`PARAM_COPIES` float32 values each) and the float32 values one training sample keeps
    for the backward pass: those of the student the trial trains, as its registry entry gives
    them (:func:`param_count`, :func:`activations`:
    the built-ins' closed forms, a package's own or err-high counts).
    """
    n_params = param_count(cfg)
    data = (2 * cfg.n + cfg.k) * cfg.d
    if cfg.equivariance == "augment":
        data = 2 * data + cfg.d * cfg.d
    acts = activations(cfg)
    return FLOAT_BYTES * (PARAM_COPIES * n_params + cfg.m * (data + acts) + cfg.n_test * (2 * cfg.n + cfg.k) * cfg.d)


def build_student(model: str, equivariance: str, n: int, k: int, d: int, width: int, heads: int) -> nn.Module:
    """The student a trial names, freshly initialised: the form
    :func:`workers.builtin_students.form_of` gives (``orthogonal`` -> :class:`~workers.students.InnerProductStudent`,
    ``heads`` heads, hidden width 16, the model name checked but not used; ``permutation`` -> the
    named student's permutation-equivariant form, the transformer's :class:`~workers.students.SeqTransformer`
    without positions; ``none`` and ``augment`` -> the named student), a package's checked by
    :func:`workers.students.check_student`. ``width`` is the one the trial's student takes
    (:func:`workers.builtin_students.width_of`).

    Raises:
        ValueError: unknown equivariance, ``permutation`` for a student without such a form, or
            width not divisible by heads for the transformer.
        TaskError: unknown model (the message lists those there are), or a package's student
            that does not load or breaks its contract (the message names it).
    """
    from attnsweep.workers.students import check_student

    form = form_of(model, equivariance)
    built = form.build(n, k, d, width, heads)
    if form.forms is None:  # a package's student (built-ins declare forms) is held to what training reads
        check_student(model, built, n, k, d)
    return built
