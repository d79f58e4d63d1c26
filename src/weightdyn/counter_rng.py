"""Counter-based random numbers for the compiled kernels.

A kernel that draws its own random numbers must give the same result whatever the chunking of
the steps and whatever the number of threads sharing the replicas. Both hold when the number
drawn depends only on *which* draw it is: draw ``k`` of replica ``r`` of a cell is::

    u(r, k) = splitmix64(key_r + (k + 1) * GAMMA) >> 11  scaled to [0, 1),
    key_r   = splitmix64(cell_key + (r + 1) * GAMMA),

where ``splitmix64`` is the output function of Steele, Lea and Flood's SplitMix64 generator
(OOPSLA 2014; Vigna's reference constants) and ``GAMMA`` its odd increment (the golden ratio
times 2^64). For a fixed key the sequence ``k = 0, 1, ...`` *is* the SplitMix64 stream, which
passes BigCrush; different replicas start at effectively random points of the 2^64 cycle (two
streams of 1e12 draws overlap with probability about 1e-7). ``cell_key`` is one 64-bit integer
drawn from the cell's :class:`numpy.random.Generator` (:func:`cell_key`), so every cell keeps
its parameter-derived seed (:mod:`weightdyn.seeds`).

Normals use the Box-Muller transform of the pair of uniforms ``(2m, 2m + 1)``: normals
``2m`` and ``2m + 1`` of a replica are its cosine and sine branch.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "cell_key",
    "normal_pair",
    "normals",
    "replica_key",
    "replica_keys",
    "splitmix64",
    "uniform",
    "uniforms",
]

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_ONE = np.uint64(1)
_TO_UNIT = 2.0**-53
_TWO_PI = 2.0 * np.pi


@njit(cache=True, inline="always")
def splitmix64(z: np.uint64) -> np.uint64:
    """The SplitMix64 output function (a bijection of the 64-bit integers)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def replica_key(key: np.uint64, r: int) -> np.uint64:
    """The key of replica ``r`` of the cell with key ``key``."""
    return splitmix64(key + (np.uint64(r) + _ONE) * _GAMMA)


@njit(cache=True, inline="always")
def uniform(key: np.uint64, k: np.uint64) -> float:
    """Draw ``k`` of the stream ``key``: a double in [0, 1) with 53 random bits."""
    return float(splitmix64(key + (k + _ONE) * _GAMMA) >> _S11) * _TO_UNIT


@njit(cache=True, inline="always")
def normal_pair(key: np.uint64, m: np.uint64) -> tuple[float, float]:
    """Normals ``2m`` and ``2m + 1`` of the stream ``key`` (Box-Muller of uniforms 2m, 2m+1)."""
    u1 = 1.0 - uniform(key, np.uint64(2) * m)  # in (0, 1]: log is finite
    u2 = uniform(key, np.uint64(2) * m + _ONE)
    rho = np.sqrt(-2.0 * np.log(u1))
    return rho * np.cos(_TWO_PI * u2), rho * np.sin(_TWO_PI * u2)


def cell_key(rng: np.random.Generator) -> np.uint64:
    """One 64-bit key drawn from the cell's generator: the root of all its kernel streams."""
    return np.uint64(rng.integers(0, 2**64, dtype=np.uint64))


def replica_keys(rng: np.random.Generator, replicas: int) -> np.ndarray:
    """The keys (R,) uint64 of the replicas of a kernel run, rooted in one draw from ``rng``."""
    return _replica_keys(cell_key(rng), replicas)


@njit(cache=True)
def _replica_keys(key: np.uint64, replicas: int) -> np.ndarray:
    out = np.empty(replicas, np.uint64)
    for r in range(replicas):
        out[r] = replica_key(key, r)
    return out


@njit(cache=True)
def uniforms(keys: np.ndarray, step0: int, n: int, k: int) -> np.ndarray:
    """The uniforms (n, R, k) that a kernel drawing ``k`` per step uses at steps
    ``step0 .. step0 + n - 1``: draw ``step * k + j`` of each replica's stream."""
    out = np.empty((n, keys.shape[0], k))
    for t in range(n):
        base = np.uint64(step0 + t) * np.uint64(k)
        for r in range(keys.shape[0]):
            for j in range(k):
                out[t, r, j] = uniform(keys[r], base + np.uint64(j))
    return out


@njit(cache=True)
def normals(keys: np.ndarray, step0: int, n: int, k: int) -> np.ndarray:
    """The standard normals (n, R, k) that a kernel drawing ``k`` per step uses at steps
    ``step0 .. step0 + n - 1``: normals ``step k' + j`` (``k'`` = k rounded up to even)."""
    half = (k + 1) // 2
    out = np.empty((n, keys.shape[0], k))
    for t in range(n):
        base = np.uint64(step0 + t) * np.uint64(half)
        for r in range(keys.shape[0]):
            for m in range(half):
                a, b = normal_pair(keys[r], base + np.uint64(m))
                out[t, r, 2 * m] = a
                if 2 * m + 1 < k:
                    out[t, r, 2 * m + 1] = b
    return out
