"""Experiment E4: the Gaussian ansatz of paper 002 (Eqs. 27-30) against the particle dynamics.

A narrow Gaussian cloud ``N(b, A)`` (Eq. 27) with ``A(0) = s^2 C`` is represented by the weighted
nodes of a tensor Gauss-Hermite rule (no sampling noise: the rule reproduces the mean and covariance
of the initial Gaussian to round-off), and every node follows the particle dynamics
``dw/dt = -grad u`` (Eqs. 9-10, RK4). The ansatz predicts

- ``db/dt = -int (phi(b, x) - f(x)) grad_w phi(b, x) dmu`` (Eq. 28, gradient descent of one unit),
- ``dA/dt = A H + H A`` with ``H = -int (phi(b, x) - f(x)) D_w phi(b, x) dmu`` (Eq. 29).

Both are leading-order statements in the width ``s`` of the cloud. The cloud mean feels the
curvature of the velocity field and of ``phi`` (``E phi(w) = phi(b) + tr(A D_w phi) / 2 + ...``),
so ``|b_particles - b_ode| = O(s^2)``. The covariance equation is exact up to (i) the O(s^2) shift
of the point where ``H`` is evaluated and of the residual, and (ii) third and fourth moments of the
deformed cloud (zero / Gaussian at t = 0, generated at O(s^4) by the curvature of the velocity
field); both change ``dA/dt`` by O(s^2) * A = O(s^4). So the absolute error of ``A`` is O(s^4) and
its relative error O(s^2) -- the experiment fits all three slopes.

The stationary part takes a point-like stationary state ``b*`` (``db/dt = 0`` in Eq. 28) of the
linear-output ``TanhUnit`` (``phi = c tanh(a x + h)``, ``w = (w0, w~) = (c, (a, h))``):

- with ``b0 != 0``: ``H`` has the block form of Eq. 30 (``H_{w0 w0} = 0`` identically and
  ``H_{w0 w~} = (1 / b0) d b~/dt = 0``); the eigenvalues ``lambda_k`` of ``H`` set the growth of a
  cloud started at ``b*`` with ``A(0) = s^2 I``: its variance along the eigenvector ``e_k`` is
  ``s^2 exp(2 lambda_k t)`` (Eq. 29 in the eigenbasis);
- with ``b0 = 0`` (erratum: Eq. 30 needs ``b0 != 0``, the paper writes ``w0 != 0``):
  ``phi(b, .) = 0`` so ``d b~/dt = 0`` automatically and ``db0/dt = int f phi~(b~, x) dmu``, which
  vanishes at a ``b~`` where ``f`` is orthogonal to ``phi~(b~, .)``; there
  ``H_{w0 w~} = int f grad_{w~} phi~(b~, x) dmu != 0`` and the block form fails.

Registry entry ``mf_gaussian``: the axis is the cloud width ``s`` (``part: cloud``); the
stationary analysis (``part: stationary``, cloud width ``stationary_s``) is added by
:func:`extra_cells`. The initial cloud is ``N(init.mean, s^2 diag(init.std^2))``, and ``init.mean``
is also where the search for ``b*`` starts. No random numbers are used (all clouds are
deterministic quadrature nodes).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from scipy.integrate import solve_ivp
from scipy.optimize import brentq, root

from weightdyn import stats
from weightdyn.agreement import Agreement
from weightdyn.experiments import REQUIRED, ConfigError, Figure, LazyPlots, Param
from weightdyn.io import attrs
from weightdyn.mean_field import params as mfp
from weightdyn.mean_field.model import Measure, TanhUnit, Unit
from weightdyn.mean_field.particles import State, integrate

plots = LazyPlots("weightdyn.plots.mean_field_gaussian")

Params = Mapping[str, Any]
Log = Callable[[str], None]

UNIT = TanhUnit()
COMPONENTS = list(UNIT.names)
POINTS = ["b0_nonzero", "b0_zero"]
TIME = attrs("time", "1", "Eq. 3")
K = attrs("weight component (c, a, h)", "1", "Eq. 27")
L = attrs("weight component (c, a, h), second index", "1", "Eq. 27")

# ------------------------------------------------------------------------------------- theory


def hermite_nodes(
    mean: Sequence[float], cov: np.ndarray, points: int
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted nodes of ``N(mean, cov)``: a tensor Gauss-Hermite rule mapped by ``chol(cov)``.

    Exact for polynomials of degree ``2 points - 1`` in each coordinate, so the nodes carry the
    mean and covariance of Eq. (27) to round-off. Returns nodes ``(points**d, d)`` and weights
    summing to 1.
    """
    mean = np.asarray(mean, dtype=float)
    d = mean.size
    z, w = np.polynomial.hermite_e.hermegauss(points)
    grid = np.stack(np.meshgrid(*([z] * d), indexing="ij"), axis=-1).reshape(-1, d)
    weights = np.prod(np.stack(np.meshgrid(*([w] * d), indexing="ij")), axis=0).ravel()
    return mean + grid @ np.linalg.cholesky(cov).T, weights / weights.sum()


def cloud_moments(W: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean ``(d,)`` and covariance ``(d, d)`` of particles ``W`` with weights ``q``."""
    mean = q @ W
    dev = W - mean
    return mean, np.einsum("n,ni,nj->ij", q, dev, dev)


def _point_residual(unit: Unit, b: np.ndarray, measure: Measure, f_values: np.ndarray):
    return measure.weights * (unit.values(b, measure.x) - f_values)


def single_unit_velocity(
    unit: Unit, b: np.ndarray, measure: Measure, f_values: np.ndarray
) -> np.ndarray:
    """db/dt = -int (phi(b, x) - f(x)) grad_w phi(b, x) dmu (Eq. 28), shape ``(d,)``."""
    return -_point_residual(unit, b, measure, f_values) @ unit.gradient(b, measure.x)


def ansatz_hessian(unit: Unit, b: np.ndarray, measure: Measure, f_values: np.ndarray) -> np.ndarray:
    """H = -int (phi(b, x) - f(x)) D_w phi(b, x) dmu (after Eq. 29), shape ``(d, d)``."""
    rho = _point_residual(unit, b, measure, f_values)
    return -np.einsum("m,mij->ij", rho, unit.hessian(b, measure.x))


def _ansatz_rates(unit, b, A, measure, f_values):
    H = ansatz_hessian(unit, b, measure, f_values)
    return single_unit_velocity(unit, b, measure, f_values), A @ H + H @ A


def ansatz_trajectory(
    unit: Unit,
    b: np.ndarray,
    A: np.ndarray,
    measure: Measure,
    f_values: np.ndarray,
    steps: Sequence[int],
    dt: float,
) -> tuple[np.ndarray, np.ndarray]:
    """b(t) and A(t) of Eqs. (28)-(29) by RK4 with step ``dt``, at the step counts ``steps``.

    Returns arrays ``(T, d)`` and ``(T, d, d)``.
    """
    bs, As, done = [], [], 0
    for target in steps:
        while done < target:
            k1 = _ansatz_rates(unit, b, A, measure, f_values)
            k2 = _ansatz_rates(unit, b + dt / 2 * k1[0], A + dt / 2 * k1[1], measure, f_values)
            k3 = _ansatz_rates(unit, b + dt / 2 * k2[0], A + dt / 2 * k2[1], measure, f_values)
            k4 = _ansatz_rates(unit, b + dt * k3[0], A + dt * k3[1], measure, f_values)
            b = b + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
            A = A + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
            done += 1
        bs.append(b)
        As.append(A)
    return np.array(bs), np.array(As)


def stationary_point(
    unit: Unit, b_init: Sequence[float], measure: Measure, f_values: np.ndarray, t_relax: float
) -> np.ndarray:
    """A zero of Eq. (28) reached from ``b_init``: Eq. (28) run to ``t_relax``, then Newton.

    The Jacobian of the r.h.s. of Eq. (28) is ``H - G`` with ``G = int grad phi grad phi^T dmu``.
    """

    def velocity(_t, b):
        return single_unit_velocity(unit, b, measure, f_values)

    def jacobian(b):
        g = unit.gradient(b, measure.x)
        gram = np.einsum("m,mi,mj->ij", measure.weights, g, g)
        return ansatz_hessian(unit, b, measure, f_values) - gram

    relaxed = solve_ivp(
        velocity, (0.0, t_relax), np.asarray(b_init, float), method="LSODA", rtol=1e-10,
        atol=1e-12, jac=lambda _t, b: jacobian(b),
    )  # fmt: skip
    b = root(lambda b: velocity(0.0, b), relaxed.y[:, -1], jac=jacobian, tol=1e-14).x
    residual = np.abs(velocity(0.0, b)).max()
    if not residual < 1e-12:
        raise RuntimeError(f"stationary_point: |db/dt| = {residual:.2e} after Newton from b_init")
    return b


def counterexample_point(
    unit: Unit, a: float, measure: Measure, f_values: np.ndarray, h_max: float = 5.0
) -> np.ndarray:
    """``b = (0, a, h)`` with ``int f phi~((a, h), x) dmu = 0``: stationary for Eq. (28), b0 = 0.

    With ``b0 = 0`` the model vanishes, ``d b~/dt = 0`` identically and ``db0/dt`` is that
    integral; ``h`` is its root in ``[-h_max, h_max]`` (Brent).
    """

    def overlap(h):
        return measure.weights @ (f_values * unit.tilde(np.array([1.0, a, h]), measure.x))

    if overlap(-h_max) * overlap(h_max) > 0:
        raise ValueError(
            f"counter_a: int f tanh({a} x + h) dmu has no sign change for h in "
            f"[-{h_max}, {h_max}]; choose another counter_a or target"
        )
    h = brentq(overlap, -h_max, h_max, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    return np.array([0.0, a, h])


def fitted_rate(t: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of log(values) vs t (an exponential rate) and its standard error."""
    rate, se, *_ = stats.line_fit(t, np.log(values))
    return rate, se


# --------------------------------------------------------------------------------- experiment

PARTS = ("cloud", "stationary")


def _positive(name: str, long_name: str) -> Param:
    return Param(name, float, REQUIRED, long_name, minimum=0.0, exclusive_minimum=True)


PARAMS: tuple[Param, ...] = (
    mfp.part(PARTS, "clouds of width s followed in time, or the stationary states of Eq. 30"),
    Param(
        "s",
        float,
        None,
        "initial cloud width s, A(0) = s^2 C",
        axis=True,
        minimum=0.0,
        exclusive_minimum=True,
        maximum=0.3,
    ),
    mfp.dict_param("target", "target f {kind: sin | tanh_bumps, amplitude[, bumps]}"),
    mfp.dict_param("measure", "input measure mu {kind: gauss_legendre | grid, size: M}"),
    mfp.dict_param("init", "initial cloud centre b(0) = mean and C = diag(std^2), w = (c, a, h)"),
    _positive("t_end", "final time"),
    _positive("dt", "RK4 time step"),
    Param("outputs", int, REQUIRED, "output intervals (divide t_end / dt)", minimum=3),
    Param("hermite_points", int, REQUIRED, "Gauss-Hermite nodes per axis", minimum=3, maximum=12),
    _positive("stationary_s", "cloud width s at the stationary states"),
    Param(
        "stationary_growth",
        float,
        REQUIRED,
        "variance growth factor of the fastest mode at b*",
        minimum=1.0,
        exclusive_minimum=True,
    ),
    _positive("relax_t", "time Eq. 28 runs before Newton's method finds b*"),
    Param("counter_a", float, REQUIRED, "slope a of the b0 = 0 stationary state"),
)


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Check the settings; a ``cloud`` cell needs ``s``, the ``stationary`` cell drops it."""
    mfp.gaussian(params["init"], "init", UNIT.names)
    mfp.measure(params["measure"])
    mfp.target(params["target"])
    steps = float(params["t_end"]) / float(params["dt"])
    outputs = int(params["outputs"])
    if abs(steps - round(steps)) > 1e-9 * steps or round(steps) % outputs:
        raise ConfigError(
            f"outputs: {outputs!r} is not allowed; allowed: a divisor of t_end / dt = {steps:g}"
        )
    if params["part"] == "cloud":
        mfp.require(params, ("s",), "cloud")
    else:
        params["s"] = None
    return params


def extra_cells(settings: Params) -> list[dict[str, Any]]:
    """The stationary analysis of Eq. 30 (cloud width ``stationary_s``)."""
    return [{"part": "stationary", "s": None}]


def _problem(params: Params) -> tuple[Measure, np.ndarray]:
    measure = mfp.measure(params["measure"])
    return measure, mfp.target(params["target"])(measure.x)


def _cloud_cell(params: Params, log: Log) -> xr.Dataset:
    """A cloud N(b, s^2 C) followed by particles and by Eqs. 28-29 (one cloud width s)."""
    measure, f_values = _problem(params)
    s, dt = float(params["s"]), float(params["dt"])
    n_steps, outputs = round(float(params["t_end"]) / dt), int(params["outputs"])
    steps = np.arange(outputs + 1) * (n_steps // outputs)
    b0 = np.asarray(params["init"]["mean"], dtype=float)
    A0 = s**2 * np.diag(np.asarray(params["init"]["std"], dtype=float) ** 2)
    W, q = hermite_nodes(b0, A0, int(params["hermite_points"]))
    log(f"s = {s}: {q.size} Gauss-Hermite particles, {n_steps} RK4 steps of dt = {dt}")
    traj = integrate(UNIT, State(W, q), measure, f_values, steps * dt, dt, keep_states=True)
    moments = [cloud_moments(st.W, st.q) for st in traj.states]
    b_part = np.array([m for m, _ in moments])
    A_part = np.array([c for _, c in moments])
    b_ode, A_ode = ansatz_trajectory(UNIT, b0, A0, measure, f_values, steps, dt)
    err_b = np.linalg.norm(b_part - b_ode, axis=-1)
    err_A = np.linalg.norm(A_part - A_ode, axis=(-2, -1))
    log(f"s = {s}: max |b_p - b_ode| = {err_b.max():.3e}, max |A_p - A_ode|_F = {err_A.max():.3e}")
    vec, mat = ("t", "k"), ("t", "k", "l")
    return xr.Dataset(
        {
            "b_particles": (vec, b_part, attrs("cloud mean", "1", "simulation")),
            "b_ode": (vec, b_ode, attrs("centre b of the Gaussian ansatz", "1", "Eq. 28")),
            "A_particles": (mat, A_part, attrs("cloud covariance", "1", "simulation")),
            "A_ode": (mat, A_ode, attrs("covariance A of the Gaussian ansatz", "1", "Eq. 29")),
            "err_b": ("t", err_b, attrs("|b_particles - b_ode|", "1", "simulation vs Eq. 28")),
            "err_A_abs": (
                "t",
                err_A,
                attrs("|A_particles - A_ode|_F", "1", "simulation vs Eq. 29"),
            ),
            "err_A_rel": (
                "t",
                err_A / np.linalg.norm(A_ode, axis=(-2, -1)),
                attrs("|A_particles - A_ode|_F / |A_ode|_F", "1", "simulation vs Eq. 29"),
            ),
            "loss": ("t", traj.loss, attrs("mean-field loss L_mf", "1", "Eq. 11, simulation")),
        },
        coords={"t": ("t", steps * dt, TIME), "k": ("k", COMPONENTS, K), "l": ("l", COMPONENTS, L)},
    )


def _growth(measure, f_values, b, s, growth, dt, outputs, hermite_points, log):
    """Cloud N(b, s^2 I) at a stationary b: variance along H's eigenvectors vs exp(2 lambda t)."""
    H = ansatz_hessian(UNIT, b, measure, f_values)
    lam, vec = np.linalg.eigh(H)
    # run until the fastest direction has changed its variance by the factor ``growth``
    per_output = max(1, round(np.log(growth) / (2 * np.abs(lam).max()) / dt / outputs))
    steps = np.arange(outputs + 1) * per_output
    W, q = hermite_nodes(b, s**2 * np.eye(b.size), hermite_points)
    log(f"growth at b = {b}: lambda = {lam}, {steps[-1]} RK4 steps of dt = {dt}")
    traj = integrate(UNIT, State(W, q), measure, f_values, steps * dt, dt, keep_states=True)
    var = np.array([np.diag(vec.T @ cloud_moments(st.W, st.q)[1] @ vec) for st in traj.states])
    fits = [fitted_rate(steps * dt, var[:, k]) for k in range(b.size)]
    return H, lam, vec, steps * dt, var / s**2, np.array(fits)


def _stationary_analysis(params: Params, measure: Measure, f_values: np.ndarray, points, log):
    """Per stationary point: the Gram matrix, |db/dt|, H and its eigenpairs, the cloud growth."""
    out = {key: [] for key in ("H", "lam", "vec", "t", "var", "fit", "resid", "G")}
    for b in points:
        g = UNIT.gradient(b, measure.x)
        out["G"].append(np.einsum("m,mi,mj->ij", measure.weights, g, g))
        out["resid"].append(np.abs(single_unit_velocity(UNIT, b, measure, f_values)).max())
        H, lam, vec, t, var, fit = _growth(
            measure, f_values, b, float(params["stationary_s"]),
            float(params["stationary_growth"]), float(params["dt"]), int(params["outputs"]),
            int(params["hermite_points"]), log,
        )  # fmt: skip
        for key, value in zip(
            ("H", "lam", "vec", "t", "var", "fit"), (H, lam, vec, t, var, fit), strict=True
        ):
            out[key].append(value)
        log(f"b = {b}: growth rates {fit[:, 0]} vs 2 lambda = {2 * lam}")
    return out


def _stationary_cell(params: Params, log: Log) -> xr.Dataset:
    """Eq. 30 at two point-like stationary states (b0 != 0 and b0 = 0) and the cloud growth."""
    measure, f_values = _problem(params)
    s_stat = float(params["stationary_s"])
    points = [
        stationary_point(UNIT, params["init"]["mean"], measure, f_values, params["relax_t"]),
        counterexample_point(UNIT, float(params["counter_a"]), measure, f_values),
    ]
    out = _stationary_analysis(params, measure, f_values, points, log)
    H = np.array(out["H"])
    fit = np.array(out["fit"])
    gram_minus_H = np.linalg.eigvalsh(np.array(out["G"]) - H)
    pk, pkl = ("point", "k"), ("point", "k", "l")
    return xr.Dataset(
        {
            "b_star": (pk, np.array(points), attrs("stationary centre b*", "1", "Eq. 28 = 0")),
            "stationary_residual": (
                "point", np.array(out["resid"]), attrs("max_k |db_k/dt| at b*", "1", "Eq. 28")
            ),
            "H": (pkl, H, attrs("H at b*", "1", "Eq. 29")),
            "H_w0w0": ("point", H[:, 0, 0], attrs("H_{w0 w0}", "1", "Eq. 30")),
            "H_w0wt_norm": (
                "point",
                np.linalg.norm(H[:, 0, 1:], axis=-1),
                attrs("|H_{w0 w~}|", "1", "Eq. 30"),
            ),
            "lambda_H": (pk, np.array(out["lam"]), attrs("eigenvalues of H", "1", "Eq. 29")),
            "eigvec_H": (pkl, np.array(out["vec"]), attrs("eigenvectors of H (columns)", "1",
                                                          "Eq. 29")),
            "loss_hessian_eig": (
                pk, gram_minus_H, attrs("eigenvalues of the single-unit loss Hessian G - H", "1",
                                        "Eq. 28"),
            ),
            "t_growth": (("point", "step"), np.array(out["t"]), attrs("time", "1", "simulation")),
            "var_growth": (
                ("point", "step", "k"),
                np.array(out["var"]),
                attrs("cloud variance along e_k of H / s^2", "1", "simulation"),
            ),
            "rate_fit": (pk, fit[..., 0], attrs("fitted growth rate of variance along e_k",
                                                 "1", "simulation")),
            "rate_fit_se": (pk, fit[..., 1], attrs("standard error of rate_fit", "1",
                                                    "simulation")),
            "rate_theory": (pk, 2 * np.array(out["lam"]), attrs("2 lambda_k", "1", "Eq. 29")),
        },
        coords={
            "point": ("point", POINTS, attrs("stationary state", "1", "Eq. 30")),
            "k": ("k", COMPONENTS, K),
            "l": ("l", COMPONENTS, L),
            "s_stationary": ((), s_stat, attrs("cloud width s at b*, A(0) = s^2 I", "1", "Eq. 29")),
        },
    )  # fmt: skip


def run_cell(params: Params, progress: Log) -> xr.Dataset:
    """One cell: a cloud of width ``s`` (Eqs. 27-29) or the stationary analysis (Eq. 30)."""
    if params["part"] == "cloud":
        return _cloud_cell(params, progress)
    return _stationary_cell(params, progress)


def summarize(
    datasets: Sequence[xr.Dataset], params: Sequence[Params], settings: Params
) -> xr.Dataset:
    """The sweep over s with max-over-time errors and their fitted s-exponents, plus Eq. 30 data."""
    groups = mfp.by_part(datasets, params, key="s")
    mfp.need_cells(groups, "cloud", 3, "a fit in s")
    mfp.need_cells(groups, "stationary", 1, "added by the experiment")
    s = np.array([p["s"] for p, _ in groups["cloud"]])
    stationary = groups["stationary"][0][1]
    cells = [ds for _, ds in groups["cloud"]]
    ds = xr.concat(cells, dim=xr.DataArray(s, dims="s", name="s"), join="exact")
    ds["s"].attrs = attrs("initial cloud width s, A(0) = s^2 C", "1", "Eq. 27")
    window = {"t": slice(ds["t"].values[1], None)}
    names = {
        "err_b": ("b", "max_t |b_particles - b_ode|", "Eq. 28"),
        "err_A_rel": ("A_rel", "max_t |A_p - A_ode|_F / |A_ode|_F", "Eq. 29"),
        "err_A_abs": ("A_abs", "max_t |A_p - A_ode|_F", "Eq. 29"),
    }
    for var, (short, long_name, eq) in names.items():
        peak = ds[var].sel(window).max("t")
        slope, se, intercept, _ = stats.power_law_fit(s, peak.values)
        ds[f"max_{var}"] = ("s", peak.values, attrs(long_name, "1", f"simulation vs {eq}"))
        ds[f"slope_{short}"] = ((), slope, attrs(f"log-log slope of {long_name} vs s", "1", eq))
        ds[f"slope_{short}_se"] = ((), se, attrs(f"standard error of slope_{short}", "1", eq))
        ds[f"intercept_{short}"] = ((), intercept, attrs(f"log of fitted {long_name} at s=1",
                                                          "1", eq))  # fmt: skip
    ds = xr.merge([ds, stationary], compat="no_conflicts", join="outer")
    ds.attrs.update({
        "experiment": "E4 Gaussian ansatz (paper 002, Eqs. 27-30)",
        "unit": "tanh: phi = c tanh(a x + h)",
        "b_init": str(list(settings["init"]["mean"])),
        "cloud_std": str(list(settings["init"]["std"])),
        "target": str(dict(settings["target"])),
        "hermite_points": int(settings["hermite_points"]),
    })  # fmt: skip
    return ds


def agreement(ds: xr.Dataset, label: str) -> list[Agreement]:
    """The E4 rows: s-exponents of the centre and covariance errors, Eq. 28, Eqs. 29-30."""
    rows = [
        mfp.exponent(label, f"exponent of the {what} error in s vs 2", "Eqs. 28-29", ds, name, 2.0)
        for name, what in (("slope_b", "centre b"), ("slope_A_rel", "relative covariance A"))
    ]
    rows += [
        mfp.row(label, "cloud centre vs Eq. 28 (all s, t, components)", "Eq. 28",
                ds["b_particles"], ds["b_ode"]),
        mfp.row(label, "variance growth rate along eigenvectors of H vs 2 lambda_k", "Eqs. 29-30",
                ds["rate_fit"], ds["rate_theory"], ds["rate_fit_se"]),
    ]  # fmt: skip
    return rows


FIGURES = {
    "error_vs_s": Figure(
        plots.error_vs_s,
        "E4 (paper 002, Eqs. 27-29): largest deviation of the particle cloud's centre and "
        "covariance from the Gaussian ansatz (Eqs. 28-29) against the initial width s, with the "
        "fitted power laws (:math:`s^2`, :math:`s^4`).",
        source="summary",
    ),
    "trajectories": Figure(
        plots.trajectories,
        "E4 (paper 002, Eqs. 28-29): centre and covariance of the cloud (markers) against "
        "Eqs. 28-29 (lines) at the widest s, and the centre error divided by :math:`s^2`.",
        source="summary",
    ),
    "stationary": Figure(
        plots.stationary,
        "E4 (paper 002, Eqs. 29-30): :math:`|H|` at the stationary states with "
        ":math:`b_0\\neq0` (block form of Eq. 30) and :math:`b_0=0` (where it fails), and the "
        "cloud variance along the eigenvectors of H against :math:`e^{2\\lambda_k t}`.",
        source="summary",
    ),
}

EXPERIMENT = mfp.experiment(
    "mf_gaussian",
    "E4: the Gaussian ansatz against the particle dynamics",
    "paper 002 Eqs. 27-30",
    sys.modules[__name__],
)
