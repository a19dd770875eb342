"""Per-epoch learning curves of trials, kept only when a run asks for them
(``execution.curves`` of the spec; off by default).

A training loop already measures each trial's training set before each epoch's step (its
stopping rule reads the result): a curve keeps some of those measurements, never takes one
of its own. A point at epoch ``e`` is the training set's loss and accuracy of the weights after
``e`` optimiser epochs (so epoch 0 is the initialisation). Points are kept every ``stride``
epochs (0, stride, 2 stride, ...) and at the last epoch the loop measured; ``stride`` is the
spec's ``every``, widened when a trial's ``max_epochs`` would give more than ``max_points``
points (:meth:`CurvePlan.stride`). Nothing here runs when curves are off, so the loops do the
same work as without them, and a trial's numbers never depend on whether they are kept.

No torch import: values may be floats or 0-d tensors. A tensor on the CPU is read at once
(no sync there): kept as a tensor, each point pinned small allocations amid the loop's large
transient ones, and a worker's memory grew 1.3 to 17 KB a point (one-layer transformer T = 300;
MLP width 2048, unstacked), where floats cost about 250 bytes (workers/memory.py
``CURVE_POINT_BYTES``). One on another device is kept as it is and read once, at the end, so
that a GPU loop gains no host sync per epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

CURVE_KEY = "curve"
"""The key of a row (as a pack returns it) holding its curve; the driver's writer takes it out
of the row before the row is written (results/curves_table.py), so ``trials`` never has it."""


@dataclass(frozen=True)
class CurvePlan:
    """Which epochs a curve keeps.

    Attributes:
        every: keep every ``every``-th epoch (>= 1), from epoch 0.
        max_points: at most this many points per trial (>= 2), the last epoch included.
    """

    every: int = 1
    max_points: int = 200

    @classmethod
    def from_wire(cls, value: dict | None) -> CurvePlan | None:
        """A plan from the plain dict the driver sends (``execution.curves``), or None (off).

        Raises:
            ValueError: ``every`` below 1 or ``max_points`` below 2 (a worker checks again
                what the spec checked).
        """
        if value is None:
            return None
        plan = cls(int(value["every"]), int(value["max_points"]))
        if plan.every < 1 or plan.max_points < 2:
            raise ValueError(f"curves: every must be >= 1 and max_points >= 2, got {value!r}")
        return plan

    def stride(self, max_epochs: int) -> int:
        """Epochs between kept points for a trial of ``max_epochs``: ``every``, or more where
        that would keep more than ``max_points`` points. A loop measures epochs 0 ..
        max_epochs - 1 at most, so at most ``ceil((max_epochs - 1) / stride) + 1`` points are
        kept (the regular ones and the last): within ``max_points`` exactly when ``stride >=
        ceil((max_epochs - 1) / (max_points - 1))``, the least such stride."""
        return max(self.every, -(-(max(max_epochs, 1) - 1) // (self.max_points - 1)))

    def curve(self, max_epochs: int) -> Curve:
        """An empty curve for one trial of ``max_epochs``."""
        return Curve(self.stride(max_epochs))


class Curve:
    """The kept points of one trial, in epoch order (:meth:`note` once per measured epoch)."""

    def __init__(self, stride: int):
        self.stride = stride
        self._kept: list[tuple[int, Any, Any, Any]] = []
        self._last: tuple[int, Any, Any, Any] | None = None

    def note(self, epoch: int, loss: Any, acc: Any = None, error: Any = None) -> None:
        """The measurement of epoch ``epoch``: ``loss`` (mean training loss), ``acc``
        (training accuracy, a fraction; None where the experiment has none) and ``error``
        (relative training error; None where it has none); floats or 0-d tensors."""
        point = (epoch, _host(loss), _host(acc), _host(error))
        if epoch % self.stride == 0:
            self._kept.append(point)
            self._last = None
        else:
            self._last = point  # kept only if no later epoch is measured

    def columns(self) -> dict[str, list]:
        """The points as columns: ``epoch`` (int), ``train_loss``, ``train_acc``,
        ``train_error`` (float or None: not measured, or not finite)."""
        points = self._kept + ([self._last] if self._last is not None else [])
        return {
            "epoch": [p[0] for p in points],
            "train_loss": [_number(p[1]) for p in points],
            "train_acc": [_number(p[2]) for p in points],
            "train_error": [_number(p[3]) for p in points],
        }


def _host(value: Any) -> Any:
    """``value`` as a float when it is one or a CPU tensor (reading it costs no sync); else as
    it is (None, or a tensor on a GPU: read at the end)."""
    if value is None or isinstance(value, float):
        return value
    device = getattr(value, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        return value
    return float(value)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def attach(rows: list[dict], curves: list[Curve | None]) -> None:
    """Put each trial's curve (its :meth:`Curve.columns`) into its row under :data:`CURVE_KEY`."""
    for row, curve in zip(rows, curves, strict=True):
        if curve is not None:
            row[CURVE_KEY] = curve.columns()


def note_slots(
    curves: list[Curve | None],
    trial_of_slot: list[int],
    active: list[bool],
    epoch: int,
    loss: list[float],
    acc: list[float] | None = None,
    error: list[float] | None = None,
) -> None:
    """Note one epoch of a stacked pack (workers/stacked.py): slot ``s``, when ``active[s]``,
    is trial ``trial_of_slot[s]`` and measured ``loss[s]``, ``acc[s]``, ``error[s]`` (lists
    over the slots, read from the device once for the whole pack)."""
    for s, (t, on) in enumerate(zip(trial_of_slot, active, strict=True)):
        curve = curves[t]
        if on and curve is not None:
            curve.note(
                epoch,
                loss[s],
                None if acc is None else acc[s],
                None if error is None else error[s],
            )
