"""Relaxational dynamics of SGD in the eigenmodes of the Hessian (paper 000 Sec. II.2.3, Fig. 3).

With ``H = V diag(omega) V^T`` (``omega`` ascending, Eq. 25) the weights are projected onto the
modes ``z = V^T w``; the loss is quadratic in them (Eq. 26)::

    L(z) = L* + (1/2) sum_k omega_k (z_k - z*_k)^2 ,

and the SDE solution (Eq. 27) has the noise-averaged mean ``<z_k(t)> = z*_k + exp(-omega_k t)
(z_k(0) - z*_k)`` in SDE time ``t = lr * n`` after ``n`` SGD steps (the paper's ``t = tau/lambda``
is a typo, docs/errata.md). Because the mini-batch gradient is an unbiased estimate of the full
gradient and linear in ``w``, the mean over the SGD noise obeys the exact discrete recursion
``<z(n+1)> - z* = (1 - lr omega) (<z(n)> - z*)``, i.e. ``<z_k(n)> = z*_k + (1 - lr omega_k)^n
(z_k(0) - z*_k)``, of which Eq. 27 is the small-``lr omega`` limit.

Trajectories are recorded with the numba kernel of :mod:`weightdyn.single_layer.simulate` fed by
the same counter-based stream as :func:`~weightdyn.single_layer.simulate.run_sgd`, so the
trajectory does not depend on the recording schedule, and the state after ``n`` steps equals
``run_sgd``'s ``final_W`` after ``n`` steps from the same generator state.
Pure numpy in, numpy/xarray out; no file I/O.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

from weightdyn import stats
from weightdyn.counter_rng import replica_keys
from weightdyn.io import attrs
from weightdyn.single_layer import theory
from weightdyn.single_layer.simulate import _check_sampling, sgd_kernel

__all__ = [
    "RelaxationRun",
    "discrete_mean_modes",
    "discrete_rates",
    "exponential_mean_modes",
    "fit_relaxation_rates",
    "loss_from_modes",
    "loss_settle_time",
    "mode_variance_discrete",
    "mp_edge_check",
    "mp_edge_from_rates",
    "record_relaxation",
    "record_steps",
    "relaxation_dataset",
    "run_deviation",
    "sign_changes",
]

#: the loss has settled once it stays within this fraction above its stationary value
SETTLE_TOLERANCE = 0.1
#: the slow modes whose share of the loss decides when it settles: omega_k < SLOW_FACTOR omega_0
SLOW_FACTOR = 10.0

P000 = "paper 000"


# ----------------------------------------------------------------------------- simulation


def record_steps(n_steps: int, every: int | None = None, n_log: int | None = None) -> np.ndarray:
    """Step numbers at which to record: ``0, every, 2 every, ..., n_steps`` (linear grid) merged
    with ``n_log`` log-spaced steps in ``[1, n_steps]`` (for log-log plots); sorted, unique."""
    if n_steps < 1:
        raise ValueError(f"n_steps must be positive, got {n_steps}")
    parts = [np.array([0, n_steps], dtype=np.int64)]
    if every is not None:
        if every < 1:
            raise ValueError(f"every must be positive, got {every}")
        parts.append(np.arange(0, n_steps + 1, every, dtype=np.int64))
    if n_log is not None:
        parts.append(np.round(np.geomspace(1, n_steps, n_log)).astype(np.int64))
    return np.unique(np.concatenate(parts))


@dataclass(frozen=True)
class RelaxationRun:
    """Recorded SGD trajectories of R replicas from one common start, in Hessian modes (Eq. 25).

    ``steps`` (T,) are SGD step numbers (``steps[0]`` may be 0, the start); ``W`` (T, R, N) the
    weights, ``z`` (T, R, N) the modes ``V^T w``, ``loss`` (T, R) the full-batch loss (Eq. 3).
    ``omega`` (N,) ascending, ``V`` (N, N) eigenvectors in columns, ``w_star`` and ``z_star``
    the minimum-norm solution (Eq. 7), ``L_star = L(w*)`` (Eq. 26), ``C_tilde_diag`` the diagonal
    of ``V^T C V`` with ``C`` the noise covariance at ``w*`` (Eq. 17, App. C prefactor).
    """

    steps: np.ndarray
    W: np.ndarray
    z: np.ndarray
    loss: np.ndarray
    omega: np.ndarray
    V: np.ndarray
    w_init: np.ndarray
    w_star: np.ndarray
    z_star: np.ndarray
    L_star: float
    C_tilde_diag: np.ndarray
    lr: float
    batch_size: int
    sampling: str
    diverged: bool
    P: int

    @property
    def time(self) -> np.ndarray:
        """SDE time ``t = lr * n`` (Eq. 13 with the corrected time variable)."""
        return self.lr * self.steps.astype(float)

    @property
    def z_init(self) -> np.ndarray:
        return self.V.T @ self.w_init


def _recorded_sgd(
    X: np.ndarray,
    y: np.ndarray,
    lr: float,
    with_replacement: bool,
    w_init: np.ndarray,
    steps: np.ndarray,
    rng: np.random.Generator,
    S: int,
    R: int,
    w_star: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """SGD weights (T, R, N) of R chains at the record ``steps`` (NaN after a chain leaves
    ``1e6 (max|w*| + 1)``) and which chains stayed bounded (R,)."""
    P, N = X.shape
    W = np.tile(w_init, (R, 1))
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    bound = float(1e6 * (np.max(np.abs(w_star), initial=0.0) + 1.0))
    keys = replica_keys(rng, R)
    no_sums, no_rec = (np.empty((0, N)), np.empty((0, N, N))), np.empty((0, R, N))
    W_rec = np.empty((steps.size, R, N))
    alive = np.ones(R, dtype=bool)
    done = 0
    for i, target in enumerate(steps):
        n = int(target) - done
        if n > 0:
            flags = sgd_kernel(
                X, y, W, lr, S, with_replacement, perm, keys, done, n, n + 1, w_star, *no_sums,
                no_rec, bound,
            )  # fmt: skip
            alive &= ~flags
            done = int(target)
        W_rec[i] = np.where(alive[:, None], W, np.nan)
    return W_rec, alive


def record_relaxation(
    X: ArrayLike,
    y: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str,
    w_init: ArrayLike,
    steps: ArrayLike,
    rng: np.random.Generator,
    replicas: int = 1,
) -> RelaxationRun:
    """Run ``replicas`` SGD chains (Eqs. 10-11) from the common start ``w_init`` (N,) and record
    them at the increasing step numbers ``steps`` (e.g. from :func:`record_steps`).

    Returns the weights, their Hessian modes ``z = V^T w`` (Eq. 25) and the full-batch loss
    (Eq. 3) at every record, plus what the theory of Eqs. 26-27 needs. A replica leaving
    ``1e6 (max|w*| + 1)`` is flagged (``diverged``) and its later records are NaN.
    """
    with_replacement = _check_sampling(sampling)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    P, N = X.shape
    w_init = np.asarray(w_init, dtype=np.float64)
    if w_init.shape != (N,):
        raise ValueError(f"w_init must have shape ({N},), got {w_init.shape}")
    steps = np.asarray(steps, dtype=np.int64)
    if steps.ndim != 1 or steps.size == 0 or steps[0] < 0 or np.any(np.diff(steps) <= 0):
        raise ValueError("steps must be a non-empty, strictly increasing array of ints >= 0")
    S, R = int(batch_size), int(replicas)
    if S < 1 or (not with_replacement and S > P) or R < 1:
        raise ValueError("need 1 <= batch_size (<= P without replacement) and replicas >= 1")

    H = theory.hessian(X)
    omega, V = np.linalg.eigh(0.5 * (H + H.T))
    w_star = theory.min_norm_solution(X, y)
    C = theory.noise_covariance(X, y, S, sampling)
    C_tilde_diag = np.einsum("ik,ij,jk->k", V, C, V)

    W_rec, alive = _recorded_sgd(X, y, lr, with_replacement, w_init, steps, rng, S, R, w_star)
    z = W_rec @ V
    loss = theory.loss(X, y, np.nan_to_num(W_rec))
    loss = np.where(np.isnan(W_rec).any(axis=-1), np.nan, loss)
    return RelaxationRun(
        steps=steps,
        W=W_rec,
        z=z,
        loss=np.asarray(loss),
        omega=omega,
        V=V,
        w_init=w_init.copy(),
        w_star=w_star,
        z_star=V.T @ w_star,
        L_star=theory.optimal_loss(X, y),
        C_tilde_diag=C_tilde_diag,
        lr=float(lr),
        batch_size=S,
        sampling=sampling,
        diverged=bool(not alive.all()),
        P=P,
    )


# --------------------------------------------------------------------------------- theory


def exponential_mean_modes(
    z_init: ArrayLike, z_star: ArrayLike, omega: ArrayLike, t: ArrayLike
) -> np.ndarray:
    """Noise-averaged modes of Eq. 27: ``z* + exp(-omega_k t) (z_k(0) - z*_k)``, shape (T, N)
    for SDE times ``t`` (T,) = lr * steps."""
    z_init, z_star, omega = (np.asarray(a, dtype=float) for a in (z_init, z_star, omega))
    t = np.asarray(t, dtype=float)[:, None]
    return z_star + np.exp(-omega * t) * (z_init - z_star)


def discrete_mean_modes(
    z_init: ArrayLike, z_star: ArrayLike, omega: ArrayLike, lr: float, steps: ArrayLike
) -> np.ndarray:
    """Exact noise-averaged modes of SGD: ``z* + (1 - lr omega_k)^n (z_k(0) - z*_k)``, (T, N).

    Exact because the mini-batch gradient is unbiased and linear in ``w`` (Eqs. 10-11); Eq. 27
    is its limit ``lr omega -> 0`` at fixed ``t = lr n``.
    """
    z_init, z_star, omega = (np.asarray(a, dtype=float) for a in (z_init, z_star, omega))
    n = np.asarray(steps, dtype=float)[:, None]
    return z_star + np.power(1.0 - lr * omega, n) * (z_init - z_star)


def mode_variance_discrete(
    C_tilde_diag: ArrayLike, omega: ArrayLike, lr: float, steps: ArrayLike
) -> np.ndarray:
    """Variance of each mode built up by additive noise ``C`` at w* (Eqs. 17, 25), (T, N).

    The discrete recursion ``v(n+1) = (1 - lr omega)^2 v(n) + lr^2 C~_kk`` gives
    ``v(n) = lr C~_kk [1 - (1 - lr omega)^(2n)] / (omega (2 - lr omega))``, which tends to the
    diagonal of the stationary covariance of Eq. 30 (``lr C~_kk / (2 omega_k)``) for small
    ``lr omega`` and to ``n lr^2 C~_kk`` for ``omega -> 0``. Multiplicative noise (Eq. 14 away
    from w*) is neglected.
    """
    c, omega = np.asarray(C_tilde_diag, dtype=float), np.asarray(omega, dtype=float)
    n = np.asarray(steps, dtype=float)[:, None]
    a = lr * omega
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = -np.expm1(2.0 * n * np.log1p(-a))  # 1 - (1 - a)^(2n), accurate for small a
        v = lr * c * growth / (omega * (2.0 - a))
    return np.where(np.abs(a) > 1e-300, v, n * lr**2 * c)


def loss_from_modes(
    z: ArrayLike, z_star: ArrayLike, omega: ArrayLike, L_star: float, var: ArrayLike | None = None
) -> np.ndarray:
    """Loss of Eq. 26, ``L* + (1/2) sum_k omega_k [(z_k - z*_k)^2 + var_k]`` over the last axis.

    With ``z`` the noise-averaged modes and ``var`` their variance this is the noise-averaged
    loss; ``var = None`` evaluates Eq. 26 at ``z`` itself.
    """
    z, z_star, omega = (np.asarray(a, dtype=float) for a in (z, z_star, omega))
    dev2 = (z - z_star) ** 2
    if var is not None:
        dev2 = dev2 + np.asarray(var, dtype=float)
    return L_star + 0.5 * np.sum(omega * dev2, axis=-1)


def discrete_rates(omega: ArrayLike, lr: float) -> np.ndarray:
    """Decay rate per unit SDE time of the exact SGD mean, ``-log|1 - lr omega_k| / lr``.

    The mean modes decay as ``(1 - lr omega_k)^n = exp(-rate t)`` with ``t = lr n`` (the exact
    discrete form of Eq. 27); ``rate -> omega_k`` for ``lr omega_k -> 0``.
    """
    omega = np.asarray(omega, dtype=float)
    with np.errstate(divide="ignore"):
        return -np.log(np.abs(1.0 - lr * omega)) / lr


def fit_relaxation_rates(
    z: ArrayLike, z_star: ArrayLike, t: ArrayLike, threshold: float = 5.0, min_points: int = 5
) -> tuple[np.ndarray, np.ndarray]:
    """Relaxation rate of each mode fitted to the replica mean (Eq. 27), with a jackknife SE.

    ``z`` (T, R, N) are recorded modes of R replicas at SDE times ``t`` (T,). For mode k the
    rate is minus the least-squares slope of ``log|<z_k>(t) - z*_k|`` against ``t``, fitted over
    the times ``t > 0`` before the deviation first falls below ``threshold`` standard errors of
    the replica mean (while the relaxation is resolved above the stationary noise of Eq. 30; the
    exact mean decays as ``(1 - lr omega_k)^n``, see :func:`discrete_rates`). The SE is a delete-one
    jackknife over replicas on the same window. Replicas with NaN records (diverged) are left
    out; a mode with fewer than ``min_points`` points, or fewer than 2 replicas, gives NaN.
    """
    z = np.asarray(z, dtype=float)
    z = z[:, ~np.isnan(z).any(axis=(0, 2))]
    t = np.asarray(t, dtype=float)
    z_star = np.asarray(z_star, dtype=float)
    n_modes, R = z.shape[2], z.shape[1]
    rate, se = np.full(n_modes, np.nan), np.full(n_modes, np.nan)
    if R < 2:
        return rate, se
    dev = z.mean(axis=1) - z_star
    mean_se = z.std(axis=1, ddof=1) / np.sqrt(R)
    later = t > 0
    for k in range(n_modes):
        resolved = np.abs(dev[:, k]) > threshold * mean_se[:, k]
        window = later & np.logical_and.accumulate(resolved | ~later)
        if window.sum() < min_points:
            continue

        def decay_rate(replicas: np.ndarray, k: int = k, window: np.ndarray = window) -> float:
            log_dev = np.log(np.abs(replicas.mean(axis=0) - z_star[k]))
            return -stats.line_fit(t[window], log_dev).slope

        fit, fit_se = stats.jackknife(decay_rate, z[window, :, k].T)
        rate[k], se[k] = float(fit), float(fit_se)
    return rate, se


def mp_edge_check(X: ArrayLike, sigma_x2: float) -> dict[str, float]:
    """Smallest Hessian eigenvalue vs the Marchenko-Pastur lower edge (text after Eq. 27).

    Returns ``omega_min`` (smallest eigenvalue of H = X^T X / P), the corrected edge
    ``sigma_x^2 (1 - sqrt(N/P))^2`` and the paper's ``sigma_x^2 (sqrt(P/N) - 1)^2``, and the
    ratios of ``omega_min`` to both. For ``N > P`` the smallest *nonzero* eigenvalue is used.
    """
    X = np.asarray(X, dtype=float)
    return mp_edge_from_rates(theory.relaxation_rates(theory.hessian(X)), X.shape[0], sigma_x2)


def mp_edge_from_rates(omega: ArrayLike, P: int, sigma_x2: float) -> dict[str, float]:
    """:func:`mp_edge_check` for given Hessian eigenvalues ``omega`` (N,) ascending."""
    omega = np.sort(np.asarray(omega, dtype=float))
    N = omega.size
    thr = N * np.finfo(float).eps * max(omega[-1], 0.0)
    omega_min = float(omega[omega > thr][0])
    edge, _ = theory.marchenko_pastur_edges(N, P, sigma_x2)
    edge_paper = float(sigma_x2 * (np.sqrt(P / N) - 1.0) ** 2)
    return {
        "omega_min": omega_min,
        "mp_lower_edge": edge,
        "mp_lower_edge_paper": edge_paper,
        "ratio": omega_min / edge if edge > 0 else np.inf,
        "ratio_paper": omega_min / edge_paper if edge_paper > 0 else np.inf,
    }


# ------------------------------------------------------------------ the claims of Fig. 3


def sign_changes(z: ArrayLike) -> np.ndarray:
    """Number of sign changes of ``z`` along its first axis (time), for every other index.

    Exact zeros and NaN records carry no sign and are skipped (a change across them counts once).
    The noise-averaged Eq. 27 changes sign at most once; single SGD runs may change it often
    (paper 000, text after Eq. 27: "sign changes").
    """
    s = np.sign(np.nan_to_num(np.asarray(z, dtype=float)))
    T = s.shape[0]
    index = np.where(s != 0, np.arange(T).reshape((T,) + (1,) * (s.ndim - 1)), 0)
    filled = np.take_along_axis(s, np.maximum.accumulate(index, axis=0), axis=0)
    return np.sum(filled[1:] * filled[:-1] < 0, axis=0)


def run_deviation(
    z: ArrayLike, z_mean: ArrayLike, z_init: ArrayLike, z_star: ArrayLike
) -> np.ndarray:
    """Largest deviation of single runs from the noise-averaged modes, in units of the distance
    to relax: ``max_t |z_k(t) - <z_k(t)>| / |z_k(0) - z*_k|`` for runs ``z`` (T, R, N) and the
    mean ``z_mean`` (T, N) of Eq. 27; (R, N). Small values: every run relaxes in one step as
    Eq. 27; values of order one: sign changes or two-step relaxation (text after Eq. 27)."""
    z, z_mean = np.asarray(z, dtype=float), np.asarray(z_mean, dtype=float)
    scale = np.abs(np.asarray(z_init, dtype=float) - np.asarray(z_star, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a diverged run: all NaN
        return np.nanmax(np.abs(z - z_mean[:, None, :]), axis=0) / scale


def loss_settle_time(t: ArrayLike, loss: ArrayLike, level: float) -> float:
    """The first record time from which ``loss`` stays at or below ``level`` (NaN if the last
    record is above it, or NaN)."""
    t, loss = np.asarray(t, dtype=float), np.asarray(loss, dtype=float)
    above = ~(loss <= level)
    if above[-1]:
        return float("nan")
    last = np.flatnonzero(above)
    return float(t[last[-1] + 1]) if last.size else float(t[0])


def _claim_variables(run: RelaxationRun) -> dict[str, tuple]:
    """The numbers behind the text after Eq. 27: sign changes of single runs against Eq. 27,
    the time at which the replica-mean loss settles, and the slow mode's share of the loss."""
    text = f"{P000} text after Eq. 27, Fig. 3"
    with warnings.catch_warnings():  # all replicas diverged: NaN mean, no warning
        warnings.simplefilter("ignore", RuntimeWarning)
        loss_mean = np.nanmean(run.loss, axis=1)
    level = (1.0 + SETTLE_TOLERANCE) * (run.L_star + 0.25 * run.lr * np.sum(run.C_tilde_diag))
    z_exp = exponential_mean_modes(run.z_init, run.z_star, run.omega, run.time)
    omega0, dz0 = float(run.omega[0]), float(run.z_init[0] - run.z_star[0])
    slow = run.omega < SLOW_FACTOR * omega0
    settle = f"replica-mean loss within {SETTLE_TOLERANCE:g} of L* + tr(HM)/2"
    return {
        "sign_changes_sgd": (("replica", "mode"), sign_changes(run.z).astype(np.int64),
                             attrs("sign changes of z_k(t) along one SGD run", "1", text)),
        "sign_changes_theory": (("mode",), sign_changes(z_exp).astype(np.int64),
                                attrs("sign changes of the noise-averaged z_k(t) of Eq. 27",
                                      "1", f"{P000} Eq. 27")),
        "run_deviation": _var(("replica", "mode"),
                              run_deviation(run.z, z_exp, run.z_init, run.z_star),
                              "max_t |z_k(t) - Eq. 27| / |z_k(0) - z_k*| of one SGD run", text),
        "loss_settle_level": _var((), level, f"level of {settle}", text),
        "loss_settle_time": _var((), loss_settle_time(run.time, loss_mean, level),
                                 f"first time from which the {settle}", text),
        "slow_mode_initial_loss": _var((), 0.5 * omega0 * dz0**2,
                                       "slow mode's initial excess loss omega_0 (z_0(0)-z_0*)^2/2",
                                       f"{P000} Eq. 26"),
        "slow_modes_initial_loss": _var(
            (), 0.5 * float(np.sum((run.omega * (run.z_init - run.z_star) ** 2)[slow])),
            f"initial excess loss of the {int(slow.sum())} modes with omega_k < "
            f"{SLOW_FACTOR:g} omega_0", f"{P000} Eq. 26"),
        "slow_mode_solution_loss": _var((), 0.5 * omega0 * float(run.z_star[0]) ** 2,
                                        "slow mode's loss scale omega_0 z_0*^2/2",
                                        f"{P000} Eq. 26"),
    }  # fmt: skip


# -------------------------------------------------------------------------------- dataset


def _var(dims: tuple[str, ...], values, long_name: str, source: str) -> tuple:
    """One dimensionless data variable with its CF attributes."""
    return dims, values, attrs(long_name, "1", source)


def _sgd_variables(run: RelaxationRun) -> dict[str, tuple]:
    """The recorded SGD modes and losses with their replica means and SEs (Eqs. 3, 11, 25)."""
    R = run.z.shape[1]
    with warnings.catch_warnings():  # all replicas diverged: NaN statistics, no warning
        warnings.simplefilter("ignore", RuntimeWarning)
        z_mean = np.nanmean(run.z, axis=1)
        z_std = np.nanstd(run.z, axis=1, ddof=1) if R > 1 else np.zeros_like(z_mean)
        loss_mean = np.nanmean(run.loss, axis=1)
        loss_std = np.nanstd(run.loss, axis=1, ddof=1) if R > 1 else np.zeros(run.steps.size)
    modes, loss = f"{P000} Eqs. 11, 25", f"{P000} Eq. 3"
    tm = ("t", "mode")
    return {
        "z_sgd": _var(("replica", *tm), run.z.transpose(1, 0, 2),
                      "SGD weight modes z_k = (V^T w)_k", modes),
        "z_sgd_mean": _var(tm, z_mean, "replica mean of the SGD modes z_k", modes),
        "z_sgd_std": _var(tm, z_std, "replica standard deviation of the SGD modes", modes),
        "z_sgd_se": _var(tm, z_std / np.sqrt(R), "standard error of the replica mean of z_k",
                         modes),
        "loss_sgd": _var(("replica", "t"), run.loss.T,
                         "full-batch training loss L(w) under SGD", loss),
        "loss_sgd_mean": _var(("t",), loss_mean, "replica mean of the training loss", loss),
        "loss_sgd_se": _var(("t",), loss_std / np.sqrt(R),
                            "standard error of the replica-mean loss", loss),
    }  # fmt: skip


def _theory_variables(run: RelaxationRun) -> dict[str, tuple]:
    """Eqs. 26-27 (continuous and exact discrete mean modes, transient variance, losses)."""
    z_disc = discrete_mean_modes(run.z_init, run.z_star, run.omega, run.lr, run.steps)
    var = mode_variance_discrete(run.C_tilde_diag, run.omega, run.lr, run.steps)
    # stationary excess loss tr(H M)/2 = lr tr(C)/4 (trace of the Lyapunov equation, Eq. 29)
    stationary_excess = float(0.25 * run.lr * np.sum(run.C_tilde_diag))
    mean_only = loss_from_modes(z_disc, run.z_star, run.omega, run.L_star)
    eq27, tm, t = f"{P000} Eq. 27", ("t", "mode"), ("t",)
    return {
        "z_theory_exp": _var(tm, exponential_mean_modes(run.z_init, run.z_star, run.omega,
                                                        run.time),
                             "noise-averaged mode z* + exp(-omega t)(z(0) - z*)", eq27),
        "z_theory_discrete": _var(tm, z_disc, "exact SGD mean z* + (1 - lr omega)^n (z(0) - z*)",
                                  f"{eq27}, discrete time"),
        "mode_var_theory": _var(tm, var, "mode variance from additive noise C at w*",
                                f"{P000} Eqs. 17, 25, 30"),
        "loss_theory_mean_only": _var(t, mean_only, "loss of the noise-averaged modes",
                                      f"{P000} Eqs. 26-27"),
        "loss_theory": _var(t, loss_from_modes(z_disc, run.z_star, run.omega, run.L_star, var),
                            "noise-averaged loss: mean modes plus transient mode variance",
                            f"{P000} Eqs. 26-27, 30"),
        "loss_theory_stationary": _var(t, mean_only + stationary_excess,
                                       "loss of the mean modes plus stationary tr(HM)/2",
                                       f"{P000} Eqs. 26, 29-30"),
        "optimal_loss": _var((), run.L_star, "loss of the fully trained model L*",
                             f"{P000} Eq. 26"),
        "stationary_excess_loss": _var((), stationary_excess,
                                       "stationary excess loss tr(HM)/2 = lr tr(C)/4",
                                       f"{P000} Eqs. 29-30"),
    }  # fmt: skip


def _mode_variables(run: RelaxationRun) -> dict[str, tuple]:
    """Rates, solution and start in the Hessian modes, the fitted rates and the flag."""
    eq27, m = f"{P000} Eq. 27", ("mode",)
    omega_fit, omega_fit_se = fit_relaxation_rates(run.z, run.z_star, run.time)
    flag = attrs("a replica left the stability bound (1) or not (0)", "1", f"{P000} Eq. 11")
    flag |= {"flag_values": np.array([0, 1], dtype=np.int8), "flag_meanings": "stable diverged"}
    return {
        "omega": _var(m, run.omega, "relaxation rate omega_k (eigenvalue of H)",
                      f"{P000} Eqs. 4, 25"),
        "z_star": _var(m, run.z_star, "solution modes z* = V^T w*", f"{P000} Eqs. 7, 25"),
        "z_init": _var(m, run.z_init, "initial modes z(0) = V^T w(0)", eq27),
        "omega_min": _var((), float(run.omega[0]), "smallest relaxation rate omega_0", eq27),
        "omega_fit": _var(m, omega_fit, "relaxation rate fitted to the replica-mean mode",
                          f"{eq27}, fit"),
        "omega_fit_se": _var(m, omega_fit_se,
                             "jackknife standard error of omega_fit (over replicas)",
                             f"{eq27}, fit"),
        "omega_discrete": _var(m, discrete_rates(run.omega, run.lr),
                               "decay rate of the exact SGD mean, -log|1 - lr omega| / lr",
                               f"{eq27}, discrete time"),
        "diverged": ((), np.int8(run.diverged), flag),
    }  # fmt: skip


def _edge_variables(run: RelaxationRun, sigma_x2: float) -> dict[str, tuple]:
    """The smallest rate against the Marchenko-Pastur lower edge (text after Eq. 27)."""
    check = mp_edge_from_rates(run.omega, run.P, sigma_x2)
    text = f"{P000} text after Eq. 27"
    return {
        "mp_lower_edge": _var((), check["mp_lower_edge"],
                              "Marchenko-Pastur lower edge sigma_x^2 (1 - sqrt(N/P))^2",
                              f"{text} (corrected)"),
        "mp_lower_edge_paper": _var((), check["mp_lower_edge_paper"],
                                    "paper's lower edge sigma_x^2 (sqrt(P/N) - 1)^2",
                                    f"{text} (as printed)"),
        "omega_min_over_mp_edge": _var((), check["ratio"],
                                       "omega_0 / Marchenko-Pastur lower edge", text),
    }  # fmt: skip


def relaxation_dataset(run: RelaxationRun, sigma_x2: float | None = None) -> xr.Dataset:
    """Fig. 3 dataset of one relaxation run, dims ``(t, mode)`` plus ``replica``.

    Coordinates: ``t`` (SDE time lr*n), ``step`` (t), ``mode`` (k, omega ascending),
    ``replica``. Variables: ``z_sgd`` (replica, t, mode); ``z_sgd_mean``, ``z_sgd_std``,
    ``z_sgd_se`` (t, mode) over replicas; ``z_theory_exp`` (Eq. 27) and ``z_theory_discrete``
    (t, mode); ``mode_var_theory`` (t, mode); ``loss_sgd`` (replica, t),
    ``loss_sgd_mean``/``loss_sgd_se`` (t); ``loss_theory_mean_only`` (Eq. 26 at the mean),
    ``loss_theory`` (plus the transient noise variance), ``loss_theory_stationary`` (mean plus
    the stationary tr(HM)/2) (t); ``omega``, ``z_star``, ``z_init`` (mode); scalars
    ``optimal_loss``, ``stationary_excess_loss``, ``omega_min``; the rates ``omega_fit``,
    ``omega_fit_se`` (:func:`fit_relaxation_rates`) and ``omega_discrete``
    (:func:`discrete_rates`) (mode); the flag ``diverged``; the claims of the text after
    Eq. 27: ``sign_changes_sgd`` (replica, mode) and ``sign_changes_theory`` (mode, Eq. 27),
    ``run_deviation`` (replica, mode, :func:`run_deviation`), ``loss_settle_time`` and
    ``loss_settle_level`` (:func:`loss_settle_time` of the replica-mean loss), the slow mode's
    ``slow_mode_initial_loss``, ``slow_mode_solution_loss`` and the share of the modes below
    ``SLOW_FACTOR omega_0``, ``slow_modes_initial_loss``; and, if ``sigma_x2`` is given,
    ``mp_lower_edge``, ``mp_lower_edge_paper``, ``omega_min_over_mp_edge``. The time dimension is
    ``t``, not ``time``: CF checkers take a dimension named ``time`` for calendar time.
    """
    R, N = run.z.shape[1], run.omega.size
    data_vars = _sgd_variables(run) | _theory_variables(run) | _mode_variables(run)
    data_vars |= _claim_variables(run)
    if sigma_x2 is not None:
        data_vars |= _edge_variables(run, sigma_x2)
    eq27 = f"{P000} Eq. 27"
    coords = {
        "t": ("t", run.time, attrs("SDE time t = lr n", "1", f"{P000} Eq. 13 (t = lr tau)")),
        "step": ("t", run.steps, attrs("SGD step n", "1", f"{P000} Eq. 11")),
        "mode": ("mode", np.arange(N), attrs("mode index k (omega ascending)", "1", eq27)),
        "replica": ("replica", np.arange(R), attrs("SGD replica", "1", f"{P000} Eq. 11")),
    }
    cell = {"N": N, "P": run.P, "lr": run.lr, "batch_size": run.batch_size,
            "sampling": run.sampling, "replicas": R, "diverged": int(run.diverged)}  # fmt: skip
    return xr.Dataset(data_vars, coords=coords, attrs=cell)
