"""The teacher-student data set shared by the single-layer experiments (paper 000 Eq. 1).

One data set per (N, P, sigma_eps2, data_seed) and test-set size, so every experiment that names
the same values sees the same data (and the workflow computes and caches it once). Its random
numbers do not depend on the label-noise level: the teacher u, the inputs X and the test inputs
come from the stream ``single_layer/data/inputs`` and the standard normal label-noise draws z from
``single_layer/data/noise``, both seeded by (N, P, data_seed) alone, and eps = sqrt(sigma_eps2) z
(Eqs. 1-2). Data sets that differ only in sigma_eps2 therefore share X, u, X_test and z exactly:
a noise sweep varies the label noise on fixed inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from weightdyn import data, seeds
from weightdyn.experiments import DataSet, Param, Params

DATA_KEYS = ("N", "P", "sigma_eps2", "data_seed")
#: the keys seeding the data set's streams: :data:`DATA_KEYS` without the noise level
STREAM_KEYS = ("N", "P", "data_seed")
INPUT_STREAM = "single_layer/data/inputs"
NOISE_STREAM = "single_layer/data/noise"

N_TEST = Param("n_test", int, 1000, "number of test samples", minimum=1)


def generators(params: Params) -> tuple[np.random.Generator, np.random.Generator]:
    """(inputs, noise) generators of the data set of ``params``, independent of sigma_eps2."""
    cell = {key: params[key] for key in STREAM_KEYS}
    return seeds.generator(INPUT_STREAM, cell), seeds.generator(NOISE_STREAM, cell)


def make(params: Params) -> xr.Dataset:
    """The data set of ``params`` (keys :data:`DATA_KEYS` and ``n_test``) as a Dataset."""
    inputs, noise = generators(params)
    drawn = data.teacher_student(
        int(params["N"]),
        int(params["P"]),
        float(params["sigma_eps2"]),
        inputs,
        n_test=params["n_test"],
        noise_rng=noise,
    )
    return data.to_dataset(drawn)


def load(ds: xr.Dataset) -> Any:
    """The stored data set as :class:`weightdyn.data.TeacherStudentData`."""
    return data.from_dataset(ds)


TEACHER_STUDENT = DataSet("teacher_student", DATA_KEYS, make, load, settings=("n_test",))
