"""Multiplicative SGD noise without label noise: geometric Brownian motion (paper 000, Eqs. 21-24).

For ``sigma_eps = 0`` the labels are ``y = X u`` and the noise covariance Eq. 21 is quadratic in
``wbar = w - u``. In ``N = 1`` dimension with ``P`` samples ``x_mu`` (here ``x_mu ~ N(0, 1)``), Eq.
22 reduces to the geometric Brownian motion (GBM) of Eq. 24::

    d wbar = -a wbar dt + sqrt(lr c v) wbar dW,   a = <x^2>,  v = <x^4> - <x^2>^2,

with ``<.>`` the empirical average over the ``P`` samples, ``c = c(P, S)`` the App. C prefactor
(``1/S`` with replacement) and SDE time ``t = lr * step`` (see ``docs/errata.md``). Its moments::

    <wbar(t)>   = wbar(0) exp(-a t),
    <wbar(t)^2> = wbar(0)^2 exp[(-2 a + lr c v) t],
    Var wbar(t) = wbar(0)^2 { exp[(-2 a + lr c v) t] - exp(-2 a t) } .

The paper assumes Gaussian moments, ``v = 2 a^2``, which gives its formula after Eq. 24,
``Var = wbar(0)^2 [exp(2a(lr a/S - 1) t) - exp(-2 a t)]`` (printed there as ``<wbar(t)^2>``, but it
is the variance: the second moment lacks the ``-exp(-2at)`` term), and the stability condition
``<x^2> < S / lr``. For finite ``P`` the empirical ``v`` differs from ``2 a^2``; both are offered.

SGD itself (Eq. 11) is a random product, ``wbar_{n+1} = (1 - lr x_B^2) wbar_n`` with the mini-batch
average ``x_B^2 = (1/S) sum_{mu in B} x_mu^2``. Its first two moments obey closed recursions::

    E[wbar_{n+1}]   = (1 - lr a) E[wbar_n],
    E[wbar_{n+1}^2] = q E[wbar_n^2],   q = E[(1 - lr x_B^2)^2] = (1 - lr a)^2 + lr^2 c v,

exact for any ``lr`` (``Var x_B^2 = c v`` for either sampling mode). The continuum formulas are
their ``lr -> 0`` limit: per unit SDE time ``log(1 - lr a)/lr = -a - lr a^2/2 + ...`` and
``log(q)/lr = -2a + lr c v + lr a^2 + ...``, so they miss the ``O(lr a^2)`` terms of plain gradient
descent. Stability of the second moment is ``q < 1``, i.e. ``lr (a^2 + c v) < 2 a``, stricter
than the continuum ``lr c v < 2 a`` (= ``<x^2> < S/lr`` for Gaussian moments).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from weightdyn.io import attrs
from weightdyn.single_layer import theory

__all__ = [
    "MOMENT_MODES",
    "GBMParameters",
    "discrete_moments",
    "gbm_dataset",
    "gbm_moments",
    "gbm_parameters",
    "sgd_ensemble",
    "stability",
]

MOMENT_MODES = ("empirical", "gaussian")
FloatArray = NDArray[np.float64]
SRC = "paper 000"


@dataclass(frozen=True)
class GBMParameters:
    """Coefficients of the GBM of Eq. 24 and of the exact SGD moment recursion.

    ``a = <x^2>``, ``v = Var(x^2)`` (empirical or Gaussian ``2 a^2``), ``c`` the App. C prefactor,
    ``lr``; ``mean_factor = 1 - lr a`` and ``second_factor = q = (1 - lr a)^2 + lr^2 c v`` per
    SGD step; ``mean_rate = -a`` and ``second_rate = -2a + lr c v`` per unit SDE time.
    """

    a: float
    v: float
    c: float
    lr: float

    @property
    def mean_rate(self) -> float:
        return -self.a

    @property
    def second_rate(self) -> float:
        return -2.0 * self.a + self.lr * self.c * self.v

    @property
    def mean_factor(self) -> float:
        return 1.0 - self.lr * self.a

    @property
    def second_factor(self) -> float:
        return (1.0 - self.lr * self.a) ** 2 + self.lr**2 * self.c * self.v


def _check_x(x: ArrayLike) -> FloatArray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1 or x.size < 1:
        raise ValueError(f"x must have shape (P,) or (P, 1) (N = 1 inputs), got {x.shape}")
    return x


def gbm_parameters(
    x: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str = "with",
    moments: str = "empirical",
) -> GBMParameters:
    """GBM coefficients of Eq. 24 for inputs ``x`` (P,), see :class:`GBMParameters`.

    ``moments="empirical"`` uses ``v = (1/P) sum x^4 - a^2`` of the finite sample (exact for SGD
    on these data); ``"gaussian"`` uses the paper's ``v = 2 a^2`` (``<x^4> = 3 <x^2>^2``).
    """
    if moments not in MOMENT_MODES:
        raise ValueError(f"moments must be one of {MOMENT_MODES}, got moments={moments!r}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got lr={lr!r}")
    x = _check_x(x)
    x2 = x * x
    a = float(x2.mean())
    v = float(x2.var()) if moments == "empirical" else 2.0 * a * a
    c = theory.noise_prefactor(x.size, batch_size, sampling)
    return GBMParameters(a=a, v=v, c=c, lr=float(lr))


def gbm_moments(t: ArrayLike, wbar0: float, params: GBMParameters) -> tuple[FloatArray, FloatArray]:
    """Mean and variance of ``wbar(t)`` for the GBM of Eq. 24 (formulas after Eq. 24).

    ``<wbar> = wbar0 e^{-a t}``, ``Var = wbar0^2 (e^{(-2a + lr c v) t} - e^{-2 a t})`` with SDE
    time ``t = lr * step``; with Gaussian moments (``v = 2a^2``, ``c = 1/S``) the exponent is
    ``2a (lr a / S - 1) t`` as in the paper.
    """
    t = np.asarray(t, dtype=float)
    mean = wbar0 * np.exp(params.mean_rate * t)
    # e^{(-2a + lr c v) t} - e^{-2at} = e^{-2at} expm1(lr c v t), free of cancellation
    var = (
        wbar0**2
        * np.exp(2.0 * params.mean_rate * t)
        * np.expm1(params.lr * params.c * params.v * t)
    )
    return mean, var


def discrete_moments(
    steps: ArrayLike, wbar0: float, params: GBMParameters
) -> tuple[FloatArray, FloatArray]:
    """Exact mean and variance of ``wbar`` after ``steps`` SGD steps (Eq. 11, ``N = 1``).

    ``E[wbar_n] = (1 - lr a)^n wbar0``, ``E[wbar_n^2] = q^n wbar0^2`` with
    ``q = E[(1 - lr x_B^2)^2] = (1 - lr a)^2 + lr^2 c v`` (the mini-batches are independent of
    ``wbar_n``); ``Var = E[wbar^2] - E[wbar]^2``.
    """
    n = np.asarray(steps, dtype=float)
    m = params.mean_factor
    mean = wbar0 * m**n
    # q^n - m^{2n} = m^{2n} expm1(n log(q / m^2)), q / m^2 = 1 + lr^2 c v / m^2 (no cancellation)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        ratio = params.lr**2 * params.c * params.v / (m * m)
        var = wbar0**2 * m ** (2.0 * n) * np.expm1(n * np.log1p(ratio))
        if m == 0.0:
            var = wbar0**2 * params.second_factor**n
    return mean, var


def stability(params: GBMParameters) -> dict[str, float | bool]:
    """Stability of the second moment of ``wbar``: continuum (Eq. 24) vs exact SGD.

    Returns ``continuum_rate = -2a + lr c v`` (growth rate of ``<wbar^2>`` per SDE time; the
    paper's condition ``<x^2> < S / lr`` is ``continuum_rate < 0`` for Gaussian moments),
    ``discrete_factor = q`` (per SGD step), and the booleans ``continuum_stable`` and
    ``discrete_stable`` (``q < 1``).
    """
    return {
        "continuum_rate": params.second_rate,
        "discrete_factor": params.second_factor,
        "continuum_stable": bool(params.second_rate < 0),
        "discrete_stable": bool(params.second_factor < 1),
    }


def _batch_means(
    x2: FloatArray, n: int, R: int, S: int, with_replacement: bool, rng: np.random.Generator
) -> FloatArray:
    """Mini-batch averages x_B^2 (n, R) of the squared inputs."""
    P = x2.size
    if with_replacement:
        idx = rng.integers(0, P, size=(n, R, S))
    else:
        idx = np.argsort(rng.random((n, R, P)), axis=-1)[..., :S]
    return x2[idx].mean(axis=-1)


def sgd_ensemble(
    x: ArrayLike,
    wbar0: float,
    lr: float,
    batch_size: int,
    record_steps: ArrayLike,
    replicas: int,
    rng: np.random.Generator,
    sampling: str = "with",
    block_steps: int = 256,
) -> FloatArray:
    """``wbar = w - u`` of ``replicas`` independent SGD runs at the given step counts, (R, K).

    SGD (Eqs. 10-11) with ``N = 1``, ``sigma_eps = 0`` (``y_mu = u x_mu``) is exactly
    ``wbar_{n+1} = (1 - lr x_B^2) wbar_n``, so the runs are products of per-step factors,
    evaluated as cumulative products over blocks of steps (all replicas as one array operation).
    Mini-batches of size ``S = batch_size`` are drawn independently at every step, with
    replacement (uniform indices) or without (a uniformly random S-subset). ``record_steps``
    must be non-decreasing non-negative integers; step 0 is the start ``wbar0``.
    """
    x = _check_x(x)
    if sampling not in ("with", "without"):
        raise ValueError(f"sampling must be one of ('with', 'without'), got sampling={sampling!r}")
    S = int(batch_size)
    if S < 1 or (sampling == "without" and S > x.size):
        raise ValueError(f"batch_size must be in [1, P = {x.size}], got batch_size={batch_size!r}")
    steps = np.asarray(record_steps, dtype=np.int64)
    if steps.ndim != 1 or np.any(steps < 0) or np.any(np.diff(steps) < 0):
        raise ValueError("record_steps must be a non-decreasing 1-D array of steps >= 0")
    if replicas < 2:
        raise ValueError(f"replicas must be >= 2, got replicas={replicas!r}")
    x2 = x * x
    R = int(replicas)
    out = np.empty((R, steps.size))
    w = np.full(R, float(wbar0))
    done = 0
    k = 0
    while k < steps.size and steps[k] == 0:
        out[:, k] = w
        k += 1
    with np.errstate(over="ignore", invalid="ignore"):
        while k < steps.size:
            n = int(min(block_steps, steps[-1] - done))
            factors = 1.0 - lr * _batch_means(x2, n, R, S, sampling == "with", rng)
            path = w * np.cumprod(factors, axis=0)  # (n, R): wbar after done+1 .. done+n
            while k < steps.size and steps[k] <= done + n:
                out[:, k] = path[steps[k] - done - 1]
                k += 1
            w = path[-1]
            done += n
    return out


def _mean_var_se(samples: FloatArray) -> tuple[FloatArray, ...]:
    """Mean, variance (ddof=1) and their standard errors over replicas (axis 0)."""
    R = samples.shape[0]
    mean = samples.mean(axis=0)
    dev = samples - mean
    var = (dev**2).sum(axis=0) / (R - 1)
    mean_se = np.sqrt(var / R)
    # SE of the sample variance: sqrt((m4 - var^2) / R) (delta method; no Gaussian assumption)
    var_se = np.sqrt(np.maximum((dev**4).mean(axis=0) - var**2, 0.0) / R)
    return mean, mean_se, var, var_se


def gbm_dataset(
    x: ArrayLike,
    wbar0: float,
    lr: float,
    batch_size: int,
    times: ArrayLike,
    replicas: int,
    rng: np.random.Generator,
    sampling: str = "with",
) -> xr.Dataset:
    """SGD ensemble of ``wbar`` vs the GBM formulas (Eq. 24) and the exact recursion, over ``t``.

    ``times`` are SDE times; each is run to ``round(t / lr)`` SGD steps (the dataset's ``t`` holds
    ``lr * steps``). Dims: ``t``. Variables (all with attrs): ``steps``; ensemble ``mean_wbar``,
    ``mean_wbar_se``, ``var_wbar``, ``var_wbar_se``; ``mean_gbm``, ``var_gbm`` (empirical
    moments), ``var_gbm_gaussian`` (the paper's ``v = 2a^2``); ``mean_discrete``,
    ``var_discrete`` (exact SGD recursion); scalars ``a`` (``<x^2>``), ``v`` (``Var x^2``),
    ``v_gaussian``, ``continuum_rate``, ``discrete_factor``. Attributes: ``lr``, ``batch_size``,
    ``P``, ``wbar0``, ``replicas``, ``sampling``.
    """
    x = _check_x(x)
    steps = np.unique(np.rint(np.asarray(times, dtype=float) / lr).astype(np.int64))
    t = lr * steps
    params = gbm_parameters(x, lr, batch_size, sampling)
    gauss = gbm_parameters(x, lr, batch_size, sampling, moments="gaussian")
    samples = sgd_ensemble(x, wbar0, lr, batch_size, steps, replicas, rng, sampling)
    mean, mean_se, var, var_se = _mean_var_se(samples)
    sim = f"{SRC} Eqs. 10-11 (SGD, N = 1, sigma_eps = 0)"
    ensemble = {
        "steps": ("t", steps, attrs("SGD steps", "1", sim)),
        "mean_wbar": ("t", mean, attrs("ensemble mean of w - u", "1", sim)),
        "mean_wbar_se": ("t", mean_se, attrs("standard error of mean_wbar", "1", sim)),
        "var_wbar": ("t", var, attrs("ensemble variance of w - u", "1", sim)),
        "var_wbar_se": ("t", var_se, attrs("standard error of var_wbar", "1", sim)),
    }
    cell = {"lr": float(lr), "batch_size": int(batch_size), "P": int(x.size),
            "wbar0": float(wbar0), "replicas": int(replicas), "sampling": sampling}  # fmt: skip
    return xr.Dataset(
        ensemble | _theory_variables(t, steps, wbar0, params, gauss),
        coords={"t": ("t", t, attrs("SDE time lr * step", "1", f"{SRC} Eq. 13 (t = lr tau)"))},
        attrs=cell,
    )


def _theory_variables(
    t: FloatArray, steps: np.ndarray, wbar0: float, params: GBMParameters, gauss: GBMParameters
) -> dict[str, tuple]:
    """GBM moments (Eq. 24, empirical and Gaussian <x^4>), the exact recursion and the
    coefficients of :func:`gbm_dataset`."""
    m_gbm, v_gbm = gbm_moments(t, wbar0, params)
    _, v_gauss = gbm_moments(t, wbar0, gauss)
    m_dis, v_dis = discrete_moments(steps, wbar0, params)
    eq24 = f"{SRC} Eq. 24 (GBM), text after Eq. 24"
    rec = f"{SRC} Eq. 11, exact moment recursion (N = 1)"
    st = stability(params)
    return {
        "mean_gbm": ("t", m_gbm, attrs("GBM mean of w - u", "1", eq24)),
        "var_gbm": ("t", v_gbm, attrs("GBM variance, empirical <x^4>", "1", eq24)),
        "var_gbm_gaussian": ("t", v_gauss,
                             attrs("GBM variance, Gaussian <x^4> = 3<x^2>^2", "1", eq24)),
        "mean_discrete": ("t", m_dis, attrs("exact SGD mean of w - u", "1", rec)),
        "var_discrete": ("t", v_dis, attrs("exact SGD variance of w - u", "1", rec)),
        "a": ((), params.a, attrs("empirical <x^2>", "1", f"{SRC} Eq. 24")),
        "v": ((), params.v, attrs("empirical <x^4> - <x^2>^2", "1", f"{SRC} Eq. 24")),
        "v_gaussian": ((), gauss.v, attrs("Gaussian value 2 <x^2>^2", "1", f"{SRC} Eq. 24")),
        "continuum_rate": ((), st["continuum_rate"],
                           attrs("growth rate of <wbar^2> per SDE time, -2a + lr c v", "1", eq24)),
        "discrete_factor": ((), st["discrete_factor"],
                            attrs("E[(1 - lr x_B^2)^2] per SGD step", "1", rec)),
    }  # fmt: skip
