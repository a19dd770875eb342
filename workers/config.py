"""The settings of one sparse-Boolean trial: what a worker needs to train and score it.

Every field becomes a typed column of the ``trials`` table, so a row says exactly how
its numbers were made. Validation (pydantic) names the field and the allowed values.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from attnsweep.tasks.registry import BUILT_IN as TASKS_BUILT_IN
from attnsweep.tasks.registry import task_names
from attnsweep.tasks.teachers import BUILT_IN as TEACHERS_BUILT_IN
from attnsweep.tasks.teachers import teacher_names
from attnsweep.workers.boolean_models import BUILT_IN as MODELS_BUILT_IN
from attnsweep.workers.boolean_models import DECLARED, model_names, problem
from attnsweep.workers.builtin_students import built_in_form, permutation_models
from attnsweep.workers.student_registry import BUILT_IN as STUDENTS_BUILT_IN
from attnsweep.workers.student_registry import student_names


def _known_task(name: str) -> str:
    if name in TASKS_BUILT_IN:  # valid whatever is installed: no entry point to read
        return name
    names = task_names()
    if name not in names:
        raise ValueError(f"must be one of {names} (a package can add tasks: docs/extending.md)")
    return name


def _known_model(name: str) -> str:
    if name in MODELS_BUILT_IN:
        return name
    names = model_names()
    if name not in names:
        raise ValueError(f"must be one of {names} (a package can add models: docs/extending.md)")
    return name


# Names, not Literals: installed packages add tasks (tasks/registry.py) and models
# (workers/boolean_models.py), read at validation without loading them or torch.
TaskName = Annotated[str, AfterValidator(_known_task)]
ModelName = Annotated[str, AfterValidator(_known_model)]
NormKind = Literal["frobenius", "spectral", "l21"]
Fault = Literal["raise", "nan", "exit"]
# Training arithmetic: float32 throughout, or bfloat16 autocast of the training forward
# pass (mixed precision: weights, optimiser state and evaluation stay float32).
Precision = Literal["float32", "bfloat16"]
Positions = Literal["learned", "fixed", "sinusoidal"]
# When a sparse-Boolean trial stops training (besides divergence and max_epochs): at its first
# fit, once it fits with a normalised margin of at least margin_target, or never (a fixed budget).
StopRule = Literal["fit", "margin", "budget"]


LATER_FIELDS: dict[str, object] = {
    "positions": "learned",
    "ln_affine": True,
    "restart": 0,
    "stop": "fit",
    "margin_target": None,
}
"""Trial settings added after trial rows were first published, with the value every earlier
trial had: at that value a setting does not enter a trial's id (orchestrator/spec.py
``trial_id``), so earlier trials keep theirs and a resume finds them, and a stored row
without the column reads as that value (orchestrator/trials_table.py ``with_later_fields``)."""

N_TEST_MIN = 100
"""The smallest held-out set of a sparse-Boolean trial (test accuracy in steps of at most 0.01)."""


def counts_whole(annotation) -> bool:
    """Whether a field of this type takes an integer and no float (so that a whole float
    given for it, as YAML reads ``1e4``, is that integer)."""
    args = (
        typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType)
        else (annotation,)
    )
    return int in args and float not in args


def whole_float(annotation, value):
    """``value`` as the integer it spells where the field takes integers and it is a whole float."""
    if isinstance(value, float) and value.is_integer() and counts_whole(annotation):
        return int(value)
    return value


class StrictSettings(BaseModel):
    """Settings read strictly: no string and no boolean is read as a number (pydantic's strict
    mode), while a whole float is the integer it spells (``n_test: 1e4``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_floats(cls, data: typing.Any) -> typing.Any:
        if not isinstance(data, dict):
            return data
        counts = _count_fields(cls)
        return {k: (int(v) if k in counts and isinstance(v, float) and v.is_integer() else v) for k, v in data.items()}


@functools.cache
def _count_fields(cls: type[BaseModel]) -> frozenset[str]:
    return frozenset(name for name, info in cls.model_fields.items() if counts_whole(info.annotation))


class BooleanTrialConfig(StrictSettings):
    """One trial of the sparse Boolean experiment (Edelman et al., ICML 2022, section 5)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    # The target and the data.
    task: TaskName = Field(
        description="s-sparse Boolean function: 'and', 'parity', or a task an installed "
        "package adds (docs/extending.md)"
    )
    T: int = Field(ge=2, le=1_000_000, description="context length (bits per sample)")
    s: int = Field(ge=1, le=64, description="sparsity: number of relevant positions")
    m: int = Field(ge=1, le=100_000_000, description="training-set size (samples)")
    seed: int = Field(ge=0, lt=2**62, description="seeds the support, data and init")
    restart: int = Field(
        0,
        ge=0,
        le=1023,
        description="which initialisation trains this training set: 0 is the "
        "seed's own; r > 0 draws the model afresh from (seed, r) while the support, training and "
        "test sets stay the seed's, so R restarts train one training set from R inits",
    )
    n_test: int = Field(
        2000,
        ge=N_TEST_MIN,
        le=10_000_000,
        description=f"held-out samples, at least {N_TEST_MIN}: test accuracy then resolves 0.01, so a "
        "0.95 threshold means at most 5 errors in 100",
    )
    reject_ambiguous: bool = Field(True, description="redraw training sets >1 support explains")
    max_redraws: int = Field(100, ge=0, le=100_000, description="redraws before failing")

    # The model.
    model: ModelName = Field(
        "transformer",
        description="CLS transformer, MLP baseline, or a model an installed package adds (docs/extending.md)",
    )
    d: int = Field(32, ge=1, le=65_536, description="width (transformer embedding size)")
    layers: int = Field(1, ge=1, le=64, description="attention layers, or MLP hidden layers")
    heads: int = Field(1, ge=1, le=256, description="attention heads; must divide d")
    mlp_width: int = Field(256, ge=1, le=1_000_000, description="MLP baseline hidden width")
    positions: Positions = Field(
        "learned",
        description="transformer position codes: 'learned' (a trained (T+1) x d "
        "table, the paper's protocol), 'fixed' (drawn once from N(0, 1) for (T, d), never "
        "trained) or 'sinusoidal' (never trained)",
    )
    ln_affine: bool = Field(
        True,
        description="train the gain and bias of the LayerNorm before each attention head; "
        "false fixes them at 1 and 0, so every input the head reads has Euclidean norm sqrt(d) "
        "(the bounded inputs of Edelman et al., section 3)",
    )

    # The norm bound of the theory (None: unbounded).
    norm_bound: float | None = Field(None, gt=0, le=1e12, description="bound B on the norms")
    norm_kind: NormKind = Field("frobenius", description="which matrix norm B bounds")

    # Training.
    lr: float = Field(1e-3, gt=0, le=10, description="AdamW learning rate")
    weight_decay: float = Field(0.0, ge=0, le=10, description="AdamW weight decay")
    max_epochs: int = Field(300, ge=1, le=10_000_000, description="epochs before giving up")
    batch_size: int | None = Field(None, ge=1, description="minibatch size; None: full batch")
    precision: Precision = Field("float32", description="float32, or bfloat16 mixed precision in training")
    stop: StopRule = Field(
        "fit",
        description="when training stops, besides divergence and max_epochs: 'fit' (the first epoch "
        "that classifies every training sample right), 'margin' (the first that does so with a "
        "normalised margin of at least margin_target: workers/margins.py) or 'budget' (never: "
        "max_epochs steps)",
    )
    margin_target: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="the normalised training margin at which stop 'margin' stops (needed by it, "
        "and a setting of it alone)",
    )

    # Test-only fault injection (a trial that raises, turns NaN, or kills its process).
    fault: Fault | None = Field(None, description="test only: make this trial misbehave")

    @model_validator(mode="after")
    def _check_shapes(self) -> BooleanTrialConfig:
        if (self.stop == "margin") != (self.margin_target is not None):
            raise ValueError(
                "margin_target (a number above 0, the normalised margin to train to) is the setting of "
                f"stop 'margin': give both or neither (got stop={self.stop!r}, margin_target={self.margin_target!r}; "
                "a grid that varies stop gives each rule its own grid block)"
            )
        if self.s >= self.T:
            raise ValueError(f"T must be greater than s (got T={self.T}, s={self.s})")
        # A package's model is not imported here (validation reads names alone): the worker
        # asks it the same question before the trial trains (workers/train_boolean.py).
        declared = DECLARED.get(self.model)
        wrong = problem(declared, self) if declared is not None else None
        if wrong:
            raise ValueError(wrong)
        return self

    def shape_key(self) -> tuple:
        """Settings that must be equal for trials to be trained together in one pack.

        Everything but ``seed``, ``restart``, ``norm_bound`` and ``fault``: those vary per
        trial inside a pack (per-trial generators, per-trial projection radius, per-trial fault).
        """
        return tuple(
            (k, v) for k, v in self.model_dump().items() if k not in ("seed", "restart", "norm_bound", "fault")
        )


def _known_teacher(name: str) -> str:
    if name in TEACHERS_BUILT_IN:
        return name
    names = teacher_names()
    if name not in names:
        raise ValueError(f"must be one of {names} (a package can add teachers: docs/extending.md)")
    return name


def _known_student(name: str) -> str:
    if name in STUDENTS_BUILT_IN:
        return name
    names = student_names()
    if name not in names:
        raise ValueError(f"must be one of {names} (a package can add students: docs/extending.md)")
    return name


# Names, not Literals: installed packages add teachers (tasks/teachers.py) and students
# (workers/student_registry.py), read at validation without loading them or torch.
TeacherName = Annotated[str, AfterValidator(_known_teacher)]
StudentModel = Annotated[str, AfterValidator(_known_student)]
Equivariance = Literal["none", "orthogonal", "augment", "permutation"]


class SymmetryTrialConfig(StrictSettings):
    """One trial of the symmetry experiment (Ma & Ying, arXiv 2210.06741; docs/claims.md 1b).

    A student learns a seq2seq function with knowledge Y = f(X, K) (X: n rows in R^d, K: k
    rows in R^d) from m samples of a teacher (tasks/seq2seq.py).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    # The target and the data.
    teacher: TeacherName = Field(
        description="equivariant, control (breaks O(d)), positional (breaks permutations), or a teacher "
        "an installed package adds (docs/extending.md)"
    )
    n: int = Field(ge=1, le=4096, description="input sequence length (rows of X)")
    k: int = Field(ge=1, le=4096, description="knowledge vectors (rows of K); every teacher reads them")
    d: int = Field(ge=2, le=4096, description="embedding dimension")
    m: int = Field(ge=1, le=100_000_000, description="training-set size (samples)")
    seed: int = Field(ge=0, lt=2**62, description="seeds the teacher, data and init")
    n_test: int = Field(1000, ge=1, le=10_000_000, description="held-out samples")

    # The student.
    model: StudentModel = Field(
        "transformer",
        description="generic transformer, MLP, or a student an installed package adds (docs/extending.md)",
    )
    equivariance: Equivariance = Field(
        "none",
        description="none; orthogonal (inner-product form); augment (random rotations); permutation (no positions)",
    )
    width: int = Field(32, ge=1, le=65_536, description="transformer width")
    heads: int = Field(4, ge=1, le=256, description="attention heads (transformer and inner-product form)")
    mlp_width: int = Field(256, ge=1, le=1_000_000, description="MLP hidden width")

    # Training.
    lr: float = Field(3e-3, gt=0, le=10, description="AdamW learning rate")
    weight_decay: float = Field(0.0, ge=0, le=10, description="AdamW weight decay")
    max_epochs: int = Field(1500, ge=1, le=10_000_000, description="full-batch steps")
    n_q: int = Field(8, ge=1, le=1000, description="random rotations/permutations per equivariance error")
    precision: Precision = Field("float32", description="float32, or bfloat16 mixed precision in training")

    fault: Fault | None = Field(None, description="test only: make this trial misbehave")

    @model_validator(mode="after")
    def _check_student(self) -> SymmetryTrialConfig:
        # The registry's declarations of the built-in students (workers/builtin_students.py); a
        # package's student is not imported here (validation reads names alone).
        if self.equivariance == "orthogonal" and self.model != type(self).model_fields["model"].default:
            raise ValueError(
                "model must be left out for the inner-product student (equivariance 'orthogonal'): "
                "it has no model choice"
            )
        form = built_in_form(self.model, self.equivariance)
        if self.equivariance == "permutation" and form is None:
            raise ValueError(
                f"equivariance 'permutation' needs model {permutation_models()} (an MLP has no position-free form)"
            )
        wrong = form.forms.check(self) if form is not None and form.forms is not None and form.forms.check else None
        if wrong:
            raise ValueError(wrong)
        return self

    def shape_key(self) -> tuple:
        """Settings that must be equal for trials to share a pack: all but seed and fault."""
        return tuple((k, v) for k, v in self.model_dump().items() if k not in ("seed", "fault"))
