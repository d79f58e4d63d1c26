"""Synthetic teacher-student data sets (paper 000, Sec. II.1, Eqs. 1-2).

Inputs are i.i.d. Gaussian, x_i ~ N(0, sigma_x^2) with sigma_x^2 = 1/N; the teacher u has i.i.d.
N(0, sigma_u^2) entries and the labels are y = u.x + eps with eps ~ N(0, sigma_eps^2) (Eq. 1).
Arrays are numpy, one row per sample: X has shape (P, N) (the paper's X is the transpose).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import xarray as xr

from weightdyn.io import attrs


@dataclass(frozen=True)
class TeacherStudentData:
    """A training set, a fresh test set of the same teacher, and the teacher itself (Eq. 1)."""

    X: np.ndarray
    y: np.ndarray
    u: np.ndarray
    eps: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    sigma_x2: float
    sigma_eps2: float

    @property
    def N(self) -> int:
        return self.X.shape[1]

    @property
    def P(self) -> int:
        return self.X.shape[0]


def teacher_student(
    N: int,
    P: int,
    sigma_eps2: float,
    rng: np.random.Generator,
    n_test: int = 1000,
    sigma_u2: float = 1.0,
    *,
    noise_rng: np.random.Generator | None = None,
) -> TeacherStudentData:
    """Draw a teacher-student regression problem (paper 000 Eqs. 1-2) with sigma_x^2 = 1/N.

    The test set holds ``n_test`` fresh samples of the same teacher with fresh label noise.
    The label noise is ``sqrt(sigma_eps2)`` times standard normal draws, so two calls that
    differ only in ``sigma_eps2`` share the inputs, the teacher and the test inputs exactly
    (see :func:`gaussian_teacher_student`, also for ``noise_rng``).
    """
    return gaussian_teacher_student(
        N, P, sigma_eps2, rng, n_test=n_test, sigma_u2=sigma_u2, noise_rng=noise_rng
    )


def to_dataset(data: TeacherStudentData) -> xr.Dataset:
    """The data set as netCDF-ready xarray variables (saved beside each cell's results)."""
    src = "paper 000 Eq. 1"
    return xr.Dataset(
        {
            "X": (("sample", "feature"), data.X, attrs("training inputs x^mu", "1", src)),
            "y": (("sample",), data.y, attrs("training labels y^mu", "1", src)),
            "u": (("feature",), data.u, attrs("teacher weights u", "1", src)),
            "eps": (("sample",), data.eps, attrs("label noise epsilon^mu", "1", src)),
            "X_test": (("test_sample", "feature"), data.X_test, attrs("test inputs", "1", src)),
            "y_test": (("test_sample",), data.y_test, attrs("test labels", "1", src)),
        },
        attrs={"sigma_x2": data.sigma_x2, "sigma_eps2": data.sigma_eps2},
    )


def from_dataset(ds: xr.Dataset) -> TeacherStudentData:
    """Inverse of :func:`to_dataset`."""
    return TeacherStudentData(
        X=ds["X"].values,
        y=ds["y"].values,
        u=ds["u"].values,
        eps=ds["eps"].values,
        X_test=ds["X_test"].values,
        y_test=ds["y_test"].values,
        sigma_x2=float(ds.attrs["sigma_x2"]),
        sigma_eps2=float(ds.attrs["sigma_eps2"]),
    )


# ----------------------------------------------------------------- correlated inputs

#: input covariance families of :func:`input_covariance`
COVARIANCE_KINDS = ("iid", "exponential", "powerlaw")


def input_covariance(
    N: int,
    kind: str = "iid",
    param: float | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Input covariance Sigma_x (N, N) normalised to tr(Sigma_x) = 1 (paper 000 Sec. II.1, Fig. 5b).

    The i.i.d. case of Sec. II.1 has Sigma_x = sigma_x^2 1 with sigma_x^2 = 1/N, hence
    tr(Sigma_x) = 1; every family keeps this normalisation, so the mean feature variance is
    sigma_x^2 = 1/N and tr(H)/N -> sigma_x^2 as P -> infinity (Eq. 4) in all cases.

    * ``"iid"``: ``Sigma_x = 1/N``; ``param`` is ignored.
    * ``"exponential"``: ``Sigma_ij = sigma_x^2 rho^|i-j|`` with ``rho = param`` in [0, 1)
      (an AR(1) feature chain; its diagonal is sigma_x^2, so the trace is 1 exactly).
    * ``"powerlaw"``: eigenvalues proportional to ``k^-alpha`` (k = 1..N, ``alpha = param``
      >= 0), normalised to sum 1, in a Haar-random orthonormal basis drawn from ``rng``.

    Returns a symmetric positive-definite matrix. ``rng`` is needed only for ``"powerlaw"``.
    """
    if N < 1:
        raise ValueError(f"N must be positive, got N={N}")
    if kind not in COVARIANCE_KINDS:
        raise ValueError(f"kind must be one of {COVARIANCE_KINDS}, got kind={kind!r}")
    sigma_x2 = 1.0 / N
    if kind == "iid":
        return sigma_x2 * np.eye(N)
    if param is None:
        raise ValueError(f"kind={kind!r} needs param (rho or alpha)")
    if kind == "exponential":
        rho = float(param)
        if not 0.0 <= rho < 1.0:
            raise ValueError(f"exponential covariance needs 0 <= rho < 1, got rho={rho}")
        lag = np.abs(np.subtract.outer(np.arange(N), np.arange(N)))
        return sigma_x2 * rho**lag
    alpha = float(param)
    if alpha < 0:
        raise ValueError(f"powerlaw covariance needs alpha >= 0, got alpha={alpha}")
    if rng is None:
        raise ValueError("kind='powerlaw' needs rng for its random eigenbasis")
    spectrum = np.arange(1, N + 1, dtype=float) ** (-alpha)
    spectrum /= spectrum.sum()
    Q, R = np.linalg.qr(rng.standard_normal((N, N)))
    Q = Q * np.sign(np.diag(R))  # Haar measure (Mezzadri's sign fix)
    Sigma = (Q * spectrum) @ Q.T
    return 0.5 * (Sigma + Sigma.T)


def _covariance_root(Sigma: np.ndarray) -> np.ndarray:
    """A matrix L with L L^T = Sigma (symmetric square root; PSD Sigma allowed)."""
    Sigma = np.asarray(Sigma, dtype=float)
    if Sigma.ndim != 2 or Sigma.shape[0] != Sigma.shape[1]:
        raise ValueError(f"input_cov must be a square matrix, got shape {Sigma.shape}")
    if not np.allclose(Sigma, Sigma.T, rtol=0.0, atol=1e-12 * max(1.0, np.abs(Sigma).max())):
        raise ValueError("input_cov must be symmetric")
    evals, evecs = np.linalg.eigh(0.5 * (Sigma + Sigma.T))
    if evals[0] < -1e-10 * max(evals[-1], 0.0):
        raise ValueError(f"input_cov must be positive semi-definite (min eigenvalue {evals[0]})")
    return (evecs * np.sqrt(np.clip(evals, 0.0, None))) @ evecs.T


def gaussian_teacher_student(
    N: int,
    P: int,
    sigma_eps2: float,
    rng: np.random.Generator,
    *,
    input_cov: np.ndarray | None = None,
    random_labels: bool = False,
    n_test: int = 1000,
    sigma_u2: float = 1.0,
    noise_rng: np.random.Generator | None = None,
) -> TeacherStudentData:
    """Teacher-student data (paper 000 Eqs. 1-2) with correlated inputs and/or random labels.

    * ``input_cov``: inputs x^mu ~ N(0, Sigma_x) with ``Sigma_x = input_cov`` (e.g. from
      :func:`input_covariance`), drawn as ``x = Sigma_x^{1/2} g`` with g standard normal.
      ``None`` means i.i.d. inputs with sigma_x^2 = 1/N, drawn exactly as
      :func:`teacher_student` draws them, so that call is reproduced bit for bit.
    * ``random_labels``: statistically independent random labels, i.e. the replacements
      ``u = 0``, ``eps -> y`` of Sec. II.1: y = eps ~ N(0, sigma_eps^2) (also on the test set).
      The teacher is still drawn (and discarded) so that the inputs equal those of the
      teacher-student draw from the same generator state.
    * ``noise_rng``: the generator of the label noise. The noise of Eq. 1 is always
      ``eps = sqrt(sigma_eps2) z`` with ``z`` standard normal (training noise first, then the
      test noise), so the noise level never changes which numbers are drawn: calls differing
      only in ``sigma_eps2`` share X, u, X_test and z exactly. With ``noise_rng`` the inputs
      come from ``rng`` alone (u, X, X_test) and z from ``noise_rng``; without it everything
      comes from ``rng`` in the order u, X, z, X_test, z_test.

    The returned ``sigma_x2`` is the mean feature variance tr(Sigma_x)/N (1/N for the families
    of :func:`input_covariance`).
    """
    if N < 1 or P < 1:
        raise ValueError(f"N and P must be positive, got N={N}, P={P}")
    if sigma_eps2 < 0:
        raise ValueError(f"sigma_eps2 must be >= 0, got {sigma_eps2}")
    if n_test < 1:
        raise ValueError(f"n_test must be positive, got {n_test}")
    draw_inputs, sigma_x2 = _input_sampler(N, rng, input_cov)
    sigma_eps = np.sqrt(sigma_eps2)
    u = rng.normal(0.0, np.sqrt(sigma_u2), size=N)
    if random_labels:
        u = np.zeros(N)
    X = draw_inputs(P)
    if noise_rng is None:
        eps = sigma_eps * rng.standard_normal(P)
        X_test = draw_inputs(n_test)
        eps_test = sigma_eps * rng.standard_normal(n_test)
    else:
        X_test = draw_inputs(n_test)
        eps = sigma_eps * noise_rng.standard_normal(P)
        eps_test = sigma_eps * noise_rng.standard_normal(n_test)
    return TeacherStudentData(
        X=X,
        y=X @ u + eps,
        u=u,
        eps=eps,
        X_test=X_test,
        y_test=X_test @ u + eps_test,
        sigma_x2=sigma_x2,
        sigma_eps2=float(sigma_eps2),
    )


def _input_sampler(
    N: int, rng: np.random.Generator, input_cov: np.ndarray | None
) -> tuple[Callable[[int], np.ndarray], float]:
    """(draw n inputs from ``rng``, mean feature variance) for i.i.d. (sigma_x^2 = 1/N) or
    ``input_cov``-correlated Gaussian inputs (paper 000 Sec. II.1)."""
    if input_cov is None:
        sigma_x = np.sqrt(1.0 / N)
        return (lambda n: rng.normal(0.0, sigma_x, size=(n, N))), 1.0 / N
    if np.shape(input_cov) != (N, N):
        raise ValueError(f"input_cov must have shape ({N}, {N}), got {np.shape(input_cov)}")
    root = _covariance_root(input_cov)  # symmetric: cov = root root^T
    return (lambda n: rng.standard_normal((n, N)) @ root), float(np.trace(input_cov)) / N
