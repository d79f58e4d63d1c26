"""Mini-batch index choice shared by the SGD kernels (paper 000 Eq. 10; App. C sampling)."""

from __future__ import annotations

import numpy as np
from numba import njit


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
