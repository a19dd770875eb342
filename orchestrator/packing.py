"""Grouping trials into packs: trials with equal ``shape_key()`` trained in one call.

Trials arrive in grid order with seeds (and norm bounds) varying fastest, so runs of
consecutive trials share a shape key; a pack is cut from such a run, at most
``pack_size`` long. This streams: no list of all trials is ever held.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pydantic import BaseModel


@dataclass(frozen=True)
class Pack:
    """Trials of one experiment trained together: ``ids[i]`` is the trial id of ``configs[i]``."""

    ids: tuple[str, ...]
    configs: tuple[BaseModel, ...]
    experiment: str = "sparse_boolean"

    def __len__(self) -> int:
        return len(self.ids)


def make_packs(trials: Iterable[tuple[str, BaseModel]], pack_size: int,
               experiment: str = "sparse_boolean") -> Iterator[Pack]:
    """Cut ``(trial_id, config)`` pairs into packs of equal shape key, at most ``pack_size`` each."""
    ids: list[str] = []
    configs: list[BaseModel] = []
    key = None
    for tid, cfg in trials:
        k = cfg.shape_key()
        if configs and (k != key or len(configs) == pack_size):
            yield Pack(tuple(ids), tuple(configs), experiment)
            ids, configs = [], []
        ids.append(tid)
        configs.append(cfg)
        key = k
    if configs:
        yield Pack(tuple(ids), tuple(configs), experiment)
