"""One cell of a model experiment: data, minimum, SGD about it, and the local theory there.

Protocol (paper 000 App. A and the local protocol of the two-layer experiment):

1. **Data**: inputs ``x ~ N(0, 1_{N_i})`` (rows of ``X``, shape ``(P, N_i)``); labels from a
   teacher (a random linear map, or for the one-hidden-layer experiment a random network of
   the same architecture) plus label noise of variance ``noise`` (Eq. 1 with the teacher
   replaced by a network).
2. **Minimum** ``theta*``: full-batch optimisation (:func:`~weightdyn.models.theory.find_minimum`)
   from a random initialisation of scale ``init_scale`` (the gradient-flow end point), or from
   the teacher's weights (``start = teacher``).
3. **Stationarity**: R SGD replicas (Eqs. 10-11) start at ``theta*`` (``init = minimum``) or at
   the random initialisation itself (``init = random``) and run ``burn_tau`` slowest relaxation
   times ``tau = 1 / (lr omega_min)`` (steps; ``omega_min`` the smallest non-zero Hessian
   eigenvalue at ``theta*``), plus ``log(D^2 / tr M) / 2`` more for a start at squared distance
   ``D^2`` from ``theta*`` within ``range(H)`` (``tr M`` of Eq. 30 at ``theta*``;
   :func:`weightdyn.stationarity.extra_burnin_tau`).
4. **Local point**: every replica's mean must lie in one minimum (or on one manifold of
   minima: the same loss), else the cell is ``multimodal`` (checked again after sampling);
   then the minimum nearest the replicas' mean at the end of the burn-in
   (Newton on the range of ``H``). For an isolated minimum it is ``theta*``; for a deep linear
   network SGD has moved along the manifold of minima (the ``GL(N_l)`` symmetry) and the theory
   is evaluated where SGD sits.
5. **Sampling**: ``sample_tau`` relaxation times more, split into ``n_blocks`` time blocks per
   replica; the covariance about the sampled mean, projected onto ``range(H)`` at the local
   point, with jackknife errors over the (replica, block) groups.
6. **Theory** at the local point: the exact linearisation (drift = full Hessian, noise = the
   exact mini-batch covariance, Eq. 14 with App. C; Eq. 29), its detailed-balance form
   (Eq. 33), the App. A reduction ``X -> J`` (Gauss-Newton drift, residual curvature dropped),
   the discrete-time recursion of the local quadratic model with additive noise (exact only
   for a quadratic loss) and with the mini-batch Hessian noise as well (exact for linear
   models). The exact linearisation and the recursion are evaluated a second time at the SGD
   mean ``theta_bar`` (the sampled mean over replicas and time; drift ``H(theta_bar)``, noise
   ``C(theta_bar)``, on the same ``range(H)``): SGD's mean sits ``O(lr)`` off the minimum,
   ``m = -H^+ grad tr(H M) / 2`` to first order (the loss smoothed by the fluctuations), far
   along soft modes, and the Hessian there differs at ``O(lr)`` too.
7. **Stationarity** of the sampling window (:func:`weightdyn.stationarity.window_test`): the
   early against the late half of each replica's blocks, for the second moment along the
   slowest Hessian mode and the quadratic loss excess ``tr(H S) / 2`` (``S`` the second moment
   about the local point); ``not_stationary`` flags a window whose halves differ.

A cell whose set-up fails a check (no minimum found, not underparameterised, ``lr`` beyond the
local stability limit, a relaxation time too long for ``max_steps``, diverged replicas, replicas
that settle in different minima) returns a flagged dataset (``status`` names the reason, NaN
elsewhere) instead of stopping the sweep.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats as sps

from weightdyn import seeds, stationarity
from weightdyn.io import attrs
from weightdyn.linear_theory import check_lr_below, range_covariances
from weightdyn.models import feng_tu, theory
from weightdyn.models.base import FloatArray, Model
from weightdyn.models.simulate import CHUNK_STEPS, run_sgd
from weightdyn.sgd import Schedule, Update
from weightdyn.stats import jackknife_of_mean

Progress = Callable[[str], None]

#: outcome of a cell's checks (``status`` of the dataset); 0 is a complete cell
STATUS = (
    "ok",
    "no_minimum",
    "not_underparameterised",
    "lr_unstable",
    "diverged",
    "too_slow",
    "multimodal",
)


class CellFailed(Exception):
    """A check of the protocol failed; ``status`` is one of :data:`STATUS`."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Data:
    """Training set: ``X`` (P, N_i), ``Y`` (P, N_o), and the teacher's parameters (None for a
    data set without a teacher, :mod:`weightdyn.datasets`)."""

    X: FloatArray
    Y: FloatArray
    theta_teacher: FloatArray | None


def teacher_data(
    model: Model, teacher: Model, params: Mapping[str, Any], teacher_scale: float
) -> Data:
    """Gaussian inputs, labels ``teacher(x) + eps`` with ``eps = sqrt(noise) z`` (step 1, paper
    000 Eq. 1 with a network teacher).

    ``X`` and the teacher come from the stream ``models/data/inputs`` and the standard normal
    ``z`` from ``models/data/noise``, both seeded without the noise level, so cells that differ
    only in ``noise`` share ``X``, the teacher and ``z`` exactly.
    """
    keys = _data_keys(params)
    rng = seeds.generator("models/data/inputs", keys)
    X = rng.standard_normal((int(params["P"]), model.n_in))
    theta_t = teacher.random_theta(rng, teacher_scale)
    Y = teacher.output(X, theta_t)
    if model.loss_function.name == "cross_entropy":
        return Data(X, _teacher_classes(Y, float(params["noise"]), keys), theta_t)
    z = seeds.generator("models/data/noise", keys).standard_normal(Y.shape)
    return Data(X, Y + math.sqrt(float(params["noise"])) * z, theta_t)


def _teacher_classes(logits: FloatArray, noise: float, keys: Mapping[str, Any]) -> FloatArray:
    """One-hot classes for a cross-entropy student: the teacher's most likely class, replaced
    with probability ``noise`` by a uniformly drawn one (the classification form of label
    noise; ``noise = 0``: the teacher's decisions, a separable set). Uniforms from the stream
    ``models/data/noise``."""
    P, K = logits.shape
    rng = seeds.generator("models/data/noise", keys)
    flip, other = rng.random(P) < min(noise, 1.0), rng.integers(0, K, size=P)
    classes = np.where(flip, other, logits.argmax(axis=1))
    return np.eye(K)[classes]


def _data_keys(params: Mapping[str, Any]) -> dict[str, Any]:
    """The data's parameters without the label-noise level ``noise``."""
    keys = ("N_i", "N_o", "P", "teacher", "data_seed", "activation", "width", "dataset",
            "split_seed", "hidden")  # fmt: skip
    return {k: params[k] for k in keys if k in params}


def _init_keys(params: Mapping[str, Any]) -> dict[str, Any]:
    """The data's keys and the architecture: the start ``theta0`` is shared by cells that
    differ only in ``noise``, ``lr``, ``batch_size``, ``sampling`` or ``init``, and ``theta*``
    by those that differ only in the last four."""
    return {**_data_keys(params), **{k: params[k] for k in ("depth", "init_scale", "start")
                                     if k in params}}  # fmt: skip


@dataclass(frozen=True)
class Minimum:
    """Step 2: the random start ``theta0`` and the minimum ``theta*`` reached from it."""

    theta0: FloatArray
    result: theory.MinimumResult


def minimum(model: Model, data: Data, params: Mapping[str, Any], progress: Progress) -> Minimum:
    """Step 2, with the checks of underparameterisation (the rank of the Jacobian at the start,
    before any optimisation) and of a minimum."""
    rng = seeds.generator("models/init", _init_keys(params))
    theta0 = model.random_theta(rng, float(params["init_scale"]))
    if params.get("start") == "teacher":
        theta0 = data.theta_teacher.copy()
    if model.weight_decay == 0.0:  # chi > 0: H >= chi 1, an isolated minimum at any n
        try:
            theory.check_underparameterised(model, data.X, theta0)
        except ValueError as err:
            raise CellFailed("not_underparameterised", str(err)) from None
    res = theory.find_minimum(model, data.X, data.Y, theta0, gtol=params["gtol"], strict=False)
    progress(
        f"minimum: |grad L| = {res.grad_norm:.2e}, L = {res.loss:.6g} after {res.iterations} "
        f"iterations + {res.newton_steps} Newton steps ({res.seconds:.1f} s)"
    )
    if not res.converged:
        raise CellFailed(
            "no_minimum", f"no minimum: |grad L| = {res.grad_norm:.2e} > gtol = {params['gtol']}"
        )
    _check_not_separated(model, data, res.theta)
    return Minimum(theta0, res)


def _check_not_separated(model: Model, data: Data, theta: FloatArray) -> None:
    """CellFailed ``no_minimum`` for cross-entropy without weight decay where every training
    sample is classified correctly: growing the logits' scale lowers the loss without end, so a
    small gradient marks a point on the way to infinity, not a minimum."""
    if model.weight_decay > 0 or model.loss_function.name != "cross_entropy":
        return
    predicted = model.output(data.X, theta).argmax(axis=1)
    if np.all(predicted == data.Y.argmax(axis=1)):
        raise CellFailed(
            "no_minimum",
            "separable training set: every sample is classified correctly, so the "
            "cross-entropy has no minimum at finite theta without weight decay (its infimum 0 is "
            "approached as the logits grow); give weight_decay > 0",
        )


def relaxation_steps(info: theory.RangeInfo, lr: float) -> tuple[float, float]:
    """``(tau_slow, tau_fast)`` in steps, ``1 / (lr omega)`` for the extreme non-zero Hessian
    eigenvalues (``info``, :func:`~weightdyn.models.theory.hessian_range`; Eq. 27's relaxation
    rates of the linearised dynamics)."""
    omega = info.omega[info.omega > 0]
    return 1.0 / (lr * omega.min()), 1.0 / (lr * omega.max())


def _steps(tau: float, n_tau: float, unit: int, cap: int) -> int:
    """``n_tau * tau`` steps rounded up to a multiple of ``unit``, at most ``cap``."""
    n = min(math.ceil(n_tau * tau), cap)
    return max(unit, math.ceil(n / unit) * unit)


def start_extra_tau(
    model: Model, data: Data, start: FloatArray, theta_star: FloatArray,
    info: theory.RangeInfo, H: FloatArray, params: Mapping[str, Any],
) -> float:  # fmt: skip
    """Relaxation times of burn-in that ``start`` needs beyond a start at ``theta*``
    (:func:`weightdyn.stationarity.extra_burnin_tau`): its squared distance from ``theta*`` on
    ``range(H)`` against ``tr M = (lr/2) tr(H^+ C)`` of Eq. 30 at ``theta*`` (C of Eq. 14).
    0 for a start at ``theta*`` (nothing else is computed then); ``info`` is
    :func:`~weightdyn.models.theory.hessian_range` of ``H``."""
    distance2 = stationarity.squared_distance(start, theta_star, info.Q)
    if distance2 == 0.0:
        return 0.0
    C = theory.noise_covariance(model, data.X, data.Y, theta_star, params["batch_size"],
                                params["sampling"])  # fmt: skip
    return stationarity.extra_burnin_tau(distance2, stationarity.lyapunov_trace(H, C, params["lr"]))


#: settings that enter SGD's seed only where given (cells without them keep their old streams)
OPTIONAL_SETTINGS = ("moment_modes", "moment_block", "flatness_block")


def _sgd_keys(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters that seed SGD: all of the cell's, :data:`OPTIONAL_SETTINGS` left out
    where absent (a cell without them keeps the streams it had before they existed)."""
    return {k: v for k, v in params.items() if not (k in OPTIONAL_SETTINGS and v is None)}


def simulate(
    model: Model, data: Data, start: FloatArray, tau: float, params: Mapping[str, Any],
    progress: Progress, extra_tau: float = 0.0, basis: FloatArray | None = None,
    near: theory.RangeInfo | None = None,
) -> tuple[Any, Any, FloatArray, int]:  # fmt: skip
    """Steps 3-5: burn-in from ``start`` (``burn_tau + extra_tau`` relaxation times), the local
    point, sampling; returns the burn-in and sampling results, the local point and the
    thinning. ``basis``: second moments recorded in it (:class:`Frame`); ``near``: the Hessian
    decomposition at ``theta*`` for the minima searches (:func:`_nearest_minimum`)."""
    R, n_blocks = int(params["replicas"]), int(params["n_blocks"])
    thin = max(1, int(tau / params["records_per_tau"]))
    cap = int(params["max_steps"])
    rng = seeds.generator("models/sgd", _sgd_keys(params))
    update = Update(params["lr"], params["batch_size"], params["sampling"])
    common = dict(update=update, rng=rng, progress=progress, engine=params.get("engine", "auto"),
                  basis=basis)  # fmt: skip
    n_burn = _steps(tau, params["burn_tau"] + extra_tau, thin, cap)
    progress(f"burn-in: {n_burn} steps x {R} replicas (tau = {tau:.4g} steps, thin {thin})")
    burn = run_sgd(
        model, data.X, data.Y, np.tile(start, (R, 1)), theta_ref=start,
        schedule=Schedule(0, n_burn, thin, 1, CHUNK_STEPS), **common,
    )  # fmt: skip
    if burn.diverged.any():
        raise CellFailed("diverged", f"{int(burn.diverged.sum())} of {R} replicas diverged")
    check_one_basin(model, data, burn, start, params["gtol"], "burn-in", near)
    local = _nearest_minimum(model, data, sgd_mean(burn, start), params["gtol"], near)
    if not local.converged:
        raise CellFailed("no_minimum", f"no local minimum: |grad L| = {local.grad_norm:.2e}")
    n_sample = _steps(tau, params["sample_tau"], thin * n_blocks, cap)
    progress(f"sampling: {n_sample} steps x {R} replicas in {n_blocks} blocks")
    sample = run_sgd(
        model, data.X, data.Y, burn.final, theta_ref=local.theta,
        schedule=Schedule(0, n_sample, thin, n_blocks, CHUNK_STEPS), **common,
    )  # fmt: skip
    if sample.diverged.any():
        raise CellFailed("diverged", f"{int(sample.diverged.sum())} of {R} replicas diverged")
    check_one_basin(model, data, sample, local.theta, params["gtol"], "sampling", near)
    return burn, sample, local.theta, thin


#: relative loss difference above which two replicas' minima count as different minima
BASIN_RTOL = 1e-7


#: above this many parameters the minima of the basin checks are found by chord steps with the
#: Hessian decomposition at theta* (:func:`~weightdyn.models.theory.newton_minimum`): a full
#: Newton step costs a Hessian and an eigh (0.6 s at n = 472, about 75 s at n = 6310), for 16
#: replicas x 2 checks; the minima agree to gtol
CHORD_MIN_PARAMS = 400


def _nearest_minimum(
    model: Model, data: Data, theta: FloatArray, gtol: float,
    near: theory.RangeInfo | None = None,
) -> theory.MinimumResult:  # fmt: skip
    """The minimum of the basin ``theta`` lies in (Newton; chord steps with the decomposition
    ``near`` of the Hessian at ``theta*`` above :data:`CHORD_MIN_PARAMS` parameters); where
    that stalls (a flat basin), the full search from ``theta``. Check ``converged``."""
    fixed = near if model.n_params > CHORD_MIN_PARAMS else None
    res = theory.newton_minimum(model, data.X, data.Y, theta, gtol=gtol, max_steps=200 if fixed
                                else 50, fixed_hessian=fixed)  # fmt: skip
    if res.converged:
        return res
    return theory.find_minimum(model, data.X, data.Y, theta, gtol, strict=False)


def _replica_minima_losses(
    model: Model, data: Data, run: Any, theta_ref: FloatArray, gtol: float,
    near: theory.RangeInfo | None = None,
) -> FloatArray:  # fmt: skip
    """Loss at the minimum nearest each replica's mean over ``run`` (NaN where none is
    found): equal for replicas in one basin, or on one manifold of minima."""
    means = theta_ref + run.sum_d.sum(axis=1) / run.n_records.sum(axis=1)[:, None]
    minima = [_nearest_minimum(model, data, mean, gtol, near) for mean in means]
    return np.array([res.loss if res.converged else math.nan for res in minima])


def check_one_basin(
    model: Model, data: Data, run: Any, theta_ref: FloatArray, gtol: float, stage: str,
    near: theory.RangeInfo | None = None,
) -> None:  # fmt: skip
    """``CellFailed("multimodal")`` if the replicas' means over ``run`` lie in different
    minima (losses differing by more than :data:`BASIN_RTOL`): a covariance about one minimum
    then mixes the distance between minima into the fluctuations. ``near``: the Hessian
    decomposition at ``theta*`` (:func:`_nearest_minimum`)."""
    losses = _replica_minima_losses(model, data, run, theta_ref, gtol, near)
    ok = losses[np.isfinite(losses)]
    tol = BASIN_RTOL * max(float(np.median(ok)), 1e-300) if ok.size else 0.0
    if ok.size == losses.size and np.ptp(ok) <= tol:
        return
    groups = np.split(np.sort(ok), np.flatnonzero(np.diff(np.sort(ok)) > tol) + 1)
    where = ", ".join(f"{g.size} at L = {g[0]:.7g}" for g in groups if g.size)
    lost = losses.size - ok.size
    raise CellFailed(
        "multimodal",
        f"after the {stage} the {losses.size} replicas lie in {len(groups)} different minima "
        f"({where}{f'; {lost} with no minimum found' if lost else ''})",
    )


# ------------------------------------------------------------------ estimators


def _group_moments(sample: Any) -> FloatArray:
    """Per-(replica, block) means of ``d`` and ``d d^T`` as one flat vector per group."""
    n = sample.n_records.reshape(-1).astype(float)
    R, B, k = sample.sum_d.shape
    m1 = sample.sum_d.reshape(R * B, k) / n[:, None]
    m2 = sample.sum_dd.reshape(R * B, k * k) / n[:, None]
    return np.hstack([m1, m2])


def _covariances(moments: FloatArray, k: int) -> FloatArray:
    """Covariances about the pooled mean from stacked group-mean vectors (m, k + k^2)."""
    m1, m2 = moments[:, :k], moments[:, k:].reshape(-1, k, k)
    cov = m2 - m1[:, :, None] * m1[:, None, :]
    return 0.5 * (cov + np.swapaxes(cov, 1, 2))


def _ivfr(variance: FloatArray, curvature: FloatArray) -> tuple[float, float]:
    """Spearman correlation and log-log slope of curvature against variance (Fig. 7a); NaN
    with fewer than 3 positive pairs."""
    ok = (variance > 0) & (curvature > 0)
    if ok.sum() < 3:
        return math.nan, math.nan
    rho = sps.spearmanr(variance[ok], curvature[ok]).statistic
    slope = np.polyfit(np.log(variance[ok]), np.log(curvature[ok]), 1)[0]
    return float(rho), float(slope)


Layer = slice | FloatArray


def layer_basis(M: FloatArray, Qr: FloatArray, layer: slice) -> Layer:
    """The output layer's coordinates ``layer``, or, where the exact linearisation ``M`` does
    not fluctuate along part of them (weight decay with a low-rank noise,
    :func:`fluctuating_basis`), an orthonormal basis (n, b') of the part it does."""
    P = Qr @ Qr.T
    block = (P @ M @ P)[layer, layer]
    if not np.all(np.isfinite(block)):
        return layer
    lam, V = np.linalg.eigh(0.5 * (block + block.T))
    keep = lam > FLUCTUATION_RTOL * lam.max()
    if keep.all():
        return layer
    E = np.zeros((M.shape[0], block.shape[0]))
    E[layer] = np.eye(block.shape[0])
    return E @ V[:, keep]


def _layer_size(layer: Layer, k: int) -> int:
    return len(range(*layer.indices(k))) if isinstance(layer, slice) else layer.shape[1]


def layer_spectrum(
    cov: FloatArray, Qr: FloatArray, H: FloatArray, layer: Layer
) -> tuple[FloatArray, FloatArray]:
    """Fig. 7a's IVFR data of the output layer: the eigenvalues (descending) of the ``layer``
    block of ``cov`` projected onto ``range(H)`` (``Qr``; the paper's projected
    ``cov(vec dW2)``) and the curvature ``v^T H_layer v`` of the loss along their
    eigenvectors ``v`` within the layer (Eq. 73's ``kappa_i``); ``layer`` a slice of theta or a
    basis of its fluctuating part (:func:`layer_basis`)."""
    P = Qr @ Qr.T
    if isinstance(layer, slice):
        block, Hl = (P @ cov @ P)[layer, layer], H[layer, layer]
    else:
        block, Hl = layer.T @ P @ cov @ P @ layer, layer.T @ H @ layer
    lam, V = np.linalg.eigh(0.5 * (block + block.T))
    lam, V = lam[::-1], V[:, ::-1]
    return lam, np.einsum("ik,ij,jk->k", V, Hl, V)


def _spectrum_and_ivfr(lam: FloatArray, curv: FloatArray) -> FloatArray:
    return np.concatenate([lam, curv, _ivfr(lam, curv)])


def sgd_statistics(
    sample: Any, Qr: FloatArray, H: FloatArray, layer: Layer | None = None
) -> dict[str, Any]:
    """Eigenvalues of the SGD covariance on ``range(H)`` (``Qr`` its basis), its trace and the
    IVFR (curvature ``v^T H v`` along its eigenvectors ``v``); with a ``layer``, the same of the
    output layer's block (:func:`layer_spectrum`); each with a jackknife error."""
    k, r = Qr.shape
    Hr = Qr.T @ H @ Qr
    b = 0 if layer is None else _layer_size(layer, k)

    def estimates(means: FloatArray) -> FloatArray:
        out = []
        for cov in _covariances(means, k):
            lam, V = np.linalg.eigh(Qr.T @ cov @ Qr)
            lam, V = lam[::-1], V[:, ::-1]
            row = [_spectrum_and_ivfr(lam, np.einsum("ik,ij,jk->k", V, Hr, V)), [lam.sum()]]
            if layer is not None:
                row.append(_spectrum_and_ivfr(*layer_spectrum(cov, Qr, H, layer)))
            out.append(np.concatenate(row))
        return np.array(out)

    est, se = jackknife_of_mean(estimates, _group_moments(sample))
    parts = {"eig": slice(0, r), "curv": slice(r, 2 * r), "ivfr_spearman": 2 * r,
             "ivfr_slope": 2 * r + 1, "trace": 2 * r + 2}  # fmt: skip
    o = 2 * r + 3
    if layer is not None:
        parts |= {"layer_eig": slice(o, o + b), "layer_curv": slice(o + b, o + 2 * b),
                  "layer_ivfr_spearman": o + 2 * b, "layer_ivfr_slope": o + 2 * b + 1}  # fmt: skip
    return {name: (est[s], se[s]) for name, s in parts.items()}


#: eigenvalues of the exact covariance below this fraction of its largest are numerically zero
FLUCTUATION_RTOL = 1e-9


def fluctuating_basis(Q: FloatArray, M: FloatArray) -> FloatArray:
    """The part of ``range(H)`` (basis ``Q``) in which the exact linearisation ``M`` (Eq. 29)
    fluctuates: ``Q`` itself unless ``M`` vanishes (below :data:`FLUCTUATION_RTOL` of its
    largest eigenvalue) on part of it. That happens with weight decay and a low-rank noise
    (cross-entropy, few samples): SGD then moves only in the subspace the noise reaches (the rest
    of ``range(H)`` relaxes to the minimum and stays there, in SGD as in Eq. 29), and spectra are
    compared there, not on numerically zero eigenvalues."""
    if not np.all(np.isfinite(M)):
        return Q
    lam, V = np.linalg.eigh(Q.T @ (0.5 * (M + M.T)) @ Q)
    keep = lam > FLUCTUATION_RTOL * lam.max()
    return Q if keep.all() else Q @ V[:, keep]


def theory_spectra(M: FloatArray, Qr: FloatArray, Hr: FloatArray) -> dict[str, FloatArray]:
    """Sorted eigenvalues of a theory covariance on ``range(H)``, the curvature along its
    eigenvectors and its trace (``M`` symmetrised first: Eq. 33 is not symmetric); NaN if
    ``M`` is (a recursion without a stationary state)."""
    if not np.all(np.isfinite(M)):
        nan = np.full(Qr.shape[1], np.nan)
        return {"eig": nan, "curv": nan, "trace": math.nan}
    lam, V = np.linalg.eigh(Qr.T @ (0.5 * (M + M.T)) @ Qr)
    lam, V = lam[::-1], V[:, ::-1]
    return {"eig": lam, "curv": np.einsum("ik,ij,jk->k", V, Hr, V), "trace": lam.sum()}


# --------------------------------------------------------------------- dataset

THEORIES = {
    "exact": ("exact linearisation: full Hessian, exact noise (Eq. 29)", "Eqs. 14, 29"),
    "jacobian": ("App. A: X -> J, Gauss-Newton drift (Eq. 29)", "Eqs. 79-81"),
    "detailed": ("detailed balance (Eq. 33)", "Eq. 33"),
    "discrete": ("discrete-time recursion of the local quadratic model", "beyond paper 000"),
    "minibatch": (
        "discrete-time recursion with the mini-batch Hessian noise",
        "beyond paper 000, App. C",
    ),
    "exact_mean": ("exact linearisation at the SGD mean (Eq. 29)", "Eqs. 14, 29"),
    "discrete_mean": ("discrete-time recursion at the SGD mean", "beyond paper 000"),
}


#: the mini-batch recursion holds the P per-sample Hessians (P n^2 floats); above this it is
#: skipped (NaN): digits 64-16-16-10 (n = 1482, P = 1000) would need 17.6 GB
MINIBATCH_MAX_BYTES = 2 << 30


def _minibatch(model: Model, data: Data, theta: FloatArray, p: Mapping[str, Any]) -> FloatArray:
    """:func:`~weightdyn.models.theory.minibatch_stationary_covariance`, NaN where its
    recursion has no stationary state (beyond the second-moment stability limit) or its
    per-sample Hessians would exceed :data:`MINIBATCH_MAX_BYTES`."""
    n, P = model.n_params, data.X.shape[0]
    if 8 * P * n * n > MINIBATCH_MAX_BYTES:
        return np.full((n, n), np.nan)
    try:
        return theory.minibatch_stationary_covariance(
            model, data.X, data.Y, theta, p["lr"], p["batch_size"], p["sampling"]
        )
    except ValueError:
        return np.full((model.n_params, model.n_params), np.nan)


def _theories(model: Model, data: Data, theta: FloatArray, p: Mapping[str, Any]) -> dict:
    """Step 6: the covariances of :data:`THEORIES` and the local theory at ``theta``."""
    args = (model, data.X, data.Y, theta, p["lr"], p["batch_size"], p["sampling"])
    exact = theory.local_theory(*args, gtol=p["gtol"])
    gn = theory.local_theory(*args, drift="gauss_newton", gtol=p["gtol"])
    Ms = {"exact": exact.M, "jacobian": gn.M, "detailed": exact.M_detailed,
          "discrete": exact.M_discrete, "minibatch": _minibatch(model, data, theta, p)}  # fmt: skip
    return {"local": exact, "M": Ms, "gn": gn, "local_lr": float(p["lr"])}


def sgd_mean(run: Any, theta_ref: FloatArray) -> FloatArray:
    """``theta_bar``: the mean of a run over all replicas and records (``run.sum_d`` holds the
    sums of ``theta - theta_ref``)."""
    return theta_ref + run.sum_d.sum(axis=(0, 1)) / run.n_records.sum()


def _theories_at_mean(
    model: Model, data: Data, theta_bar: FloatArray, Q: FloatArray, p: Mapping[str, Any]
) -> dict[str, FloatArray]:
    """The exact linearisation (Eq. 29) and the discrete recursion with the drift
    ``H(theta_bar)`` and the noise ``C(theta_bar)`` (Eq. 14) at the SGD mean, on the range
    ``Q`` (n, r) of the local point's Hessian, as (r, r) matrices in ``Q``'s coordinates; NaN if
    ``H`` is not positive definite there or ``lr`` is beyond its stability limit."""
    Hr = Q.T @ model.hessian(data.X, data.Y, theta_bar) @ Q
    Cr = Q.T @ theory.noise_covariance(model, data.X, data.Y, theta_bar, p["batch_size"],
                                       p["sampling"]) @ Q  # fmt: skip
    nan = np.full((Q.shape[1],) * 2, np.nan)
    info = theory.hessian_range(Hr)
    if info.null_dim > 0:  # not positive definite on the local point's range
        return {"exact_mean": nan, "discrete_mean": nan}
    try:
        cov = range_covariances(info, Cr, p["lr"])
    except ValueError:
        return {"exact_mean": nan, "discrete_mean": nan}
    return {"exact_mean": cov.M, "discrete_mean": cov.M_discrete}


def _mean_shift(model: Model, data: Data, th: dict, theta_loc: FloatArray,
                theta_bar: FloatArray, Q: FloatArray) -> dict:  # fmt: skip
    """How far SGD's mean sits from the local minimum within ``range(H)`` (``Q``; along a
    manifold of minima the mean drifts, see :func:`_drift`), against the first-order
    prediction :func:`~weightdyn.models.theory.smoothing_shift` (with the exact
    linearisation's M)."""
    shift = Q @ (Q.T @ (theta_bar - theta_loc))
    pred = theory.smoothing_shift(model, data.X, data.Y, theta_loc, th["M"]["exact"],
                                  hessian_info=th["local"].info)  # fmt: skip
    norm, scale = np.linalg.norm, np.linalg.norm(theta_loc)
    cos = float(shift @ pred / (norm(shift) * norm(pred))) if norm(shift) * norm(pred) else 0.0
    values = {
        "shift_mean": (norm(shift) / scale, "|theta_bar - theta_local| / |theta_local| on "
                       "range(H) (SGD mean off the minimum)"),
        "shift_predicted": (norm(pred) / scale, "|m| / |theta_local|, m = -H^+ grad tr(H M) / 2 "
                            "(first order in lr)"),
        "shift_cosine": (cos, "cosine between the SGD mean's shift and m"),
        "grad_norm_mean": (float(norm(model.gradient(data.X, data.Y, theta_bar))),
                           "|grad L| at the SGD mean"),
    }  # fmt: skip
    return {k: ((), v, attrs(text, "1", "models")) for k, (v, text) in values.items()}


@dataclass(frozen=True)
class Frame:
    """The coordinates a cell's covariances are compared in: all of ``theta`` (``basis`` None)
    or ``y = basis^T theta``. SGD then records k^2 second moments per block, not n^2
    (:func:`moment_frame`):

    * setting ``moment_modes`` = k: the k stiffest Hessian modes at ``theta*`` (``invariant``:
      they span an invariant subspace of ``H``, so the run need only resolve the slowest of
      them and a theory may be solved in the frame);
    * setting ``moment_block``: a block of coordinates (the output layer, or an MLP's
      hidden-to-hidden weights). Not invariant: the run resolves all of ``range(H)`` and the
      theories are solved on all of it, then compressed to the block."""

    basis: FloatArray | None = None
    invariant: bool = True

    def matrix(self, A: FloatArray) -> FloatArray:
        """``A`` (n, n) in the frame."""
        return A if self.basis is None else self.basis.T @ A @ self.basis

    def sample(self, run: Any) -> Any:
        """The run with its first moments in the frame (its second moments already are)."""
        return run if self.basis is None else replace(run, sum_d=run.sum_d @ self.basis)

    def full(self, Q: FloatArray) -> FloatArray:
        """Columns ``Q`` given in the frame, in ``theta``'s coordinates."""
        return Q if self.basis is None else self.basis @ Q

    def range_basis(self, info: theory.RangeInfo) -> FloatArray:
        """``range(H)`` in the frame (the frame's own coordinates where it is reduced: its
        Hessian modes lie in the range; a block is taken whole)."""
        return info.Q if self.basis is None else np.eye(self.basis.shape[1])


def moment_frame(info: theory.RangeInfo, model: Model, params: Mapping[str, Any]) -> Frame:
    """:class:`Frame` of the settings ``moment_modes`` (the k stiffest modes of ``H``,
    ``info``; all of ``theta`` where k covers ``range(H)``) or ``moment_block``; all of
    ``theta`` without them."""
    block = params.get("moment_block")
    if block is not None:
        coords = model.last_layer if block == "output" else feng_tu.hidden_weights(model)
        return Frame(np.ascontiguousarray(np.eye(model.n_params)[:, coords]), invariant=False)
    k = params.get("moment_modes")
    if k is None or k >= info.rank:
        return Frame()
    return Frame(np.ascontiguousarray(info.Q[:, -int(k) :]))


def _run_tau(info: theory.RangeInfo, frame: Frame, lr: float) -> float:
    """The slowest relaxation time the run must resolve: of ``range(H)``, or of the slowest
    Hessian mode of an invariant frame."""
    if frame.basis is None or not frame.invariant:
        return relaxation_steps(info, lr)[0]
    return 1.0 / (lr * info.omega[-frame.basis.shape[1]])


def _check_run_length(tau: float, info: theory.RangeInfo, params: Mapping[str, Any]) -> None:
    """``CellFailed("too_slow")`` if ``max(burn_tau, sample_tau)`` relaxation times ``tau``
    exceed ``max_steps``."""
    n_tau = max(params["burn_tau"], params["sample_tau"])
    if n_tau * tau > params["max_steps"]:
        raise CellFailed(
            "too_slow",
            f"slowest relaxation time {tau:.3g} steps: {n_tau:g} of them exceed max_steps = "
            f"{params['max_steps']} (a flat direction at theta*; null(H) dimension "
            f"{info.null_dim}; setting moment_modes samples only the stiffest modes)",
        )


def cell_dataset(
    model: Model, data: Data, start: Minimum, params: Mapping[str, Any], progress: Progress
) -> xr.Dataset:
    """Steps 3-6 of a cell whose minimum passed its checks, as one dataset."""
    theta_star = start.result.theta
    H_star = model.hessian(data.X, data.Y, theta_star)
    info_star = theory.hessian_range(H_star)
    try:
        check_lr_below(float(info_star.omega.max(initial=0.0)), params["lr"])
    except ValueError as err:
        raise CellFailed("lr_unstable", str(err)) from None
    tau_star, tau_fast = relaxation_steps(info_star, params["lr"])
    frame = moment_frame(info_star, model, params)
    tau = _run_tau(info_star, frame, params["lr"])
    _check_run_length(tau, info_star, params)
    begin = start.theta0 if params["init"] == "random" else theta_star
    extra = start_extra_tau(model, data, begin, theta_star, info_star, H_star, params)
    _, sample, theta_loc, thin = simulate(model, data, begin, tau, params, progress, extra,
                                          frame.basis, info_star)  # fmt: skip
    th = _theories(model, data, theta_loc, params)
    cmp = compare(model, data, th, sample, theta_loc, frame, params)
    sim, spectra = cmp.sim, cmp.spectra
    progress(
        f"tr M: SGD {sim['trace'][0]:.5g} +- {sim['trace'][1]:.2g}, exact "
        f"{spectra['exact']['trace']:.5g}, discrete {spectra['discrete']['trace']:.5g}, "
        f"App. A {spectra['jacobian']['trace']:.5g}, exact at the SGD mean "
        f"{spectra['exact_mean']['trace']:.5g}"
    )
    info = th["local"].info
    ds = _spectra_dataset(sim, spectra)
    times = (tau_star, tau_fast, tau)
    ds.update(_scalars(model, data, start, th, sample, theta_loc, info, times, thin, frame))
    ds.update(_mean_shift(model, data, th, theta_loc, cmp.theta_bar, frame.full(cmp.Qr)))
    if cmp.layer is not None:
        exact = layer_spectrum(cmp.M["exact"], cmp.Qr, cmp.H, cmp.layer)
        ds.update(_layer_dataset(sim, exact))
    ds.update(_drift(sample, info, thin))
    u = _slowest_mode(info, cmp.Qr, cmp.H, frame)
    ds.update(_stationarity(frame.sample(sample), u, cmp.H, progress))
    ds.update(_trace_variables(sim, spectra))
    if params.get("flatness_block"):
        block = params["flatness_block"]
        ds.update(_feng_tu(model, data, cmp, sample, theta_loc, frame, block, progress))
    ds["status"] = ((), 0, _status_attrs())
    return ds


def _feng_tu(
    model: Model, data: Data, cmp: Comparison, sample: Any, theta_loc: FloatArray,
    frame: Frame, block: str, progress: Progress,
) -> xr.Dataset:  # fmt: skip
    """Feng & Tu's IVFR on ``block`` (:mod:`weightdyn.models.feng_tu`)."""
    b = feng_tu.block_basis(block, model, cmp.Qr, frame.basis,
                            partial(layer_basis, cmp.M["exact"], cmp.Qr))  # fmt: skip
    result = feng_tu.measurement(
        model, data.X, data.Y, (cmp.theta_bar, theta_loc), cmp.H,
        feng_tu.theory_covariances(cmp.M), frame.sample(sample), b,
    )  # fmt: skip
    ds = feng_tu.dataset(result, b)
    progress(feng_tu.log_line(ds))
    return ds


@dataclass(frozen=True)
class Comparison:
    """SGD against the theories in a :class:`Frame`: the fluctuating basis ``Qr``, the Hessian
    ``H`` and the theories' covariances ``M`` in the frame, the SGD mean, the output layer's
    coordinates (None in a reduced frame), SGD's statistics and the theories' spectra."""

    Qr: FloatArray
    H: FloatArray
    M: dict[str, FloatArray]
    theta_bar: FloatArray
    layer: Layer | None
    sim: dict[str, Any]
    spectra: dict[str, dict[str, FloatArray]]


def compare(
    model: Model, data: Data, th: dict, sample: Any, theta_loc: FloatArray, frame: Frame,
    params: Mapping[str, Any],
) -> Comparison:  # fmt: skip
    """Step 6: SGD's spectra (:func:`sgd_statistics`) and the theories' (:func:`theory_spectra`,
    the local ones of ``th`` and those at the SGD mean) on the fluctuating part of ``range(H)``
    in ``frame``."""
    H = frame.matrix(th["local"].H)
    M = {name: frame.matrix(m) for name, m in th["M"].items()}
    Qr = fluctuating_basis(frame.range_basis(th["local"].info), M["exact"])
    Hr = Qr.T @ H @ Qr
    theta_bar = sgd_mean(sample, theta_loc)
    if frame.invariant:
        at_mean = _theories_at_mean(model, data, theta_bar, frame.full(Qr), params)
        M.update({name: Qr @ m @ Qr.T for name, m in at_mean.items()})
    else:  # a block: solved on all of range(H), then compressed
        Q = th["local"].info.Q
        at_mean = _theories_at_mean(model, data, theta_bar, Q, params)
        M.update({name: frame.matrix(Q @ m @ Q.T) for name, m in at_mean.items()})
    layer = model.last_layer if frame.basis is None else None
    if layer is not None:
        layer = layer_basis(M["exact"], Qr, layer)
    sim = sgd_statistics(frame.sample(sample), Qr, H, layer)
    spectra = {name: theory_spectra(m, Qr, Hr) for name, m in M.items()}
    return Comparison(Qr, H, M, theta_bar, layer, sim, spectra)


def _spectra_dataset(sim: dict, spectra: dict) -> xr.Dataset:
    r = sim["eig"][0].size
    ds = xr.Dataset(coords={"mode": ("mode", np.arange(r), attrs("mode rank", "1", "sorted"))})
    ds["eig_sgd"] = ("mode", sim["eig"][0], attrs("eigenvalue of the SGD covariance on "
                     "range(H)", "1", "Eqs. 10-11"))  # fmt: skip
    ds["eig_sgd_se"] = ("mode", sim["eig"][1], attrs("jackknife s.e. of eig_sgd", "1", "jk"))
    ds["curv_sgd"] = ("mode", sim["curv"][0], attrs("curvature v^T H v along eigenvectors of "
                      "the SGD covariance", "1", "IVFR, Fig. 7a"))  # fmt: skip
    ds["curv_sgd_se"] = ("mode", sim["curv"][1], attrs("jackknife s.e. of curv_sgd", "1", "jk"))
    for name in ("trace", "ivfr_spearman", "ivfr_slope"):
        ds[f"{name}_sgd"] = ((), sim[name][0], attrs(f"{name} of the SGD covariance", "1", "IVFR"))
        ds[f"{name}_sgd_se"] = ((), sim[name][1], attrs(f"jackknife s.e. of {name}", "1", "jk"))
    for name, spec in spectra.items():
        text, source = THEORIES[name]
        ds[f"eig_{name}"] = ("mode", spec["eig"], attrs(f"eigenvalue, {text}", "1", source))
        ds[f"curv_{name}"] = ("mode", spec["curv"], attrs(f"curvature along eigenvectors, {text}",
                              "1", source))  # fmt: skip
        ds[f"trace_{name}"] = ((), spec["trace"], attrs(f"trace, {text}", "1", source))
        rho, slope = _ivfr(spec["eig"], spec["curv"])
        ds[f"ivfr_spearman_{name}"] = ((), rho, attrs(f"IVFR Spearman rho, {text}", "1", source))
        ds[f"ivfr_slope_{name}"] = ((), slope, attrs(f"IVFR log-log slope, {text}", "1", source))
    return ds


def _layer_dataset(sim: dict, exact: tuple[FloatArray, FloatArray]) -> xr.Dataset:
    """The output layer's IVFR (Fig. 7a, Eq. 73): SGD's block spectrum and curvatures with
    their s.e. and the exact linearisation's, along ``layer_mode``."""
    b = exact[0].size
    src, text = "Fig. 7a, Eq. 73", "of the output layer's block of the covariance on range(H)"
    mode = ("layer_mode", np.arange(b), attrs("output-layer mode rank", "1", "sorted"))
    ds = xr.Dataset(coords={"layer_mode": mode})
    values = {
        "layer_eig_sgd": (sim["layer_eig"][0], f"eigenvalue {text}, SGD"),
        "layer_eig_sgd_se": (sim["layer_eig"][1], "jackknife s.e. of layer_eig_sgd"),
        "layer_curv_sgd": (sim["layer_curv"][0], "curvature v^T H v along its eigenvectors, SGD"),
        "layer_curv_sgd_se": (sim["layer_curv"][1], "jackknife s.e. of layer_curv_sgd"),
        "layer_eig_exact": (exact[0], f"eigenvalue {text}, exact linearisation (Eq. 29)"),
        "layer_curv_exact": (exact[1], "curvature along its eigenvectors, exact linearisation"),
    }  # fmt: skip
    for name, (value, long_name) in values.items():
        ds[name] = ("layer_mode", value, attrs(long_name, "1", src))
    rho, slope = _ivfr(*exact)
    scalars = {
        "layer_ivfr_spearman_sgd": sim["layer_ivfr_spearman"][0],
        "layer_ivfr_spearman_sgd_se": sim["layer_ivfr_spearman"][1],
        "layer_ivfr_slope_sgd": sim["layer_ivfr_slope"][0],
        "layer_ivfr_slope_sgd_se": sim["layer_ivfr_slope"][1],
        "layer_ivfr_spearman_exact": rho,
        "layer_ivfr_slope_exact": slope,
    }
    for name, value in scalars.items():
        what = "Spearman rho" if "spearman" in name else "log-log slope"
        kind = "jackknife s.e. of the " if name.endswith("_se") else ""
        who = "exact linearisation" if "exact" in name else "SGD"
        ds[name] = ((), value, attrs(f"{kind}output layer's IVFR {what}, {who}", "1", src))
    return ds


def _scalars(model, data, start, th, sample, theta_loc, info, times, thin, frame) -> dict:
    """Per-cell numbers of the minimum, the local theory and the run (``times``: the slowest
    and fastest relaxation times at ``theta*`` and the slowest the run resolves)."""
    H, C, Q = th["local"].H, th["local"].C, th["local"].Q
    tau, tau_fast, tau_run = times
    k = model.n_params if frame.basis is None else frame.basis.shape[1]
    norm = np.linalg.norm
    values = {
        "n_params": (model.n_params, "number of parameters", "1"),
        "rank_H": (info.rank, "rank of the Hessian at the local point", "1"),
        "null_dim": (info.null_dim, "null-space dimension of the Hessian (flat directions)", "1"),
        "grad_norm_star": (start.result.grad_norm, "|grad L| at theta*", "1"),
        "grad_norm_local": (th["local"].grad_norm, "|grad L| at the local point", "1"),
        "loss_star": (start.result.loss, "training loss at theta*", "1"),
        "residual_curvature": (_sym_norm(H - th["gn"].H) / _sym_norm(H), "||H - J^T J / P|| "
                               "/ ||H|| (spectral norms; the term App. A drops)", "1"),
        "circulation": (norm(Q) / norm(C), "||Q|| / ||C|| (Eq. 31; 0 under detailed balance)",
                        "1"),
        "commutator": (norm(H @ C - C @ H) / (norm(H) * norm(C)), "||[H, C]|| / (||H|| ||C||)",
                       "1"),
        "tau_slow": (tau, "slowest relaxation time 1 / (lr omega_min) at theta*, in steps", "1"),
        "tau_fast": (tau_fast, "fastest relaxation time 1 / (lr omega_max), in steps", "1"),
        "tau_sampled": (tau_run, "slowest relaxation time the run resolves (of the moment "
                        "modes; tau_slow with all of them), in steps", "1"),
        "moment_modes": (k, "dimension of the frame SGD's second moments are recorded in "
                         "(n_params: all; else the stiffest Hessian modes at theta*)", "1"),
        "tau_slow_local": (relaxation_steps(info, th["local_lr"])[0], "slowest relaxation time "
                           "at the local point, in steps", "1"),
        "lr_omega_max": (1.0 / tau_fast, "lr * max eig(H) (stability needs < 2)", "1"),
        "thin": (thin, "steps between records", "1"),
        "sample_steps": (int(sample.n_records.max()) * thin * sample.n_records.shape[1],
                         "sampling steps per replica", "1"),
        "shift_from_star": (norm(theta_loc - start.result.theta) / norm(start.result.theta),
                            "|theta_local - theta*| / |theta*|", "1"),
        "steps_per_second": (sample.steps_per_second, "replica-steps per second (sampling)",
                             "1/s"),
    }  # fmt: skip
    return {k: ((), v, attrs(text, units, "models")) for k, (v, text, units) in values.items()}


def _sym_norm(A: FloatArray) -> float:
    """Spectral norm of a symmetric matrix, ``max |eig|`` (no SVD)."""
    return float(np.max(np.abs(np.linalg.eigvalsh(A)), initial=0.0))


def _drift(sample: Any, info: theory.RangeInfo, thin: int) -> dict:
    """Motion of the replica mean between the first and the last sampling block, split into the
    null space of ``H`` (along the manifold of minima) and its range, per step."""
    n = sample.n_records.astype(float)
    means = sample.sum_d / n[:, :, None]
    delta = means[:, -1].mean(axis=0) - means[:, 0].mean(axis=0)
    steps = (sample.n_records.shape[1] - 1) * sample.n_records[0, 0] * thin
    on_range = info.Q @ (info.Q.T @ delta)
    null = np.linalg.norm(delta - on_range) / max(steps, 1)
    return {
        "drift_null": ((), null, attrs("drift of the mean along null(H) per step", "1",
                                       "beyond paper 000: the manifold of minima")),
        "drift_range": ((), np.linalg.norm(on_range) / max(steps, 1),
                        attrs("motion of the mean within range(H) per step", "1",
                              "beyond paper 000: the manifold of minima")),
    }  # fmt: skip


def _slowest_mode(
    info: theory.RangeInfo, Qr: FloatArray, H: FloatArray, frame: Frame
) -> FloatArray:
    """The slowest Hessian mode on ``range(H)`` (``info``), or within the fluctuating subspace
    ``Qr`` (:func:`fluctuating_basis`) where that is smaller (no noise reaches the rest), in
    ``frame`` (``H`` given in it)."""
    if frame.basis is None and Qr.shape[1] == info.Q.shape[1]:
        return info.Q[:, int(np.argmin(info.omega))]
    omega, V = np.linalg.eigh(Qr.T @ H @ Qr)
    return Qr @ V[:, int(np.argmin(omega))]


def _stationarity(
    sample: Any, u: FloatArray, H: FloatArray, progress: Progress
) -> dict[str, tuple]:
    """The window test (:func:`weightdyn.stationarity.window_test`) on the block means of the
    second moment about the local point along the slowest mode ``u`` (:func:`_slowest_mode`)
    and of the quadratic loss excess ``tr(H S) / 2``; logged, with a WARNING line when
    flagged."""
    R, B, k = sample.sum_d.shape
    S = sample.sum_dd.reshape(R, B, k, k) / sample.n_records[:, :, None, None]  # about theta_loc
    values = np.stack([np.einsum("i,rbij,j->rb", u, S, u),
                       0.5 * np.einsum("ij,rbji->rb", H, S)], axis=-1)  # fmt: skip
    test = stationarity.window_test(values.transpose(1, 0, 2), ("slowest", "loss"))
    for line in test.log_lines():
        progress(line)
    return test.variables("Eqs. 10-11 (SGD), second moments about the local point")


def _theory_source(name: str) -> str:
    """The ``source`` attribute of theory ``name`` of :data:`THEORIES`."""
    where = THEORIES[name][1]
    return where if where.startswith("beyond") else f"paper 000 {where}"


def _trace_variables(sim: dict, spectra: dict) -> dict[str, tuple]:
    """tr M of SGD on ``range(H)`` (about its sampled mean, jackknife error) and of every theory
    of :data:`THEORIES` (:func:`weightdyn.stationarity.trace_variables`)."""
    theories = {
        name: (spec["trace"], f"tr M on range(H), {THEORIES[name][0]}", _theory_source(name))
        for name, spec in spectra.items()
    }
    source = "paper 000 Eqs. 10-11 (SGD), covariance about the sampled mean on range(H)"
    return stationarity.trace_variables(sim["trace"], theories, source)


def _status_attrs() -> dict[str, str]:
    return {**attrs("outcome of the cell's checks", "1", "models"),
            "flag_values": " ".join(f"{i}:{s}" for i, s in enumerate(STATUS))}  # fmt: skip


def failed_dataset(status: str, message: str) -> xr.Dataset:
    """A flagged cell: ``status`` names the failed check, ``message`` is kept as an attribute."""
    ds = xr.Dataset({"status": ((), STATUS.index(status), _status_attrs())})
    ds.attrs["failure"] = message
    return ds


def run(model: Model, teacher: Model, params: Mapping[str, Any], progress: Progress) -> xr.Dataset:
    """Steps 1-6 of one cell on teacher-student data (:func:`teacher_data`)."""
    data = teacher_data(model, teacher, params, float(params["teacher_scale"]))
    return run_on_data(model, data, params, progress)


def run_on_data(
    model: Model, data: Data, params: Mapping[str, Any], progress: Progress
) -> xr.Dataset:
    """Steps 2-6 of one cell on the training set ``data``; a failed check gives
    :func:`failed_dataset`."""
    t0 = time.perf_counter()
    try:
        start = minimum(model, data, params, progress)
        ds = cell_dataset(model, data, start, params, progress)
    except CellFailed as err:
        progress(f"cell flagged ({err.status}): {err}")
        ds = failed_dataset(err.status, str(err))
    ds["elapsed_s"] = ((), time.perf_counter() - t0, attrs("wall time of the cell", "s", "run"))
    return ds
