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

__all__ = ["StateNoise", "noise_at_states", "state_noise", "state_noise_dataset"]

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


def _schedule(
    tau: float,
    n_states: int,
    replicas: int,
    n_blocks: int,
    burnin_tau: float,
    sample_tau: float,
) -> tuple[int, int, int]:
    """(burn-in steps, records per block, thin): at least ``n_states`` states over all chains,
    each chain's sampling window at least ``sample_tau`` relaxation times ``tau``."""
    per_block = ceil(n_states / (replicas * n_blocks))
    window = sample_tau * tau / n_blocks if np.isfinite(tau) else 0.0
    thin = max(1, ceil(window / per_block))
    burnin = ceil(burnin_tau * tau) if np.isfinite(tau) else 0
    return burnin, per_block, thin


def state_noise(
    X: ArrayLike,
    y: ArrayLike,
    lr: float,
    batch_size: int,
    sampling: str,
    n_states: int,
    rng: np.random.Generator,
    replicas: int = 8,
    n_blocks: int = 4,
    burnin_tau: float = 2.0,
    sample_tau: float = 4.0,
    progress: Callable[[str], None] | None = None,
) -> StateNoise:
    """Noise second moments at the states of ``replicas`` stationary SGD chains from ``w*``.

    Each chain burns in for ``burnin_tau`` slowest relaxation times ``1/(lr omega_0)``
    (Eq. 27), then samples ``n_blocks`` time blocks covering at least ``sample_tau`` of them,
    recording every ``thin``-th state so that at least ``n_states`` states are used in all.
    The SGD batches come from the counter stream keyed by ``rng`` (as
    :func:`~weightdyn.single_layer.simulate.run_sgd`), the measuring batches from ``rng``.
    """
    with_replacement = _check_sampling(sampling)
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    P, N = X.shape
    S, R = int(batch_size), int(replicas)
    w_star = theory.min_norm_solution(X, y)
    tau = theory.slowest_relaxation_steps(theory.hessian(X), lr)
    burnin, per_block, thin = _schedule(tau, n_states, R, n_blocks, burnin_tau, sample_tau)
    W = np.tile(w_star, (R, 1))
    perm = np.tile(np.arange(P, dtype=np.int64), (R, 1))
    keys = replica_keys(rng, R)
    bound = float(1e6 * (np.max(np.abs(w_star), initial=0.0) + 1.0))
    no_sums = np.empty((0, N)), np.empty((0, N, N))
    second = np.zeros((R, n_blocks, N, N))
    done, diverged = 0, False

    def advance(n_rec: int, every: int) -> np.ndarray:
        nonlocal done, diverged
        rec = np.empty((n_rec, R, N))
        steps = max(n_rec, 1) * every
        flags = sgd_kernel(
            X,
            y,
            W,
            lr,
            S,
            with_replacement,
            perm,
            keys,
            done,
            steps,
            every,
            w_star,
            *no_sums,
            rec,
            bound,
        )
        done += steps
        diverged |= bool(flags.any())
        return rec

    chunk = max(1, _CHUNK_ENTRIES // (R * S * N))
    with one_blas_thread():
        while not diverged and done < burnin:
            advance(0, min(burnin - done, 2**20))
        for b in range(n_blocks):
            left = per_block
            while not diverged and left:
                m = min(left, chunk)
                states = advance(m, thin)
                if diverged:
                    break
                xi = noise_at_states(X, y, states.reshape(-1, N), S, sampling, rng)
                xi = xi.reshape(m, R, N)
                second[:, b] += np.einsum("mri,mrj->rij", xi, xi)
                left -= m
            if progress is not None:
                progress(f"SGD-state noise: block {b + 1}/{n_blocks}, {done} steps per chain")
    second = second.reshape(R * n_blocks, N, N) / per_block
    if diverged:
        second[:] = np.nan
    return StateNoise(second, per_block, burnin, thin, per_block * thin, diverged)


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
    nan = np.full(N, np.nan)
    eig_sgd = eig_se = eig17 = eig15 = eig_exact = nan
    tr_sgd = tr_se = tr17 = tr15 = tr_exact = np.nan
    if P > N:
        C17 = theory.noise_covariance(X, y, batch_size, sampling)
        M = theory.stationary_covariance(theory.hessian(X), C17, lr)
        C15 = theory.averaged_noise_covariance(X, y, batch_size, sampling, M)
        eig17, eig15 = theory.sorted_eigenvalues(C17), theory.sorted_eigenvalues(C15)
        tr17, tr15 = float(np.trace(C17)), float(np.trace(C15))
        C_exact = _averaged_over_exact_m(X, y, lr, batch_size, sampling)
        if C_exact is not None:
            eig_exact, tr_exact = theory.sorted_eigenvalues(C_exact), float(np.trace(C_exact))
        if not result.diverged:
            eig_sgd, eig_se = stats.eigenvalues_with_se(result.second)
            tr_sgd, tr_se = _trace_with_se(result.second)
    measured = f"{P000} Eqs. 10, 12, 14 at SGD states"
    eq15 = f"{P000} Eqs. 14-15 (corrected) averaged over M of Eq. 30"
    exact = f"{P000} Eqs. 14-15 averaged over the exact discrete-time M (beyond Eq. 30)"
    flag = {"flag_values": np.array([0, 1], dtype=np.int8), "flag_meanings": "no yes"}
    spectra = {
        "eig_C_sgd": (
            eig_sgd,
            "eigenvalues of the mini-batch noise covariance at SGD states",
            measured,
        ),
        "eig_C_sgd_se": (eig_se, "jackknife standard error of eig_C_sgd", measured),
        "eig_C_theory": (
            eig17,
            "eigenvalues of the noise covariance C at w*",
            f"{P000} Eq. 17 (App. C prefactor)",
        ),
        "eig_C_averaged": (eig15, "eigenvalues of C(w) averaged over the stationary weights", eq15),
        "eig_C_averaged_exact": (
            eig_exact,
            "eigenvalues of C(w) averaged over the exact SGD M",
            exact,
        ),
    }
    scalars = {
        "trace_C_sgd": (tr_sgd, "trace of the noise covariance at SGD states", measured),
        "trace_C_sgd_se": (tr_se, "jackknife standard error of trace_C_sgd", measured),
        "trace_C_theory": (tr17, "trace of C at w*", f"{P000} Eq. 17"),
        "trace_C_averaged": (tr15, "trace of C(w) averaged over the stationary weights", eq15),
        "trace_C_averaged_exact": (tr_exact, "trace of C(w) averaged over the exact SGD M", exact),
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
        "states_per_group": (result.states, "SGD states per (replica, time block) group", measured),
        "burnin_steps": (result.burnin_steps, "SGD burn-in steps per chain", measured),
        "thin": (result.thin, "SGD steps between measured states", measured),
    }
    data = {
        k: (("mode",), np.asarray(v, dtype=float), attrs(n, "1", s))
        for k, (v, n, s) in spectra.items()
    }
    data |= {k: ((), v, attrs(n, "1", s)) for k, (v, n, s) in scalars.items()}
    data["diverged"] = (
        (),
        np.int8(result.diverged),
        attrs("an SGD chain left the stability bound", "1", measured) | flag,
    )
    data["interpolating"] = (
        (),
        np.int8(P <= N),
        attrs("P <= N: no noise at w* (Eq. 16)", "1", f"{P000} Eq. 16") | flag,
    )
    mode = ("mode", np.arange(N), attrs("eigenvalue index, descending", "1", f"{P000} Fig. 2"))
    return xr.Dataset(data, coords={"mode": mode})
