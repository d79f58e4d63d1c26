"""Mini-batch index choice shared by the SGD kernels (paper 000 Eq. 10; App. C sampling)."""

from __future__ import annotations

import numpy as np
from numba import njit

from weightdyn.counter_rng import uniform


@njit(cache=True, inline="always")
def draw_batch(u: np.ndarray, P: int, with_replacement: bool, perm: np.ndarray, idx: np.ndarray):
    """Fill ``idx`` (S,) with one mini-batch chosen by the uniforms ``u`` (S,) in [0, 1).

    With replacement: ``idx_s = min(floor(u_s P), P - 1)``. Without replacement: a partial
    Fisher-Yates shuffle of the persistent permutation ``perm`` (P,), ``k = j + floor(u_j (P - j))``
    swapped into place j; ``perm[:S]`` is then a uniformly random S-subset whatever ``perm`` was.
    """
    S = idx.shape[0]
    if with_replacement:
        for s in range(S):
            k = int(u[s] * P)
            if k >= P:
                k = P - 1
            idx[s] = k
    else:
        for j in range(S):
            k = j + int(u[j] * (P - j))
            if k >= P:
                k = P - 1
            tmp = perm[j]
            perm[j] = perm[k]
            perm[k] = tmp
            idx[j] = perm[j]


@njit(cache=True, inline="always")
def draw_step_batch(key, step, u: np.ndarray, P: int, with_replacement: bool, perm: np.ndarray,
                    idx: np.ndarray):  # fmt: skip
    """The mini-batch of global step ``step`` of the replica with stream ``key``: uniforms
    ``step S .. step S + S - 1`` of its counter-based stream into ``u`` (S,), then
    :func:`draw_batch` into ``idx`` (the kernels' shared App. C sampling)."""
    S = u.shape[0]
    base = np.uint64(step) * np.uint64(S)
    for s in range(S):
        u[s] = uniform(key, base + np.uint64(s))
    draw_batch(u, P, with_replacement, perm, idx)
