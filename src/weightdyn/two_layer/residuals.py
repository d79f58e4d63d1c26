"""The residual term ``K`` of a two-layer SGD or SGF step (paper 000 Eqs. 41, 52).

``K = sum_k a_k (y_k - w x_k) x_k^T`` over a batch of samples, for the float64 kernels of
:mod:`weightdyn.two_layer.simulate` (``w = W2 W1``, ``y`` the targets) and the deviation-form
kernels of :mod:`weightdyn.two_layer.deviation` (``w`` the product's deviation ``dw``, ``y`` the
residuals ``e0`` at the reference). Generic in the dtype of ``K``: the dot products accumulate
in it (float64 or float32).
"""

from __future__ import annotations

from numba import njit

__all__ = ["add_sample", "add_samples"]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def add_sample(K, w, x, y, a):
    """``K += a (y - w x) x^T``: one sample's residual term of ``K`` (Eqs. 41, 52)."""
    N_o, N_i = K.shape
    zero = K.dtype.type(0)
    for o in range(N_o):
        wo = w[o]
        s = zero
        for i in range(N_i):
            s += wo[i] * x[i]
        e = a * (y[o] - s)
        Ko = K[o]
        for i in range(N_i):
            Ko[i] += e * x[i]


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"}, inline="always")
def add_samples(K, w, X, Y, rows, a):
    """``K += sum_k a[k] (y_k - w x_k) x_k^T`` over the samples ``rows`` (Eqs. 41, 52).

    Samples go four at a time: four residuals share each load of ``w``, and ``K`` takes four
    rows per load and store (the loads and stores, not the multiply-adds, bound this loop);
    the remainder goes one by one (:func:`add_sample`).
    """
    n = rows.shape[0]
    N_o, N_i = K.shape
    zero = K.dtype.type(0)
    n4 = n - n % 4
    for k in range(0, n4, 4):
        m0, m1, m2, m3 = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
        x0, x1, x2, x3 = X[m0], X[m1], X[m2], X[m3]
        for o in range(N_o):
            wo = w[o]
            s0 = s1 = s2 = s3 = zero
            for i in range(N_i):
                wi = wo[i]
                s0 += wi * x0[i]
                s1 += wi * x1[i]
                s2 += wi * x2[i]
                s3 += wi * x3[i]
            e0 = a[k] * (Y[m0, o] - s0)
            e1 = a[k + 1] * (Y[m1, o] - s1)
            e2 = a[k + 2] * (Y[m2, o] - s2)
            e3 = a[k + 3] * (Y[m3, o] - s3)
            Ko = K[o]
            for i in range(N_i):
                Ko[i] += (e0 * x0[i] + e1 * x1[i]) + (e2 * x2[i] + e3 * x3[i])
    for k in range(n4, n):
        add_sample(K, w, X[rows[k]], Y[rows[k]], a[k])
