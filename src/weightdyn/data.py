"""Synthetic teacher-student data sets (paper 000, Sec. II.1, Eqs. 1-2).

Inputs are i.i.d. Gaussian, x_i ~ N(0, sigma_x^2) with sigma_x^2 = 1/N; the teacher u has i.i.d.
N(0, sigma_u^2) entries and the labels are y = u.x + eps with eps ~ N(0, sigma_eps^2) (Eq. 1).
Arrays are numpy, one row per sample: X has shape (P, N) (the paper's X is the transpose).
"""

from __future__ import annotations

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
) -> TeacherStudentData:
    """Draw a teacher-student regression problem (paper 000 Eqs. 1-2) with sigma_x^2 = 1/N.

    The test set holds ``n_test`` fresh samples of the same teacher with fresh label noise.
    """
    if N < 1 or P < 1:
        raise ValueError(f"N and P must be positive, got N={N}, P={P}")
    if sigma_eps2 < 0:
        raise ValueError(f"sigma_eps2 must be >= 0, got {sigma_eps2}")
    if n_test < 1:
        raise ValueError(f"n_test must be positive, got {n_test}")
    sigma_x = np.sqrt(1.0 / N)
    sigma_eps = np.sqrt(sigma_eps2)
    u = rng.normal(0.0, np.sqrt(sigma_u2), size=N)
    X = rng.normal(0.0, sigma_x, size=(P, N))
    eps = rng.normal(0.0, sigma_eps, size=P)
    X_test = rng.normal(0.0, sigma_x, size=(n_test, N))
    y_test = X_test @ u + rng.normal(0.0, sigma_eps, size=n_test)
    return TeacherStudentData(
        X=X,
        y=X @ u + eps,
        u=u,
        eps=eps,
        X_test=X_test,
        y_test=y_test,
        sigma_x2=1.0 / N,
        sigma_eps2=float(sigma_eps2),
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
