"""Finite-volume solver of the transport equation dp/dt = div(p grad u) (Eqs. 9-10) in 2-D.

For a two-dimensional weight space (the ``ShiftedTanhUnit``, ``w = (w0, h)``) the density ``p`` is
held as cell averages on a uniform ``n x n`` grid over a box. At every stage:

- the mean-field prediction (Eq. 6) is the midpoint rule ``f_hat(x) = sum_cells p_cell |cell|
  phi(w_cell, x)``, second-order accurate for cell averages;
- ``rho_m = mu_m (f_hat(x_m) - f(x_m))`` and the velocity ``-grad u`` (Eq. 9) is evaluated exactly
  at the midpoint of every cell face (second order for the face-averaged flux). Since ``u`` is
  linear in ``rho``, ``grad_w phi`` is tabulated once at the faces and ``grad u = table @ rho`` --
  the same numbers as ``unit.u_derivatives`` at the faces, at the cost of a matrix-vector product;
- the flux ``p v`` through each face is upwinded from a piecewise-constant (first order) or MUSCL
  (limited piecewise-linear, second order) reconstruction; the boundary faces carry no flux, so the
  total probability is conserved to round-off (the telescoping sum of Eq. 10's divergence form).

Time stepping is SSP-RK3 (Shu-Osher): a convex combination of forward-Euler stages, each of which
keeps ``p >= 0`` under the CFL bound ``dt (max|v_w0|/h_w0 + max|v_h|/h_h) <= cfl`` with ``cfl <=
1/2`` (upwind) or ``<= 1/4`` (MUSCL, whose face values are at most twice the cell average). A step
whose result is negative anywhere (the velocity changed within the step) is retried with half dt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.interpolate import RegularGridInterpolator
from scipy.special import ndtr

from weightdyn.mean_field.model import Measure, Unit

SCHEMES = ("upwind", "muscl")
LIMITERS = ("minmod", "mc")
CFL_BOUND = {"upwind": 0.5, "muscl": 0.25}


@dataclass(frozen=True)
class Grid:
    """A uniform ``n x n`` grid of cells over ``[lo[0], hi[0]] x [lo[1], hi[1]]`` (axes w0, h)."""

    lo: tuple[float, float]
    hi: tuple[float, float]
    n: int

    def edges(self, axis: int) -> np.ndarray:
        """The n + 1 cell edges along ``axis``."""
        return np.linspace(self.lo[axis], self.hi[axis], self.n + 1)

    def centers(self, axis: int) -> np.ndarray:
        """The n cell centres along ``axis``."""
        e = self.edges(axis)
        return 0.5 * (e[1:] + e[:-1])

    @property
    def spacing(self) -> np.ndarray:
        """Cell widths ``(h_w0, h_h)``."""
        return (np.asarray(self.hi, float) - np.asarray(self.lo, float)) / self.n

    @property
    def area(self) -> float:
        """Cell area |cell|."""
        return float(np.prod(self.spacing))

    def points(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The tensor grid of points ``(a_i, b_j)``, shape ``(len(a), len(b), 2)``."""
        return np.stack(np.meshgrid(a, b, indexing="ij"), axis=-1)


def gaussian_cell_averages(grid: Grid, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """Exact cell averages of N(mean, diag(std^2)), renormalised to unit mass on the box."""
    factors = []
    for axis in range(2):
        cdf = ndtr((grid.edges(axis) - mean[axis]) / std[axis])
        factors.append(np.diff(cdf))
    mass = np.outer(factors[0], factors[1])
    return mass / mass.sum() / grid.area


def cell_masses(grid: Grid, p: np.ndarray) -> np.ndarray:
    """Probability of every cell, ``p_cell |cell|``."""
    return p * grid.area


def binned_masses(grid: Grid, p: np.ndarray, bins: int) -> np.ndarray:
    """Cell masses summed over ``bins x bins`` coarse bins (``bins`` must divide ``n``)."""
    if grid.n % bins:
        raise ValueError(f"bins: {bins} must divide the grid size n = {grid.n}")
    k = grid.n // bins
    return cell_masses(grid, p).reshape(bins, k, bins, k).sum(axis=(1, 3))


def point_density(grid: Grid, p: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The density at points ``w`` (shape ``(..., 2)``) by bilinear interpolation of cell averages.

    Second-order accurate (cell average = centre value + O(h^2)); zero outside the cell centres.
    """
    interp = RegularGridInterpolator(
        (grid.centers(0), grid.centers(1)), p, bounds_error=False, fill_value=0.0
    )
    return interp(w.reshape(-1, 2)).reshape(w.shape[:-1])


def _minmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(a * b > 0, np.sign(a) * np.minimum(np.abs(a), np.abs(b)), 0.0)


def _mc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = np.minimum(np.minimum(2 * np.abs(a), 2 * np.abs(b)), 0.5 * np.abs(a + b))
    return np.where(a * b > 0, np.sign(a) * m, 0.0)


SLOPE_LIMITERS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "minmod": _minmod,
    "mc": _mc,
}


def face_states(p: np.ndarray, axis: int, limiter: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Left and right states at the n - 1 interior faces along ``axis``.

    ``limiter=None`` is the piecewise-constant (first-order upwind) reconstruction; otherwise the
    limited MUSCL slopes, zero in the two boundary cells.
    """
    p = np.moveaxis(p, axis, 0)
    if limiter is None:
        left, right = p[:-1], p[1:]
    else:
        d = np.diff(p, axis=0)
        zero = np.zeros_like(p[:1])
        d = np.concatenate([zero, d, zero])
        slope = SLOPE_LIMITERS[limiter](d[:-1], d[1:])
        left, right = (p + 0.5 * slope)[:-1], (p - 0.5 * slope)[1:]
    return np.moveaxis(left, 0, axis), np.moveaxis(right, 0, axis)


@dataclass
class TransportProblem:
    """Eqs. (9)-(10) on a grid: tabulated features at cell centres and face gradients.

    ``phi_centers`` is ``phi(w_cell, x_m)`` (shape ``(n*n, M)``); ``grad_faces[a]`` is the ``a``-th
    component of ``grad_w phi`` at the midpoints of the interior faces normal to axis ``a``
    (shapes ``(n-1, n, M)`` and ``(n, n-1, M)``).
    """

    unit: Unit
    grid: Grid
    measure: Measure
    f_values: np.ndarray
    phi_centers: np.ndarray = field(init=False, repr=False)
    grad_faces: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        g, x = self.grid, self.measure.x
        c0, c1, e0, e1 = g.centers(0), g.centers(1), g.edges(0)[1:-1], g.edges(1)[1:-1]
        self.phi_centers = self.unit.values(g.points(c0, c1), x).reshape(g.n * g.n, -1)
        self.grad_faces = (
            self.unit.gradient(g.points(e0, c1), x)[..., 0],
            self.unit.gradient(g.points(c0, e1), x)[..., 1],
        )

    def residual(self, p: np.ndarray) -> np.ndarray:
        """f_hat(x_m) - f(x_m) with the midpoint-rule prediction of Eq. (6), shape ``(M,)``."""
        return self.grid.area * (p.ravel() @ self.phi_centers) - self.f_values

    def loss(self, p: np.ndarray) -> float:
        """L_mf (Eq. 11) of the grid density."""
        r = self.residual(p)
        return 0.5 * float((self.measure.weights * r * r).sum())

    def face_velocities(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The normal components of ``-grad u`` (Eq. 9) at the interior faces of both axes."""
        rho = self.measure.weights * self.residual(p)
        return -(self.grad_faces[0] @ rho), -(self.grad_faces[1] @ rho)

    def rate(
        self, p: np.ndarray, limiter: str | None, velocities: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """dp/dt = div(p grad u) (Eq. 10) in conservative flux form, zero flux on the boundary."""
        out = np.zeros_like(p)
        for axis, (v, h) in enumerate(zip(velocities, self.grid.spacing, strict=True)):
            left, right = face_states(p, axis, limiter)
            flux = np.maximum(v, 0.0) * left + np.minimum(v, 0.0) * right
            pad = [(0, 0), (0, 0)]
            pad[axis] = (1, 1)
            out -= np.diff(np.pad(flux, pad), axis=axis) / h
        return out

    def courant(self, velocities: tuple[np.ndarray, np.ndarray]) -> float:
        """``max|v_w0|/h_w0 + max|v_h|/h_h``: the CFL number of a unit time step."""
        return sum(
            float(np.abs(v).max(initial=0.0)) / h
            for v, h in zip(velocities, self.grid.spacing, strict=True)
        )


def ssp_rk3_step(
    problem: TransportProblem, p: np.ndarray, dt: float, limiter: str | None, velocities=None
) -> np.ndarray:
    """One SSP-RK3 (Shu-Osher) step of Eq. (10); ``velocities`` of ``p`` may be passed in."""
    v0 = problem.face_velocities(p) if velocities is None else velocities
    p1 = p + dt * problem.rate(p, limiter, v0)
    p2 = 0.75 * p + 0.25 * (p1 + dt * problem.rate(p1, limiter, problem.face_velocities(p1)))
    return p / 3.0 + 2.0 / 3.0 * (p2 + dt * problem.rate(p2, limiter, problem.face_velocities(p2)))


@dataclass
class GridTrajectory:
    """Loss (Eq. 11), total mass and minimum density at the output times; the densities there."""

    t: np.ndarray
    loss: np.ndarray
    mass: np.ndarray
    min_density: np.ndarray
    densities: list[np.ndarray]
    steps: int


def solve(
    problem: TransportProblem,
    p0: np.ndarray,
    t_out: Sequence[float],
    scheme: str = "muscl",
    limiter: str = "mc",
    cfl: float | None = None,
    progress: Callable[[float, int], None] | None = None,
) -> GridTrajectory:
    """Integrate Eq. (10) from ``p0`` at t = 0 to every (increasing) time in ``t_out``.

    The step is ``dt = cfl / courant`` at the start of each step (``cfl`` defaults to 0.8 of the
    positivity bound of the scheme), shortened to land on the output times.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: {scheme!r} is not one of {list(SCHEMES)}")
    if limiter not in LIMITERS:
        raise ValueError(f"limiter: {limiter!r} is not one of {list(LIMITERS)}")
    bound = CFL_BOUND[scheme]
    cfl = 0.8 * bound if cfl is None else float(cfl)
    if not 0.0 < cfl <= bound:
        raise ValueError(f"cfl: {cfl} must lie in (0, {bound}] for scheme {scheme!r}")
    lim = None if scheme == "upwind" else limiter
    t_out = np.asarray(t_out, dtype=float)
    if t_out[0] < 0 or np.any(np.diff(t_out) <= 0):
        raise ValueError("t_out must be increasing and non-negative")
    p, t, steps = np.array(p0, dtype=float), 0.0, 0
    out = GridTrajectory(
        t_out, np.empty(t_out.size), np.empty(t_out.size), np.empty(t_out.size), [], 0
    )
    for k, target in enumerate(t_out):
        while t < target * (1 - 1e-14):
            v = problem.face_velocities(p)
            dt = min(cfl / max(problem.courant(v), 1e-300), target - t)
            new = ssp_rk3_step(problem, p, dt, lim, v)
            while new.min() < 0.0:
                dt /= 2
                new = ssp_rk3_step(problem, p, dt, lim, v)
            p, t, steps = new, t + dt, steps + 1
        t = target
        out.loss[k] = problem.loss(p)
        out.mass[k] = cell_masses(problem.grid, p).sum()
        out.min_density[k] = p.min()
        out.densities.append(p.copy())
        if progress is not None:
            progress(t, steps)
    out.steps = steps
    return out
