"""Stable seeds derived from a trial's settings.

Every random stream of a trial (relevant positions, training set, test set, model
initialisation) gets its own generator whose seed is a hash of a purpose tag and the
settings that stream depends on. A trial's data therefore depend only on its own
settings, never on which other trials share its pack or on the order they run in.
"""

from __future__ import annotations

import hashlib

import torch


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the ``repr`` of ``parts``, stable across processes and hosts.

    Python's ``hash`` is salted per process, so it cannot be used here.

    Args:
        parts: values (strings, ints, floats, None) that identify one random stream.

    Returns:
        int in ``[0, 2**63)``.
    """
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A torch generator on ``device`` seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g
