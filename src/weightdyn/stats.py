"""Generic statistics helpers: group covariances, jackknife errors, autocorrelation times, fits.

Nothing in here knows about the physics; "groups" are independent (or nearly independent)
units of data, e.g. (replica, time block) pairs of a simulation, stacked along axis 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "MIN_BLOCK_TAU_INT",
    "IntegratedTime",
    "LineFit",
    "blocks_too_short",
    "eigenvalues_with_se",
    "group_covariances",
    "integrated_autocorrelation_time",
    "integrated_time",
    "jackknife",
    "jackknife_bias_corrected",
    "jackknife_of_mean",
    "line_fit",
    "mean_with_se",
    "power_law_fit",
    "sums_by_label",
]

#: A time block must span at least this many integrated autocorrelation times ``tau_int`` of the
#: slowest observable for (replica, block) groups to count as independent. The means of two
#: adjacent blocks of ``L`` steps of a series with exponential autocorrelation are correlated by
#: about ``tau_int / (2 L)``; a jackknife that treats them as independent underestimates the
#: variance by a factor ``1 + 2 (B - 1) / B * tau_int / (2 L)`` (B blocks per replica): 1.75 at
#: ``L = tau_int`` and B = 4, 1.15 at ``5 tau_int``, 1.075 at ``10 tau_int`` (s.e. 4 % low).
MIN_BLOCK_TAU_INT = 10.0


def group_covariances(
    sum_dw: np.ndarray, sum_dwdw: np.ndarray, n_records: np.ndarray, about: str = "reference"
) -> np.ndarray:
    """Per-group covariance (G, N, N) from accumulated first and second moments.

    ``sum_dw`` (G, N) and ``sum_dwdw`` (G, N, N) are sums over ``n_records`` (G,) snapshots
    of ``dw = w - w_ref``.

    * ``about="reference"``: ``<dw dw^T> = sum_dwdw / n`` (second moment about ``w_ref``);
    * ``about="mean"``: ``sum_dwdw / n - m m^T`` with the group's own time average
      ``m = sum_dw / n`` (the biased, 1/n, sample covariance).
    """
    if about not in ("reference", "mean"):
        raise ValueError(f"about must be 'reference' or 'mean', got about={about!r}")
    n = np.asarray(n_records, dtype=np.float64)
    if np.any(n <= 0):
        raise ValueError("n_records must be positive for every group")
    second = np.asarray(sum_dwdw, dtype=np.float64) / n[:, None, None]
    if about == "reference":
        return second
    m = np.asarray(sum_dw, dtype=np.float64) / n[:, None]
    return second - m[:, :, None] * m[:, None, :]


def blocks_too_short(
    block_steps: float, tau_int: float, min_tau_int: float = MIN_BLOCK_TAU_INT
) -> bool:
    """Whether time blocks of ``block_steps`` steps are too short to be independent groups:
    shorter than ``min_tau_int`` slowest integrated autocorrelation times ``tau_int`` (steps;
    see :data:`MIN_BLOCK_TAU_INT`). False for a non-finite ``tau_int`` (nothing relaxes)."""
    return bool(np.isfinite(tau_int) and block_steps < min_tau_int * tau_int)


def sums_by_label(labels: np.ndarray, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each of ``arrays`` (G, ...) summed over the groups that share a label: rows
    ``0 .. labels.max()`` (e.g. a replica's time blocks pooled into one group per replica)."""
    labels = np.asarray(labels)
    k = int(labels.max()) + 1
    out = []
    for arr in arrays:
        arr = np.asarray(arr, dtype=np.float64)
        pooled = np.zeros((k, *arr.shape[1:]))
        np.add.at(pooled, labels, arr)
        out.append(pooled)
    return tuple(out)


def _jackknife_se(loo: np.ndarray) -> np.ndarray:
    k = loo.shape[0]
    dev = loo - loo.mean(axis=0)
    return np.sqrt((k - 1) / k * np.sum(dev * dev, axis=0))


def jackknife(
    estimator: Callable[[np.ndarray], np.ndarray], groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Delete-one jackknife over the leading axis of ``groups`` (k, ...).

    ``estimator`` maps an array of group values (m, ...) to a result array. Returns
    ``(estimator(groups), se)`` with ``se = sqrt((k-1)/k * sum_i (theta_i - theta_.)^2)``,
    ``theta_i = estimator(groups without i)``. Cost: k + 1 estimator calls; for estimators
    of the form ``f(mean(groups))`` prefer :func:`jackknife_of_mean`.
    """
    groups = np.asarray(groups)
    k = groups.shape[0]
    if k < 2:
        raise ValueError(f"jackknife needs at least 2 groups, got {k}")
    full = np.asarray(estimator(groups), dtype=np.float64)
    loo = np.stack(
        [np.asarray(estimator(np.delete(groups, i, axis=0)), dtype=np.float64) for i in range(k)]
    )
    return full, _jackknife_se(loo)


def jackknife_of_mean(
    func: Callable[[np.ndarray], np.ndarray], groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Jackknife of ``func(mean over groups)``, with O(k) leave-one-out means.

    ``func`` must accept a stack of means (m, ...) and return a stack of results (m, ...)
    (it is called once on the full mean with m = 1 and once on all k leave-one-out means).
    """
    groups = np.asarray(groups, dtype=np.float64)
    k = groups.shape[0]
    if k < 2:
        raise ValueError(f"jackknife needs at least 2 groups, got {k}")
    total = groups.sum(axis=0)
    full = np.asarray(func((total / k)[None]))[0]
    loo = np.asarray(func((total[None] - groups) / (k - 1)))
    return full, _jackknife_se(loo)


def jackknife_bias_corrected(
    func: Callable[[np.ndarray], np.ndarray | float], groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bias-corrected jackknife of ``func(mean over groups)``: ``k f - (k - 1) mean_i f_i``
    with ``f_i`` the leave-one-out values, and their standard error. ``func`` takes one mean
    (not a stack). It removes the ``O(1/n)`` bias of a smooth nonlinear function of a sampled
    mean (e.g. a KL divergence of a sampled covariance), exactly for a quadratic one."""
    groups = np.asarray(groups, dtype=np.float64)
    k = groups.shape[0]
    if k < 2:
        raise ValueError(f"jackknife needs at least 2 groups, got {k}")
    total = groups.sum(axis=0)
    full = np.asarray(func(total / k), dtype=np.float64)
    loo = np.stack([np.asarray(func((total - g) / (k - 1)), dtype=np.float64) for g in groups])
    return k * full - (k - 1) * loo.mean(axis=0), _jackknife_se(loo)


def _sorted_eigvals_desc(mats: np.ndarray) -> np.ndarray:
    sym = 0.5 * (mats + np.swapaxes(mats, -1, -2))
    return np.linalg.eigvalsh(sym)[..., ::-1]


def eigenvalues_with_se(group_covs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) of the mean of ``group_covs`` (G, N, N), jackknife SE.

    The SE refers to the eigenvalue at each sorted position (leave-one-group-out).
    """
    return jackknife_of_mean(_sorted_eigvals_desc, group_covs)


def mean_with_se(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the leading axis and its standard error ``std(ddof=1) / sqrt(n)``."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    if n < 2:
        raise ValueError(f"mean_with_se needs at least 2 values, got {n}")
    return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(n)


class IntegratedTime(NamedTuple):
    """Integrated autocorrelation time, in units of the series spacing, with Sokal's window.

    ``tau`` and ``window`` (the summation window M) per observable; ``se`` is Sokal's standard
    error ``tau sqrt(2 (2M + 1) / n)`` with ``n`` the number of independent series points
    (series length times the number of replicas averaged). ``replicas`` counts the replicas that
    entered the average (constant ones are left out).
    """

    tau: np.ndarray
    window: np.ndarray
    se: np.ndarray
    replicas: np.ndarray


def _normalised_acf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rho, varies): the FFT autocorrelation of every column of ``x`` (T, m) about its own
    mean, normalised to rho(0) = 1 (biased, 1/T, estimator as emcee's ``function_1d``), and
    whether the column varies at all (a constant column has rho = 0)."""
    T = x.shape[0]
    x = np.ascontiguousarray((x - x.mean(axis=0)).T)  # FFTs along contiguous rows
    nfft = 1 << int(np.ceil(np.log2(2 * T)))
    acov = np.empty((T, x.shape[0]))
    step = max(1, (1 << 22) // nfft)  # a few MB of spectra at a time
    for lo in range(0, x.shape[0], step):
        f = np.fft.rfft(x[lo : lo + step], n=nfft, axis=1)
        acov[:, lo : lo + step] = np.fft.irfft(f.real**2 + f.imag**2, n=nfft, axis=1)[:, :T].T
    varies = acov[0] > 0
    rho = np.zeros_like(acov)
    np.divide(acov, acov[0], out=rho, where=varies)
    return rho, varies


def _sokal_window(rho: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """(tau(M), M) per column of ``rho`` (T, m): ``tau(M) = 1 + 2 sum_{t=1}^{M} rho(t)`` at the
    smallest window ``M >= c tau(M)`` (the last lag if there is none)."""
    T = rho.shape[0]
    tau = 2.0 * np.cumsum(rho, axis=0) - 1.0
    ok = np.arange(T)[:, None] >= c * tau
    m = np.where(ok.any(axis=0), np.argmax(ok, axis=0), T - 1)
    return tau[m, np.arange(rho.shape[1])], m


def integrated_time(
    series: np.ndarray, c: float = 5.0, ensemble_axis: int | None = None
) -> IntegratedTime:
    """Integrated autocorrelation time with Sokal's automatic windowing (Sokal 1997, Sec. 3).

    ``tau(M) = 1 + 2 sum_{t=1}^{M} rho(t)`` with the normalised autocorrelation ``rho`` of the
    mean-subtracted series, at the smallest window ``M >= c tau(M)`` (c = 5 as Sokal and emcee).
    ``series`` has time along axis 0; one tau per trailing index. With ``ensemble_axis`` (e.g.
    1 for (T, R, m) replicas), the normalised autocorrelation functions of the replicas are
    averaged before the window search, as emcee's ``autocorr.integrated_time`` does for walkers;
    replicas that do not vary are left out. This is the algorithm of emcee 3 (same FFT estimator,
    same window rule) and agrees with it to rounding. A constant series gives tau = 1, M = 0.
    """
    x = np.asarray(series, dtype=np.float64)
    if x.shape[0] < 2:
        raise ValueError("need at least 2 time points")
    if ensemble_axis is None:
        x = x[:, None]
    elif ensemble_axis % x.ndim != 1:
        x = np.moveaxis(x, ensemble_axis, 1)
    T, R = x.shape[:2]
    shape = x.shape[2:]
    rho, varies = _normalised_acf(x.reshape(T, -1))
    rho = rho.reshape(T, R, -1)
    n_rep = varies.reshape(R, -1).sum(axis=0)
    mean = rho.sum(axis=1) / np.maximum(n_rep, 1)
    tau, m = _sokal_window(mean, c)
    tau = np.where(n_rep > 0, tau, 1.0)
    m = np.where(n_rep > 0, m, 0)
    se = tau * np.sqrt(2.0 * (2 * m + 1) / (T * np.maximum(n_rep, 1)))
    return IntegratedTime(*(a.reshape(shape) for a in (tau, m, se, n_rep)))


def integrated_autocorrelation_time(series: np.ndarray, c: float = 5.0) -> np.ndarray:
    """Integrated autocorrelation time of each column, :func:`integrated_time` (Sokal's window
    ``M >= c tau(M)``). ``series`` is (T,) or (T, ...) (time along axis 0; one tau per trailing
    index). A constant series gives tau = 1.
    """
    tau = integrated_time(series, c).tau
    return tau[()] if tau.ndim == 0 else tau


class LineFit(NamedTuple):
    """Least-squares line ``y = intercept + slope x`` with the slope's standard error."""

    slope: float
    slope_se: float
    intercept: float
    chi2_dof: float


def line_fit(x: ArrayLike, y: ArrayLike, sigma: ArrayLike | None = None) -> LineFit:
    """Straight-line fit, e.g. of a log-log power law or of log values against time.

    Without ``sigma`` the slope's SE comes from the residual variance (``chi2_dof`` is then that
    variance); with per-point errors ``sigma`` the fit is weighted and the SE is inflated by
    ``sqrt(chi2/dof)`` when the scatter exceeds the errors (never deflated).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    s = np.ones_like(y) if sigma is None else np.asarray(sigma, dtype=float)
    A = np.stack([np.ones_like(x), x], axis=-1) / s[:, None]
    coef, *_ = np.linalg.lstsq(A, y / s, rcond=None)
    dof = x.size - 2
    chi2 = float(np.sum(((y - coef[0] - coef[1] * x) / s) ** 2) / dof) if dof > 0 else np.nan
    cov = np.linalg.inv(A.T @ A)
    scale = chi2 if sigma is None else max(1.0, chi2)
    return LineFit(float(coef[1]), float(np.sqrt(cov[1, 1] * scale)), float(coef[0]), chi2)


def power_law_fit(x: ArrayLike, y: ArrayLike, se: ArrayLike | None = None) -> LineFit:
    """Fit ``y = exp(intercept) x**slope`` as a line in log-log axes (errors ``se/y`` if given)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    sigma = None if se is None else np.asarray(se, dtype=float) / y
    return line_fit(np.log(x), np.log(y), sigma)
