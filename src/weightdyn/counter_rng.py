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

Normal ``j`` of a replica (:func:`normal`) comes from Marsaglia and Tsang's ziggurat (J. Stat.
Softw. 5(8), 2000) with 128 layers in Doornik's form (ZIGNOR, 2005): the 64-bit word
``h = splitmix64(key_r + (j + 1) * GAMMA)`` (draw ``j``) gives the layer (its low 7 bits) and
a uniform in [-1, 1) (its high 53 bits); 98.8 % of normals are that word times a table entry.
The rest (the wedges and the tail beyond r = 3.4426) take further words from the stream keyed
by ``h`` itself, ``splitmix64(h + (a + 1) * GAMMA)``, a = 0, 1, ..., so normal ``j`` still
depends only on ``(key_r, j)``. A normal costs one SplitMix64 word and a table look-up instead
of Box-Muller's log, sqrt, sin and cos (``benchmarks/sgf_throughput.py``: normals column).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "cell_key",
    "normal",
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
_LAYER_MASK = np.uint64(127)


def _ziggurat_tables() -> tuple[np.ndarray, np.ndarray]:
    """ZIGNOR's layer edges ``x`` (129,) and fast-path ratios ``x[i+1] / x[i]`` (128,)."""
    r, v = 3.442619855899, 9.91256303526217e-3  # 128 layers of equal area v
    x = np.zeros(129)
    f = np.exp(-0.5 * r * r)
    x[0], x[1] = v / f, r
    for i in range(2, 128):
        x[i] = np.sqrt(-2.0 * np.log(v / x[i - 1] + f))
        f = np.exp(-0.5 * x[i] * x[i])
    return x, x[1:] / x[:-1]


_ZIG_X, _ZIG_RATIO = _ziggurat_tables()
_ZIG_R = float(_ZIG_X[1])


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
def normal(key: np.uint64, j: np.uint64) -> float:
    """Normal ``j`` of the stream ``key``: the ziggurat's fast path on draw ``j``, the rare
    wedge and tail cases in :func:`_normal_slow` (module docstring)."""
    h = splitmix64(key + (j + _ONE) * _GAMMA)
    i = int(h & _LAYER_MASK)
    u = 2.0 * (float(h >> _S11) * _TO_UNIT) - 1.0
    if abs(u) < _ZIG_RATIO[i]:
        return u * _ZIG_X[i]
    return _normal_slow(h, i, u)


@njit(cache=True)
def _normal_slow(h: np.uint64, i: int, u: float) -> float:
    """The ziggurat outside the fast path: the tail beyond r for the base layer (``i = 0``),
    else the wedge test; a rejected try draws a new layer and uniform. Words come from the
    stream keyed by ``h``."""
    a = np.uint64(0)
    while True:
        if i == 0:  # Marsaglia's tail: r - log(U1) / r, accepted when -2 log U2 >= x^2
            while True:
                x = np.log(1.0 - uniform(h, a)) / _ZIG_R
                y = np.log(1.0 - uniform(h, a + _ONE))
                a += np.uint64(2)
                if -2.0 * y >= x * x:
                    return x - _ZIG_R if u < 0.0 else _ZIG_R - x
        x = u * _ZIG_X[i]
        f0 = np.exp(-0.5 * (_ZIG_X[i] * _ZIG_X[i] - x * x))
        f1 = np.exp(-0.5 * (_ZIG_X[i + 1] * _ZIG_X[i + 1] - x * x))
        if f1 + uniform(h, a) * (f0 - f1) < 1.0:
            return x
        g = splitmix64(h + (a + np.uint64(2)) * _GAMMA)
        a += np.uint64(2)
        i = int(g & _LAYER_MASK)
        u = 2.0 * (float(g >> _S11) * _TO_UNIT) - 1.0
        if abs(u) < _ZIG_RATIO[i]:
            return u * _ZIG_X[i]


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
    ``step0 .. step0 + n - 1``: normal ``step * k + j`` of each replica's stream."""
    out = np.empty((n, keys.shape[0], k))
    for t in range(n):
        base = np.uint64(step0 + t) * np.uint64(k)
        for r in range(keys.shape[0]):
            for j in range(k):
                out[t, r, j] = normal(keys[r], base + np.uint64(j))
    return out
