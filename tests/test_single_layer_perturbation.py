"""Loss perturbation along SGD covariance eigenvectors (paper 000 Fig. 5, Eq. 35), Table 1, and
the correlated-input / random-label data generators (Sec. II.1)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from weightdyn.data import (
    gaussian_teacher_student,
    input_covariance,
    teacher_student,
)
from weightdyn.single_layer import perturbation as pt
from weightdyn.single_layer import theory
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd

THETAS = np.array([1e-3, 1e-2, 0.1, 1.0])


def _protocol(replicas: int, sample_steps: int) -> SGDProtocol:
    return SGDProtocol(
        replicas=replicas,
        burnin_tau=0.0,
        burnin_min_steps=1000,
        sample_steps=sample_steps,
        thin=10,
        n_blocks=4,
    )


# ------------------------------------------------------------------------------- data


@pytest.mark.parametrize(
    ("kind", "param"), [("iid", None), ("exponential", 0.7), ("powerlaw", 1.5)]
)
def test_correlated_inputs_have_the_requested_covariance(kind, param) -> None:
    """Sample covariance of many draws matches Sigma_x entrywise within its standard error."""
    N, P = 8, 40_000
    cov = input_covariance(N, kind, param, np.random.default_rng(0))
    assert np.trace(cov) == pytest.approx(1.0, rel=1e-12)
    data = gaussian_teacher_student(N, P, 0.25, np.random.default_rng(1), input_cov=cov, n_test=1)
    sample = data.X.T @ data.X / P
    # Var of the sample mean of x_i x_j for Gaussian x: (S_ii S_jj + S_ij^2) / P
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / P)
    z = (sample - cov) / se
    assert np.max(np.abs(z)) < 4.0
    assert 0.5 < np.mean(z[np.triu_indices(N)] ** 2) < 1.6
    assert data.sigma_x2 == pytest.approx(1.0 / N)


def test_generator_reproducible_and_iid_draw_order() -> None:
    cov = input_covariance(6, "exponential", 0.5)
    a = gaussian_teacher_student(6, 20, 0.1, np.random.default_rng(7), input_cov=cov)
    b = gaussian_teacher_student(6, 20, 0.1, np.random.default_rng(7), input_cov=cov)
    for key in ("X", "y", "u", "eps", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    # the documented i.i.d. draw order (u, X, eps, X_test, test noise), which keeps the data of
    # existing sweep cells unchanged
    c = teacher_student(6, 20, 0.1, np.random.default_rng(7), n_test=5)
    rng = np.random.default_rng(7)
    u = rng.normal(0.0, 1.0, size=6)
    X = rng.normal(0.0, np.sqrt(1 / 6), size=(20, 6))
    eps = rng.normal(0.0, np.sqrt(0.1), size=20)
    X_test = rng.normal(0.0, np.sqrt(1 / 6), size=(5, 6))
    y_test = X_test @ u + rng.normal(0.0, np.sqrt(0.1), size=5)
    for key, ref in (("u", u), ("X", X), ("eps", eps), ("X_test", X_test), ("y_test", y_test)):
        np.testing.assert_array_equal(getattr(c, key), ref)
    np.testing.assert_array_equal(c.y, X @ u + eps)
    assert c.sigma_x2 == 1 / 6


def test_random_labels() -> None:
    """u = 0, eps -> y (Sec. II.1): the labels are the noise, the inputs are unchanged."""
    ref = teacher_student(10, 50, 0.5, np.random.default_rng(3))
    data = gaussian_teacher_student(10, 50, 0.5, np.random.default_rng(3), random_labels=True)
    assert np.all(data.u == 0)
    np.testing.assert_array_equal(data.y, data.eps)
    np.testing.assert_array_equal(data.X, ref.X)
    np.testing.assert_array_equal(data.eps, ref.eps)
    np.testing.assert_allclose(data.y_test, data.y_test - data.X_test @ data.u)
    assert np.var(data.y_test) == pytest.approx(0.5, rel=0.2)


def test_input_covariance_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="kind"):
        input_covariance(4, "gauss")
    with pytest.raises(ValueError, match="rho"):
        input_covariance(4, "exponential", 1.0)
    with pytest.raises(ValueError, match="rng"):
        input_covariance(4, "powerlaw", 1.0)


# ---------------------------------------------------------------------------- Fig. 5


def test_loss_perturbation_is_the_quadratic_form_of_eq35() -> None:
    data = teacher_student(12, 60, 0.25, np.random.default_rng(2))
    w_star = theory.min_norm_solution(data.X, data.y)
    V = np.linalg.qr(np.random.default_rng(3).normal(size=(12, 12)))[0]
    dL = pt.loss_perturbation(data.X, data.y, w_star, V, THETAS)
    exact = pt.perturbation_theory_exact(theory.hessian(data.X), V, THETAS)
    np.testing.assert_allclose(dL, exact, rtol=1e-6)
    np.testing.assert_allclose(pt.perturbation_theory_iid(2.0, 0.1), 0.2)


@pytest.fixture(scope="module")
def fig5a_dataset():
    """Fig. 5a: N = 100, P = 2000, iid, lr = 0.1, S = 10, sigma_eps^2 = 0.25."""
    data = teacher_student(100, 2000, 0.25, np.random.default_rng(20))
    return pt.run_perturbation_cell(
        data, 0.1, 10, THETAS, np.random.default_rng(21), _protocol(8, 80_000)
    )


def test_fig5a_loss_perturbation_is_isotropic(fig5a_dataset) -> None:
    """delta L / theta^2 is the same for every covariance mode (spread <= 5 %) and equals
    sigma_x^2 / 2 (mean within 5 %): no inverse variance-flatness relation (Sec. II.3.2)."""
    ds = fig5a_dataset
    ratio = ds["delta_L_over_theta2"]
    spread = ratio.std("mode") / ratio.mean("mode")
    assert float(spread.max()) <= 0.05
    mean = ratio.mean("mode") / ds["delta_L_over_theta2_iid"]
    np.testing.assert_allclose(mean, 1.0, atol=0.05)
    # independent of theta (Eq. 35 is exact for the quadratic loss)
    np.testing.assert_allclose(ratio, ds["delta_L_over_theta2_exact"], rtol=1e-5)
    # the covariance spectrum is anisotropic although delta L is not: its extreme eigenvalues
    # differ by more than a factor 2, normalised by lr sigma_eps^2 / (2S) (Eq. 34, not /S)
    eig = ds["eig_M_sgd"] / ds["M_isotropic"]
    assert float(eig[0] / eig[-1]) > 2.0
    assert float(eig.mean()) == pytest.approx(
        float(ds["eig_M_theory"].mean() / ds["M_isotropic"]), rel=0.05
    )


def test_dataset_conventions_and_figures(fig5a_dataset) -> None:
    from weightdyn.plots.perturbation import fig5a, fig5b

    assert fig5a_dataset["delta_L"].dims == ("mode", "theta")
    for name, var in fig5a_dataset.data_vars.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name
    fig = fig5a(fig5a_dataset)
    assert fig.axes[0].get_legend() is not None
    plt.close(fig)

    cov = input_covariance(10, "exponential", 0.8)
    cells = []
    for seed in range(3):
        data = gaussian_teacher_student(10, 50, 0.25, np.random.default_rng(seed), input_cov=cov)
        cells.append(
            pt.run_perturbation_cell(
                data, 0.1, 5, THETAS, np.random.default_rng(100 + seed), _protocol(4, 4000)
            )
        )
    avg = pt.average_over_realisations(cells)
    assert avg["delta_L_over_theta2_mean"].dims == ("mode", "theta")
    assert avg.sizes["realisation"] == 3
    for name, var in avg.data_vars.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name
    # the mode average of delta L / theta^2 is tr(H)/(2N) -> sigma_x^2 / 2 (tr Sigma_x = 1)
    per_set = cells[0]["delta_L_over_theta2"].mean("mode") / cells[0]["delta_L_over_theta2_iid"]
    np.testing.assert_allclose(per_set, 1.0, atol=0.3)
    fig = fig5b(avg)
    assert fig.legends
    plt.close(fig)


# ---------------------------------------------------------------------------- Table 1


def test_table1_rows_say_what_the_paper_says() -> None:
    protocol = _protocol(4, 8000)
    cells = []
    for N, P, s2 in [(10, 40, 0.25), (10, 40, 0.0025), (30, 15, 0.25), (50, 15, 0.25)]:
        data = teacher_student(N, P, s2, np.random.default_rng(N * P))
        w_star, result = run_stationary_sgd(
            data, 0.1, 5, "with", protocol, np.random.default_rng(1)
        )
        cells.append((data, w_star, result))
    rows = [pt.table1_row(data, w_star, result, 0.1, 5) for data, w_star, result in cells]
    assert [r["regime"] for r in rows] == ["under", "under", "over", "over"]
    for r in rows:
        assert r["agrees_student"] and r["agrees_loss"] and r["agrees_fluctuations"], r
        assert r["paper_loss"] == pt.TABLE1_PAPER[r["regime"]]["loss"]
    under, under_small, *over = rows
    # underparameterised: nonzero loss and fluctuations, both ~ sigma_eps^2 (Eq. 34)
    assert under["train_loss"] > 1e-3 and under["var_w"] > 1e-4
    assert under["var_w"] == pytest.approx(under["var_w_theory"], rel=0.3)
    assert under_small["var_w"] / under["var_w"] == pytest.approx(0.01, rel=0.3)
    assert under_small["train_loss"] / under["train_loss"] == pytest.approx(0.01, rel=1e-6)
    assert under_small["student_teacher_dist"] < 0.2 * under["student_teacher_dist"]
    # overparameterised: final loss ~ 0 and fluctuations ~ 0, student differs from teacher
    for r in over:
        assert r["train_loss"] < 1e-20 and r["var_w"] < 1e-20
        assert r["student_teacher_dist"] > 0.3
    # the cell datasets hold the same numbers, and the Table 1 figure prints one row per cell
    from weightdyn.io import stack_cells
    from weightdyn.plots.perturbation import table1

    datasets = [pt.table1_dataset(*cell, 0.1, 5) for cell in cells]
    for ds, row in zip(datasets, rows, strict=True):
        assert float(ds["train_loss"]) == row["train_loss"]
        assert int(ds["overparameterised"]) == (row["regime"] == "over")
        assert int(ds["agrees_loss"]) == row["agrees_loss"]
        for var in ds.data_vars.values():
            assert {"long_name", "units", "source"} <= set(var.attrs)
    coords = {
        key: ([row[key] for row in rows], {"long_name": key, "units": "1"})
        for key in ("N", "P", "sigma_eps2")
    }
    fig = table1(stack_cells(datasets, coords))
    texts = [c.get_text().get_text() for c in fig.axes[0].tables[0].get_celld().values()]
    assert texts.count("yes") == len(rows)
    assert sum("vanishes (also if" in t for t in texts) == 2
    plt.close(fig)


def test_diverged_cells_are_flagged_not_raised() -> None:
    """Beyond the stability limit the SGD columns are NaN and ``diverged`` is 1; the theory
    columns stay (docs/design.md: a cell that cannot be simulated says so)."""
    data = teacher_student(5, 20, 0.25, np.random.default_rng(3))
    protocol = _protocol(2, 400)
    ds = pt.run_perturbation_cell(data, 80.0, 5, THETAS, np.random.default_rng(4), protocol)
    assert int(ds["diverged"]) == 1
    assert np.isnan(ds["eig_M_sgd"]).all() and np.isnan(ds["delta_L"]).all()
    assert np.isfinite(ds["delta_L_over_theta2_iid"])
    w_star, result = run_stationary_sgd(data, 80.0, 5, "with", protocol, np.random.default_rng(4))
    table = pt.table1_dataset(data, w_star, result, 80.0, 5)
    assert int(table["diverged"]) == 1 and np.isnan(float(table["train_loss"]))
    assert np.isfinite(float(table["train_loss_theory"]))
    assert int(table["agrees_loss"]) == 0
