"""Specs from Python: check a spec and say what it would run, write a starter spec, list and
copy the example specs (what ``attnsweep validate``, ``init`` and ``examples`` print)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from attnsweep.orchestrator.errors import AttnsweepError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from attnsweep.orchestrator.spec import SweepSpec


@dataclass(frozen=True)
class SpecCheck:
    """What :func:`check_spec` found out about a valid spec, without running it.

    Attributes:
        spec: the parsed spec.
        workers: the workers a run here would start (no more than it has trials).
        n_packs: the packs of a grid sweep for that many workers (None for an adaptive search).
        packs_exact: whether ``n_packs`` is counted over every shape (else estimated from a
            sample of them).
        largest_trial_bytes: the training memory of the largest trial seen.
        budget_bytes: ``execution.pack_memory_mb`` in bytes: a larger trial runs alone in its
            pack and may not fit a worker.
        pooled_axes: a symmetry grid's axes that vary but do not key its cells (analyze
            pools their values in one cell).
        curve_points: the most learning-curve points a trial seen keeps (0 without
            ``execution.curves``).
        curve_bytes: the most a trial seen's learning curve holds in its worker until its pack
            ends (bytes, :func:`workers.memory.curve_bytes`; part of ``largest_trial_bytes``).
    """

    spec: SweepSpec
    workers: int
    n_packs: int | None
    packs_exact: bool
    largest_trial_bytes: int
    budget_bytes: int
    pooled_axes: list[str] = field(default_factory=list)
    curve_points: int = 0
    curve_bytes: int = 0


def check_spec(spec: str | Path, max_trials: int = 1_000_000, overrides: Sequence[str] = ()) -> SpecCheck:
    """Check the spec file ``spec``, with ``overrides`` (``PATH=VALUE`` texts, as ``--set``
    gives them: docs/spec.md) put into it, and count what it would run here; writes nothing and
    imports neither torch nor Ray, nor any package that adds a task, teacher or student: their
    names are read from the entry points' metadata, and a package's student is sized at the
    memory estimate's err-high default (workers/student_registry.py ``without_loading``).

    Raises:
        orchestrator.SpecError: the spec is invalid (or an override: the message names its
            ``--set``), or its grid holds more than ``max_trials`` trials.
    """
    from attnsweep.workers.student_registry import without_loading

    with without_loading():
        return _check_spec(spec, max_trials, overrides)


def _check_spec(spec: str | Path, max_trials: int, overrides: Sequence[str] = ()) -> SpecCheck:
    from attnsweep.orchestrator.packing import count_packs, spec_pack_sizer
    from attnsweep.orchestrator.spec import load_spec
    from attnsweep.workers.memory import curve_bytes, curve_points

    s = load_spec(spec, max_trials=max_trials, overrides=overrides)
    workers = s.resources.num_workers or max(1, int((os.cpu_count() or 1) / s.resources.cpus_per_worker))
    workers = min(workers, s.n_trials())  # a run starts no more workers than it has trials (executors.py)
    budget = s.execution.pack_memory_mb * 2**20
    biggest = most_points = most_curve = 0
    n_packs, exact = None, False

    def trial_bytes(cfg) -> int:  # its training memory, its curve's buffer included
        nonlocal most_points, most_curve
        curve = curve_bytes(cfg.max_epochs, s.execution.curves)
        most_points = max(most_points, curve_points(cfg.max_epochs, s.execution.curves))
        most_curve = max(most_curve, curve)
        return s.family.working_bytes(cfg) + s.family.memory_bytes(cfg) + curve

    if not s.search.adaptive:  # one pass over the runs of one shape: pack count and memory (no trial list)
        sizer = spec_pack_sizer(s, workers)

        def size_of(cfg) -> int:
            nonlocal biggest
            size = sizer(cfg)
            biggest = max(biggest, trial_bytes(cfg))
            return size

        n_packs, exact = count_packs(s, size_of)
    biggest = max(
        [
            biggest,
            *(trial_bytes(c) for c in _largest_trials(s)),
        ]
    )
    pooled = []
    keys = s.family.cell_keys  # where the analysis keys its cells by these alone (stats/symmetry.py)
    if keys is not None:
        pooled = sorted({axis for g in s.grids for axis, values in g.items() if len(values) > 1} - keys - {"m"})
    return SpecCheck(s, workers, n_packs, exact, biggest, budget, pooled, most_points, most_curve)


def _largest_trials(s):
    """The trials whose memory the pack count did not already see: an adaptive search's at
    the top of its m range; of a grid with more shapes than the count visits (a sample),
    each block's trial with every numeric axis at its largest value (memory grows with each)."""
    from attnsweep.orchestrator.packing import shape_groups

    if s.search.adaptive:
        yield from (s.family.config(**cell, m=s.search.m.max, seed=s.seeds[0]) for cell in s.cells())
        return
    if shape_groups(s)[2]:
        return
    for block in range(len(s.grids)):
        top = {
            k: max(v) if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) else v[0]
            for k, v in s.axes(block).items()
        }
        with contextlib.suppress(ValueError):  # the largest values together break a cross-field rule
            yield s.family.config(**s.fixed, **top)


STARTER = """\
# A starter sweep: the critical sample size m* against the context length T for 3-sparse AND.
# `attnsweep validate --show {path}` lists every trial setting and which ones are defaults;
# `attnsweep examples` lists the example specs (attnsweep examples copy NAME to start from one).
name: {name}
seeds: 4
grid:
  T: [8, 16, 32]
  m: {{start: 8, stop: 256, num: 6, scale: log}}   # 8, 16, 32, 64, 128, 256
fixed:
  task: and          # or parity
  s: 3               # relevant bits
  model: transformer # or mlp (the baseline)
  d: 32
  heads: 4
  lr: 3e-3
  max_epochs: 1000
analysis:
  acc_threshold: 0.95  # a seed succeeds at this test accuracy
  success_frac: 0.5    # m* is where the success rate (the share of seeds that succeed) crosses this
                       # fraction: a logistic fit of success against ln m, solved for it (docs/method.md)
# Your own claims, judged before the paper's by analyze and report (docs/spec.md, "Your claims"):
# claims:
#   - {{id: mine-1, kind: growth, axis: T, law: log}}   # needs T over 3 decades to be decided
"""


def write_starter(path: Path) -> Path:
    """Write a starter sweep spec at ``path``, named after the file (``my-sweep`` where its
    name cannot name a sweep); returns ``path``.

    Raises:
        AttnsweepError: something is already at ``path``, or its folder is missing.
    """
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", path.stem)
    name = stem if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,99}", stem) else "my-sweep"
    _write_new(path, STARTER.format(name=name, path=_comment_path(path)).encode())
    return path


def _comment_path(path: Path) -> str:
    """``path`` as the starter's comment names it: a shell word (quoted where it needs to be),
    or ``SPEC`` where the path holds a character a one-line YAML comment cannot hold as it is
    (a newline, a carriage return, another control character: after one, the rest of the path
    would be read as the spec's own keys)."""
    import shlex

    text = str(path)
    if any(ch.isspace() and ch != " " or not ch.isprintable() for ch in text):
        return "SPEC"
    return shlex.quote(text)


def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file at ``path``, never over a file, a link or a folder, and
    whole or not at all: written to a temporary file beside it, synced, then linked to
    ``path`` (which fails where anything is there), so a full disk or a kill leaves no file
    at ``path``, never a short one.

    Raises:
        AttnsweepError: something is already at ``path``, its folder is missing, or the file
            cannot be written (a full disk, no permission), naming ``path`` and why; nothing
            is left at ``path`` then.
    """
    folder = path.parent
    if os.path.lexists(path):
        raise AttnsweepError(f"{path}: already exists; give another path (nothing was written)")
    if not folder.is_dir():
        raise AttnsweepError(f"{path}: its folder does not exist")
    temp = folder / f".{path.name[:100]}.writing-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)  # fails where anything is at path, a dangling link included
        except FileExistsError:
            raise AttnsweepError(f"{path}: already exists; give another path (nothing was written)") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                raise
            # A file system without hard links: checked above, then renamed into place.
            if os.path.lexists(path):
                raise AttnsweepError(f"{path}: already exists; give another path (nothing was written)") from None
            os.rename(temp, path)
    except OSError as exc:
        raise AttnsweepError(f"{path}: cannot write it: {exc.strerror or exc}; nothing was written") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def examples_dir() -> Path:
    """The folder of the example specs: ``sweeps/`` of a checkout (or an editable install),
    ``attnsweep/examples/`` of an installed wheel (package data)."""
    face = Path(__file__).resolve().parent
    for folder in (face / "examples", face.parent / "sweeps"):
        if folder.is_dir() and any(folder.glob("*.yaml")):
            return folder
    raise AttnsweepError(f"no example specs found beside {face}: reinstall attnsweep")


def examples() -> list[tuple[str, str]]:
    """The example specs by name: (name, description on one line; empty where the file has
    none or cannot be read as a spec)."""
    import yaml

    found = []
    for path in sorted(examples_dir().glob("*.yaml"), key=lambda p: p.stem):
        try:
            data = yaml.safe_load(path.read_text()) or {}
            about = " ".join(str(data.get("description") or "").split())
        except (yaml.YAMLError, AttributeError):
            about = ""
        found.append((path.stem, about))
    return found


def copy_example(name: str, dest: Path | None = None) -> Path:
    """Copy the example spec ``name`` (with or without ``.yaml``) to ``dest`` (a file, or a
    folder to copy it into; default ``NAME.yaml`` here), never over an existing file;
    returns the file written.

    Raises:
        AttnsweepError: no such example, or something is already at the target.
    """
    folder = examples_dir()
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    stem = name[:-5] if name.endswith(".yaml") else name
    if stem not in names:
        raise AttnsweepError(f"examples copy: no example {name!r}; the examples are: {', '.join(names)}")
    target = dest if dest is not None else Path(f"{stem}.yaml")
    if target.is_dir():
        target = target / f"{stem}.yaml"
    _write_new(target, (folder / f"{stem}.yaml").read_bytes())
    return target
