"""Stationarity of a sampled window: the burn-in a start needs, and a test of the window.

Burn-in (docs/design.md, "Burn-in and stationarity"). About a minimum the linearised dynamics
relax every mode as ``exp(-t / tau_k)`` (paper 000 Eq. 27, ``tau_k = 1 / (lr omega_k)`` steps),
so the excess of the second moment over its stationary value ``M`` decays at least as
``exp(-2 t / tau)`` with ``tau`` the slowest relaxation time. A start at the minimum has the
excess ``-M`` (trace ``-tr M``); a start at squared distance ``D^2`` (projected on the range of
the Hessian) has the excess ``D^2 - tr M``. The protocol's burn-in of ``n_tau`` relaxation times
leaves a start at the minimum the bias ``tr M exp(-2 n_tau)``; a start at ``D^2`` reaches the
same bias after

    n_tau + max(0, log(D^2 / tr M) / 2)   relaxation times,

:func:`extra_burnin_tau` being the second term (0 at the minimum: the old burn-in, bit for bit).
The stationary ``tr M`` it uses is Eq. 30's, ``tr M = (lr / 2) tr(H^+ C)``
(:func:`lyapunov_trace`; exact for the Lyapunov solution, whose diagonal in the eigenbasis of
``H`` is ``lr C_kk / (2 omega_k)``).

Test (:func:`window_test`). For each replica, the log ratio of the mean of a positive observable
over the last half of the sampling window to its mean over the first half. In a stationary chain
both halves have the same distribution, so the log ratio has mean exactly 0 (and is symmetric
about it); the replicas are independent, so its mean over the ``R`` replicas divided by its
standard error (the spread over replicas over sqrt(R)) is Student-t with ``R - 1`` degrees of
freedom. The log makes the test sensitive to a transient that differs in size between replicas
(a random start) but not in sign. The window is flagged ``not_stationary`` where any observable's
``|t|`` exceeds the two-sided quantile of probability :data:`FALSE_ALARM` / m (Bonferroni over
the m observables): a stationary cell is flagged with probability at most :data:`FALSE_ALARM`
(for R = 32 and two observables ``|t| > 4.70``; ``|t| > 4.06`` for many replicas).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from weightdyn.io import attrs

__all__ = [
    "FALSE_ALARM",
    "StationarityTest",
    "extra_burnin_tau",
    "lyapunov_trace",
    "squared_distance",
    "trace_variables",
    "window_test",
]

#: probability that a stationary cell is flagged (all its observables together)
FALSE_ALARM = 1e-4


def lyapunov_trace(H: np.ndarray, C: np.ndarray, lr: float, rcond: float = 1e-10) -> float:
    """``tr M = (lr / 2) tr(H^+ C)`` of the Lyapunov solution of Eq. 30 (``H M + M H = lr C``)
    on the range of the symmetric ``H`` (eigenvalues above ``rcond`` times the largest)."""
    omega, U = np.linalg.eigh(0.5 * (H + H.T))
    keep = omega > rcond * max(float(omega.max(initial=0.0)), 0.0)
    if not keep.any():
        return 0.0
    Uk = U[:, keep]
    return float(0.5 * lr * np.sum(np.einsum("ik,ij,jk->k", Uk, C, Uk) / omega[keep]))


def squared_distance(starts: np.ndarray, minimum: np.ndarray, Q: np.ndarray | None = None) -> float:
    """Mean over the replicas' ``starts`` (R, n) of ``|Q^T (start - minimum)|^2``: the squared
    distance from the minimum within the range ``Q`` (n, r) of the Hessian (all of it without)."""
    d = np.atleast_2d(starts) - minimum
    if Q is not None:
        d = d @ Q
    return float(np.mean(np.sum(d * d, axis=-1)))


def extra_burnin_tau(distance2: float, variance: float) -> float:
    """Burn-in, in slowest relaxation times, that a start at squared distance ``distance2`` needs
    beyond a start at the minimum: ``max(0, log(distance2 / variance) / 2)``, ``variance`` the
    stationary ``tr M`` (module docstring). 0 where either is zero or not finite."""
    if not (distance2 > 0 and variance > 0 and math.isfinite(distance2 / variance)):
        return 0.0
    return max(0.0, 0.5 * math.log(distance2 / variance))


@dataclass(frozen=True)
class StationarityTest:
    """Per observable: the t statistic of the late-over-early log ratio (NaN where untested)."""

    names: tuple[str, ...]
    t: np.ndarray
    replicas: int

    @property
    def threshold(self) -> float:
        """``|t|`` above which the window is flagged (module docstring; inf for R < 2)."""
        if self.replicas < 2:
            return math.inf
        return float(sps.t.isf(FALSE_ALARM / (2 * len(self.names)), self.replicas - 1))

    @property
    def not_stationary(self) -> bool:
        """Some observable's |t| exceeds :attr:`threshold`."""
        return bool(np.any(np.abs(self.t[np.isfinite(self.t)]) > self.threshold))

    def log_lines(self) -> list[str]:
        """The cell log's summary line and, if flagged, a WARNING line."""
        ts = ", ".join(f"{n} {t:+.2f}" for n, t in zip(self.names, self.t, strict=True))
        lines = [f"stationarity: t of log(late / early half) {ts} (|t| > {self.threshold:.3g} "
                 f"flags; R = {self.replicas})"]  # fmt: skip
        if self.not_stationary:
            lines.append(
                "WARNING: not_stationary: the sampling window's late half differs from its early "
                f"half ({ts}; |t| > {self.threshold:.3g}); the burn-in was too short, estimates "
                "are biased"
            )
        return lines

    def variables(self, source: str) -> dict[str, tuple]:
        """Data variables (name -> (dims, value, attrs)): ``not_stationary`` and the t of each
        observable, all scalars with units "1"."""
        src = f"{source}; late vs early half of the sampling window (weightdyn.stationarity)"
        out = {
            f"stationarity_t_{name}": ((), float(t), attrs(
                f"t statistic over replicas of log(late / early half mean) of {name}", "1", src))
            for name, t in zip(self.names, self.t, strict=True)
        }  # fmt: skip
        flag = np.int8(self.not_stationary)
        long_name = (f"sampling window not stationary: some |t| > {self.threshold:.3g} "
                     f"(false-alarm probability {FALSE_ALARM:g}; 1: flagged)")  # fmt: skip
        out["not_stationary"] = ((), flag, attrs(long_name, "1", src))
        return out


def window_test(series: np.ndarray, names: tuple[str, ...]) -> StationarityTest:
    """The test of the module docstring on ``series`` (T, R, m) of positive observables in time
    order (e.g. block means, T = n_blocks): per replica ``log(mean of the last T//2 points /
    mean of the first T//2)``, its mean over replicas over its standard error. NaN (not flagged)
    for an observable with a non-positive or non-finite half mean, or with T < 2 or R < 2."""
    x = np.asarray(series, dtype=np.float64)
    T, R, m = x.shape
    t = np.full(m, np.nan)
    h = T // 2
    if h >= 1 and R >= 2:
        early, late = x[:h].mean(axis=0), x[T - h :].mean(axis=0)
        with np.errstate(all="ignore"):
            ratio = np.log(late / early)  # (R, m)
            se = ratio.std(axis=0, ddof=1) / math.sqrt(R)
            ok = np.isfinite(ratio).all(axis=0) & (early > 0).all(axis=0) & (se > 0)
            t = np.where(ok, ratio.mean(axis=0) / se, np.nan)
    return StationarityTest(tuple(names), t, R)


def trace_variables(
    sim: tuple[float, float] | None, theories: dict[str, tuple[float, str, str]], source: str
) -> dict[str, tuple]:
    """The ``trace_M_*`` variables: one ``trace_M_<name>`` per theory (name -> (value,
    long_name, source)) and, unless ``sim`` is None (a theory-only cell), ``trace_M_sgd`` (tr M
    of the simulated dynamics, ``sim`` = (value, standard error), ``source`` its equations) with
    ``trace_M_sgd_se``; ``trace_M_sgd`` names its error (``ancillary_variables``) and the
    theories (``weightdyn_theories``)."""
    out = {}
    if sim is not None:
        names = " ".join(f"trace_M_{name}" for name in theories)
        long_name = "tr M of the simulated dynamics"
        sim_attrs = attrs(long_name, "1", source)
        sim_attrs |= {"ancillary_variables": "trace_M_sgd_se", "weightdyn_theories": names}
        se_name = "standard error of trace_M_sgd (jackknife over replicas and time blocks)"
        out["trace_M_sgd"] = ((), float(sim[0]), sim_attrs)
        out["trace_M_sgd_se"] = ((), float(sim[1]), attrs(se_name, "1", source))
    for name, (value, long_name, src) in theories.items():
        out[f"trace_M_{name}"] = ((), float(value), attrs(long_name, "1", src))
    return out
