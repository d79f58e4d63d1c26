"""Particle gradient descent of Eq. (3) with alpha = N, and its infinite-width reference (Eq. 6).

A state is a set of particles ``W`` (shape ``(..., N, d)``) with weights ``q`` (shape ``(..., N)``,
summing to 1): ``q = 1/N`` is a network of width N; weighted quadrature nodes of the initial density
are the infinite-width limit. Every particle moves with ``dw/dt = -grad u(w, t)`` (Eqs. 9-10), which
is ``-N grad_{w_n} L`` for ``q = 1/N``: one explicit Euler step of size ``dt`` is therefore plain
gradient descent on L (Eq. 2) with the discrete learning rate ``N dt``.

Weightless *probe* particles ride the same velocity field and carry ``log p`` along characteristics,
``d log p / dt = Laplacian u`` (the characteristics solution below Eq. 10), giving the exact
density of the infinite-width limit at their positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from weightdyn.mean_field import tanh_kernels
from weightdyn.mean_field.model import Measure, TanhUnit, Unit


def uniform_weights(W: np.ndarray) -> np.ndarray:
    """Weights 1/N of a width-N network, shape ``W.shape[:-1]``."""
    n = W.shape[-2]
    return np.full(W.shape[:-1], 1.0 / n)


def prediction(unit: Unit, W: np.ndarray, q: np.ndarray, x: np.ndarray) -> np.ndarray:
    """f(W, x_m) = sum_n q_n phi(w_n, x_m) (Eq. 1; Eq. 6 for quadrature weights), shape (..., M)."""
    return np.einsum("...n,...nm->...m", q, unit.values(W, x))


def residual(
    unit: Unit, W: np.ndarray, q: np.ndarray, measure: Measure, f_values: np.ndarray
) -> np.ndarray:
    """f(W, x_m) - f(x_m), shape ``(..., M)``."""
    return prediction(unit, W, q, measure.x) - f_values


def loss(unit: Unit, W: np.ndarray, q: np.ndarray, measure: Measure, f_values: np.ndarray):
    """L = 1/2 int (f(W, x) - f(x))^2 dmu (Eq. 2; L_mf of Eq. 11 for quadrature weights)."""
    r = residual(unit, W, q, measure, f_values)
    return 0.5 * (measure.weights * r * r).sum(-1)


def velocity(
    unit: Unit,
    W: np.ndarray,
    rho: np.ndarray,
    x: np.ndarray,
    laplacian: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """-grad u(w) at each particle and (optionally) Laplacian u (Eqs. 9-10).

    ``rho = mu_m * residual_m`` with shape ``(..., M)`` (one residual per state in the batch).
    """
    grad, lap = unit.u_derivatives(W, x, rho[..., None, :], laplacian=laplacian)
    return -grad, lap


def residual_and_velocity(
    unit: Unit, W: np.ndarray, q: np.ndarray, measure: Measure, f_values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(f(W, x_m) - f(x_m), -grad u(w_n))``: the residual (Eq. 2) and the particle velocity
    (Eqs. 9-10) with ``rho = mu_m * residual_m``; compiled for the tanh unit
    (:mod:`weightdyn.mean_field.tanh_kernels`), numpy otherwise."""
    if isinstance(unit, TanhUnit):
        return tanh_kernels.residual_and_velocity(W, q, measure.x, measure.weights, f_values)
    r = residual(unit, W, q, measure, f_values)
    v, _ = velocity(unit, W, measure.weights * r, measure.x)
    return r, v


def dissipation(unit: Unit, W: np.ndarray, q: np.ndarray, measure: Measure, f_values: np.ndarray):
    """int p |grad u|^2 dw = sum_n q_n |grad u(w_n)|^2, i.e. -dL_mf/dt of Eq. (12)."""
    _, v = residual_and_velocity(unit, W, q, measure, f_values)
    return np.einsum("...n,...n->...", q, (v * v).sum(-1))


@dataclass
class State:
    """Particles ``W`` with weights ``q``; probes ``Z`` (shape ``(..., K, d)``) with ``logp``."""

    W: np.ndarray
    q: np.ndarray
    Z: np.ndarray | None = None
    logp: np.ndarray | None = None


def _rates(unit: Unit, s: State, measure: Measure, f_values: np.ndarray):
    r, vW = residual_and_velocity(unit, s.W, s.q, measure, f_values)
    if s.Z is None:
        return vW, None, None
    vZ, lap = velocity(unit, s.Z, measure.weights * r, measure.x, laplacian=True)
    return vW, vZ, lap


def _advance(s: State, dt: float, rates) -> State:
    vW, vZ, lap = rates
    if s.Z is None:
        return State(s.W + dt * vW, s.q)
    return State(s.W + dt * vW, s.q, s.Z + dt * vZ, s.logp + dt * lap)


def euler_step(unit: Unit, s: State, measure: Measure, f_values: np.ndarray, dt: float) -> State:
    """One explicit Euler step: gradient descent on L with learning rate ``N dt`` for q = 1/N."""
    return _advance(s, dt, _rates(unit, s, measure, f_values))


def rk4_step(unit: Unit, s: State, measure: Measure, f_values: np.ndarray, dt: float) -> State:
    """One classical Runge-Kutta step of the particle (and probe) dynamics."""
    k1 = _rates(unit, s, measure, f_values)
    k2 = _rates(unit, _advance(s, dt / 2, k1), measure, f_values)
    k3 = _rates(unit, _advance(s, dt / 2, k2), measure, f_values)
    k4 = _rates(unit, _advance(s, dt, k3), measure, f_values)
    combined = tuple(
        None if a is None else (a + 2 * b + 2 * c + d) / 6
        for a, b, c, d in zip(k1, k2, k3, k4, strict=True)
    )
    return _advance(s, dt, combined)


STEPPERS: dict[str, Callable[..., State]] = {"rk4": rk4_step, "euler": euler_step}


@dataclass
class Trajectory:
    """Loss and dissipation (Eq. 12) at the output times; states at the output times if kept."""

    t: np.ndarray
    loss: np.ndarray
    dissipation: np.ndarray
    states: list[State]


def integrate(
    unit: Unit,
    state: State,
    measure: Measure,
    f_values: np.ndarray,
    t_out: Sequence[float],
    dt: float,
    method: str = "rk4",
    keep_states: bool = False,
    progress: Callable[[float], None] | None = None,
) -> Trajectory:
    """Integrate to every time in ``t_out`` (multiples of ``dt``, starting at 0) with fixed steps.

    Loss and dissipation have shape ``(T, ...)``; with ``keep_states`` the states at ``t_out``.
    """
    if method not in STEPPERS:
        raise ValueError(f"method: {method!r} is not one of {sorted(STEPPERS)}")
    t_out = np.asarray(t_out, dtype=float)
    steps = np.rint(t_out / dt).astype(int)
    if np.any(np.abs(steps * dt - t_out) > 1e-9 * np.maximum(1.0, t_out)) or np.any(
        np.diff(steps) < 0
    ):
        raise ValueError(f"t_out must be increasing multiples of dt = {dt}")
    step = STEPPERS[method]
    losses, dissipations, states = [], [], []
    done = 0
    for target in steps:
        while done < target:
            state = step(unit, state, measure, f_values, dt)
            done += 1
        losses.append(loss(unit, state.W, state.q, measure, f_values))
        dissipations.append(dissipation(unit, state.W, state.q, measure, f_values))
        if keep_states:
            states.append(state)
        if progress is not None:
            progress(done * dt)
    return Trajectory(t_out, np.array(losses), np.array(dissipations), states)


def gaussian_log_density(w: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """log of the product Gaussian density N(mean, diag(std^2)) at ``w`` (shape ``(..., d)``)."""
    z = (w - mean) / std
    return -0.5 * (z * z).sum(-1) - np.log(std).sum() - 0.5 * len(std) * np.log(2 * np.pi)


def gaussian_grid_nodes(
    mean: Sequence[float], std: Sequence[float], points: int, width: float = 6.0
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted nodes of N(mean, diag(std^2)): a uniform tensor grid on mean +- width std.

    Weights are the trapezoid rule times the density, normalised to sum 1. For the smooth, rapidly
    decaying Gaussian this truncated trapezoid rule converges geometrically in ``points``, much
    faster than Gauss-Hermite for the tanh features here. Returns nodes ``(points**d, d)`` and
    weights ``(points**d,)``.
    """
    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    axes = [m + s * np.linspace(-width, width, points) for m, s in zip(mean, std, strict=True)]
    nodes = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, mean.size)
    trap = np.ones(points)
    trap[[0, -1]] = 0.5
    w1 = np.prod(np.stack(np.meshgrid(*([trap] * mean.size), indexing="ij")), axis=0).ravel()
    weights = w1 * np.exp(gaussian_log_density(nodes, mean, std))
    return nodes, weights / weights.sum()


def sample_gaussian(
    rng: np.random.Generator, shape: tuple[int, ...], mean: Sequence[float], std: Sequence[float]
) -> np.ndarray:
    """I.i.d. draws from N(mean, diag(std^2)), shape ``(*shape, d)`` (initialisation of Eq. 3)."""
    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    return mean + std * rng.standard_normal((*shape, mean.size))
