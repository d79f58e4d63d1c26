"""The mini-batch noise that stationary SGD feels (paper 000 Fig. 2a from SGD, Eqs. 10-17).

Fig. 2a compares the spectrum of the mini-batch gradient covariance "obtained from SGD" with
Eq. 17, the covariance at the fixed point ``w*``. Sampling mini-batches at ``w*`` tests the
sampler only (:func:`weightdyn.single_layer.noise.empirical_noise_spectrum`); here the noise is
measured where SGD actually is: ``R`` chains run the SGD kernel of
:mod:`weightdyn.single_layer.simulate` into their stationary state, and at every ``thin``-th
state ``w(t)`` one mini-batch ``B`` (drawn by the chain's sampling rule, independent of ``w(t)``
as the batch SGD draws next) gives ``xi = grad L_B(w(t)) - grad L(w(t))`` (Eq. 12). The second
moment of ``xi`` over the visited states is Eq. 14 averaged over the stationary distribution,
``<C(w)>``, which is Eq. 17 plus the multiplicative correction
(:func:`weightdyn.single_layer.theory.averaged_noise_covariance`, Eq. 15 over the M of Eq. 30).

Errors: the states are grouped by (replica, time block); eigenvalues and traces carry a
jackknife standard error over the groups. Pure numpy/numba in, xarray out; no file I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import ceil

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from weightdyn import stats
from weightdyn.blas import one_blas_thread
from weightdyn.counter_rng import replica_keys
from weightdyn.io import attrs
from weightdyn.single_layer import theory
from weightdyn.single_layer.noise import _draw_batches
from weightdyn.single_layer.simulate import _check_sampling, sgd_kernel

__all__ = [
    "StateNoise",
    "StateNoiseSampling",
    "noise_at_states",
    "state_noise",
    "state_noise_dataset",
]

FloatArray = NDArray[np.float64]
P000 = "paper 000"
#: gathered batch entries (states x S x N) per kernel call: bounds a chunk's memory (32 MB)
_CHUNK_ENTRIES = 4_000_000


@dataclass(frozen=True)
class StateNoise:
    """Second moments of the mini-batch noise at SGD states, per (replica, block) group.

    ``second`` (G, N, N) are the group means of ``xi xi^T``; ``states`` the number of states
    per group; ``burnin_steps``, ``thin`` and ``block_steps`` the schedule of every chain;
    ``diverged`` whether a chain left the stability bound (then ``second`` is NaN).
    """

    second: FloatArray
    states: int
    burnin_steps: int
    thin: int
    block_steps: int
    diverged: bool


def noise_at_states(
    X: ArrayLike,
    y: ArrayLike,
    W: ArrayLike,
    batch_size: int,
    sampling: str,
    rng: np.random.Generator,
) -> FloatArray:
    """``xi = grad L_B(w) - grad L(w)`` (Eqs. 10, 12) at each row ``w`` of ``W`` (n, N), one
    fresh mini-batch ``B`` of size ``S`` per row; returns (n, N)."""
    X, W = np.asarray(X, dtype=float), np.atleast_2d(np.asarray(W, dtype=float))
    y = np.asarray(y, dtype=float)
    P = X.shape[0]
    idx = _draw_batches(rng, P, int(batch_size), W.shape[0], sampling)
    xb = X[idx]  # (n, S, N)
    rb = np.einsum("nsi,ni->ns", xb, W) - y[idx]  # residuals on the batch
    batch = np.einsum("ns,nsi->ni", rb, xb) / batch_size
    full = W @ (X.T @ X / P) - X.T @ y / P  # grad L(w) = H w - X^T y / P, O(N^2) per state
    return batch - full


@dataclass(frozen=True)
class StateNoiseSampling:
    """How long the SGD chains of :func:`state_noise` run (paper 000 Eq. 27 time scale).

    ``replicas`` chains each burn in for ``burnin_tau`` slowest relaxation times
    ``1/(lr omega_0)`` (Eq. 27), then sample ``n_blocks`` time blocks covering at least
    ``sample_tau`` of them; the (replica, block) groups carry the jackknife errors.
    """

    replicas: int = 8
    n_blocks: int = 4
    burnin_tau: float = 2.0
    sample_tau: float = 4.0


def _schedule(tau: float, n_states: int, schedule: StateNoiseSampling) -> tuple[int, int, int]:
    """(burn-in steps, records per block, thin): at least ``n_states`` states over all chains,
    each chain's sampling window at least ``sample_tau`` relaxation times ``tau`` (Eq. 27)."""
    replicas, n_blocks = int(schedule.replicas), schedule.n_blocks
    per_block = ceil(n_states / (replicas * n_blocks))
    window = schedule.sample_tau * tau / n_blocks if np.isfinite(tau) else 0.0
    thin = max(1, ceil(window / per_block))
    burnin = ceil(schedule.burnin_tau * tau) if np.isfinite(tau) else 0
    return burnin, per_block, thin


@dataclass
class _SgdChains:
    """``R`` SGD chains (the kernel of :mod:`weightdyn.single_layer.simulate`, Eqs. 10-11),
    advanced in place: ``W`` (R, N) their weights, ``done`` the steps taken by each,
    ``diverged`` whether any chain has left ``[-bound, bound]``."""

    X: FloatArray
    y: FloatArray
    lr: float
    batch_size: int
    with_replacement: bool
    w_star: FloatArray
    W: FloatArray
    perm: NDArray[np.int64]
    keys: NDArray[np.uint64]
    bound: float
    done: int = 0
    diverged: bool = False

    def advance(self, n_rec: int, every: int) -> FloatArray:
        """Runs ``max(n_rec, 1) * every`` steps of every chain and returns the (n_rec, R, N)
        states recorded after every ``every``-th step (Eqs. 10-11)."""
        R, N = self.W.shape
        rec = np.empty((n_rec, R, N))
        steps = max(n_rec, 1) * every
        no_sums = np.empty((0, N)), np.empty((0, N, N))
        flags = sgd_kernel(
            self.X,
            self.y,
            self.W,
            self.lr,
            self.batch_size,
            self.with_replacement,
            self.perm,
            self.keys,
            self.done,
            steps,
            every,
            self.w_star,
            *no_sums,
            rec,
            self.bound,
        )
        self.done += steps
        self.diverged |= bool(flags.any())
        return rec


def _chains_at_minimum(
    X: FloatArray,
    y: FloatArray,
    lr: float,
    batch_size: int,
    with_replacement: bool,
    replicas: int,
    rng: np.random.Generator,
) -> _SgdChains:
    """``replicas`` SGD chains started at the minimum-norm solution ``w*`` (the fixed point
    of Eq. 11), their batches from the counter stream keyed by ``rng``."""
    P = X.shape[0]
    w_star = theory.min_norm_solution(X, y)
    W = np.tile(w_star, (replicas, 1))
    perm = np.tile(np.arange(P, dtype=np.int64), (replicas, 1))
    keys = replica_keys(rng, replicas)
    bound = float(1e6 * (np.max(np.abs(w_star), initial=0.0) + 1.0))
    return _SgdChains(X, y, lr, batch_size, with_replacement, w_star, W, perm, keys, bound)


def _burn_in(chains: _SgdChains, burnin: int) -> None:
    """Advances ``chains`` to ``burnin`` steps without recording (stops on divergence)."""
    while not chains.diverged and chains.done < burnin:
        chains.advance(0, min(burnin - chains.done, 2**20))


def _block_noise_sum(
    chains: _SgdChains,
    per_block: int,
    thin: int,
    sampling: str,
    rng: np.random.Generator,
) -> FloatArray:
    """Sum over one time block of ``xi xi^T`` (Eqs. 12, 14) at ``per_block`` states of each
    chain, every ``thin``-th step, one measuring batch from ``rng`` per state: (R, N, N).
    Stops early if a chain diverges (the sum is then incomplete)."""
    R, N = chains.W.shape
    S = chains.batch_size
    chunk = max(1, _CHUNK_ENTRIES // (R * S * N))
    total = np.zeros((R, N, N))
    left = per_block
    while not chains.diverged and left:
        m = min(left, chunk)
        states = chains.advance(m, thin)
        if chains.diverged:
            break
        xi = noise_at_states(chains.X, chains.y, states.reshape(-1, N), S, sampling, rng)
        xi = xi.reshape(m, R, N)
        total += np.einsum("mri,mrj->rij", xi, xi)
        left -= m
    return total


def state_noise(
    X: ArrayLike,
    y: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str,
    n_states: int,
    rng: np.random.Generator,
    schedule: StateNoiseSampling = StateNoiseSampling(),
    progress: Callable[[str], None] | None = None,
) -> StateNoise:
    """Noise second moments at the states of ``schedule.replicas`` stationary SGD chains
    from ``w*``.

    Each chain burns in for ``burnin_tau`` slowest relaxation times ``1/(lr omega_0)``
    (Eq. 27), then samples ``n_blocks`` time blocks covering at least ``sample_tau`` of them
    (:class:`StateNoiseSampling`), recording every ``thin``-th state so that at least
    ``n_states`` states are used in all. The SGD batches come from the counter stream keyed by
    ``rng`` (as :func:`~weightdyn.single_layer.simulate.run_sgd`), the measuring batches
    (Eq. 12) from ``rng``.
    """
    with_replacement = _check_sampling(sampling)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    R, n_blocks = int(schedule.replicas), schedule.n_blocks
    chains = _chains_at_minimum(X, y, lr, int(batch_size), with_replacement, R, rng)
    tau = theory.slowest_relaxation_steps(theory.hessian(X), lr)
    burnin, per_block, thin = _schedule(tau, n_states, schedule)
    N = X.shape[1]
    second = np.zeros((R, n_blocks, N, N))
    with one_blas_thread():
        _burn_in(chains, burnin)
        for b in range(n_blocks):
            second[:, b] = _block_noise_sum(chains, per_block, thin, sampling, rng)
            if progress is not None:
                progress(
                    f"SGD-state noise: block {b + 1}/{n_blocks}, {chains.done} steps per chain"
                )
    second = second.reshape(R * n_blocks, N, N) / per_block
    if chains.diverged:
        second[:] = np.nan
    return StateNoise(second, per_block, burnin, thin, per_block * thin, chains.diverged)


def _averaged_over_exact_m(
    X: FloatArray, y: FloatArray, lr: float, batch_size: int, sampling: str
) -> FloatArray | None:
    """Eq. 15 averaged over SGD's exact stationary second moment (the discrete recursion,
    :func:`weightdyn.single_layer.theory.discrete_stationary_covariance`): exact for SGD, since
    C(w) is quadratic in w and the stationary mean is w*. None beyond the stability limit."""
    try:
        M = theory.discrete_stationary_covariance(X, y, lr, batch_size, sampling).M
    except ValueError:  # no stationary second moment (lr at or beyond the limit)
        return None
    return theory.averaged_noise_covariance(X, y, batch_size, sampling, M)


def _trace_with_se(second: FloatArray) -> tuple[float, float]:
    mean, se = stats.jackknife_of_mean(lambda m: np.trace(m, axis1=-2, axis2=-1), second)
    return float(mean), float(se)


_MEASURED = f"{P000} Eqs. 10, 12, 14 at SGD states"
_EQ15 = f"{P000} Eqs. 14-15 (corrected) averaged over M of Eq. 30"
_EXACT = f"{P000} Eqs. 14-15 averaged over the exact discrete-time M (beyond Eq. 30)"
#: (long name, source) of the spectra on ``mode``, eigenvalues sorted descending
_SPECTRA = {
    "eig_C_sgd": ("eigenvalues of the mini-batch noise covariance at SGD states", _MEASURED),
    "eig_C_sgd_se": ("jackknife standard error of eig_C_sgd", _MEASURED),
    "eig_C_theory": (
        "eigenvalues of the noise covariance C at w*",
        f"{P000} Eq. 17 (App. C prefactor)",
    ),
    "eig_C_averaged": ("eigenvalues of C(w) averaged over the stationary weights", _EQ15),
    "eig_C_averaged_exact": ("eigenvalues of C(w) averaged over the exact SGD M", _EXACT),
}
#: (long name, source) of their traces
_TRACES = {
    "trace_C_sgd": ("trace of the noise covariance at SGD states", _MEASURED),
    "trace_C_sgd_se": ("jackknife standard error of trace_C_sgd", _MEASURED),
    "trace_C_theory": ("trace of C at w*", f"{P000} Eq. 17"),
    "trace_C_averaged": ("trace of C(w) averaged over the stationary weights", _EQ15),
    "trace_C_averaged_exact": ("trace of C(w) averaged over the exact SGD M", _EXACT),
}


def _theory_spectra(
    X: FloatArray, y: FloatArray, lr: float, batch_size: int, sampling: str
) -> dict[str, FloatArray | float]:
    """Eigenvalues and traces of Eq. 17 at w*, of Eq. 15 averaged over the Lyapunov M of
    Eq. 30 and, below the stability limit, of Eq. 15 averaged over SGD's exact discrete M
    (keys of ``_SPECTRA`` and ``_TRACES``); for ``P > N``."""
    C17 = theory.noise_covariance(X, y, batch_size, sampling)
    M = theory.stationary_covariance(theory.hessian(X), C17, lr)
    C15 = theory.averaged_noise_covariance(X, y, batch_size, sampling, M)
    out: dict[str, FloatArray | float] = {
        "eig_C_theory": theory.sorted_eigenvalues(C17),
        "eig_C_averaged": theory.sorted_eigenvalues(C15),
        "trace_C_theory": float(np.trace(C17)),
        "trace_C_averaged": float(np.trace(C15)),
    }
    C_exact = _averaged_over_exact_m(X, y, lr, batch_size, sampling)
    if C_exact is not None:
        out["eig_C_averaged_exact"] = theory.sorted_eigenvalues(C_exact)
        out["trace_C_averaged_exact"] = float(np.trace(C_exact))
    return out


def _measured_spectra(second: FloatArray) -> dict[str, FloatArray | float]:
    """Eigenvalues and trace of the noise covariance at SGD states (Eqs. 10, 12, 14) with
    their jackknife standard errors over the (replica, block) groups of ``second``."""
    eig, eig_se = stats.eigenvalues_with_se(second)
    trace, trace_se = _trace_with_se(second)
    return {
        "eig_C_sgd": eig,
        "eig_C_sgd_se": eig_se,
        "trace_C_sgd": trace,
        "trace_C_sgd_se": trace_se,
    }


def _noise_spectra(
    X: FloatArray, y: FloatArray, lr: float, batch_size: int, sampling: str, result: StateNoise
) -> dict[str, FloatArray | float]:
    """Every spectrum and trace of ``_SPECTRA`` and ``_TRACES`` (Eqs. 14-15, 17, 30), NaN where
    undefined: all for ``P <= N`` (Eq. 16), the measured ones for a diverged run, the exact-M
    ones beyond the stability limit."""
    P, N = X.shape
    out: dict[str, FloatArray | float] = dict.fromkeys(_SPECTRA, np.full(N, np.nan))
    out |= dict.fromkeys(_TRACES, np.nan)
    if P > N:
        out |= _theory_spectra(X, y, lr, batch_size, sampling)
        if not result.diverged:
            out |= _measured_spectra(result.second)
    return out


def _cell_scalars(
    P: int, N: int, batch_size: int, sampling: str, sigma_eps2: float, result: StateNoise
) -> dict[str, tuple[float, str, str]]:
    """(value, long name, source) of the normalisation ``C_norm`` (Fig. 2), the noise
    prefactor (App. C) and the SGD schedule of ``result``."""
    return {
        "C_norm": (
            sigma_eps2 / (N * batch_size),
            "noise-spectrum normalisation sigma_x^2 sigma_eps^2 / S",
            f"{P000} Fig. 2",
        ),
        "noise_prefactor": (
            theory.noise_prefactor(P, batch_size, sampling),
            "mini-batch noise prefactor, 1/S or (P-S)/(S(P-1))",
            f"{P000} App. C",
        ),
        "states_per_group": (
            result.states,
            "SGD states per (replica, time block) group",
            _MEASURED,
        ),
        "burnin_steps": (result.burnin_steps, "SGD burn-in steps per chain", _MEASURED),
        "thin": (result.thin, "SGD steps between measured states", _MEASURED),
    }


def _cell_flags(P: int, N: int, diverged: bool) -> dict[str, tuple]:
    """The int8 flag variables ``diverged`` and ``interpolating`` (P <= N, Eq. 16)."""
    flag = {"flag_values": np.array([0, 1], dtype=np.int8), "flag_meanings": "no yes"}
    return {
        "diverged": (
            (),
            np.int8(diverged),
            attrs("an SGD chain left the stability bound", "1", _MEASURED) | flag,
        ),
        "interpolating": (
            (),
            np.int8(P <= N),
            attrs("P <= N: no noise at w* (Eq. 16)", "1", f"{P000} Eq. 16") | flag,
        ),
    }


def state_noise_dataset(
    X: ArrayLike,
    y: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str,
    sigma_eps2: float,
    result: StateNoise,
) -> xr.Dataset:
    """Fig. 2a-from-SGD cell: noise spectra at SGD states against Eq. 17 and Eq. 15 averaged.

    Variables on ``mode`` (eigenvalues sorted descending): ``eig_C_sgd`` (+ ``_se``, jackknife
    over (replica, block) groups), ``eig_C_theory`` (Eq. 17 at w*), ``eig_C_averaged`` (Eq. 15
    averaged over the Lyapunov M of Eq. 30), ``eig_C_averaged_exact`` (over SGD's exact discrete
    M, beyond Eq. 30); scalars: their traces (``trace_C_sgd_se``),
    ``C_norm = sigma_x^2 sigma_eps^2 / S`` (stored, not applied), ``noise_prefactor`` (App. C),
    the schedule and the flags ``diverged``, ``interpolating`` (P <= N: no noise, NaN).
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    P, N = X.shape
    values = _noise_spectra(X, y, lr, batch_size, sampling, result)
    data = {
        k: (("mode",), np.asarray(values[k], dtype=float), attrs(n, "1", s))
        for k, (n, s) in _SPECTRA.items()
    }
    data |= {k: ((), values[k], attrs(n, "1", s)) for k, (n, s) in _TRACES.items()}
    scalars = _cell_scalars(P, N, batch_size, sampling, sigma_eps2, result)
    data |= {k: ((), v, attrs(n, "1", s)) for k, (v, n, s) in scalars.items()}
    data |= _cell_flags(P, N, result.diverged)
    mode = ("mode", np.arange(N), attrs("eigenvalue index, descending", "1", f"{P000} Fig. 2"))
    return xr.Dataset(data, coords={"mode": mode})
