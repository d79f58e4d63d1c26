"""Noise sweeps vary the label noise on fixed inputs (paper 000 Eqs. 1-2, Sec. III.1, App. A).

Cells and data sets that differ only in the label-noise level (``sigma_eps2``, ``sigma_y2``,
``noise``) share the inputs, the teacher, the test inputs and the standard noise draws exactly:
the noise is ``sqrt(level)`` times one fixed standard normal draw. A different ``data_seed``
still gives different data.
"""

from __future__ import annotations

import numpy as np
import pytest

from weightdyn import data, sweep
from weightdyn.models import Linear
from weightdyn.models import cell as models_cell
from weightdyn.models import experiment as models_experiment
from weightdyn.single_layer import dynamics_experiments, theory
from weightdyn.single_layer.teacher_student import TEACHER_STUDENT
from weightdyn.two_layer import protocol as two_layer_protocol

LOW, HIGH = 0.1, 1.0


def _assert_paired(a: dict[str, np.ndarray], b: dict[str, np.ndarray], low: float, high: float):
    """Arrays are equal, but those named ``noise*``, which scale by sqrt(level) only."""
    for name in a:
        if not name.startswith("noise"):
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
            continue
        z_low, z_high = a[name] / np.sqrt(low), b[name] / np.sqrt(high)
        np.testing.assert_allclose(z_low, z_high, rtol=1e-12, atol=1e-12, err_msg=name)
        assert np.std(z_low) > 0.5  # a standard draw, not zeros


def _cells(experiment: str, block: dict, axis: str) -> list[dict]:
    """The cells of a sweep of ``block`` over ``axis`` in (LOW, HIGH), as the workflow expands
    them (derived parameters included)."""
    cells = sweep.expand_sweep("paired", {"experiment": experiment, **block, axis: [LOW, HIGH]})
    params = [dict(cell.params) for cell in cells.cells]
    assert [p[axis] for p in params] == [LOW, HIGH]
    return params


def _single_layer(params: dict) -> dict[str, np.ndarray]:
    d = TEACHER_STUDENT.load(TEACHER_STUDENT.make(params))
    return {"X": d.X, "u": d.u, "X_test": d.X_test, "noise": d.eps,
            "noise_test": d.y_test - d.X_test @ d.u}  # fmt: skip


@pytest.mark.parametrize("experiment", ["single_layer", "table1", "relaxation", "k_diagonal"])
def test_single_layer_cells_share_inputs_across_noise_levels(experiment: str) -> None:
    """The shared teacher-student data set of two cells differing only in sigma_eps2."""
    block = {"N": 8, "P": 24, "batch_size": 4, "lr": 0.1}
    if experiment == "k_diagonal":
        block = {"N": 8, "P": 24}
    low, high = (_single_layer(p) for p in _cells(experiment, block, "sigma_eps2"))
    _assert_paired(low, high, LOW, HIGH)
    top = [theory.sorted_eigenvalues(theory.hessian(d["X"]))[0] for d in (low, high)]
    assert top[0] == top[1]  # the same Hessian at every noise level


def test_single_layer_data_seed_gives_new_inputs() -> None:
    """data_seed still draws a new data set, and the data set holds the labels of Eq. 1."""
    params = {"N": 8, "P": 24, "sigma_eps2": LOW, "data_seed": 0, "n_test": 50}
    d0 = TEACHER_STUDENT.load(TEACHER_STUDENT.make(params))
    d1 = TEACHER_STUDENT.load(TEACHER_STUDENT.make({**params, "data_seed": 1}))
    assert not np.allclose(d0.X, d1.X)
    assert not np.allclose(d0.u, d1.u)
    assert not np.allclose(d0.eps / np.sqrt(LOW), d1.eps / np.sqrt(LOW))
    np.testing.assert_allclose(d0.y, d0.X @ d0.u + d0.eps, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"random_labels": True}, {"input_cov": data.input_covariance(6, "exponential", 0.6)}],
    ids=["teacher", "random_labels", "correlated"],
)
@pytest.mark.parametrize("separate_noise_stream", [False, True])
def test_gaussian_teacher_student_paired(kwargs: dict, separate_noise_stream: bool) -> None:
    """The public function, one generator or two: equal generator states give equal inputs."""

    def draw(level: float) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(11)
        noise_rng = np.random.default_rng(12) if separate_noise_stream else None
        d = data.gaussian_teacher_student(
            6, 15, level, rng, n_test=9, noise_rng=noise_rng, **kwargs
        )
        return {"X": d.X, "u": d.u, "X_test": d.X_test, "noise": d.eps}

    low, high = draw(LOW), draw(HIGH)
    _assert_paired(low, high, LOW, HIGH)
    if kwargs.get("random_labels"):
        np.testing.assert_array_equal(low["u"], np.zeros(6))


def test_teacher_student_without_noise_rng_keeps_its_draws() -> None:
    """The old call (one generator, no noise_rng) draws u, X, eps, X_test, test noise in turn."""
    d = data.teacher_student(5, 12, 0.3, np.random.default_rng(4), n_test=7)
    rng = np.random.default_rng(4)
    u = rng.normal(0.0, 1.0, size=5)
    X = rng.normal(0.0, np.sqrt(1 / 5), size=(12, 5))
    eps = rng.normal(0.0, np.sqrt(0.3), size=12)
    X_test = rng.normal(0.0, np.sqrt(1 / 5), size=(7, 5))
    for got, want in ((d.u, u), (d.X, X), (d.eps, eps), (d.X_test, X_test)):
        np.testing.assert_array_equal(got, want)


def test_correlated_perturbation_data_paired() -> None:
    """Fig. 5b cells: each realisation's covariance and inputs do not depend on sigma_eps2."""
    block = {"N": 6, "P": 18, "batch_size": 3, "inputs": "correlated",
             "input_covariance": "powerlaw", "correlation": 1.0, "realisations": 2}  # fmt: skip
    cells = _cells("perturbation", block, "sigma_eps2")
    pairs = []
    for r in (0, 1):
        low, high = (dynamics_experiments._correlated_data(p, r) for p in cells)
        _assert_paired(*({"X": d.X, "u": d.u, "X_test": d.X_test, "noise": d.eps}
                         for d in (low, high)), LOW, HIGH)  # fmt: skip
        pairs.append(low)
    assert not np.allclose(pairs[0].X, pairs[1].X)  # realisations differ
    other = dynamics_experiments._correlated_data({**cells[0], "data_seed": 1}, 0)
    assert not np.allclose(other.X, pairs[0].X)


@pytest.mark.parametrize("targets", ["random", "teacher"])
def test_two_layer_cells_share_inputs_across_sigma_y2(targets: str) -> None:
    """Two-layer cells differing only in sigma_y2: same X, U and standard target draws."""
    block = {"N_i": 4, "N_h": 3, "N_o": 2, "P": 30, "targets": targets, "lr": 0.05, "batch_size": 5}
    cells = _cells("two_layer", block, "sigma_y2")
    low, high = (two_layer_protocol.cell_data(p) for p in cells)

    def arrays(d) -> dict[str, np.ndarray]:
        teacher = np.zeros((d.N_o, d.N_i)) if d.U is None else d.U
        return {"X": d.X, "U": teacher, "noise": d.Y - d.X @ teacher.T}

    _assert_paired(arrays(low), arrays(high), LOW, HIGH)
    other = two_layer_protocol.cell_data({**cells[0], "data_seed": 1})
    assert not np.allclose(other.X, low.X)


def test_two_layer_init_does_not_depend_on_sigma_y2() -> None:
    """The start weights' stream (Eq. 71) is seeded by the data keys without sigma_y2."""
    cells = _cells(
        "two_layer", {"N_i": 4, "N_h": 3, "P": 30, "lr": 0.05, "batch_size": 5}, "sigma_y2"
    )
    keys = [{k: p[k] for k in (*two_layer_protocol.DATA_KEYS, "N_h", "init")} for p in cells]
    assert keys[0] == keys[1]


@pytest.mark.parametrize("experiment", ["deep_linear", "one_hidden"])
def test_models_cells_share_inputs_across_noise(experiment: str) -> None:
    """Deep linear and one-hidden-layer cells differing only in ``noise`` (App. A data)."""
    block = {"N_i": 4, "N_o": 1, "width": 3, "P": 40, "batch_size": 4, "lr": 0.01}
    if experiment == "deep_linear":
        block["depth"] = 2
    cells = _cells(experiment, block, "noise")

    def draw(p: dict) -> dict[str, np.ndarray]:
        if experiment == "deep_linear":
            model, teacher = models_experiment.deep_linear_model(p), Linear(p["N_i"], p["N_o"])
        else:
            model = models_experiment.one_hidden_model(p)
            teacher = models_experiment.OrthogonalTeacher(p["N_i"], p["width"], p["N_o"],
                                                          p["activation"])  # fmt: skip
        d = models_cell.teacher_data(model, teacher, p, float(p["teacher_scale"]))
        clean = teacher.output(d.X, d.theta_teacher)
        return {"X": d.X, "theta": d.theta_teacher, "noise": d.Y - clean}

    low, high = (draw(p) for p in cells)
    _assert_paired(low, high, LOW, HIGH)
    other = draw({**cells[0], "data_seed": 1})
    assert not np.allclose(other["X"], low["X"])
