"""Stationary protocol of one single-layer cell: initialisation, burn-in, sampling length.

Burn-in is a multiple of the slowest relaxation time tau = 1/(lr omega_min) (paper 000 Eq. 27, in
SGD steps), plus, for a start away from w*, the relaxation times its distance needs
(:func:`weightdyn.stationarity.extra_burnin_tau`: ``log(D^2 / tr M) / 2`` with ``D^2`` the squared
distance of the start from w* and ``tr M`` that of Eq. 30), bounded below and capped; the
sampling length is at least ``sample_steps`` (the floor), at least ``sample_tau`` relaxation times
(``sample_tau`` independent samples of the slowest mode per replica) and, with ``sample_rse``
set, long enough for that relative standard error of tr M (:func:`trace_rse_steps`),
capped by ``sample_max_steps``; a cell whose cap binds is flagged ``length_capped``. Every length
is fixed before sampling starts (no optional stopping: estimates stay unbiased and reruns
bit-identical). The same protocol drives SGD
(Eqs. 10-11, :func:`run_stationary_sgd`) and the stochastic gradient flow of Eq. 13
(:func:`run_stationary_sgf`), which covers the same SDE time ``t = lr * tau``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

from weightdyn import stationarity
from weightdyn.data import TeacherStudentData
from weightdyn.io import attrs
from weightdyn.observables import LinearQuadratic, Observables
from weightdyn.sgd import Schedule, Update
from weightdyn.single_layer import theory
from weightdyn.single_layer.sgf import SGFResult, run_sgf
from weightdyn.single_layer.simulate import SGDResult, run_sgd
from weightdyn.stationarity import extra_burnin_tau, lyapunov_trace, squared_distance

INITS = ("wstar", "random")


@dataclass(frozen=True)
class SGDProtocol:
    """How a cell's SGD chains are started, equilibrated and sampled."""

    replicas: int = 64
    init: str = "wstar"
    init_scale: float = 1.0
    burnin_tau: float = 2.0
    burnin_min_steps: int = 1000
    burnin_max_steps: int = 2_000_000
    sample_steps: int = 900_000
    sample_tau: float = 0.0
    sample_max_steps: int = 10_000_000
    sample_rse: float = 0.0
    thin: int = 10
    n_blocks: int = 4

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"init: {self.init!r} is not allowed; allowed: {INITS}")
        if self.replicas < 2:
            raise ValueError(f"replicas: {self.replicas}; at least 2 are needed for errors")

    def burnin(self, tau: float, extra_tau: float = 0.0) -> int:
        """Burn-in steps: (burnin_tau + extra_tau) * tau, within [burnin_min_steps,
        burnin_max_steps]; ``extra_tau`` is what a start away from w* needs
        (:func:`start_extra_tau`)."""
        steps = (self.burnin_tau + extra_tau) * tau if np.isfinite(tau) else self.burnin_min_steps
        return int(min(max(np.ceil(steps), self.burnin_min_steps), self.burnin_max_steps))

    def required_steps(self, tau: float, rse_steps: float = 0.0) -> float:
        """Sampling steps the cell needs before the cap: the floor ``sample_steps``,
        ``sample_tau * tau`` and ``rse_steps`` (:func:`trace_rse_steps`)."""
        by_tau = self.sample_tau * tau if np.isfinite(tau) else 0.0
        return float(max(self.sample_steps, by_tau, rse_steps))

    def is_capped(self, tau: float, rse_steps: float = 0.0) -> bool:
        """Whether ``sample_max_steps`` cuts the cell's :meth:`required_steps`."""
        return self.required_steps(tau, rse_steps) > self.sample_max_steps

    def sampling_length(self, tau: float, rse_steps: float = 0.0) -> int:
        """Sampling steps, :meth:`required_steps` capped at ``sample_max_steps``, a whole
        number of thinned records in each of the n_blocks blocks."""
        steps = min(self.required_steps(tau, rse_steps), self.sample_max_steps)
        unit = self.thin * self.n_blocks
        return int(max(1, round(steps / unit)) * unit)


def trace_rse_steps(H: np.ndarray, M: np.ndarray, lr: float, replicas: int,
                          rse: float) -> float:  # fmt: skip
    """Sampling steps per replica for a relative standard error ``rse`` of tr M, planned from
    the theory before the run (0 for ``rse = 0``, for no fluctuations, and where a mode does not
    relax, ``lr omega >= 2``: gradient descent itself diverges, there is nothing to sample).

    In the Hessian eigenbasis (rates ``omega_k``, range only, Eq. 27) mode ``k`` has variance
    ``m_k = u_k^T M u_k`` (``M`` of Eq. 30) and relaxes by ``rho_k = 1 - lr omega_k`` per step
    (Eq. 11); for a Gaussian AR(1) mode the time average of ``dw_k^2`` over ``T`` steps has
    variance ``2 m_k^2 g_k / T`` with ``g_k = (1 + rho_k^2) / (1 - rho_k^2)`` (twice the
    integrated autocorrelation time of ``dw_k^2``). Treating the modes as independent,
    ``Var(tr M_hat) = sum_k 2 m_k^2 g_k / (R T)``, so ``T = sum_k 2 m_k^2 g_k /
    (R (rse tr M)^2)``. A plan, not a measurement: multiplicative noise (large lr/S) widens
    the tails and lengthens the times a little; the error bars themselves are measured.
    """
    if rse <= 0:
        return 0.0
    omega, U = np.linalg.eigh(0.5 * (H + H.T))
    keep = omega > theory.range_threshold(omega, None)
    m = np.einsum("ik,ij,jk->k", U[:, keep], M, U[:, keep])
    rho2 = (1.0 - lr * omega[keep]) ** 2
    if m.sum() <= 0:
        return 0.0
    if np.any(rho2 >= 1.0):
        return 0.0
    g = (1.0 + rho2) / (1.0 - rho2)
    return float(np.sum(2.0 * m**2 * g) / (replicas * (rse * m.sum()) ** 2))


def cell_rse_steps(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str, protocol: SGDProtocol
) -> float:
    """:func:`trace_rse_steps` of a teacher-student cell: ``M`` of Eq. 30 from the
    Hessian (Eq. 4) and the noise covariance at w* (Eq. 17); 0 without ``sample_rse``."""
    if protocol.sample_rse <= 0 or data.N >= data.P:
        return 0.0
    H = theory.hessian(data.X)
    C = theory.noise_covariance(data.X, data.y, batch_size, sampling)
    M = theory.stationary_covariance(H, C, lr)
    return trace_rse_steps(H, M, lr, protocol.replicas, protocol.sample_rse)


def initial_weights(
    w_star: np.ndarray, protocol: SGDProtocol, rng: np.random.Generator
) -> np.ndarray:
    """Start of every replica: w* itself, or i.i.d. N(0, init_scale^2) weights."""
    R, N = protocol.replicas, w_star.size
    if protocol.init == "wstar":
        return np.tile(w_star, (R, 1))
    return rng.normal(0.0, protocol.init_scale, size=(R, N))


def start_extra_tau(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    sampling: str,
    w_star: np.ndarray,
    w_init: np.ndarray,
) -> float:
    """Relaxation times of burn-in that the start ``w_init`` (R, N) needs beyond a start at w*:
    ``log(D^2 / tr M) / 2`` (:func:`weightdyn.stationarity.extra_burnin_tau`), ``D^2`` the
    replicas' mean squared distance from w*, ``tr M = (lr/2) tr(H^-1 C)`` of Eq. 30 with C of
    Eq. 17. 0 for a start at w* (nothing else is computed then)."""
    distance2 = squared_distance(w_init, w_star)
    if distance2 == 0.0:
        return 0.0
    C = theory.noise_covariance(data.X, data.y, batch_size, sampling)
    return extra_burnin_tau(distance2, lyapunov_trace(theory.hessian(data.X), C, lr))


def _plan(
    data: TeacherStudentData, lr: float, batch_size: int, sampling: str, protocol: SGDProtocol
) -> tuple[np.ndarray, SGDProtocol, float, float]:
    """(w*, the protocol to run, tau in SGD steps, :func:`cell_rse_steps`) of one cell.

    In over-parameterised cells (N >= P) every per-sample gradient vanishes at the minimum-norm
    solution w* (Eq. 16), so the chains start at w* (whatever ``init`` says) and a short run
    (10 records per block) checks that they stay there.
    """
    w_star = theory.min_norm_solution(data.X, data.y)
    tau = theory.slowest_relaxation_steps(theory.hessian(data.X), lr)
    if data.N >= data.P:
        protocol = SGDProtocol(
            replicas=protocol.replicas,
            burnin_min_steps=0,
            burnin_max_steps=0,
            sample_steps=10 * protocol.thin * protocol.n_blocks,
            thin=protocol.thin,
            n_blocks=protocol.n_blocks,
        )
    planned = cell_rse_steps(data, lr, batch_size, sampling, protocol)
    return w_star, protocol, tau, planned


def slowest_mode_and_loss(data: TeacherStudentData, dtype: str = "float32") -> LinearQuadratic:
    """The observable hook of a stationary cell: ``dw = w - w*`` projected on the Hessian
    eigenvector of the smallest nonzero eigenvalue (the slowest mode, Eq. 27; the range cut of
    :func:`theory.slowest_relaxation_steps`), and the training loss
    ``L(w* + dw) = L* + dw^T H dw / 2`` (Eq. 9, exact for the linear network; the gradient
    vanishes at w*). Products in single precision by default (``LinearQuadratic.dtype``)."""
    H = theory.hessian(data.X)
    omega, U = np.linalg.eigh(0.5 * (H + H.T))
    omega_min = 1.0 / theory.slowest_relaxation_steps(H, 1.0)
    k = int(np.argmin(np.abs(omega - omega_min)))
    return LinearQuadratic(U[:, k : k + 1], H, theory.optimal_loss(data.X, data.y), dtype=dtype)


def stationarity_dataset(
    data: TeacherStudentData,
    result: SGDResult | SGFResult,
    progress: Callable[[str], None],
    source: str,
) -> xr.Dataset:
    """The window test of :func:`weightdyn.stationarity.window_test` on the series of
    :func:`slowest_mode_and_loss` (squared slowest-mode projection, loss excess ``L - L*`` of
    Eq. 9): ``not_stationary`` and ``stationarity_t_*`` (``source``: the simulation's
    equations). Untested (NaN, not flagged) where nothing fluctuates (diverged, or N >= P:
    Eq. 16) or the run had no hook. Logged through ``progress``, a WARNING line when flagged."""
    names = ("slowest", "loss")
    if result.diverged or data.N >= data.P or result.obs_series is None:
        test = stationarity.window_test(np.empty((0, result.replicas, 2)), names)
    else:
        series = result.obs_series.copy()
        series[..., 0] **= 2
        series[..., 1] -= theory.optimal_loss(data.X, data.y)
        test = stationarity.window_test(series, names)
        for line in test.log_lines():
            progress(line)
    return xr.Dataset(test.variables(source))


def length_dataset(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    sampling: str,
    protocol: SGDProtocol,
    progress: Callable[[str], None],
) -> xr.Dataset:
    """``sample_steps_required`` (SGD steps before the cap: :meth:`SGDProtocol.required_steps`)
    and ``length_capped`` (1 where ``sample_max_steps`` cut it: the cell is sampled for less
    than its time scale and precision target need), with a WARNING line through ``progress``
    when capped. Over-parameterised cells (Eq. 16) need no sampling: 0, not capped."""
    _, protocol, tau, planned = _plan(data, lr, batch_size, sampling, protocol)
    required = protocol.required_steps(tau, planned) if data.N < data.P else 0.0
    capped = data.N < data.P and protocol.is_capped(tau, planned)
    if capped:
        progress(f"WARNING: length_capped: the cell needs {required:.3g} sampling steps "
                 f"(tau = {tau:.3g}, sample_rse = {protocol.sample_rse:g}), capped at "
                 f"sample_max_steps = {protocol.sample_max_steps}")  # fmt: skip
    src = "paper 000 Eqs. 27, 30 (sampling plan)"
    needed = "SGD sampling steps the cell needs (floor, sample_tau tau, sample_rse) before the cap"
    return xr.Dataset(
        {
            "sample_steps_required": ((), required, attrs(needed, "1", src)),
            "length_capped": (
                (),
                np.int8(capped),
                attrs("sampling cut by sample_max_steps", "1", src),
            ),
        }
    )


def run_stationary_sgd(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    sampling: str,
    protocol: SGDProtocol,
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
    precision: str = "float64",
) -> tuple[np.ndarray, SGDResult]:
    """Run the cell's SGD replicas (Eqs. 10-11) to stationarity and sample them; (w*, result).

    Over-parameterised cells (N >= P) start at w* and run briefly (see :func:`_plan`).
    ``observables`` (e.g. :func:`slowest_mode_and_loss`) is the optional hook of
    :func:`~weightdyn.single_layer.simulate.run_sgd` on ``dw = w - w*``; ``precision``
    (``"float64"`` or ``"float32"``: the deviation from w* in single precision) is its too.
    """
    w_star, protocol, tau, planned = _plan(data, lr, batch_size, sampling, protocol)
    w_init = initial_weights(w_star, protocol, rng)
    extra = start_extra_tau(data, lr, batch_size, sampling, w_star, w_init)
    schedule = Schedule(
        burnin_steps=protocol.burnin(tau, extra),
        sample_steps=protocol.sampling_length(tau, planned),
        thin=protocol.thin,
        n_blocks=protocol.n_blocks,
    )
    update = Update(lr, batch_size, sampling)
    result = run_sgd(
        data.X, data.y, w_star, w_init, update, schedule, rng,
        progress=progress, observables=observables, precision=precision,
    )  # fmt: skip
    return w_star, result


def sgf_steps(
    protocol: SGDProtocol,
    tau: float,
    dt_over_lr: float,
    extra_tau: float = 0.0,
    rse_steps: float = 0.0,
) -> tuple[int, int]:
    """(burn-in, sampling) Euler steps of size dt = dt_over_lr * lr covering the SDE time of
    the SGD protocol (``t = lr * tau``, Eq. 13; ``extra_tau`` as :meth:`SGDProtocol.burnin`,
    ``rse_steps`` as :meth:`SGDProtocol.sampling_length`); the sampling steps fill whole
    thinned blocks."""
    burnin = int(np.ceil(protocol.burnin(tau, extra_tau) / dt_over_lr))
    unit = protocol.thin * protocol.n_blocks
    sgd_steps = protocol.sampling_length(tau, rse_steps)
    sample = int(max(1, round(sgd_steps / dt_over_lr / unit)) * unit)
    return burnin, sample


def run_stationary_sgf(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    sampling: str,
    protocol: SGDProtocol,
    rng: np.random.Generator,
    noise: str,
    dt_over_lr: float = 1.0,
    progress: Callable[[str], None] | None = None,
    observables: Observables | None = None,
    precision: str = "float64",
) -> tuple[np.ndarray, SGFResult]:
    """Integrate the SGF of Eq. 13 (``noise``: ``"additive"``, C(w*) of Eq. 17, or
    ``"multiplicative"``, C(w) of Eqs. 14-15) to stationarity and sample it; (w*, result).

    Euler-Maruyama steps of size ``dt = dt_over_lr * lr`` cover the SDE time of the SGD protocol
    (:func:`sgf_steps`); with ``dt_over_lr = 1`` one Euler step per SGD step, as the old
    SGD-vs-SGF experiment ran. Starts as :func:`run_stationary_sgd` does; ``observables`` and
    ``precision`` as there (:func:`~weightdyn.single_layer.sgf.run_sgf`).
    """
    w_star, protocol, tau, planned = _plan(data, lr, batch_size, sampling, protocol)
    w_init = initial_weights(w_star, protocol, rng)
    extra = start_extra_tau(data, lr, batch_size, sampling, w_star, w_init)
    burnin, sample = sgf_steps(protocol, tau, dt_over_lr, extra, planned)
    schedule = Schedule(burnin, sample, protocol.thin, protocol.n_blocks)
    result = run_sgf(
        data.X, data.y, w_star, w_init, Update(lr, batch_size, sampling), schedule, rng,
        noise=noise, dt=dt_over_lr * lr, progress=progress, observables=observables,
        precision=precision,
    )  # fmt: skip
    return w_star, result
