"""Stationary-SGD protocol of one single-layer cell: initialisation, burn-in, sampling length.

Burn-in is a multiple of the slowest relaxation time tau = 1/(lr omega_min) (paper 000 Eq. 27, in
SGD steps), bounded below and capped; the sampling length is at least ``sample_steps`` and at least
``sample_tau`` relaxation times, capped by ``sample_max_steps``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from weightdyn.data import TeacherStudentData
from weightdyn.single_layer import theory
from weightdyn.single_layer.simulate import SGDResult, run_sgd

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
    thin: int = 10
    n_blocks: int = 4

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"init: {self.init!r} is not allowed; allowed: {INITS}")
        if self.replicas < 2:
            raise ValueError(f"replicas: {self.replicas}; at least 2 are needed for errors")

    def burnin(self, tau: float) -> int:
        """Burn-in steps: burnin_tau * tau, within [burnin_min_steps, burnin_max_steps]."""
        steps = self.burnin_tau * tau if np.isfinite(tau) else self.burnin_min_steps
        return int(min(max(np.ceil(steps), self.burnin_min_steps), self.burnin_max_steps))

    def sampling_length(self, tau: float) -> int:
        """Sampling steps, a whole number of thinned records in each of the n_blocks blocks."""
        steps = max(self.sample_steps, self.sample_tau * tau if np.isfinite(tau) else 0.0)
        steps = min(steps, self.sample_max_steps)
        unit = self.thin * self.n_blocks
        return int(max(1, round(steps / unit)) * unit)


def initial_weights(
    w_star: np.ndarray, protocol: SGDProtocol, rng: np.random.Generator
) -> np.ndarray:
    """Start of every replica: w* itself, or i.i.d. N(0, init_scale^2) weights."""
    R, N = protocol.replicas, w_star.size
    if protocol.init == "wstar":
        return np.tile(w_star, (R, 1))
    return rng.normal(0.0, protocol.init_scale, size=(R, N))


def run_stationary_sgd(
    data: TeacherStudentData,
    lr: float,
    batch_size: int,
    sampling: str,
    protocol: SGDProtocol,
    rng: np.random.Generator,
    progress: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, SGDResult]:
    """Run the cell's SGD replicas to stationarity and sample them; return (w*, result).

    In over-parameterised cells (N >= P) every per-sample gradient vanishes at the minimum-norm
    solution w* (Eq. 16), so the chains start at w* and a short run (10 records per block) checks
    that they stay there.
    """
    H = theory.hessian(data.X)
    w_star = theory.min_norm_solution(data.X, data.y)
    tau = theory.slowest_relaxation_steps(H, lr)
    if data.N >= data.P:
        protocol = SGDProtocol(
            replicas=protocol.replicas,
            burnin_min_steps=0,
            burnin_max_steps=0,
            sample_steps=10 * protocol.thin * protocol.n_blocks,
            thin=protocol.thin,
            n_blocks=protocol.n_blocks,
        )
    w_init = initial_weights(w_star, protocol, rng)
    result = run_sgd(
        data.X,
        data.y,
        w_star,
        lr,
        batch_size,
        sampling,
        w_init,
        burnin_steps=protocol.burnin(tau),
        sample_steps=protocol.sampling_length(tau),
        thin=protocol.thin,
        n_blocks=protocol.n_blocks,
        rng=rng,
        progress=progress,
    )
    return w_star, result
