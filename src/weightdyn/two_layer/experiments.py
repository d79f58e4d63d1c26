"""One cell of the two-layer experiments of paper 000 Sec. III (Figs. 6-7, Eqs. 36-78).

:func:`two_layer_cell` takes a plain config block (a dict, keys in :data:`BLOCK_KEYS`) and a
progress callback and returns one xarray Dataset with everything Figs. 6a-c, 7a-b, the drift
figure and the relaxation figure need (:mod:`weightdyn.plots.two_layer`).

Protocol
--------
1. **Data** (:func:`weightdyn.two_layer.data.two_layer_data`, stream ``two_layer/data`` seeded by
   ``N_i, N_o, P, sigma_y2, targets, data_seed``), **initial weights** (stream ``two_layer/init``,
   Glorot-type Gaussian of Eq. 71 times ``init_scale`` or zero-balanced) and **gradient flow**
   (Eq. 53) to its end point ``W^0``.
2. **Protocol (a), the paper's.** Theory at ``W^0``: Eq. 66 with ``Gamma, Delta`` of Eq. 63 (with
   the corrected finite-P factor ``1 - N_i/P`` of Eq. 57, see docs/errata.md; the paper's
   ``P -> infinity`` spectrum is this divided by ``finite_p_factor``), Eq. 70 (``N_o = 1``) and
   the exact linearisation (Jacobian of the gradient and exact mini-batch noise, Lyapunov
   equation on the range of the drift). The SGD spectrum compared with it is the paper's: the
   temporal covariance of each replica about its own time average over the sampling window, not
   projected.
3. **Pre-run.** ``replicas`` SGD chains start at ``W^0`` and run ``prerun_tau`` relaxation times
   ``tau0 = 1 / (lr g_min)`` (``g_min`` the smallest nonzero eigenvalue of the exact drift at
   ``W^0``), recording traces of ``D1 = |W1|^2``, ``D2 = |W2|^2``, ``|W2 W1 - w*|`` and
   ``tr Gamma = sigma_x^2 (N_i D2 + N_o D1)`` (Eq. 63). SGD with label noise drifts along the
   manifold of minima towards lower ``tr Gamma``.
4. **Protocol (b), local.** Each replica's *local point* is its time average over the last
   ``average_tau`` tau0 of the pre-run. The exact linearisation is evaluated there (per replica),
   the chains continue for ``sample_tau`` local relaxation times, and their second moments
   **about the local point**, projected on the range of the local drift (rank ``N_o N_i``), are
   compared with it.
5. Loss perturbations (Fig. 7, Eq. 73) along the eigenvectors of ``cov(dW2)`` (projected, IVFR)
   and of the unprojected ``cov(vec dW1)`` at the local point; relaxation (Eqs. 74-78):
   autocorrelation of the drift eigenmodes ``chi_k`` of the local linearisation in a further
   ``relax_tau`` local relaxation times, against ``exp(-sigma_x^2 omega_k t)``, ``t = lr steps``.

Conventions: vec is column stacking and ``theta = [vec W1; vec W2]`` (as in
:mod:`weightdyn.two_layer.theory`); the SGD moments of
:func:`weightdyn.two_layer.simulate.run_sgd_two_layer` are row-major and are permuted here.
Spectra are sorted descending, averaged over replicas (each replica sorted first); their
standard errors are delete-one jackknife over (replica, time-block) groups, except the
unprojected ``cov(vec dW1)`` spectrum (``N_h N_i`` modes), whose error is the spread over
replicas (jackknife over replicas).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import scipy.linalg
import scipy.stats
import xarray as xr

from weightdyn import seeds
from weightdyn.io import attrs
from weightdyn.two_layer import simulate as sim
from weightdyn.two_layer import theory as tl
from weightdyn.two_layer.data import two_layer_data

__all__ = ["BLOCK_DEFAULTS", "BLOCK_KEYS", "EXPERIMENTS", "two_layer_cell"]

Block = Mapping[str, Any]
Progress = Callable[[str], None]

#: config keys of a two-layer cell and their meaning (the config schema documents the same)
BLOCK_KEYS: dict[str, str] = {
    "N_i": "input dimension (int >= 1)",
    "N_h": "hidden width (int, N_o <= N_h)",
    "N_o": "output dimension (int >= 1; Eqs. 70, 73 and the IVFR need 1)",
    "P": "number of training samples (int > N_i)",
    "sigma_y2": "label variance: random targets (<y^2>) or teacher label noise (float > 0)",
    "targets": "'random' (labels independent of inputs, the paper's case) or 'teacher'",
    "init": "'gaussian' (Eq. 71 times init_scale) or 'zero_balanced' (Eq. 42 = 0)",
    "init_scale": "initial weight variance in units of Glorot's 1/N_i, 1/N_h (1 = Glorot)",
    "lr": "learning rate lambda (float > 0)",
    "batch_size": "mini-batch size S (int, 1 <= S <= P)",
    "sampling": "'with' or 'without' replacement (App. C prefactor)",
    "data_seed": "data realisation (int)",
    "replicas": "independent SGD chains started at W^0 (int >= 2)",
    "prerun_tau": "pre-run length in relaxation times tau0 at W^0 (float > 0)",
    "average_tau": "window at the end of the pre-run defining the local point, in tau0",
    "sample_tau": "sampling length per replica in local relaxation times",
    "records_per_tau": "snapshots per local relaxation time (sets the thinning)",
    "n_blocks": "time blocks per replica for jackknife errors (int >= 2)",
    "trace_points": "trace points per decade of pre-run time (and over the sampling window)",
    "relax_tau": "length of the relaxation series in local relaxation times (0: skip)",
    "relax_modes": "number of drift eigenmodes chi_k in the relaxation figure",
    "local_point": "'window' (time average of the sampling window) or 'prerun' (of the "
    "last average_tau of the pre-run)",
}

#: defaults of the optional keys
BLOCK_DEFAULTS: dict[str, Any] = {
    "N_o": 1,
    "targets": "random",
    "init": "gaussian",
    "init_scale": 1.0,
    "sampling": "with",
    "data_seed": 0,
    "replicas": 8,
    "prerun_tau": 2000.0,
    "average_tau": 100.0,
    "sample_tau": 800.0,
    "records_per_tau": 2,
    "n_blocks": 8,
    "trace_points": 10,
    "relax_tau": 40.0,
    "relax_modes": 4,
    "local_point": "window",
}

REQUIRED = ("N_i", "N_h", "P", "sigma_y2", "lr", "batch_size")

PAPER = "paper 000"
TRACE_NAMES = ("trace_D1_avg", "trace_D2_avg", "trace_dist_avg")


# ----------------------------------------------------------------------------- settings


def _settings(block: Block) -> dict[str, Any]:
    unknown = sorted(set(block) - set(BLOCK_KEYS))
    if unknown:
        raise ValueError(f"unknown two-layer cell keys {unknown}; allowed: {sorted(BLOCK_KEYS)}")
    missing = [k for k in REQUIRED if k not in block]
    if missing:
        raise ValueError(f"two-layer cell block misses required keys {missing}")
    cfg = {**BLOCK_DEFAULTS, **dict(block)}
    for key in ("N_i", "N_h", "N_o", "P", "batch_size", "replicas", "n_blocks", "trace_points"):
        cfg[key] = int(cfg[key])
    for key in ("N_i", "N_h", "N_o", "P", "batch_size", "records_per_tau", "relax_modes"):
        if int(cfg[key]) < 1:
            raise ValueError(f"{key} must be >= 1, got {cfg[key]!r}")
    if cfg["N_o"] > cfg["N_h"]:
        raise ValueError(
            f"need N_o <= N_h (thin SVD of Sec. III.2.3), got {cfg['N_o']}, {cfg['N_h']}"
        )
    if cfg["P"] <= cfg["N_i"]:
        raise ValueError(f"need P > N_i (a unique w*), got P={cfg['P']}, N_i={cfg['N_i']}")
    if cfg["batch_size"] > cfg["P"]:
        raise ValueError(f"batch_size must be <= P, got {cfg['batch_size']} > {cfg['P']}")
    if cfg["replicas"] < 2 or cfg["n_blocks"] < 2:
        raise ValueError("replicas and n_blocks must be >= 2 (jackknife errors)")
    for key in ("sigma_y2", "lr", "prerun_tau", "average_tau", "sample_tau"):
        if not float(cfg[key]) > 0:
            raise ValueError(f"{key} must be > 0, got {cfg[key]!r}")
    if float(cfg["average_tau"]) > float(cfg["prerun_tau"]):
        raise ValueError("average_tau must not exceed prerun_tau")
    if float(cfg["relax_tau"]) < 0:
        raise ValueError(f"relax_tau must be >= 0, got {cfg['relax_tau']!r}")
    if cfg["targets"] not in ("random", "teacher"):
        raise ValueError(f"targets must be 'random' or 'teacher', got {cfg['targets']!r}")
    if cfg["init"] not in ("gaussian", "zero_balanced"):
        raise ValueError(f"init must be 'gaussian' or 'zero_balanced', got {cfg['init']!r}")
    if cfg["local_point"] not in ("window", "prerun"):
        raise ValueError(f"local_point must be 'window' or 'prerun', got {cfg['local_point']!r}")
    if cfg["sampling"] not in ("with", "without"):
        raise ValueError(f"sampling must be 'with' or 'without', got {cfg['sampling']!r}")
    return cfg


def _round_up(n: float, unit: int) -> int:
    return max(unit, math.ceil(n / unit) * unit)


# ---------------------------------------------------------------- linear algebra helpers


def _c_to_f(n_rows: int, n_cols: int) -> np.ndarray:
    """Index array ``p`` with ``vec_F(A) = A.ravel()[p]`` for ``A`` of shape (n_rows, n_cols)."""
    return np.arange(n_rows * n_cols).reshape(n_rows, n_cols).ravel(order="F")


class _Layout:
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


class _Linearisation:
    """Exact linearisation at one point: drift eigenbasis, range projector, Lyapunov M.

    ``Q`` (n, r) spans the range of the drift (its ``r = N_o rank(Sigma_xx)`` largest
    eigenvalues ``g``, ascending order dropped: ``g`` descending), in theta_C order (rows);
    ``Mr`` the covariance in that basis (``M = Q Mr Q^T``).
    """

    def __init__(self, X, Y, W1, W2, lr, S, sampling, rank, layout: _Layout):
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
        n1 = self.layout.n1
        return self.Q[:n1], self.Q[n1:]


def _psd_sqrt(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    return (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T


def _block_spectrum(Qb: np.ndarray, A: np.ndarray, length: int) -> np.ndarray:
    """Eigenvalues (descending, zero-padded to ``length``) of ``Qb A Qb^T`` for PSD ``A``."""
    R = _psd_sqrt(A)
    ev = np.linalg.eigvalsh(R @ (Qb.T @ Qb) @ R)[::-1]
    out = np.zeros(length)
    m = min(length, ev.size)
    out[:m] = np.clip(ev[:m], 0.0, None)
    return out


def _block_eig(Qb: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nonzero eigenpairs of ``Qb A Qb^T`` (descending), eigenvectors in the rows' space."""
    R = _psd_sqrt(A)
    ev, U = np.linalg.eigh(R @ (Qb.T @ Qb) @ R)
    ev, U = ev[::-1], U[:, ::-1]
    keep = ev > ev[0] * 1e-12 if ev.size and ev[0] > 0 else np.zeros(ev.size, bool)
    vecs = Qb @ R @ U[:, keep] / np.sqrt(ev[keep])
    return ev[keep], vecs


def _nanmean(a: np.ndarray, axis=None):
    """``nanmean`` that returns NaN (no warning) where every value is NaN."""
    a = np.asarray(a, dtype=float)
    n = np.sum(np.isfinite(a), axis=axis)
    total = np.nansum(a, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    return float(out) if np.ndim(out) == 0 else out


def _nanstd(a: np.ndarray) -> np.ndarray:
    """Standard deviation over axis 0 (ddof 1) ignoring NaN; NaN with fewer than 2 values."""
    n = np.sum(np.isfinite(a), axis=0)
    m = _nanmean(a, axis=0)
    ss = np.nansum((a - m) ** 2, axis=0)
    return np.where(n > 1, np.sqrt(ss / np.maximum(n - 1, 1)), np.nan)


def _pad(values: np.ndarray, length: int, fill: float = np.nan) -> np.ndarray:
    out = np.full(length, fill)
    m = min(length, values.size)
    out[:m] = values[:m]
    return out


def _median_rel_error(sgd: np.ndarray, theory: np.ndarray) -> float:
    ok = np.isfinite(sgd) & np.isfinite(theory) & (theory > 1e-10 * np.nanmax(theory))
    return float(np.median(np.abs(sgd[ok] - theory[ok]) / theory[ok])) if ok.any() else np.nan


def _trace_ratio(sgd: np.ndarray, theory: np.ndarray) -> float:
    return float(np.nansum(sgd) / np.nansum(theory))


def _mean_and_jackknife(per_group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


# --------------------------------------------------------------------------- loss pieces


def _delta_L_W1(X, W2, V: np.ndarray) -> np.ndarray:
    """Even part of the loss perturbation along ``W1`` directions, per ``theta^2``.

    ``[L(W1 + theta V_i, W2) + L(W1 - theta V_i, W2) - 2 L] / (2 theta^2)
    = tr(W2 V_i Sigma_xx V_i^T W2^T) / 2`` for a stack ``V`` (m, N_h, N_i), exactly and for
    every ``theta`` (``L`` is quadratic in ``W1`` at fixed ``W2``). At a minimum it is
    ``delta L(theta V_i) / theta^2`` of Fig. 7b; the even part removes the linear term
    ``theta grad L . V_i`` at a time-averaged point, which is not exactly a minimum.
    """
    Sxx = X.T @ X / X.shape[0]
    WV = np.einsum("oh,mhi->moi", W2, V)
    return 0.5 * np.einsum("moi,ij,moj->m", WV, Sxx, WV)


def _delta_L_W2(X, W1, U: np.ndarray) -> np.ndarray:
    """Even part of the loss perturbation along ``W2`` directions ``U`` (m, N_o, N_h), per
    ``theta^2``: ``tr(U_i W1 Sigma_xx W1^T U_i^T) / 2 = kappa_i / 2`` (Eq. 73, exact)."""
    return 0.5 * _curvature_W2(X, W1, U)


def _curvature_W2(X, W1, U: np.ndarray) -> np.ndarray:
    """``kappa_i = tr(U_i W1 Sigma_xx W1^T U_i^T)`` (exact, = sigma_x^2 D1_ii for whitened
    inputs along the columns of A, Eq. 73)."""
    Sxx = X.T @ X / X.shape[0]
    return np.einsum("moh,hg,mog->m", U, W1 @ Sxx @ W1.T, U)


def _autocorrelation(series: np.ndarray, max_lag: int) -> np.ndarray:
    """Normalised autocorrelation (lag 0 .. max_lag) of each column of ``series`` (T, K)."""
    x = series - series.mean(axis=0)
    T = x.shape[0]
    nfft = 1 << int(np.ceil(np.log2(2 * T)))
    f = np.fft.rfft(x, n=nfft, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=nfft, axis=0)[: max_lag + 1]
    acov /= (T - np.arange(max_lag + 1))[:, None]
    return acov / acov[:1]


# ------------------------------------------------------------------------------- the cell


def two_layer_cell(block: Block, progress: Progress) -> xr.Dataset:
    """Run one two-layer cell (module docstring) and return its dataset.

    Dimensions: ``mode1`` (eigen-index of ``cov(vec dW1)``, ``N_h N_i``), ``mode2`` (of
    ``cov(vec dW2)``, ``N_o N_h``), ``replica``, ``trace_time``, ``z_row``/``z_col`` (Z basis of
    Sec. III.2.3, Fig. 6a), ``relax_mode`` and ``lag`` (Eqs. 74-78). Every variable has
    ``long_name``, ``units`` and ``source``; scalar acceptance numbers are data variables.
    """
    t_start = time.perf_counter()
    cfg = _settings(block)
    N_i, N_h, N_o, P = cfg["N_i"], cfg["N_h"], cfg["N_o"], cfg["P"]
    lr, S, sampling = float(cfg["lr"]), cfg["batch_size"], cfg["sampling"]
    sigma_y2 = float(cfg["sigma_y2"])
    R, nb = cfg["replicas"], cfg["n_blocks"]
    lay = _Layout(N_i, N_h, N_o)
    n1, n2 = lay.n1, lay.n2

    # ---- data, initialisation, gradient flow -------------------------------------------
    data_cell = {k: cfg[k] for k in ("N_i", "N_o", "P", "sigma_y2", "targets", "data_seed")}
    d = two_layer_data(
        N_i, P, seeds.generator("two_layer/data", data_cell), N_o=N_o,
        targets=cfg["targets"], sigma_y2=sigma_y2,
    )  # fmt: skip
    X, Y, sx2 = d.X, d.Y, d.sigma_x2
    init_cell = {**data_cell, **{k: cfg[k] for k in ("N_h", "init", "init_scale")}}
    init_fn = sim.gaussian_init if cfg["init"] == "gaussian" else sim.zero_balanced_init
    W1i, W2i = init_fn(N_i, N_h, N_o, seeds.generator("two_layer/init", init_cell),
                       init_scale=float(cfg["init_scale"]))  # fmt: skip
    w_star = sim.least_squares_solution(X, Y)
    gtol = 1e-10 * (float(np.linalg.norm(w_star)) + 1.0)
    progress(f"two-layer cell N_i={N_i} N_h={N_h} N_o={N_o} P={P}: gradient flow")
    gf = sim.gradient_flow(X, Y, W1i, W2i, 1e7, gtol=gtol)
    W1g, W2g = gf.W1, gf.W2
    rank = N_o * int(np.linalg.matrix_rank(X))

    # ---- protocol (a): theory at W^0 ----------------------------------------------------
    progress("theory at W^0 (Eq. 66, Eq. 70, exact linearisation)")
    Gam, Del = tl.drift_diffusion(W1g, W2g, sx2, sigma_y2, S, n_samples=P, sampling=sampling)
    Mz = tl.stationary_covariance(Gam, Del, lr)
    Mz = 0.5 * (Mz + Mz.T)
    nz1 = N_o * N_i
    eig1_eq66 = _pad(np.linalg.eigvalsh(Mz[:nz1, :nz1])[::-1], n1)
    eig2_eq66 = _pad(np.linalg.eigvalsh(Mz[nz1:, nz1:])[::-1], n2)
    finite_p = 1.0 - N_i / P
    f0 = tl.svd_factors(W1g, W2g)
    if N_o == 1:
        eig2_eq70 = np.sort(finite_p * tl.m22_closed_form(W1g, W2g, lr, sigma_y2, S))[::-1]
    else:
        eig2_eq70 = np.full(n2, np.nan)
    lin0 = _Linearisation(X, Y, W1g, W2g, lr, S, sampling, rank, lay)
    Q1, Q2 = lin0.blocks()
    eig1_exact0 = _pad(_block_spectrum(Q1, lin0.Mr, rank), n1, 0.0)
    eig2_exact0 = _block_spectrum(Q2, lin0.Mr, n2)
    tau0 = lin0.tau_time / lr

    # ---- pre-run from W^0 ---------------------------------------------------------------
    rng = seeds.generator("two_layer/sgd", cfg)
    thin0 = max(1, round(tau0 / float(cfg["records_per_tau"])))
    avg_steps = _round_up(float(cfg["average_tau"]) * tau0, thin0)
    pre_steps = _round_up(float(cfg["prerun_tau"]) * tau0, thin0)
    pre_steps = max(pre_steps, avg_steps)
    per_decade = cfg["trace_points"]
    progress(
        f"pre-run: tau0 = {tau0:.4g} steps, {pre_steps} steps x {R} replicas "
        f"(local point: mean of the last {avg_steps})"
    )
    # segments ending at tau0 * 10^k (then the averaging window), traced per_decade times
    # each, so that the traces resolve the drift on a logarithmic time axis
    ends = [e for e in thin0 * np.round(tau0 * 10.0 ** np.arange(0, 12) / thin0).astype(int)
            if 0 < e < pre_steps - avg_steps] + [pre_steps - avg_steps, pre_steps]  # fmt: skip
    ends = sorted(set(ends) - {0})
    W1c, W2c = W1g, W2g
    tr_pre = {k: [] for k in ("trace_step", *TRACE_NAMES)}
    done = 0
    for end in ends:
        seg = end - done
        pre = sim.run_sgd_two_layer(
            X, Y, W1g, W2g, lr, S, sampling, W1c, W2c, 0, seg, thin0, 1, rng, replicas=R,
            w_star=w_star, trace_every=_round_up(seg / per_decade, thin0),
            second_moments="none",
        )  # fmt: skip
        if pre.diverged:
            raise RuntimeError("SGD diverged in the pre-run; lower lr")
        tr_pre["trace_step"].append(done + pre.trace_step)
        for k in TRACE_NAMES:
            tr_pre[k].append(getattr(pre, k))
        W1c, W2c = pre.final_W1, pre.final_W2
        done = end
        progress(f"pre-run: {done}/{pre_steps} steps")
    tr_pre = {k: np.concatenate(v, axis=0) for k, v in tr_pre.items()}
    n_avg = pre.n_records.astype(float)
    W1_loc = W1g[None] + (pre.sum_dW1 / n_avg[:, None]).reshape(R, N_h, N_i)
    W2_loc = W2g[None] + (pre.sum_dW2 / n_avg[:, None]).reshape(R, N_o, N_h)

    # ---- protocol (b): theory at each local point ---------------------------------------
    # (with local_point = "window" the points move to the sampling-window means below; the
    # pre-run points then only set the sampling length, from replica 0)
    n_lin = R if cfg["local_point"] == "prerun" else 1
    progress(f"exact linearisation at {n_lin} pre-run point(s)")
    lins = [
        _Linearisation(X, Y, W1_loc[r], W2_loc[r], lr, S, sampling, rank, lay) for r in range(n_lin)
    ]
    lins += [lins[0]] * (R - n_lin)
    tau_loc = np.array([lin.tau_time / lr for lin in lins[:n_lin]])
    tau_l = float(tau_loc.mean())
    thin = max(1, round(tau_l / float(cfg["records_per_tau"])))
    sample_steps = _round_up(float(cfg["sample_tau"]) * tau_l, nb * thin)
    trace_every2 = _round_up(sample_steps / per_decade, thin)

    # ---- sampling about the local points ------------------------------------------------
    progress(f"sampling: local tau = {tau_l:.4g} steps, {sample_steps} steps per replica")
    eig1_b = np.empty((R, nb + 1, n1))
    eig2_b = np.empty((R, nb + 1, n2))
    eig2_a = np.empty((R, nb + 1, n2))
    eig1_a = np.empty((R, n1))
    eig1_th_loc = np.empty((R, n1))
    eig2_th_loc = np.empty((R, n2))
    dl1_sgd = np.empty((R, n1))
    dl1_th = np.zeros((R, n1))
    ivfr_var = np.empty((R, n2))
    ivfr_kappa = np.empty((R, n2))
    dl2_sgd = np.empty((R, n2))
    kappa_eq73 = np.full((R, n2), np.nan)
    d1_loc = np.empty((R, N_h))
    d2_loc = np.empty(R)
    grad_loc = np.empty(R)
    traces2 = []
    final_W1 = np.empty((R, N_h, N_i))
    final_W2 = np.empty((R, N_o, N_h))
    Mz_sgd = None
    sets = [np.arange(nb)] + [np.delete(np.arange(nb), b) for b in range(nb)]
    for r in range(R):
        lin = lins[r]
        res = sim.run_sgd_two_layer(
            X, Y, W1_loc[r], W2_loc[r], lr, S, sampling, pre.final_W1[r], pre.final_W2[r], 0,
            sample_steps, thin, nb, rng, w_star=w_star, trace_every=trace_every2,
            second_moments="all",
        )  # fmt: skip
        if res.diverged:
            raise RuntimeError("SGD diverged while sampling; lower lr")
        progress(f"sampled replica {r + 1}/{R}")
        traces2.append({k: getattr(res, k) for k in ("trace_step", *TRACE_NAMES)})
        final_W1[r], final_W2[r] = res.final_W1[0], res.final_W2[0]
        n = res.n_records.astype(float)
        # second moments about the local point per block, theta_C order
        M11 = res.sum_dW1dW1 / n[:, None, None]
        M12 = res.sum_dW1dW2 / n[:, None, None]
        M22 = res.sum_dW2dW2 / n[:, None, None]
        m1 = res.sum_dW1 / n[:, None]
        m2 = res.sum_dW2 / n[:, None]
        # protocol (a): the unprojected dW2 covariance about the replica's own time average
        for j, idx in enumerate(sets):
            mj = m2[idx].mean(axis=0)
            c2 = M22[idx].mean(axis=0) - np.outer(mj, mj)
            eig2_a[r, j] = np.linalg.eigvalsh(0.5 * (c2 + c2.T))[::-1]
        mm1, mm2 = m1.mean(axis=0), m2.mean(axis=0)
        c1 = M11.mean(axis=0) - np.outer(mm1, mm1)
        if cfg["local_point"] == "window":
            # the local point is the time average of this sampling window: shift the moments
            W1_loc[r] += mm1.reshape(N_h, N_i)
            W2_loc[r] += mm2.reshape(N_o, N_h)
            M11 -= m1[:, :, None] * mm1[None, None, :] + mm1[None, :, None] * m1[:, None, :]
            M11 += np.outer(mm1, mm1)[None]
            M12 -= m1[:, :, None] * mm2[None, None, :] + mm1[None, :, None] * m2[:, None, :]
            M12 += np.outer(mm1, mm2)[None]
            M22 -= m2[:, :, None] * mm2[None, None, :] + mm2[None, :, None] * m2[:, None, :]
            M22 += np.outer(mm2, mm2)[None]
            m1 = m1 - mm1
            m2 = m2 - mm2
            lin = lins[r] = _Linearisation(X, Y, W1_loc[r], W2_loc[r], lr, S, sampling, rank, lay)
        Q1, Q2 = lin.blocks()
        # projected on the range of the local drift (protocol b): A_b = Q^T M_b Q
        cross = Q1.T @ M12 @ Q2
        A = Q1.T @ M11 @ Q1 + cross + cross.transpose(0, 2, 1) + Q2.T @ M22 @ Q2
        for j, idx in enumerate(sets):
            Aj = A[idx].mean(axis=0)
            eig1_b[r, j] = _block_spectrum(Q1, Aj, n1)
            eig2_b[r, j] = _block_spectrum(Q2, Aj, n2)
        # theory at the local point
        eig1_th_loc[r] = _pad(_block_spectrum(Q1, lin.Mr, rank), n1, 0.0)
        eig2_th_loc[r] = _block_spectrum(Q2, lin.Mr, n2)
        # unprojected cov(vec dW1) about the time average (Fig. 7b) and its eigenvectors
        ev1, U1 = np.linalg.eigh(0.5 * (c1 + c1.T))
        eig1_a[r] = ev1[::-1]
        V1 = U1[:, ::-1].T.reshape(n1, N_h, N_i)  # theta_C order -> matrices directly
        W1r, W2r = W1_loc[r], W2_loc[r]
        dl1_sgd[r] = _delta_L_W1(X, W2r, V1)
        ev_th, vec_th = _block_eig(Q1, lin.Mr)
        if ev_th.size:
            dl1_th[r, : ev_th.size] = _delta_L_W1(X, W2r, vec_th.T.reshape(-1, N_h, N_i))
        # IVFR: eigenvectors of the projected cov(dW2) about the local point
        ev2, vec2 = _block_eig(Q2, A.mean(axis=0))
        U2 = vec2.T.reshape(-1, N_o, N_h)
        ivfr_var[r] = _pad(ev2, n2)
        ivfr_kappa[r] = _pad(_curvature_W2(X, W1r, U2), n2)
        dl2_sgd[r] = _pad(_delta_L_W2(X, W1r, U2), n2)
        f = tl.svd_factors(W1r, W2r)
        d1_loc[r] = f.d1
        d2_loc[r] = float(f.d2.sum())
        if N_o == 1:
            pos = np.clip(ev2, 0.0, None)
            kappa_eq73[r, : ev2.size] = tl.ivfr_curvature(pos, d2_loc[r], sx2, sigma_y2, lr, S)
        g1, g2 = tl.gradients(X, Y, W1r, W2r)
        grad_loc[r] = float(np.sqrt(np.sum(g1**2) + np.sum(g2**2)))
        if r == 0:
            # SGD covariance (about the time average, unprojected) in the local Z basis
            T = lay.rows_to_c(tl.z_embedding(W1r, W2r))
            mm1, mm2 = m1.mean(axis=0), m2.mean(axis=0)
            c12 = M12.mean(axis=0) - np.outer(mm1, mm2)
            c22 = M22.mean(axis=0) - np.outer(mm2, mm2)
            full = np.block([[c1, c12], [c12.T, c22]])
            Mz_sgd = T.T @ full @ T
        del res, M11, M12, M22, A

    trG_loc = np.array([lin.trace_G for lin in lins])
    tau_final = float(np.mean([lin.tau_time / lr for lin in lins]))

    # ---- IVFR statistics ----------------------------------------------------------------
    rho = np.full(R, np.nan)
    slope = np.full(R, np.nan)
    for r in range(R):
        ok = np.isfinite(ivfr_var[r]) & (ivfr_var[r] > 0) & (ivfr_kappa[r] > 0)
        if ok.sum() >= 3:
            rho[r] = scipy.stats.spearmanr(ivfr_kappa[r, ok], ivfr_var[r, ok]).statistic
            slope[r] = np.polyfit(np.log(ivfr_var[r, ok]), np.log(ivfr_kappa[r, ok]), 1)[0]

    # ---- relaxation series (Eqs. 74-78) ---------------------------------------------------
    K = min(int(cfg["relax_modes"]), rank)
    relax_steps = math.ceil(float(cfg["relax_tau"]) * tau_l)
    n_lag = 0
    acf = acf_se = acf_th = rates = None
    lag_steps = np.zeros(0, dtype=np.int64)
    if relax_steps > 0 and K > 0:
        thin_r = max(1, round(tau_l / 20.0))
        n_rec = max(4, relax_steps // thin_r)
        progress(f"relaxation series: {n_rec} snapshots every {thin_r} steps x {R} replicas")
        # modes with rates g_min * (1 ... 8), geometrically spaced (the slowest first)
        g0 = lins[0].g
        targets = g0[-1] * np.geomspace(1.0, min(8.0, g0[0] / g0[-1]), K)
        pick = []
        for target in targets:
            order = np.argsort(np.abs(np.log(g0 / target)))
            pick.append(next(int(k) for k in order if int(k) not in pick))
        pick = np.array(sorted(pick, key=lambda k: g0[k]))
        chi = np.empty((n_rec, R, K))
        W1c, W2c = final_W1.copy(), final_W2.copy()
        theta_loc = np.concatenate(
            [W1_loc.reshape(R, n1), W2_loc.reshape(R, n2)], axis=1
        )  # theta_C order
        proj = np.stack([lins[r].Q[:, pick] for r in range(R)])  # (R, n, K)
        for k in range(n_rec):
            res = sim.run_sgd_two_layer(
                X, Y, W1g, W2g, lr, S, sampling, W1c, W2c, 0, thin_r, thin_r, 1, rng,
                w_star=w_star, trace_every=thin_r, second_moments="none",
            )  # fmt: skip
            W1c, W2c = res.final_W1, res.final_W2
            th = np.concatenate([W1c.reshape(R, n1), W2c.reshape(R, n2)], axis=1) - theta_loc
            chi[k] = np.einsum("rn,rnk->rk", th, proj)
        rates = np.stack([lins[r].g[pick] for r in range(R)])  # (R, K), per step / lr
        slowest = float(rates[:, 0].mean())
        n_lag = int(min(n_rec // 2, math.ceil(3.0 / (lr * slowest) / thin_r))) + 1
        per = np.stack([_autocorrelation(chi[:, r], n_lag - 1) for r in range(R)])  # (R, L, K)
        acf = per.mean(axis=0).T
        acf_se = per.std(axis=0, ddof=1).T / np.sqrt(R)
        lag_steps = thin_r * np.arange(n_lag)
        acf_th = np.exp(-lr * rates[:, :, None] * lag_steps[None, None, :]).mean(axis=0)
        rates = rates.mean(axis=0)

    # ---- traces ---------------------------------------------------------------------------
    tr_step = np.concatenate([tr_pre["trace_step"], pre_steps + traces2[0]["trace_step"]])

    def joined(name: str) -> np.ndarray:
        first = tr_pre[name]  # (T1, R)
        second = np.stack([t[name][:, 0] for t in traces2], axis=1)  # (T2, R)
        return np.concatenate([first, second], axis=0).T  # (R, T)

    tr_D1, tr_D2, tr_dist = joined("trace_D1_avg"), joined("trace_D2_avg"), joined("trace_dist_avg")
    tr_gamma = sx2 * (N_i * tr_D2 + N_o * tr_D1)

    # ---- assemble ----------------------------------------------------------------------------
    eig1_b_mean, eig1_b_se = _mean_and_jackknife(eig1_b)
    eig2_b_mean, eig2_b_se = _mean_and_jackknife(eig2_b)
    eig2_a_mean, eig2_a_se = _mean_and_jackknife(eig2_a)
    eig1_a_mean = eig1_a.mean(axis=0)
    eig1_a_se = eig1_a.std(axis=0, ddof=1) / np.sqrt(R)
    eig1_loc = eig1_th_loc.mean(axis=0)
    eig2_loc = eig2_th_loc.mean(axis=0)
    dl1_mean = dl1_sgd.mean(axis=0)
    dl1_se = dl1_sgd.std(axis=0, ddof=1) / np.sqrt(R)
    dl1_th_mean = dl1_th.mean(axis=0)
    n_range1 = N_o * N_i  # rank of the W1 block of the linear theory
    drop = float(np.mean(dl1_mean[n_range1:]) / np.mean(dl1_mean[:n_range1]))
    norm = lr * sigma_y2 / (2 * S)
    mz_dim = N_o * (N_i + N_h)
    D2_0 = float(f0.d2.sum())
    D2_local = float(d2_loc.mean())
    src_a = f"{PAPER} Eq. 66 at W^0 (protocol a)"
    src_b = f"{PAPER} Eqs. 62-66 exact linearisation at the local point (protocol b)"
    u_w2 = "weight^2"
    ds = xr.Dataset(
        {
            # normalisations and scalars
            "M_isotropic": (
                (),
                norm,
                attrs("lambda sigma_y^2 / (2S)", u_w2, f"{PAPER} Eq. 68, 70"),
            ),
            "finite_p_factor": (
                (),
                finite_p,
                attrs("1 - N_i/P (corrected Eq. 57)", "1", "docs/errata.md Eq. 56"),
            ),
            "sigma_x2": ((), sx2, attrs("input variance sigma_x^2", "input^2", f"{PAPER} Eq. 49")),
            "tau0_steps": (
                (),
                tau0,
                attrs("slowest relaxation time at W^0, 1/(lr g_min)", "steps", f"{PAPER} Eq. 74"),
            ),
            "tau_local_steps": (
                (),
                tau_final,
                attrs(
                    "slowest relaxation time at the local points (mean)", "steps", f"{PAPER} Eq. 74"
                ),
            ),
            "prerun_steps": ((), pre_steps, attrs("pre-run length", "steps", "protocol")),
            "average_steps": (
                (),
                avg_steps,
                attrs("window defining the local point", "steps", "protocol"),
            ),
            "sample_steps": (
                (),
                sample_steps,
                attrs("sampling length per replica", "steps", "protocol"),
            ),
            "thin": (
                (),
                thin,
                attrs("steps between snapshots while sampling", "steps", "protocol"),
            ),
            "gf_time": (
                (),
                float(gf.t[-1]),
                attrs("gradient-flow time to W^0", "lr steps", f"{PAPER} Eq. 53"),
            ),
            "gf_converged": (
                (),
                int(gf.converged),
                attrs("gradient flow reached |grad L| <= gtol", "1", f"{PAPER} Eq. 53"),
            ),
            "dist_w0": (
                (),
                float(np.linalg.norm(W2g @ W1g - w_star)),
                attrs("|W2^0 W1^0 - w*|_F", "weight", f"{PAPER} Eq. 39"),
            ),
            "D1_w0": ((), float(f0.d1.sum()), attrs("D1 = |W1^0|_F^2", u_w2, f"{PAPER} Eq. 59")),
            "D2_w0": ((), D2_0, attrs("D2 = |W2^0|_F^2", u_w2, f"{PAPER} Eq. 59")),
            "D2_local": (
                (),
                D2_local,
                attrs("|W2|_F^2 at the local points (mean)", u_w2, f"{PAPER} Eq. 59"),
            ),
            "d2_drift_factor": (
                (),
                D2_local / D2_0,
                attrs("D2(local) / D2(W^0)", "1", "drift along the manifold of minima"),
            ),
            "trG_w0": (
                (),
                lin0.trace_G,
                attrs("tr of the exact drift at W^0", "1/lr steps", f"{PAPER} Eq. 63"),
            ),
            "trG_local": (
                (),
                float(trG_loc.mean()),
                attrs("tr of the exact drift at the local points", "1/lr steps", f"{PAPER} Eq. 63"),
            ),
            "grad_norm_local": (
                (),
                float(grad_loc.mean()),
                attrs("|grad L| at the local points", "1/weight", f"{PAPER} Eq. 41"),
            ),
            # spectra, protocol (a)
            "eig_cov1_sgd_a": (
                "mode1",
                eig1_a_mean,
                attrs("eig cov(vec dW1), SGD about its time average", u_w2, f"{PAPER} Fig. 6b,c"),
            ),
            "eig_cov1_sgd_a_se": (
                "mode1",
                eig1_a_se,
                attrs("s.e. (over replicas)", u_w2, "jackknife over replicas"),
            ),
            "eig_cov1_eq66": (
                "mode1",
                eig1_eq66,
                attrs("eig M11, Eq. 66 at W^0 (x (1 - N_i/P))", u_w2, src_a),
            ),
            "eig_cov1_exact_w0": (
                "mode1",
                eig1_exact0,
                attrs(
                    "eig cov(vec dW1), exact linearisation at W^0",
                    u_w2,
                    f"{PAPER} Eq. 65 (exact drift and noise)",
                ),
            ),
            "eig_cov2_sgd_a": (
                "mode2",
                eig2_a_mean,
                attrs("eig cov(vec dW2), SGD about its time average", u_w2, f"{PAPER} Fig. 6b,c"),
            ),
            "eig_cov2_sgd_a_se": (
                "mode2",
                eig2_a_se,
                attrs("s.e.", u_w2, "jackknife over (replica, block)"),
            ),
            "eig_cov2_eq66": (
                "mode2",
                eig2_eq66,
                attrs("eig M22, Eq. 66 at W^0 (x (1 - N_i/P))", u_w2, src_a),
            ),
            "eig_cov2_eq70": (
                "mode2",
                _pad(eig2_eq70, n2),
                attrs("Eq. 70 at W^0 (x (1 - N_i/P))", u_w2, f"{PAPER} Eq. 70"),
            ),
            "eig_cov2_exact_w0": (
                "mode2",
                eig2_exact0,
                attrs(
                    "eig cov(vec dW2), exact linearisation at W^0",
                    u_w2,
                    f"{PAPER} Eq. 65 (exact drift and noise)",
                ),
            ),
            # spectra, protocol (b)
            "eig_cov1_sgd_b": (
                "mode1",
                eig1_b_mean,
                attrs(
                    "eig cov(vec dW1) about the local point, projected on range(Gamma)",
                    u_w2,
                    "protocol (b)",
                ),
            ),
            "eig_cov1_sgd_b_se": (
                "mode1",
                eig1_b_se,
                attrs("s.e.", u_w2, "jackknife over (replica, block)"),
            ),
            "eig_cov1_exact_local": (
                "mode1",
                eig1_loc,
                attrs("eig cov(vec dW1), exact linearisation at the local point", u_w2, src_b),
            ),
            "eig_cov2_sgd_b": (
                "mode2",
                eig2_b_mean,
                attrs(
                    "eig cov(vec dW2) about the local point, projected on range(Gamma)",
                    u_w2,
                    "protocol (b)",
                ),
            ),
            "eig_cov2_sgd_b_se": (
                "mode2",
                eig2_b_se,
                attrs("s.e.", u_w2, "jackknife over (replica, block)"),
            ),
            "eig_cov2_exact_local": (
                "mode2",
                eig2_loc,
                attrs("eig cov(vec dW2), exact linearisation at the local point", u_w2, src_b),
            ),
            # acceptance numbers
            "err_cov1_a_eq66": (
                (),
                _median_rel_error(eig1_a_mean, eig1_eq66),
                attrs("median rel. eigenvalue error, cov(dW1): SGD vs Eq. 66 at W^0", "1", src_a),
            ),
            "err_cov2_a_eq66": (
                (),
                _median_rel_error(eig2_a_mean, eig2_eq66),
                attrs("median rel. eigenvalue error, cov(dW2): SGD vs Eq. 66 at W^0", "1", src_a),
            ),
            "err_cov1_a_exact": (
                (),
                _median_rel_error(eig1_a_mean, eig1_exact0),
                attrs("median rel. eigenvalue error, cov(dW1): SGD vs exact at W^0", "1", src_a),
            ),
            "err_cov2_a_exact": (
                (),
                _median_rel_error(eig2_a_mean, eig2_exact0),
                attrs("median rel. eigenvalue error, cov(dW2): SGD vs exact at W^0", "1", src_a),
            ),
            "err_cov1_b": (
                (),
                _median_rel_error(eig1_b_mean, eig1_loc),
                attrs("median rel. eigenvalue error, cov(dW1), protocol (b)", "1", src_b),
            ),
            "err_cov2_b": (
                (),
                _median_rel_error(eig2_b_mean, eig2_loc),
                attrs("median rel. eigenvalue error, cov(dW2), protocol (b)", "1", src_b),
            ),
            "tr_ratio_cov1_a": (
                (),
                _trace_ratio(eig1_a_mean[:rank], eig1_eq66[:rank]),
                attrs(
                    "sum of the top N_o N_i eig cov(dW1) SGD / tr M11 (Eq. 66 at W^0)", "1", src_a
                ),
            ),
            "tr_ratio_cov2_a": (
                (),
                _trace_ratio(eig2_a_mean, eig2_eq66),
                attrs("tr cov(dW2) SGD / tr M22 (Eq. 66 at W^0)", "1", src_a),
            ),
            "tr_ratio_cov1_b": (
                (),
                _trace_ratio(eig1_b_mean, eig1_loc),
                attrs("tr cov(dW1) / tr M11, protocol (b)", "1", src_b),
            ),
            "tr_ratio_cov2_b": (
                (),
                _trace_ratio(eig2_b_mean, eig2_loc),
                attrs("tr cov(dW2) / tr M22, protocol (b)", "1", src_b),
            ),
            # IVFR and loss perturbations (Fig. 7)
            "ivfr_variance": (
                ("replica", "mode2"),
                ivfr_var,
                attrs("eigenvalue of cov(vec dW2) (projected, local)", u_w2, f"{PAPER} Eq. 73"),
            ),
            "ivfr_curvature": (
                ("replica", "mode2"),
                ivfr_kappa,
                attrs("curvature kappa along that eigenvector", "loss/weight^2", f"{PAPER} Eq. 73"),
            ),
            "ivfr_curvature_eq73": (
                ("replica", "mode2"),
                kappa_eq73,
                attrs(
                    "kappa from the variance, 2 S sigma_x^2 D2 m / (lr sigma_y^2)",
                    "loss/weight^2",
                    f"{PAPER} Eq. 73",
                ),
            ),
            "ivfr_spearman": (
                "replica",
                rho,
                attrs(
                    "Spearman rank correlation of curvature and variance",
                    "1",
                    "IVFR, Feng and Tu 2021",
                ),
            ),
            "ivfr_slope": (
                "replica",
                slope,
                attrs(
                    "fitted slope of log kappa vs log variance", "1", f"{PAPER} Eq. 73 (slope 1)"
                ),
            ),
            "ivfr_spearman_mean": (
                (),
                _nanmean(rho),
                attrs("mean Spearman rho over replicas", "1", "IVFR"),
            ),
            "ivfr_slope_mean": (
                (),
                _nanmean(slope),
                attrs("mean fitted log-log slope over replicas", "1", "IVFR"),
            ),
            "delta_L2_sgd": (
                "mode2",
                _nanmean(dl2_sgd, axis=0),
                attrs(
                    "even part of delta L(theta a_i)/theta^2 along eig. of cov(dW2)",
                    "loss/weight^2",
                    f"{PAPER} Eq. 73, Fig. 7a",
                ),
            ),
            "delta_L2_sgd_se": (
                "mode2",
                _nanstd(dl2_sgd) / np.sqrt(R),
                attrs("s.e. over replicas", "loss/weight^2", "Fig. 7a"),
            ),
            "delta_L2_eq73_exact": (
                "mode2",
                0.5 * sx2 * np.sort(d1_loc, axis=1)[:, ::-1][:, :n2].mean(axis=0)
                if N_o == 1
                else np.full(n2, np.nan),
                attrs(
                    "sigma_x^2 D1_ii / 2 at the local point",
                    "loss/weight^2",
                    f"{PAPER} Eq. 73 (exact)",
                ),
            ),
            "delta_L2_eq73_approx": (
                "mode2",
                0.5 * _nanmean(kappa_eq73, axis=0),
                attrs(
                    "S D2 sigma_x^2 m_i / (lr sigma_y^2), SGD variances m_i",
                    "loss/weight^2",
                    f"{PAPER} Eq. 73 (approximation)",
                ),
            ),
            "delta_L1_sgd": (
                "mode1",
                dl1_mean,
                attrs(
                    "even part of delta L(theta v_i)/theta^2 along eig. of cov(vec dW1)",
                    "loss/weight^2",
                    f"{PAPER} Fig. 7b",
                ),
            ),
            "delta_L1_sgd_se": (
                "mode1",
                dl1_se,
                attrs("s.e. over replicas", "loss/weight^2", "Fig. 7b"),
            ),
            "delta_L1_linear": (
                "mode1",
                dl1_th_mean,
                attrs(
                    "same along the eigenvectors of the linear theory (0 beyond N_o N_i)",
                    "loss/weight^2",
                    src_b,
                ),
            ),
            "delta_L1_drop_ratio": (
                (),
                drop,
                attrs(
                    "mean delta L for i > N_i / mean for i <= N_i (SGD)", "1", f"{PAPER} Fig. 7b"
                ),
            ),
            # traces
            "trace_D1": (
                ("replica", "trace_time"),
                tr_D1,
                attrs("D1 = |W1|_F^2 (window mean)", u_w2, f"{PAPER} Eq. 59"),
            ),
            "trace_D2": (
                ("replica", "trace_time"),
                tr_D2,
                attrs("D2 = |W2|_F^2 (window mean)", u_w2, f"{PAPER} Eq. 59"),
            ),
            "trace_dist": (
                ("replica", "trace_time"),
                tr_dist,
                attrs("|W2 W1 - w*|_F (window mean)", "weight", f"{PAPER} Eq. 39"),
            ),
            "trace_tr_gamma": (
                ("replica", "trace_time"),
                tr_gamma,
                attrs("tr Gamma = sigma_x^2 (N_i D2 + N_o D1)", "1/lr steps", f"{PAPER} Eq. 63"),
            ),
            # Fig. 6a
            "M_z_eq66": (
                ("z_row", "z_col"),
                Mz,
                attrs(
                    "M = cov(Z), Eq. 66 at W^0 (x (1 - N_i/P))", u_w2, f"{PAPER} Eq. 66, Fig. 6a"
                ),
            ),
            "M_z_sgd": (
                ("z_row", "z_col"),
                Mz_sgd,
                attrs(
                    "SGD covariance in the Z basis of the local point (replica 0)",
                    u_w2,
                    f"{PAPER} Sec. III.2.3, Fig. 6a",
                ),
            ),
        },
        coords={
            "mode1": np.arange(1, n1 + 1),
            "mode2": np.arange(1, n2 + 1),
            "replica": np.arange(R),
            "trace_time": (
                "trace_time",
                tr_step,
                attrs("SGD steps since W^0", "steps", "protocol"),
            ),
            "trace_tau": (
                "trace_time",
                tr_step / tau0,
                attrs("SGD steps since W^0 / tau0", "tau0", "protocol"),
            ),
            "z_row": np.arange(mz_dim),
            "z_col": np.arange(mz_dim),
        },
    )
    if acf is not None:
        ds = ds.assign_coords(
            relax_mode=np.arange(K),
            lag=("lag", lag_steps, attrs("lag", "steps", "protocol")),
        )
        ds["relax_acf"] = (
            ("relax_mode", "lag"),
            acf,
            attrs("normalised autocorrelation of chi_k", "1", f"{PAPER} Eq. 76"),
        )
        ds["relax_acf_se"] = (
            ("relax_mode", "lag"),
            acf_se,
            attrs("s.e. over replicas", "1", f"{PAPER} Eq. 76"),
        )
        ds["relax_theory"] = (
            ("relax_mode", "lag"),
            acf_th,
            attrs(
                "exp(-sigma_x^2 omega_k t), t = lr lag",
                "1",
                f"{PAPER} Eq. 76 (corrected sign, Eq. 75)",
            ),
        )
        ds["relax_rate"] = (
            "relax_mode",
            rates,
            attrs("sigma_x^2 omega_k (exact drift eigenvalue)", "1/(lr step)", f"{PAPER} Eq. 74"),
        )
    ds["elapsed_s"] = (
        (),
        time.perf_counter() - t_start,
        attrs("wall time of the cell", "s", "protocol"),
    )
    ds.attrs.update(
        {k: (v if isinstance(v, int | float | str) else str(v)) for k, v in cfg.items()}
    )
    ds.attrs["sampling_start_step"] = int(pre_steps)
    ds.attrs["N_z1"] = int(nz1)
    progress(f"two-layer cell done in {ds['elapsed_s'].item():.1f} s")
    return ds


EXPERIMENTS: dict[str, Callable[[Block, Progress], xr.Dataset]] = {
    "two_layer_cell": two_layer_cell,
}
