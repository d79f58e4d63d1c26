"""Time series of a few slow observables of a sampled chain, and the effective sample size.

The stationary SGD/SGF drivers accumulate moments of the recorded snapshots; the error bars on
those moments (jackknife over replicas and time blocks) are honest only if the sampling window is
long against the chains' autocorrelation time. An *observable hook* passed to a driver maps the
snapshots of each chunk, after they are recorded and independently of how they are accumulated,
to ``m`` scalars per replica and snapshot; a :class:`SeriesRecorder` keeps those series
(``n_records x R x m`` floats, block-averaged ``stride`` snapshots at a time when that would exceed
:data:`MAX_SERIES_BYTES`). :func:`effective_sample_size` turns them into Sokal's integrated
autocorrelation time (:func:`weightdyn.stats.integrated_time`, replica-averaged autocorrelation
function as emcee does for walkers) and the effective sample size ``ESS = R T / tau_int``; a cell
sampled for fewer than :data:`MIN_TAU` autocorrelation times is flagged ``undersampled``
(emcee's ``tol = 50``).

Nothing here touches a random stream or an accumulated moment: the hook only reads the records.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from weightdyn import stats
from weightdyn.io import attrs

__all__ = [
    "MAX_SERIES_BYTES",
    "MIN_TAU",
    "EffectiveSampleSize",
    "LinearQuadratic",
    "Observables",
    "SeriesRecorder",
    "effective_sample_size",
    "ess_log_lines",
    "ess_variables",
    "in_basis",
    "not_sampled",
    "series_fields",
]

#: a chain sampled for fewer integrated autocorrelation times than this is ``undersampled``
MIN_TAU = 50.0
#: memory bound of the stored series of one run (beyond it snapshots are block-averaged)
MAX_SERIES_BYTES = 32 << 20
#: rows of a record block evaluated at once (about 2 MB of doubles: the product stays in cache)
_BLOCK_DOUBLES = 1 << 18


class Observables(Protocol):
    """A hook: ``names`` of its ``m`` scalars; called with one chunk's records (the driver's
    layout, leading axes (n_rec, R)), returns their values (n_rec, R, m)."""

    names: tuple[str, ...]

    def __call__(self, *records: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class LinearQuadratic:
    """Projections and a quadratic form of ``dw = w - w_ref`` (records (n_rec, R, N)).

    Returns ``dw . V[:, j]`` for the ``k`` columns of ``V`` (N, k), then
    ``offset + g . dw + dw^T H dw / 2``. For the linear network the training loss is exactly this
    quadratic (paper 000 Eq. 9: ``L(w* + dw) = L* + dw^T H dw / 2`` about the minimum, where the
    gradient g vanishes), so its series costs one (n_rec R, N) x (N, N + k) product per chunk and
    no pass over the data: the cost of the moment accumulation once more. ``dtype="float32"`` does
    the products in single precision (relative rounding ~1e-7 of the fluctuating part, irrelevant
    for an autocorrelation time; several times cheaper); ``offset`` and ``g`` stay double.
    """

    V: np.ndarray
    H: np.ndarray
    offset: float = 0.0
    g: np.ndarray | None = None
    names: tuple[str, ...] = ("slowest", "loss")
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if self.V.ndim != 2 or self.H.shape != (self.V.shape[0],) * 2:
            raise ValueError(f"V must be (N, k) and H (N, N), got {self.V.shape}, {self.H.shape}")
        if len(self.names) != self.V.shape[1] + 1:
            raise ValueError(f"names must name the {self.V.shape[1]} projections and the loss")

    def rotated(self, U: np.ndarray) -> LinearQuadratic:
        """The same observables of ``z = U^T dw`` (records in the orthonormal basis ``U``)."""
        g = None if self.g is None else U.T @ self.g
        return LinearQuadratic(
            U.T @ self.V, U.T @ self.H @ U, self.offset, g, self.names, self.dtype
        )

    def __call__(self, dw: np.ndarray) -> np.ndarray:
        n, R, N = dw.shape
        flat = dw.reshape(n * R, N)
        k = self.V.shape[1]
        HV = np.concatenate([self.H, self.V], axis=1).astype(self.dtype)  # one product: both
        out = np.empty((n * R, k + 1))
        step = max(1, _BLOCK_DOUBLES // max(N, 1))  # cache-sized row blocks
        for lo in range(0, n * R, step):
            d = flat[lo : lo + step].astype(self.dtype)
            y = d @ HV
            out[lo : lo + step, :k] = y[:, N:]
            out[lo : lo + step, k] = 0.5 * np.einsum("ij,ij->i", y[:, :N], d)
        out[:, k] += self.offset
        if self.g is not None:
            out[:, k] += flat @ self.g
        return out.reshape(n, R, k + 1)


@dataclass(frozen=True)
class _InBasis:
    """``observables`` of ``dw = z U^T`` for records ``z`` in the orthonormal basis ``U``."""

    observables: Observables
    U: np.ndarray

    @property
    def names(self) -> tuple[str, ...]:
        return self.observables.names

    def __call__(self, z: np.ndarray) -> np.ndarray:
        return self.observables(z @ self.U.T)


def in_basis(observables: Observables, U: np.ndarray) -> Observables:
    """The hook for records ``z = U^T dw`` (e.g. the eigenbasis of additive SGF): the rotated
    :class:`LinearQuadratic`, or a wrapper that rotates the records back first."""
    if isinstance(observables, LinearQuadratic):
        return observables.rotated(U)
    return _InBasis(observables, U)


class SeriesRecorder:
    """Series (T, R, m) of an :class:`Observables` hook over ``n_records`` snapshots.

    Consecutive snapshots are averaged ``stride`` at a time (stride 1 unless the series would
    exceed ``max_bytes``); the last ``n_records % stride`` snapshots are left out. A series point
    then spans ``stride`` snapshots; the integrated autocorrelation time is resolved down to that
    spacing and the effective sample size of a mean is unchanged by the averaging.
    """

    def __init__(
        self,
        observables: Observables,
        n_records: int,
        replicas: int,
        max_bytes: int = MAX_SERIES_BYTES,
    ):
        self.observables = observables
        m = len(observables.names)
        cap = max(1, int(max_bytes) // (8 * replicas * m))
        self.stride = max(1, math.ceil(n_records / cap))
        self.series = np.empty((n_records // self.stride, replicas, m))
        self._pending = np.empty((0, replicas, m))
        self._filled = 0
        self.elapsed_s = 0.0

    def add(self, *records: np.ndarray) -> None:
        """Evaluate the hook on one chunk's records (in time order) and store the points."""
        t0 = time.perf_counter()
        self._add(self.observables(*records))
        self.elapsed_s += time.perf_counter() - t0

    def _add(self, values: np.ndarray) -> None:
        if self._pending.shape[0]:
            values = np.concatenate([self._pending, values], axis=0)
        full = values.shape[0] // self.stride
        room = self.series.shape[0] - self._filled
        take = min(full, room)
        if self.stride == 1:
            points = values[:take]
        else:
            points = values[: take * self.stride].reshape(take, self.stride, *values.shape[1:])
            points = points.mean(axis=1)
        self.series[self._filled : self._filled + take] = points
        self._filled += take
        self._pending = values[full * self.stride :] if take == full else values[:0]

    @property
    def complete(self) -> np.ndarray:
        """The points stored so far (T, R, m)."""
        return self.series[: self._filled]


def series_fields(recorder: SeriesRecorder | None, thin: int) -> dict[str, object]:
    """The ``obs_*`` fields of a driver's result (none without a hook): the series (T, R, m),
    the hook's names, the steps between points and the seconds spent in the hook."""
    if recorder is None:
        return {}
    return {
        "obs_series": recorder.complete,
        "obs_names": tuple(recorder.observables.names),
        "obs_spacing": int(thin) * recorder.stride,
        "obs_elapsed_s": recorder.elapsed_s,
    }


@dataclass(frozen=True)
class EffectiveSampleSize:
    """Integrated autocorrelation times (in steps) and effective sample sizes of a cell."""

    names: tuple[str, ...]
    tau_steps: np.ndarray  # (m,)
    tau_se_steps: np.ndarray
    ess: np.ndarray  # R * sample_steps / tau_steps
    sample_steps: int
    replicas: int
    spacing_steps: int  # steps between series points (thin * stride)

    @property
    def sampled_tau(self) -> float:
        """Sampling length in units of the longest integrated autocorrelation time."""
        tau = np.nanmax(self.tau_steps) if np.isfinite(self.tau_steps).any() else np.nan
        return float(self.sample_steps / tau) if tau > 0 else np.nan

    @property
    def undersampled(self) -> bool:
        """Sampled for fewer than :data:`MIN_TAU` integrated autocorrelation times."""
        return bool(np.isfinite(self.sampled_tau) and self.sampled_tau < MIN_TAU)

    def value(self, name: str, field: str) -> float:
        return float(getattr(self, field)[self.names.index(name)])


def effective_sample_size(
    series: np.ndarray, spacing_steps: int, sample_steps: int, names: tuple[str, ...]
) -> EffectiveSampleSize:
    """tau_int of each observable from the replica-averaged autocorrelation function of
    ``series`` (T, R, m) (:func:`weightdyn.stats.integrated_time` with ``ensemble_axis=1``, c = 5),
    converted to steps (``spacing_steps`` per point), and ``ESS = R sample_steps / tau_int``."""
    T, R = series.shape[:2]
    if T < 2:
        return not_sampled(names, sample_steps, R, spacing_steps)
    it = stats.integrated_time(series, ensemble_axis=1)
    tau = np.where(it.replicas > 0, it.tau * spacing_steps, np.nan)
    se = np.where(it.replicas > 0, it.se * spacing_steps, np.nan)
    return EffectiveSampleSize(names, tau, se, R * sample_steps / tau, int(sample_steps), R,
                               int(spacing_steps))  # fmt: skip


def not_sampled(
    names: tuple[str, ...], sample_steps: int = 0, replicas: int = 0, spacing_steps: int = 0
) -> EffectiveSampleSize:
    """The record of a cell without usable series (diverged, or no fluctuations): NaN times,
    not flagged."""
    nan = np.full(len(names), np.nan)
    return EffectiveSampleSize(names, nan, nan, nan, sample_steps, replicas, spacing_steps)


def ess_log_lines(ess: EffectiveSampleSize) -> list[str]:
    """The cell log's summary line and, if flagged, a WARNING line."""
    taus = ", ".join(
        f"{n} {t:.4g} +- {se:.2g} steps"
        for n, t, se in zip(ess.names, ess.tau_steps, ess.tau_se_steps, strict=True)
    )
    esss = ", ".join(f"{n} {e:.4g}" for n, e in zip(ess.names, ess.ess, strict=True))
    lines = [
        f"tau_int {taus} (series spacing {ess.spacing_steps} steps); ESS {esss} "
        f"(R = {ess.replicas}); sampled {ess.sampled_tau:.3g} tau_int"
    ]
    if ess.undersampled:
        lines.append(
            f"WARNING: undersampled: {ess.sample_steps} sampling steps are {ess.sampled_tau:.3g} "
            f"< {MIN_TAU:g} integrated autocorrelation times; tau_int and ESS are lower bounds, "
            "and error bars are honest only from a jackknife over replicas"
        )
    return lines


def ess_variables(ess: EffectiveSampleSize, method: str, source: str) -> dict[str, tuple]:
    """Data variables (name -> (dims, value, attrs)) of a cell's effective sample size; all
    scalars with units "1" (step counts and ratios)."""
    src = f"{source}; Sokal automatic window c = 5 (weightdyn.stats.integrated_time)"
    rows = []
    for name, desc in zip(ess.names, _descriptions(ess.names), strict=True):
        rows += [
            (f"tau_int_{name}", ess.value(name, "tau_steps"),
             f"integrated autocorrelation time of {desc} ({method}; steps; from the "
             "replica-averaged autocorrelation function; a lower bound where undersampled)"),
            (f"tau_int_{name}_se", ess.value(name, "tau_se_steps"),
             f"standard error of tau_int_{name} (Sokal: tau sqrt(2(2M+1)/(R T)))"),
            (f"ess_{name}", ess.value(name, "ess"),
             f"effective sample size of {desc}, replicas * sample_steps / tau_int"),
        ]  # fmt: skip
    rows += [
        ("sampled_tau_int", ess.sampled_tau, "sampling length in units of the longest tau_int"),
        ("tau_int_spacing", np.int64(ess.spacing_steps),
         "steps between points of the autocorrelation series (thin x block average)"),
        ("undersampled", np.int8(ess.undersampled),
         f"sampled for fewer than {MIN_TAU:g} integrated autocorrelation times (1: flagged)"),
    ]  # fmt: skip
    return {name: ((), value, attrs(long_name, "1", src)) for name, value, long_name in rows}


def _descriptions(names: tuple[str, ...]) -> list[str]:
    known = {"slowest": "the projection on the slowest mode", "loss": "the training loss"}
    return [known.get(n, f"observable {n}") for n in names]
