"""The teacher-student data set shared by the single-layer experiments (paper 000 Eq. 1).

One data set per (N, P, sigma_eps2, data_seed) and test-set size, drawn from the stream
``single_layer/data`` seeded by exactly those four values, so every experiment that names the same
values sees the same data (and the workflow computes and caches it once).
"""

from __future__ import annotations

from typing import Any

import xarray as xr

from weightdyn import data, seeds
from weightdyn.experiments import DataSet, Param, Params

DATA_KEYS = ("N", "P", "sigma_eps2", "data_seed")

N_TEST = Param("n_test", int, 1000, "number of test samples", minimum=1)


def make(params: Params) -> xr.Dataset:
    """The data set of ``params`` (keys :data:`DATA_KEYS` and ``n_test``) as a Dataset."""
    cell = {key: params[key] for key in DATA_KEYS}
    rng = seeds.generator("single_layer/data", cell)
    drawn = data.teacher_student(
        int(cell["N"]), int(cell["P"]), float(cell["sigma_eps2"]), rng, n_test=params["n_test"]
    )
    return data.to_dataset(drawn)


def load(ds: xr.Dataset) -> Any:
    """The stored data set as :class:`weightdyn.data.TeacherStudentData`."""
    return data.from_dataset(ds)


TEACHER_STUDENT = DataSet("teacher_student", DATA_KEYS, make, load, settings=("n_test",))
