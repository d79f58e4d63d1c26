"""Units phi(w, x), input measures mu and targets f of paper 002 (Eqs. 1-2).

Two units, both "models with linear output" (output weight first, ``w[..., 0]``):

- ``TanhUnit``: ``phi = c tanh(a x + h)``, ``w = (c, a, h)`` -- the shallow network of Eq. (1) with
  one input;
- ``ShiftedTanhUnit``: ``phi = w0 tanh(beta (x - h))``, ``w = (w0, h)`` with fixed slope ``beta`` --
  a two-dimensional weight space for the transport-equation solver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TanhUnit:
    """``phi(w, x) = c tanh(a x + h)`` with ``w = (c, a, h)``."""

    dim: int = 3
    names: tuple[str, ...] = ("c", "a", "h")

    def _z(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return w[..., 1, None] * x + w[..., 2, None]

    def values(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """phi(w, x_m), shape ``(..., M)``."""
        return w[..., 0, None] * np.tanh(self._z(w, x))

    def tilde(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """phi-tilde(w-tilde, x_m) = phi / c, shape ``(..., M)`` (``w`` holds the full weights)."""
        return np.tanh(self._z(w, x))

    def gradient(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """grad_w phi(w, x_m), shape ``(..., M, d)``."""
        t = np.tanh(self._z(w, x))
        cs = w[..., 0, None] * (1.0 - t * t)
        return np.stack([t, cs * x, cs], axis=-1)

    def hessian(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """D_w phi(w, x_m), shape ``(..., M, d, d)``."""
        t = np.tanh(self._z(w, x))
        s = 1.0 - t * t
        c2 = -2.0 * w[..., 0, None] * t * s
        xb = np.broadcast_to(x, t.shape)
        zero = np.zeros_like(t)
        rows = [
            [zero, s * xb, s],
            [s * xb, c2 * xb * xb, c2 * xb],
            [s, c2 * xb, c2],
        ]
        return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)

    def u_derivatives(
        self, w: np.ndarray, x: np.ndarray, rho: np.ndarray, laplacian: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """grad u and (optionally) Laplacian u for ``u(w) = sum_m rho_m phi(w, x_m)`` (Eq. 9).

        ``rho`` (the residual times the measure weights) broadcasts against ``(..., M)``.
        """
        t = np.tanh(self._z(w, x))
        s = 1.0 - t * t
        c = w[..., 0]
        rs = rho * s
        grad = np.stack(
            [(rho * t).sum(-1), c * (rs * x).sum(-1), c * rs.sum(-1)],
            axis=-1,
        )
        if not laplacian:
            return grad, None
        lap = -2.0 * c * (rs * t * (x * x + 1.0)).sum(-1)
        return grad, lap


@dataclass(frozen=True)
class ShiftedTanhUnit:
    """``phi(w, x) = w0 tanh(beta (x - h))`` with ``w = (w0, h)`` and a fixed slope ``beta``."""

    beta: float = 4.0
    dim: int = 2
    names: tuple[str, ...] = ("w0", "h")

    def _t(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.tanh(self.beta * (x - w[..., 1, None]))

    def values(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """phi(w, x_m), shape ``(..., M)``."""
        return w[..., 0, None] * self._t(w, x)

    def tilde(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """phi-tilde(h, x_m) = phi / w0, shape ``(..., M)`` (``w`` holds the full weights)."""
        return self._t(w, x)

    def gradient(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """grad_w phi(w, x_m), shape ``(..., M, 2)``."""
        t = self._t(w, x)
        return np.stack([t, -self.beta * w[..., 0, None] * (1.0 - t * t)], axis=-1)

    def hessian(self, w: np.ndarray, x: np.ndarray) -> np.ndarray:
        """D_w phi(w, x_m), shape ``(..., M, 2, 2)``."""
        t = self._t(w, x)
        s = 1.0 - t * t
        off = -self.beta * s
        hh = -2.0 * self.beta**2 * w[..., 0, None] * t * s
        zero = np.zeros_like(t)
        return np.stack([np.stack([zero, off], axis=-1), np.stack([off, hh], axis=-1)], axis=-2)

    def u_derivatives(
        self, w: np.ndarray, x: np.ndarray, rho: np.ndarray, laplacian: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """grad u and (optionally) Laplacian u for ``u(w) = sum_m rho_m phi(w, x_m)`` (Eq. 9)."""
        t = self._t(w, x)
        rs = rho * (1.0 - t * t)
        w0 = w[..., 0]
        grad = np.stack([(rho * t).sum(-1), -self.beta * w0 * rs.sum(-1)], axis=-1)
        if not laplacian:
            return grad, None
        lap = -2.0 * self.beta**2 * w0 * (rs * t).sum(-1)
        return grad, lap


Unit = TanhUnit | ShiftedTanhUnit


def make_unit(spec: Mapping[str, object]) -> Unit:
    """The unit of ``{"kind": "tanh"}`` or ``{"kind": "shifted_tanh", "beta": beta}``."""
    kind = spec.get("kind")
    if kind == "tanh":
        return TanhUnit()
    if kind == "shifted_tanh":
        return ShiftedTanhUnit(beta=float(spec.get("beta", 4.0)))
    raise ValueError(f"unit: {kind!r} is not one of 'tanh', 'shifted_tanh'")


@dataclass(frozen=True)
class Measure:
    """A finite input measure ``mu = sum_m weights_m delta(x - x_m)`` with weights summing to 1."""

    x: np.ndarray
    weights: np.ndarray

    @property
    def size(self) -> int:
        """Number of atoms M."""
        return self.x.size


def gauss_legendre(m: int) -> Measure:
    """The uniform probability measure on [-1, 1] discretised by m Gauss-Legendre nodes."""
    x, w = np.polynomial.legendre.leggauss(m)
    return Measure(x, w / 2.0)


def training_set(x: np.ndarray) -> Measure:
    """The empirical measure of a finite training set (weights 1/M)."""
    x = np.asarray(x, dtype=float)
    return Measure(x, np.full(x.size, 1.0 / x.size))


def make_measure(spec: Mapping[str, object]) -> Measure:
    """Measure from config: ``{"kind": "gauss_legendre" | "grid", "size": M}``.

    ``grid`` is a finite training set of M equally spaced points on [-1, 1].
    """
    kind, size = spec.get("kind"), int(spec.get("size", 0))
    if size < 1:
        raise ValueError(f"measure.size: {spec.get('size')!r} must be a positive integer")
    if kind == "gauss_legendre":
        return gauss_legendre(size)
    if kind == "grid":
        return training_set(np.linspace(-1.0, 1.0, size))
    raise ValueError(f"measure.kind: {kind!r} is not one of 'gauss_legendre', 'grid'")


DEFAULT_BUMPS = ((1.0, 6.0, 2.0), (-1.5, 6.0, 0.0), (1.0, 6.0, -2.0))


def make_target(spec: Mapping[str, object]) -> Callable[[np.ndarray], np.ndarray]:
    """Target f(x) from config: ``kind`` "sin" (amplitude sin(pi x)) or "tanh_bumps".

    "tanh_bumps" is ``amplitude * sum_k c_k tanh(a_k x + h_k)`` over ``bumps`` = [[c, a, h], ...].
    """
    kind = spec.get("kind")
    amplitude = float(spec.get("amplitude", 1.0))
    if kind == "sin":
        return lambda x: amplitude * np.sin(np.pi * np.asarray(x))
    if kind == "tanh_bumps":
        bumps = np.asarray(spec.get("bumps", DEFAULT_BUMPS), dtype=float)
        if bumps.ndim != 2 or bumps.shape[1] != 3:
            raise ValueError("target.bumps: expected a list of [c, a, h] triples")
        return lambda x: amplitude * TanhUnit().values(bumps, np.asarray(x)).sum(0)
    raise ValueError(f"target.kind: {kind!r} is not one of 'sin', 'tanh_bumps'")
