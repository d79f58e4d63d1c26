"""Measurement of the inverse variance-flatness relation (IVFR), as Feng & Tu measured it.

Feng & Tu (PNAS 118, e2015617118, 2021) sample the weights of a block of parameters (a layer)
during stationary SGD, take the principal directions ``p_i`` of the fluctuations (eigenvectors
of their covariance, variances ``sigma_i^2``, descending), and along each direction the loss
profile of the *full training set* ``L(s) = L(theta_bar + s p_i)`` on both sides of the mean
``theta_bar``. The flatness ``F_i`` is the full width of that profile at ``e L_0``
(``L_0 = L(0)``): ``F_i = s_+ - s_-`` with ``s_+ > 0`` and ``s_- < 0`` the first points where
``L`` reaches ``e L_0``. The IVFR is ``sigma_i^2 ~ F_i^(-psi)`` with ``psi > 0``: the variance is
*larger* along *sharper* directions.

Paper 000 (Eq. 73, Fig. 7a) states it with the curvature ``kappa_i = p_i^T H p_i`` instead:
``kappa_i`` proportional to the variance, a log-log slope of +1 of ``kappa`` against
``sigma^2``. For a quadratic profile ``L = L_0 + kappa s^2 / 2`` the width is
``F = 2 sqrt(2 (e - 1) L_0 / kappa)`` (:func:`quadratic_width`), so ``F ~ kappa^(-1/2)`` and a
slope ``+1`` is ``psi = 2``; in general ``slope = 2 / psi`` only for quadratic profiles.

Layers of this module, all pure (no simulation, no model):

* :func:`principal_fluctuations`: PCA of a covariance (descending variances, unit directions);
* :func:`profile_width`: the width of one profile ``L(s)`` at ``level_factor * L_0``, by
  geometric bracketing up to a stated ``s_max`` and :func:`scipy.optimize.brentq`; a side that
  never reaches the level is *reported* (NaN width, flag, reason), not dropped;
* :func:`flatness`: :func:`profile_width` along every direction of a set (:class:`Flatness`);
* :func:`curvature`: ``p_i^T H p_i`` from ``H`` or a Hessian-vector product;
* :func:`power_law_exponent` (Feng & Tu's ``psi``) and :func:`ivfr_slope` (paper 000's slope):
  least-squares lines in log-log axes over the usable modes;
* :func:`ivfr_measurement`: both, with jackknife errors over groups of samples (replicas, or
  replica x time-block groups), the PCA redone on every leave-one-group-out set, the profiles
  either redone too or held at the full sample's directions (``redo_profiles``), and the modes
  used and excluded (with the reason) reported.

**The jackknife of** :func:`ivfr_measurement`. Each leave-one-group-out set gets its own
pooled covariance and its own PCA; the fits are redone on every set and the errors are the
delete-one jackknife of ``(variances, psi, slope)`` (:func:`weightdyn.stats.jackknife_of_mean`).
Modes are matched by rank (0 = largest variance). The profiles are the expensive part:

* ``redo_profiles=False`` (default; one profile per mode): ``F_i`` and ``kappa_i`` are
  measured once, along the full sample's directions ``p_i``, and held fixed; in each
  leave-one-out set the variance of mode ``i`` is ``p_i^T C_(-g) p_i`` along the same
  ``p_i`` (to first order the leave-one-out eigenvalue, by first-order perturbation
  theory). The errors then contain the sampling error of the variances, not the
  change of ``F_i`` or ``kappa_i`` as the estimated direction moves. That change is of
  second order where ``p_i`` is also a principal direction of the loss (as for a loss
  whose Hessian shares the covariance's eigenvectors) and of first order otherwise;
* ``redo_profiles=True`` (G + 1 profiles per mode): the leave-one-out sets' own directions,
  eigenvalues and profiles along those directions; the errors contain the direction's
  uncertainty too.

The full-sample fit uses the modes that are resolved, have a positive variance and a
complete positive width (``psi``) or positive curvature (slope); the others are listed in
the fit's ``excluded`` with the reason. Each leave-one-out fit uses those of the same modes
that are usable in its set (``n_loo_changed`` counts the sets that lost one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from weightdyn.stats import jackknife_of_mean

__all__ = [
    "MIN_MODES",
    "Flatness",
    "IVFRMeasurement",
    "PowerLawFit",
    "Width",
    "covariance_from_moments",
    "curvature",
    "flatness",
    "group_moments",
    "ivfr_measurement",
    "ivfr_slope",
    "power_law_exponent",
    "principal_fluctuations",
    "profile_width",
    "quadratic_width",
]

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

#: fewest usable modes for a fit (two points always lie on a line); NaN below
MIN_MODES = 3

#: tolerance on the norm of a direction (profiles are in units of distance along unit vectors)
UNIT_TOL = 1e-8


# ------------------------------------------------------------------ PCA and curvature


def principal_fluctuations(cov: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Principal variances ``sigma_i^2`` (descending) and directions of a covariance.

    ``cov`` (d, d) is the covariance of the sampled weights of one block of parameters (it is
    symmetrised first). Returns ``(variances (d,), directions (d, d))``, the unit direction
    ``p_i`` in column ``i`` (Feng & Tu's PCA; paper 000 Fig. 7a's eigenvectors of
    ``cov(vec dW2)``). The sign of each direction is arbitrary (widths do not depend on it).
    """
    cov = np.asarray(cov, dtype=np.float64)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"cov must be a square matrix, got shape {cov.shape}")
    lam, vecs = np.linalg.eigh(0.5 * (cov + cov.T))
    return lam[::-1].copy(), vecs[:, ::-1].copy()


def curvature(
    hessian: ArrayLike | Callable[[FloatArray], FloatArray], directions: ArrayLike
) -> FloatArray:
    """Curvature ``kappa_i = p_i^T H p_i`` of the loss along each column ``p_i`` of
    ``directions`` (d, n) (paper 000 Eq. 73's ``kappa_i``).

    ``hessian`` is ``H`` (d, d) or a Hessian-vector product ``v -> H v`` (called once per
    direction).
    """
    P = np.asarray(directions, dtype=np.float64)
    if P.ndim == 1:
        P = P[:, None]
    if callable(hessian):
        return np.array([float(P[:, i] @ np.asarray(hessian(P[:, i]))) for i in range(P.shape[1])])
    H = np.asarray(hessian, dtype=np.float64)
    return np.einsum("ik,ij,jk->k", P, H, P)


# ------------------------------------------------------------------ loss profiles


def quadratic_width(
    loss0: ArrayLike, kappa: ArrayLike, level_factor: float = math.e
) -> FloatArray | float:
    """Width at ``level_factor * L_0`` of the quadratic profile ``L_0 + kappa s^2 / 2``:
    ``2 sqrt(2 (level_factor - 1) L_0 / kappa)`` (``inf`` where ``kappa <= 0``: never reached).
    """
    loss0, kappa = np.asarray(loss0, dtype=np.float64), np.asarray(kappa, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(kappa > 0, 2.0 * np.sqrt(2.0 * (level_factor - 1.0) * loss0 / kappa), np.inf)
    return float(w) if w.ndim == 0 else w


@dataclass(frozen=True)
class Width:
    """Width of one loss profile at ``level = level_factor * loss0`` (:func:`profile_width`).

    ``minus < 0 < plus`` are the first crossings on either side (NaN for a side that does not
    reach the level within ``s_max``); ``width = plus - minus`` (NaN unless both are reached);
    ``reason`` is empty for a complete width and says what failed otherwise.
    """

    minus: float
    plus: float
    width: float
    reached_minus: bool
    reached_plus: bool
    loss0: float
    level: float
    s_max: float
    reason: str
    n_evals: int

    @property
    def reached(self) -> bool:
        return self.reached_minus and self.reached_plus


class _NaNLoss(Exception):
    """The loss was NaN at the point in ``args[0]`` while locating a crossing."""


def _crossing(
    f: Callable[[float], float], sign: int, level: float, s0: float, s_max: float, growth: float
) -> tuple[float, str]:
    """First crossing of ``level`` by ``f(sign * s)`` for ``s`` in (0, s_max]: (s, "") or
    (NaN, reason). ``f(0) < level`` is assumed."""
    side = "plus" if sign > 0 else "minus"
    lo, s = 0.0, min(s0, s_max)
    while True:
        v = f(sign * s)
        if math.isnan(v):
            return math.nan, f"{side} side: loss is NaN at s = {sign * s:.6g}"
        if v >= level:
            # clipped above so that an infinite loss past the crossing still brackets it
            def g(t: float) -> float:
                u = f(sign * t)
                if math.isnan(u):
                    raise _NaNLoss(sign * t)
                return min(u - level, abs(level))

            try:
                root = brentq(g, lo, s, xtol=1e-13 * s, rtol=4 * np.finfo(float).eps)
            except _NaNLoss as e:
                return math.nan, f"{side} side: loss is NaN at s = {e.args[0]:.6g}"
            return sign * float(root), ""
        if s >= s_max:
            return math.nan, f"{side} side does not reach the level within s_max = {s_max:.6g}"
        lo, s = s, min(s * growth, s_max)


def profile_width(
    loss_along: Callable[[float], float],
    *,
    s_max: float,
    s0: float | None = None,
    level_factor: float = math.e,
    growth: float = 2.0,
    loss0: float | None = None,
) -> Width:
    """Full width of the loss profile ``L(s)`` at ``level_factor * L(0)`` (Feng & Tu's flatness).

    On each side the step ``s = s0, s0 * growth, ...`` grows geometrically up to ``s_max``
    (the last point tried is ``s_max`` itself) until ``L(+-s) >= level``; the crossing is then
    located in the last bracket by :func:`scipy.optimize.brentq` on ``L(s) - level`` (to about
    1e-13 of ``s``). "First crossing" is the first one on this grid: a profile that rises above
    the level and falls back within one step is not resolved. An infinite loss counts as above
    the level; a NaN loss, or a side that stays below the level up to ``s_max``, gives a NaN
    side and a ``reason`` (the profile is reported, never dropped).

    ``loss_along(s)`` is the loss at ``theta_bar + s p`` on the full training set; ``loss0``
    (``L(0)``, evaluated when not given) must be positive and ``level_factor > 1``
    (Feng & Tu: ``e``). ``s0`` defaults to ``s_max / 2**20``.
    """
    if not (level_factor > 1.0):
        raise ValueError(f"level_factor must exceed 1, got {level_factor}")
    if not (s_max > 0 and growth > 1):
        raise ValueError(f"need s_max > 0 and growth > 1, got s_max={s_max}, growth={growth}")
    s0 = s_max / 2**20 if s0 is None else float(s0)
    if not (0 < s0 <= s_max):
        raise ValueError(f"need 0 < s0 <= s_max, got s0={s0}, s_max={s_max}")
    n_evals = 0

    def f(s: float) -> float:
        nonlocal n_evals
        n_evals += 1
        return float(loss_along(s))

    L0 = f(0.0) if loss0 is None else float(loss0)
    if not (math.isfinite(L0) and L0 > 0):
        raise ValueError(f"the width at level_factor * L0 needs a finite L0 > 0, got L0 = {L0}")
    level = level_factor * L0
    minus, why_minus = _crossing(f, -1, level, s0, s_max, growth)
    plus, why_plus = _crossing(f, +1, level, s0, s_max, growth)
    return Width(
        minus=minus,
        plus=plus,
        width=plus - minus,  # NaN if either side is
        reached_minus=not why_minus,
        reached_plus=not why_plus,
        loss0=L0,
        level=level,
        s_max=float(s_max),
        reason="; ".join(r for r in (why_minus, why_plus) if r),
        n_evals=n_evals,
    )


@dataclass(frozen=True, eq=False)
class Flatness:
    """Widths along a set of directions (:func:`flatness`): arrays over the modes ``i``.

    ``width[i]`` is NaN where a side of profile ``i`` did not reach the level; ``reasons[i]``
    says why ("" for a complete width).
    """

    minus: FloatArray
    plus: FloatArray
    width: FloatArray
    reached_minus: BoolArray
    reached_plus: BoolArray
    reasons: tuple[str, ...]
    loss0: float
    level_factor: float
    s_max: float
    n_evals: int

    @property
    def reached(self) -> BoolArray:
        return self.reached_minus & self.reached_plus

    @classmethod
    def from_widths(cls, widths: Sequence[Width], level_factor: float = math.e) -> Flatness:
        """Stack per-direction :class:`Width` results (all about the same centre)."""
        if not widths:
            raise ValueError("no widths")
        return cls(
            minus=np.array([w.minus for w in widths]),
            plus=np.array([w.plus for w in widths]),
            width=np.array([w.width for w in widths]),
            reached_minus=np.array([w.reached_minus for w in widths]),
            reached_plus=np.array([w.reached_plus for w in widths]),
            reasons=tuple(w.reason for w in widths),
            loss0=widths[0].loss0,
            level_factor=level_factor,
            s_max=widths[0].s_max,
            n_evals=sum(w.n_evals for w in widths),
        )


def flatness(
    loss: Callable[[FloatArray], float],
    center: ArrayLike,
    directions: ArrayLike,
    *,
    s_max: float,
    s0: float | None = None,
    level_factor: float = math.e,
    growth: float = 2.0,
) -> Flatness:
    """Feng & Tu's flatness ``F_i``: the width of ``s -> loss(center + s p_i)`` at
    ``level_factor * loss(center)`` along every unit column ``p_i`` of ``directions`` (d, n)
    (:func:`profile_width`; ``loss`` on the full training set, ``center`` the mean weights
    ``theta_bar`` of the block). ``L_0 = loss(center)`` is evaluated once.

    With ``functools.partial(flatness, loss, center, s_max=...)`` this is the
    ``flatness_along`` of :func:`ivfr_measurement`.
    """
    c = np.asarray(center, dtype=np.float64)
    P = np.asarray(directions, dtype=np.float64)
    if P.ndim == 1:
        P = P[:, None]
    if P.shape[0] != c.size:
        raise ValueError(f"directions have {P.shape[0]} rows, the centre has {c.size} entries")
    norms = np.linalg.norm(P, axis=0)
    if np.any(np.abs(norms - 1.0) > UNIT_TOL):
        raise ValueError(
            f"directions must be unit columns, norms range {norms.min()}..{norms.max()}"
        )
    L0 = float(loss(c))
    widths = [
        profile_width(
            lambda s, p=P[:, i]: loss(c + s * p),
            s_max=s_max,
            s0=s0,
            level_factor=level_factor,
            growth=growth,
            loss0=L0,
        )
        for i in range(P.shape[1])
    ]
    out = Flatness.from_widths(widths, level_factor)
    return replace(out, n_evals=out.n_evals + 1)  # + the centre


# ------------------------------------------------------------------ power-law fits


def _usable(x: FloatArray, y: FloatArray, mask: ArrayLike | None) -> BoolArray:
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return ok if mask is None else ok & np.asarray(mask, dtype=bool)


def _line(x: FloatArray, y: FloatArray) -> tuple[float, float]:
    """Least-squares ``y = intercept + slope x``: (slope, intercept)."""
    xm, ym = x.mean(), y.mean()
    dx = x - xm
    slope = float(dx @ (y - ym) / (dx @ dx))
    return slope, float(ym - slope * xm)


def power_law_exponent(
    variance: ArrayLike, flatness: ArrayLike, mask: ArrayLike | None = None
) -> tuple[float, float]:
    """Feng & Tu's exponent: least squares of ``log sigma_i^2 = a - psi log F_i`` over the modes
    with ``mask`` (all if None), a finite positive variance and a finite positive width.
    Returns ``(psi, a)``; NaN with fewer than :data:`MIN_MODES` such modes."""
    v, F = np.asarray(variance, dtype=np.float64), np.asarray(flatness, dtype=np.float64)
    ok = _usable(v, F, mask)
    if ok.sum() < MIN_MODES:
        return math.nan, math.nan
    slope, a = _line(np.log(F[ok]), np.log(v[ok]))
    return -slope, a


def ivfr_slope(
    variance: ArrayLike, curvature: ArrayLike, mask: ArrayLike | None = None
) -> tuple[float, float]:
    """Paper 000's IVFR slope (Eq. 73, Fig. 7a): least squares of
    ``log kappa_i = b + slope log sigma_i^2`` over the modes with ``mask`` (all if None) and
    positive finite variance and curvature. Returns ``(slope, b)``; NaN with fewer than
    :data:`MIN_MODES` such modes. For quadratic profiles ``slope = 2 / psi``."""
    v, k = np.asarray(variance, dtype=np.float64), np.asarray(curvature, dtype=np.float64)
    ok = _usable(v, k, mask)
    if ok.sum() < MIN_MODES:
        return math.nan, math.nan
    return _line(np.log(v[ok]), np.log(k[ok]))


# ------------------------------------------------------------------ groups of samples


def group_moments(samples: ArrayLike) -> FloatArray:
    """Per-group means of ``x`` and of ``x x^T`` (flattened) from samples (G, n, d): (G, d + d^2),
    the layout of :func:`ivfr_measurement`'s ``kind="moments"`` (as the model cells use)."""
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"samples must be (groups, samples, d), got shape {x.shape}")
    G, n, d = x.shape
    m2 = np.einsum("gni,gnj->gij", x, x) / n
    return np.hstack([x.mean(axis=1), m2.reshape(G, d * d)])


def covariance_from_moments(moments: ArrayLike) -> FloatArray:
    """Covariance ``<x x^T> - <x><x>^T`` (symmetrised) from mean moments (d + d^2,) or
    a stack of them (m, d + d^2) -> (d, d) or (m, d, d)."""
    mo = np.asarray(moments, dtype=np.float64)
    d = round((math.sqrt(1 + 4 * mo.shape[-1]) - 1) / 2)
    if d + d * d != mo.shape[-1]:
        raise ValueError(f"moments of length {mo.shape[-1]} are not d + d^2 for any d")
    m1, m2 = mo[..., :d], mo[..., d:].reshape(*mo.shape[:-1], d, d)
    cov = m2 - m1[..., :, None] * m1[..., None, :]
    return 0.5 * (cov + np.swapaxes(cov, -1, -2))


# ------------------------------------------------------------------ the measurement


@dataclass(frozen=True, eq=False)
class PowerLawFit:
    """One IVFR fit with its jackknife error (:func:`ivfr_measurement`).

    ``value`` is ``psi`` (``log sigma^2 = intercept - psi log F``) or the slope
    (``log kappa = intercept + slope log sigma^2``); ``modes`` are the mode indices (rank of the
    variance, 0 the largest) the full-sample fit used; ``excluded`` maps every other mode to the
    reason. Each leave-one-out fit uses the full sample's modes that are usable in that set too;
    ``n_loo_changed`` counts the sets where that lost a mode.
    """

    name: str
    value: float
    se: float
    intercept: float
    intercept_se: float
    modes: NDArray[np.int_]
    excluded: dict[int, str]
    n_total: int
    n_loo_changed: int

    @property
    def n_used(self) -> int:
        return int(self.modes.size)

    def summary(self) -> str:
        used = f"{self.n_used} of {self.n_total} modes"
        if self.n_used:
            used += f" ({_ranges(self.modes)})"
        out = f"{self.name} = {self.value:.4g} +- {self.se:.2g} over {used}"
        if self.excluded:
            out += "; excluded: " + "; ".join(f"{i}: {r}" for i, r in self.excluded.items())
        if self.n_loo_changed:
            out += f"; {self.n_loo_changed} leave-one-out sets lost a mode"
        return out


def _ranges(idx: NDArray[np.int_]) -> str:
    """'0-4, 7, 9-10' from sorted indices."""
    parts, start = [], None
    for j, i in enumerate(idx):
        start = i if start is None else start
        if j + 1 == idx.size or idx[j + 1] != i + 1:
            parts.append(f"{start}" if start == i else f"{start}-{i}")
            start = None
    return ", ".join(parts)


@dataclass(frozen=True, eq=False)
class IVFRMeasurement:
    """Result of :func:`ivfr_measurement`.

    ``variance`` (descending) and ``directions`` (columns) are the full sample's PCA;
    ``variance_se`` their jackknife errors; ``flatness`` / ``curvature`` the profiles along the
    full sample's directions (None where not measured); ``psi_fit`` (Feng & Tu) and
    ``slope_fit`` (paper 000 Eq. 73 / Fig. 7a) the fits (None where not measured).
    ``jackknifed`` states what the errors include.
    """

    variance: FloatArray
    variance_se: FloatArray
    directions: FloatArray
    flatness: Flatness | None
    curvature: FloatArray | None
    psi_fit: PowerLawFit | None
    slope_fit: PowerLawFit | None
    redo_profiles: bool
    n_groups: int
    jackknifed: str = field(repr=False)

    @property
    def psi(self) -> float:
        return math.nan if self.psi_fit is None else self.psi_fit.value

    @property
    def psi_se(self) -> float:
        return math.nan if self.psi_fit is None else self.psi_fit.se

    @property
    def slope(self) -> float:
        return math.nan if self.slope_fit is None else self.slope_fit.value

    @property
    def slope_se(self) -> float:
        return math.nan if self.slope_fit is None else self.slope_fit.se

    def summary(self) -> str:
        lines = [f"IVFR over {self.n_groups} groups ({self.jackknifed})"]
        lines += [f.summary() for f in (self.psi_fit, self.slope_fit) if f is not None]
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class _SetResult:
    """PCA and profiles of one set of groups (the full sample or a leave-one-out set)."""

    variance: FloatArray
    flat: Flatness | None
    curv: FloatArray | None


def _exclusions(
    res: _SetResult, resolved: BoolArray, kind: Literal["psi", "slope"]
) -> dict[int, str]:
    out: dict[int, str] = {}
    for i in range(res.variance.size):
        if not resolved[i]:
            out[i] = "unresolved (caller's mask)"
        elif not (np.isfinite(res.variance[i]) and res.variance[i] > 0):
            out[i] = f"variance {res.variance[i]:.3g} not positive"
        elif kind == "psi" and res.flat is not None and not res.flat.reached[i]:
            out[i] = f"width not measured: {res.flat.reasons[i]}"
        elif kind == "psi" and res.flat is not None and not res.flat.width[i] > 0:
            out[i] = f"width {res.flat.width[i]:.3g} not positive"
        elif kind == "slope" and res.curv is not None and not res.curv[i] > 0:
            out[i] = f"curvature {res.curv[i]:.3g} not positive"
    return out


#: what :func:`ivfr_measurement`'s errors include, by ``redo_profiles``
JACKKNIFED = {
    True: "jackknife over leave-one-group-out sets: PCA, eigenvalues, profiles along each "
    "set's own directions and the fits redone",
    False: "jackknife over leave-one-group-out sets: variances along the full sample's "
    "directions and the fits redone; widths and curvatures fixed at the full sample's "
    "directions",
}


def _groups(
    groups: ArrayLike, kind: str
) -> tuple[FloatArray, Callable[[FloatArray], FloatArray], int]:
    """The groups as an array, the map of a group mean to its covariance, and the dimension."""
    g = np.asarray(groups, dtype=np.float64)
    if kind == "covariance":
        if g.ndim != 3 or g.shape[1] != g.shape[2]:
            raise ValueError(f"group covariances must be (G, d, d), got shape {g.shape}")
        return g, lambda mean: 0.5 * (mean + mean.T), g.shape[1]
    if kind == "moments":
        if g.ndim != 2:
            raise ValueError(f"group moments must be (G, d + d^2), got shape {g.shape}")
        return g, covariance_from_moments, covariance_from_moments(g[0]).shape[0]
    raise ValueError(f"kind must be 'covariance' or 'moments', got {kind!r}")


def _resolved_mask(resolved: ArrayLike | None, d: int) -> BoolArray:
    """The caller's mask of resolved modes (all where None), checked against ``d``."""
    ok = np.ones(d, dtype=bool) if resolved is None else np.asarray(resolved, dtype=bool)
    if ok.shape != (d,):
        raise ValueError(f"resolved must have shape ({d},), got {ok.shape}")
    return ok


def _fit_row(
    res: _SetResult, use_psi: BoolArray, use_slope: BoolArray, lost: dict[str, int]
) -> FloatArray:
    """One jackknife set's ``[variances, psi, intercept, slope, intercept]`` (NaN for a fit
    without its profiles), fitted on the full sample's usable modes that are usable in this
    set too; ``lost`` counts the sets where that dropped a mode."""
    psi = slope = (math.nan, math.nan)
    if res.flat is not None:
        use = use_psi & _usable(res.variance, res.flat.width, None)
        lost["psi"] += bool((use != use_psi).any())
        psi = power_law_exponent(res.variance, res.flat.width, use)
    if res.curv is not None:
        use = use_slope & _usable(res.variance, res.curv, None)
        lost["slope"] += bool((use != use_slope).any())
        slope = ivfr_slope(res.variance, res.curv, use)
    return np.concatenate([res.variance, psi, slope])


def _power_law_fit(
    name: str, est: FloatArray, se: FloatArray, use: BoolArray, excl: dict[int, str], lost: int
) -> PowerLawFit:
    """A :class:`PowerLawFit` from the jackknife's (value, intercept) estimates and errors."""
    return PowerLawFit(
        name=name,
        value=float(est[0]),
        se=float(se[0]),
        intercept=float(est[1]),
        intercept_se=float(se[1]),
        modes=np.flatnonzero(use),
        excluded=excl,
        n_total=use.size,
        n_loo_changed=lost,
    )


def ivfr_measurement(
    groups: ArrayLike,
    *,
    kind: Literal["covariance", "moments"] = "covariance",
    flatness_along: Callable[[FloatArray], Flatness] | None = None,
    curvature_along: Callable[[FloatArray], FloatArray] | None = None,
    resolved: ArrayLike | None = None,
    redo_profiles: bool = False,
) -> IVFRMeasurement:
    """Feng & Tu's ``psi`` and paper 000's IVFR slope (Eq. 73, Fig. 7a) with jackknife errors.

    ``groups`` are G >= 2 independent groups of weight samples of one block of parameters
    (replicas, or (replica, time block) pairs), each summarised by

    * ``kind="covariance"``: its covariance (G, d, d); the pooled covariance is their mean
      (about each group's own mean: the caller's choice of centring);
    * ``kind="moments"``: its mean moments ``[<x>, <x x^T>.ravel()]`` (G, d + d^2)
      (:func:`group_moments`); the pooled covariance is about the pooled mean.

    ``flatness_along(P)`` gives the :class:`Flatness` along the unit columns of ``P`` (e.g.
    ``functools.partial(flatness, loss, theta_bar, s_max=...)``) and ``curvature_along(P)``
    the curvatures (e.g. ``functools.partial(curvature, H)``); either may be None (that fit is
    then None). ``resolved`` (d,) marks the modes the caller trusts (False: excluded as
    "unresolved", e.g. variances at the noise floor of the sampling).

    **What is jackknifed**, and which modes each fit uses: see the module docstring.
    """
    g, cov_of, d = _groups(groups, kind)
    k = g.shape[0]
    if k < 2:
        raise ValueError(f"the jackknife needs at least 2 groups, got {k}")
    ok = _resolved_mask(resolved, d)

    def profiles(P: FloatArray) -> tuple[Flatness | None, FloatArray | None]:
        flat = None if flatness_along is None else flatness_along(P)
        curv = None if curvature_along is None else np.asarray(curvature_along(P), dtype=float)
        return flat, curv

    # the full sample, with the arithmetic jackknife_of_mean uses (its result is reused there)
    full_mean = g.sum(axis=0) / k
    var_full, P_full = principal_fluctuations(cov_of(full_mean))
    flat_full, curv_full = profiles(P_full)
    full = _SetResult(var_full, flat_full, curv_full)
    excl_psi = _exclusions(full, ok, "psi")
    excl_slope = _exclusions(full, ok, "slope")
    use_psi = np.array([i not in excl_psi for i in range(d)])
    use_slope = np.array([i not in excl_slope for i in range(d)])
    lost = {"psi": 0, "slope": 0}

    def one_set(mean: FloatArray) -> _SetResult:
        if mean.shape == full_mean.shape and np.array_equal(mean, full_mean):
            return full
        C = cov_of(mean)
        if not redo_profiles:
            return _SetResult(np.sum(P_full * (C @ P_full), axis=0), flat_full, curv_full)
        var, P = principal_fluctuations(C)
        return _SetResult(var, *profiles(P))

    def estimator(means: FloatArray) -> FloatArray:
        return np.array([_fit_row(one_set(mean), use_psi, use_slope, lost) for mean in means])

    est, se = jackknife_of_mean(estimator, g)

    def fit(name: str, j: int, use: BoolArray, excl: dict[int, str]) -> PowerLawFit:
        return _power_law_fit(name, est[d + j : d + j + 2], se[d + j : d + j + 2], use, excl,
                              lost[name])  # fmt: skip

    return IVFRMeasurement(
        variance=est[:d],
        variance_se=se[:d],
        directions=P_full,
        flatness=flat_full,
        curvature=curv_full,
        psi_fit=None if flat_full is None else fit("psi", 0, use_psi, excl_psi),
        slope_fit=None if curv_full is None else fit("slope", 2, use_slope, excl_slope),
        redo_profiles=redo_profiles,
        n_groups=k,
        jackknifed=JACKKNIFED[redo_profiles],
    )
