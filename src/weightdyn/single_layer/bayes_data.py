"""Regression data sets of the App. B sampler experiment (paper 000; Wang, Ding & Huggins 2026).

``noise_model``:

* ``homoskedastic``: paper 000's teacher-student set (Eq. 1, ``sigma_x^2 = 1/N``, label noise
  of variance ``sigma_eps2``), drawn from the same streams as
  :data:`~weightdyn.single_layer.teacher_student.TEACHER_STUDENT`, so a cell here sees exactly
  the data of the single-layer cell with the same (N, P, sigma_eps2, data_seed): the Fig. 4
  data sets.
* ``heteroskedastic``: the protocol reported by Wang, Ding & Huggins (ICML 2026): inputs
  ``x ~ N(0, 1_N)``, teacher ``u ~ N(0, 1_N)``, label noise of variance
  ``sigma_eps2 (1 + |x|^2)`` (``sigma_eps2 = 1`` is theirs); streams
  ``single_layer/bayes/data/inputs`` and ``.../noise`` seeded by (N, P, data_seed).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from weightdyn import data, seeds
from weightdyn.experiments import DataSet, Param, Params
from weightdyn.single_layer import teacher_student

NOISE_MODELS = ("homoskedastic", "heteroskedastic")
NOISE_MODEL = Param(
    "noise_model",
    str,
    "homoskedastic",
    "label noise: homoskedastic (paper 000 Eq. 1) or variance sigma_eps2 (1 + |x|^2)",
    axis=True,
    allowed=NOISE_MODELS,
)
DATA_KEYS = ("N", "P", "noise_model", "sigma_eps2", "data_seed")
STREAMS = ("single_layer/bayes/data/inputs", "single_layer/bayes/data/noise")


def heteroskedastic(
    N: int, P: int, sigma_eps2: float, inputs: np.random.Generator, noise: np.random.Generator,
    n_test: int,
) -> data.TeacherStudentData:  # fmt: skip
    """``x ~ N(0, 1_N)``, ``y = u . x + eps``, ``Var eps = sigma_eps2 (1 + |x|^2)``."""
    u = inputs.normal(size=N)
    X = inputs.normal(size=(P, N))
    X_test = inputs.normal(size=(n_test, N))
    scale = np.sqrt(sigma_eps2 * (1.0 + np.sum(X * X, axis=1)))
    eps = scale * noise.normal(size=P)
    test_scale = np.sqrt(sigma_eps2 * (1.0 + np.sum(X_test * X_test, axis=1)))
    y_test = X_test @ u + test_scale * noise.normal(size=n_test)
    return data.TeacherStudentData(X, X @ u + eps, u, eps, X_test, y_test, 1.0, sigma_eps2)


def make(params: Params) -> xr.Dataset:
    """The data set of ``params`` (keys :data:`DATA_KEYS` and ``n_test``)."""
    if params["noise_model"] == "homoskedastic":
        return teacher_student.make(params)
    cell = {key: params[key] for key in ("N", "P", "data_seed")}
    inputs, noise = (seeds.generator(stream, cell) for stream in STREAMS)
    drawn = heteroskedastic(
        int(params["N"]), int(params["P"]), float(params["sigma_eps2"]), inputs, noise,
        int(params["n_test"]),
    )  # fmt: skip
    ds = data.to_dataset(drawn)
    ds.attrs["noise_model"] = "heteroskedastic"
    return ds


def load(ds: xr.Dataset) -> Any:
    """The stored data set as :class:`weightdyn.data.TeacherStudentData`."""
    return data.from_dataset(ds)


REGRESSION = DataSet("bayes_regression", DATA_KEYS, make, load, settings=("n_test",))
