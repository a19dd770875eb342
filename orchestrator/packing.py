"""Grouping trials into packs: trials with equal ``shape_key()`` trained in one call.

Trials arrive in grid order with seeds (and norm bounds) varying fastest, so runs of
consecutive trials share a shape key; a pack is cut from such a run, at most its pack
size long. This streams: no list of all trials is ever held.

Pack size is the spec's ``execution.pack_size``, or with ``auto`` (the default) the number
of trials whose estimated training memory (:mod:`workers.memory`) fits
``execution.pack_memory_mb``, between 1 and :data:`AUTO_PACK_MAX`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel

from workers import EXPERIMENTS

# Beyond about 256 tiny trials a pack no longer gets faster per trial (BENCHMARKS.md,
# packed vs unpacked), and a lost worker would take more trials with it.
AUTO_PACK_MAX = 256


@dataclass(frozen=True)
class Pack:
    """Trials of one experiment trained together: ``ids[i]`` is the trial id of ``configs[i]``."""

    ids: tuple[str, ...]
    configs: tuple[BaseModel, ...]
    experiment: str = "sparse_boolean"

    def __len__(self) -> int:
        return len(self.ids)


def auto_pack_size(config: BaseModel, experiment: str, budget_bytes: float) -> int:
    """Trials like ``config`` that fit ``budget_bytes`` of training memory, in [1, AUTO_PACK_MAX].

    Raises:
        KeyError: unknown experiment.
    """
    per_trial = EXPERIMENTS[experiment].memory_bytes(config)
    return int(max(1, min(AUTO_PACK_MAX, budget_bytes // max(per_trial, 1))))


def pack_sizer(pack_size: int | str, experiment: str, pack_memory_mb: float,
               share: int | None = None) -> Callable[[BaseModel], int]:
    """The pack size of a trial's pack: ``pack_size`` itself, or with ``"auto"`` from the
    memory budget ``pack_memory_mb`` (MiB), computed once per shape key, and at most
    ``share`` (the sweep's trials divided over its workers, so that no worker idles while
    one trains a pack that holds the whole sweep)."""
    if pack_size != "auto":
        return lambda _config: int(pack_size)
    cache: dict[tuple, int] = {}

    def size(config: BaseModel) -> int:
        key = config.shape_key()
        if key not in cache:
            cache[key] = min(auto_pack_size(config, experiment, pack_memory_mb * 2**20), share or AUTO_PACK_MAX)
        return cache[key]

    return size


def make_packs(trials: Iterable[tuple[str, BaseModel]], pack_size: int | Callable[[BaseModel], int],
               experiment: str = "sparse_boolean") -> Iterator[Pack]:
    """Cut ``(trial_id, config)`` pairs into packs of equal shape key.

    Args:
        trials: the trials in grid order.
        pack_size: the most trials per pack, or a function of a pack's first config giving it.
        experiment: the experiment the trials belong to.
    """
    size_of = pack_size if callable(pack_size) else (lambda _config: pack_size)
    ids: list[str] = []
    configs: list[BaseModel] = []
    key, limit = None, 0
    for tid, cfg in trials:
        k = cfg.shape_key()
        if configs and (k != key or len(configs) == limit):
            yield Pack(tuple(ids), tuple(configs), experiment)
            ids, configs = [], []
        if not configs:
            key, limit = k, size_of(cfg)
        ids.append(tid)
        configs.append(cfg)
    if configs:
        yield Pack(tuple(ids), tuple(configs), experiment)
