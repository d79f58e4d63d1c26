"""Linear algebra and estimators of the two-layer cell (paper 000 Sec. III, Eqs. 62-78).

- :class:`Layout`: row-major (simulation) vs column-major (theory, ``vec`` of the paper) order of
  ``theta = [vec W1; vec W2]``.
- :class:`Linearisation`: the exact linearisation at one point (Jacobian of the gradient and
  exact mini-batch noise, Lyapunov equation on the range of the drift; Eqs. 62-66 without the
  paper's whitening and large-P approximations).
- Spectra of one block of a covariance given in the range basis (:func:`block_spectrum`,
  :func:`block_eig`), the loss perturbations of Fig. 7 (:func:`delta_L_W1`, :func:`delta_L_W2`,
  :func:`curvature_W2`, Eq. 73), the autocorrelation of Eq. 76 and the jackknife over
  (replica, time-block) groups.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from weightdyn.two_layer import theory as tl

__all__ = [
    "Layout",
    "Linearisation",
    "autocorrelation",
    "block_eig",
    "block_spectrum",
    "curvature_W2",
    "delta_L_W1",
    "delta_L_W2",
    "mean_and_jackknife",
    "median_rel_error",
    "nanmean",
    "nanstd",
    "pad",
    "trace_ratio",
]


def _c_to_f(n_rows: int, n_cols: int) -> np.ndarray:
    """Index array ``p`` with ``vec_F(A) = A.ravel()[p]`` for ``A`` of shape (n_rows, n_cols)."""
    return np.arange(n_rows * n_cols).reshape(n_rows, n_cols).ravel(order="F")


class Layout:
    """Row-major (simulation) vs column-major (theory) index maps of theta."""

    def __init__(self, N_i: int, N_h: int, N_o: int):
        self.N_i, self.N_h, self.N_o = N_i, N_h, N_o
        self.n1, self.n2 = N_h * N_i, N_o * N_h
        self.n = self.n1 + self.n2
        # theta_F = theta_C[perm]
        self.perm = np.concatenate([_c_to_f(N_h, N_i), self.n1 + _c_to_f(N_o, N_h)])

    def rows_to_c(self, A: np.ndarray) -> np.ndarray:
        """Re-index the rows of a theta_F-space matrix to theta_C order."""
        out = np.empty_like(A)
        out[self.perm] = A
        return out


class Linearisation:
    """Exact linearisation at one point: drift eigenbasis, range projector, Lyapunov M.

    ``Q`` (n, r) spans the range of the drift (its ``r = N_o rank(Sigma_xx)`` largest
    eigenvalues ``g``, descending), in theta_C order (rows); ``Mr`` is the covariance in that
    basis (``M = Q Mr Q^T``), the solution of ``G M + M G^T = lr C`` restricted to the range.

    The rank is structural (Eq. 64, the Gauss-Newton rank), not a tolerance: away from an exact
    minimum the other eigenvalues spread over ``+-||E||_2`` (:func:`theory.residual_norm`),
    ~1e-10 at the gradient-flow ``W^0`` (1e7 below ``g[-1]``) and up to 0.42 ``g[-1]`` at
    the time-averaged SGD local points of the test cells.
    """

    def __init__(self, X, Y, W1, W2, lr, S, sampling, rank, layout: Layout):
        G = tl.exact_drift(X, Y, W1, W2)
        C = tl.exact_noise_covariance(X, Y, W1, W2, S, sampling)
        g, R = np.linalg.eigh(0.5 * (G + G.T))
        g, R = g[::-1], R[:, ::-1]
        self.g_all = g
        self.g = g[:rank]
        Qf = R[:, :rank]
        Cr = Qf.T @ C @ Qf
        Gr = np.diag(self.g)
        Mr = scipy.linalg.solve_continuous_lyapunov(Gr, lr * 0.5 * (Cr + Cr.T))
        self.Mr = 0.5 * (Mr + Mr.T)
        self.Q = layout.rows_to_c(Qf)
        self.trace_G = float(np.trace(G))
        self.layout = layout
        self.W1, self.W2 = W1, W2

    @property
    def tau_time(self) -> float:
        """Slowest relaxation time ``1/g_min`` in gradient-flow time (``lr`` per step)."""
        return 1.0 / float(self.g[-1])

    def blocks(self) -> tuple[np.ndarray, np.ndarray]:
        """The W1 rows and the W2 rows of ``Q``."""
        n1 = self.layout.n1
        return self.Q[:n1], self.Q[n1:]


def _psd_sqrt(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    return (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T


def block_spectrum(Qb: np.ndarray, A: np.ndarray, length: int) -> np.ndarray:
    """Eigenvalues (descending, zero-padded to ``length``) of ``Qb A Qb^T`` for PSD ``A``."""
    R = _psd_sqrt(A)
    ev = np.linalg.eigvalsh(R @ (Qb.T @ Qb) @ R)[::-1]
    out = np.zeros(length)
    m = min(length, ev.size)
    out[:m] = np.clip(ev[:m], 0.0, None)
    return out


def block_eig(Qb: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nonzero eigenpairs of ``Qb A Qb^T`` (descending), eigenvectors in the rows' space."""
    R = _psd_sqrt(A)
    ev, U = np.linalg.eigh(R @ (Qb.T @ Qb) @ R)
    ev, U = ev[::-1], U[:, ::-1]
    keep = ev > ev[0] * 1e-12 if ev.size and ev[0] > 0 else np.zeros(ev.size, bool)
    vecs = Qb @ R @ U[:, keep] / np.sqrt(ev[keep])
    return ev[keep], vecs


def nanmean(a: np.ndarray, axis: int | None = None) -> float | np.ndarray:
    """``nanmean`` that returns NaN (no warning) where every value is NaN."""
    a = np.asarray(a, dtype=float)
    n = np.sum(np.isfinite(a), axis=axis)
    total = np.nansum(a, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    return float(out) if np.ndim(out) == 0 else out


def nanstd(a: np.ndarray) -> np.ndarray:
    """Standard deviation over axis 0 (ddof 1) ignoring NaN; NaN with fewer than 2 values."""
    n = np.sum(np.isfinite(a), axis=0)
    m = nanmean(a, axis=0)
    ss = np.nansum((a - m) ** 2, axis=0)
    return np.where(n > 1, np.sqrt(ss / np.maximum(n - 1, 1)), np.nan)


def pad(values: np.ndarray, length: int, fill: float = np.nan) -> np.ndarray:
    """``values`` cut or padded with ``fill`` to ``length``."""
    out = np.full(length, fill)
    m = min(length, values.size)
    out[:m] = values[:m]
    return out


def median_rel_error(sim: np.ndarray, theory: np.ndarray) -> float:
    """Median of ``|sim - theory| / theory`` over the modes where the theory is not ~0."""
    ok = np.isfinite(sim) & np.isfinite(theory) & (theory > 1e-10 * np.nanmax(theory))
    return float(np.median(np.abs(sim[ok] - theory[ok]) / theory[ok])) if ok.any() else np.nan


def trace_ratio(sim: np.ndarray, theory: np.ndarray) -> float:
    """``sum(sim) / sum(theory)`` ignoring NaN (a trace ratio of two spectra)."""
    return float(np.nansum(sim) / np.nansum(theory))


def mean_and_jackknife(per_group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over replicas of per-replica estimates, jackknife SE over (replica, block).

    ``per_group`` has shape (R, B + 1, ...): index 0 the full estimate of replica r, index
    ``1 + b`` its estimate without block b. The delete-one-group estimate of the mean replaces
    one replica's full value by its leave-one-block value.
    """
    full = per_group[:, 0]
    R, nb = full.shape[0], per_group.shape[1] - 1
    mean = full.mean(axis=0)
    loo = mean[None, None] + (per_group[:, 1:] - full[:, None]) / R  # (R, B, ...)
    loo = loo.reshape(R * nb, *mean.shape)
    k = loo.shape[0]
    dev = loo - loo.mean(axis=0)
    return mean, np.sqrt((k - 1) / k * np.sum(dev * dev, axis=0))


def delta_L_W1(X: np.ndarray, W2: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Even part of the loss perturbation along ``W1`` directions, per ``theta^2`` (Fig. 7b).

    ``[L(W1 + theta V_i, W2) + L(W1 - theta V_i, W2) - 2 L] / (2 theta^2)
    = tr(W2 V_i Sigma_xx V_i^T W2^T) / 2`` for a stack ``V`` (m, N_h, N_i), exactly and for
    every ``theta`` (``L`` of Eq. 37 is quadratic in ``W1`` at fixed ``W2``). At a minimum it is
    ``delta L(theta V_i) / theta^2`` of Fig. 7b; the even part removes the linear term
    ``theta grad L . V_i`` at a time-averaged point, which is not exactly a minimum.
    """
    Sxx = X.T @ X / X.shape[0]
    WV = np.einsum("oh,mhi->moi", W2, V)
    return 0.5 * np.einsum("moi,ij,moj->m", WV, Sxx, WV)


def delta_L_W2(X: np.ndarray, W1: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Even part of the loss perturbation along ``W2`` directions ``U`` (m, N_o, N_h), per
    ``theta^2``: ``tr(U_i W1 Sigma_xx W1^T U_i^T) / 2 = kappa_i / 2`` (Eq. 73, exact)."""
    return 0.5 * curvature_W2(X, W1, U)


def curvature_W2(X: np.ndarray, W1: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``kappa_i = tr(U_i W1 Sigma_xx W1^T U_i^T)`` (exact, = sigma_x^2 D1_ii for whitened
    inputs along the columns of A, Eq. 73)."""
    Sxx = X.T @ X / X.shape[0]
    return np.einsum("moh,hg,mog->m", U, W1 @ Sxx @ W1.T, U)


def autocorrelation(series: np.ndarray, max_lag: int) -> np.ndarray:
    """Normalised autocorrelation (lag 0 .. max_lag) of each column of ``series`` (T, K)."""
    x = series - series.mean(axis=0)
    T = x.shape[0]
    nfft = 1 << int(np.ceil(np.log2(2 * T)))
    f = np.fft.rfft(x, n=nfft, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=nfft, axis=0)[: max_lag + 1]
    acov /= (T - np.arange(max_lag + 1))[:, None]
    return acov / acov[:1]
