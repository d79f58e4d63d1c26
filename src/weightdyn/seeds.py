"""Random seeds derived from a cell's parameter values (never from its grid position).

Adding a value to a sweep axis must not change any existing result, and a rerun must reproduce the
same numbers bit for bit whatever the number of cores. Every random stream of a cell is therefore
seeded from a SHA-256 hash of the canonical text of its parameters and of a stream name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from weightdyn.io import format_number


def canonical_parameters(params: Mapping[str, object]) -> str:
    """Canonical text of a parameter mapping: keys sorted, numbers in the canonical format."""
    parts = []
    for key in sorted(params):
        value = params[key]
        if isinstance(value, bool | np.bool_):
            text = str(bool(value)).lower()
        elif isinstance(value, int | float | np.number):
            text = format_number(value)
        else:
            text = str(value)
        parts.append(f"{key}={text}")
    return "|".join(parts)


def seed_sequence(stream: str, params: Mapping[str, object]) -> np.random.SeedSequence:
    """SeedSequence of the named random ``stream`` for the cell described by ``params``."""
    digest = hashlib.sha256(f"{stream}|{canonical_parameters(params)}".encode()).digest()
    return np.random.SeedSequence(int.from_bytes(digest[:16], "little"))


def generator(stream: str, params: Mapping[str, object]) -> np.random.Generator:
    """A PCG64 Generator for the named ``stream`` of the cell described by ``params``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(stream, params)))
