"""Training data for the two-layer linear network (paper 000, Section III.1).

Inputs are Gaussian with zero mean: i.i.d. ``x_i ~ N(0, sigma_x^2)`` with ``sigma_x^2 = 1/N_i``
(the paper's case, Fig. 7), or ``x ~ N(0, Sigma_x)`` with a given input covariance (e.g. from
:func:`weightdyn.data.input_covariance`, normalised to ``tr Sigma_x = 1``; Fig. 6 uses non-white
inputs). Targets ``y in R^{N_o}`` are either

* ``"random"``: i.i.d. ``y_i ~ N(0, sigma_y^2)`` independent of the inputs (the paper's case,
  "we do not suppose such a relation"), or
* ``"teacher"``: a linear teacher plus label noise, ``y = U x + eps`` with ``U`` of shape
  ``(N_o, N_i)`` with i.i.d. ``N(0, sigma_u^2)`` entries and ``eps ~ N(0, sigma_y^2 1)``
  (Eq. 1 of the single-layer section, one row of ``U`` per output).

Conventions: ``X`` has shape ``(P, N_i)`` and ``Y`` shape ``(P, N_o)``, one row per sample (the
paper's design matrices are the transposes); ``Y`` is two-dimensional also for ``N_o = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from weightdyn.data import _covariance_root

__all__ = ["TARGET_KINDS", "TwoLayerData", "two_layer_data"]

TARGET_KINDS = ("random", "teacher")


@dataclass(frozen=True)
class TwoLayerData:
    """A two-layer training set (paper 000 Sec. III.1).

    ``X`` (P, N_i), ``Y`` (P, N_o); ``U`` (N_o, N_i) the teacher (``None`` for random targets);
    ``sigma_x2`` the mean input variance ``tr(Sigma_x)/N_i``; ``sigma_y2`` the variance of the
    random targets (``"random"``) or of the label noise (``"teacher"``); ``input_cov`` the input
    covariance used (``None`` for i.i.d. inputs with ``sigma_x^2 = 1/N_i``).
    """

    X: np.ndarray
    Y: np.ndarray
    targets: str
    sigma_x2: float
    sigma_y2: float
    U: np.ndarray | None = None
    input_cov: np.ndarray | None = None

    @property
    def P(self) -> int:
        return self.X.shape[0]

    @property
    def N_i(self) -> int:
        return self.X.shape[1]

    @property
    def N_o(self) -> int:
        return self.Y.shape[1]


def two_layer_data(
    N_i: int,
    P: int,
    rng: np.random.Generator,
    *,
    N_o: int = 1,
    targets: str = "random",
    sigma_y2: float = 1.0,
    sigma_u2: float = 1.0,
    input_cov: np.ndarray | None = None,
    noise_rng: np.random.Generator | None = None,
) -> TwoLayerData:
    """Draw ``P`` samples for a network with ``N_i`` inputs and ``N_o >= 1`` outputs.

    Draw order: ``X`` (P, N_i), then for ``"teacher"`` the teacher ``U`` (N_o, N_i), then the
    standard normal draws ``Z`` (P, N_o) of the targets / label noise, ``sqrt(sigma_y2) Z``;
    ``Z`` comes from ``noise_rng`` if given, else from ``rng``. The level ``sigma_y2`` never
    changes which numbers are drawn, so calls that differ only in it share ``X``, ``U`` and
    ``Z`` exactly. I.i.d. inputs are ``rng.normal(0, sqrt(1/N_i))``; with ``input_cov`` they
    are ``g @ Sigma_x^{1/2}`` with standard normal ``g``.

    Raises
    ------
    ValueError
        for non-positive sizes, negative variances, an unknown ``targets`` or an
        ``input_cov`` that is not a symmetric PSD (N_i, N_i) matrix.
    """
    if N_i < 1 or P < 1 or N_o < 1:
        raise ValueError(f"N_i, P and N_o must be positive, got N_i={N_i}, P={P}, N_o={N_o}")
    if targets not in TARGET_KINDS:
        raise ValueError(f"targets must be one of {TARGET_KINDS}, got targets={targets!r}")
    if sigma_y2 < 0 or sigma_u2 < 0:
        raise ValueError(f"variances must be >= 0, got sigma_y2={sigma_y2}, sigma_u2={sigma_u2}")
    if input_cov is None:
        sigma_x2 = 1.0 / N_i
        X = rng.normal(0.0, np.sqrt(sigma_x2), size=(P, N_i))
        cov = None
    else:
        cov = np.array(input_cov, dtype=float)
        if cov.shape != (N_i, N_i):
            raise ValueError(f"input_cov must have shape ({N_i}, {N_i}), got {cov.shape}")
        root = _covariance_root(cov)
        sigma_x2 = float(np.trace(cov)) / N_i
        X = rng.standard_normal((P, N_i)) @ root
    U = None
    if targets == "teacher":
        U = rng.normal(0.0, np.sqrt(sigma_u2), size=(N_o, N_i))
    noise = np.sqrt(sigma_y2) * (rng if noise_rng is None else noise_rng).standard_normal((P, N_o))
    Y = noise if U is None else X @ U.T + noise
    return TwoLayerData(
        X=X, Y=Y, targets=targets, sigma_x2=sigma_x2, sigma_y2=float(sigma_y2), U=U, input_cov=cov
    )
