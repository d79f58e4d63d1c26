"""Two-layer cell of paper 000 Sec. III (Figs. 6-7): dataset contract, identities, acceptance."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from weightdyn.plots import two_layer as plots
from weightdyn.two_layer import experiments as ex
from weightdyn.two_layer import theory as tl

SMALL = {
    "N_i": 8,
    "N_h": 6,
    "P": 80,
    "sigma_y2": 1.0,
    "lr": 0.1,
    "batch_size": 5,
    "replicas": 3,
    "n_blocks": 4,
    "prerun_tau": 100.0,
    "average_tau": 20.0,
    "sample_tau": 100.0,
    "relax_tau": 20.0,
    "relax_modes": 3,
}


@pytest.fixture(scope="module")
def small_cell() -> xr.Dataset:
    return ex.two_layer_cell(SMALL, lambda _msg: None)


def test_dataset_contract(small_cell: xr.Dataset) -> None:
    ds = small_cell
    N_i, N_h, N_o = SMALL["N_i"], SMALL["N_h"], 1
    assert ds.sizes["mode1"] == N_h * N_i and ds.sizes["mode2"] == N_o * N_h
    assert ds.sizes["replica"] == SMALL["replicas"]
    assert ds.sizes["z_row"] == ds.sizes["z_col"] == N_o * (N_i + N_h)
    for name in (
        "eig_cov1_sgd_a", "eig_cov1_sgd_a_se", "eig_cov1_eq66", "eig_cov1_exact_w0",
        "eig_cov1_sgd_b", "eig_cov1_sgd_b_se", "eig_cov1_exact_local", "delta_L1_sgd",
        "delta_L1_linear", "eig_cov2_sgd_a", "eig_cov2_eq66", "eig_cov2_eq70",
        "eig_cov2_exact_w0", "eig_cov2_sgd_b", "eig_cov2_exact_local", "ivfr_variance",
        "ivfr_curvature", "delta_L2_sgd", "trace_D2", "trace_tr_gamma", "trace_dist",
        "M_z_eq66", "M_z_sgd", "relax_acf", "relax_theory", "relax_rate", "M_isotropic",
        "err_cov2_b", "tr_ratio_cov1_b", "ivfr_spearman_mean", "ivfr_slope_mean",
        "delta_L1_drop_ratio", "d2_drift_factor",
    ):  # fmt: skip
        assert name in ds, name
    for name, var in ds.data_vars.items():
        assert {"long_name", "units", "source"} <= set(var.attrs), name
    for key in ex.BLOCK_KEYS:
        assert key in ds.attrs, key
    assert np.isfinite(ds["M_z_sgd"]).all()
    assert ds["M_isotropic"] == pytest.approx(0.1 / (2 * 5))
    assert int(ds["gf_converged"]) == 1


def test_internal_identities(small_cell: xr.Dataset) -> None:
    ds = small_cell
    N_i, N_o, P = SMALL["N_i"], 1, SMALL["P"]
    r = N_o * N_i
    norm = float(ds["M_isotropic"])
    # Eq. 68 (corrected Eq. 57): M has N_o N_i eigenvalues lr sigma_y^2 (1 - N_i/P)/(2S), rest 0
    ev = np.sort(np.linalg.eigvalsh(ds["M_z_eq66"].values))[::-1]
    np.testing.assert_allclose(ev[:r], norm * (1 - N_i / P), rtol=1e-9)
    np.testing.assert_allclose(ev[r:], 0.0, atol=1e-12 * norm)
    # Eq. 70 is M22 of Eq. 66 (N_o = 1)
    np.testing.assert_allclose(ds["eig_cov2_eq66"], ds["eig_cov2_eq70"], rtol=1e-8, atol=1e-14)
    # the W1 block of the linear theory has rank N_o N_i; projected SGD has the same rank
    assert np.all(ds["eig_cov1_exact_w0"].values[r:] == 0)
    assert np.all(ds["eig_cov1_sgd_b"].values[r:] < 1e-10 * ds["eig_cov1_sgd_b"].values[0])
    assert np.all(ds["delta_L1_linear"].values[r:] == 0)
    assert np.all(ds["delta_L1_linear"].values[:r] > 0)
    # spectra sorted descending
    for name in ("eig_cov1_sgd_a", "eig_cov2_sgd_b", "eig_cov2_exact_local", "eig_cov1_eq66"):
        v = ds[name].values
        v = v[np.isfinite(v)]
        assert np.all(np.diff(v) <= 1e-15 * abs(v[0])), name
    # tr Gamma of Eq. 63 from the traces
    sx2 = float(ds["sigma_x2"])
    np.testing.assert_allclose(
        ds["trace_tr_gamma"], sx2 * (N_i * ds["trace_D2"] + N_o * ds["trace_D1"]), rtol=1e-12
    )
    # relaxation: lag 0 is 1, the slowest mode first
    np.testing.assert_allclose(ds["relax_acf"].isel(lag=0), 1.0)
    assert np.all(np.diff(ds["relax_rate"].values) >= 0)
    # the local protocol agrees at this size too (loose: short runs)
    assert 0.6 < float(ds["tr_ratio_cov2_b"]) < 1.4
    assert 0.6 < float(ds["tr_ratio_cov1_b"]) < 1.4


def test_layout_matches_theory_vec_convention() -> None:
    lay = ex._Layout(4, 3, 2)
    rng = np.random.default_rng(0)
    W1, W2 = rng.normal(size=(3, 4)), rng.normal(size=(2, 3))
    theta_c = np.concatenate([W1.ravel(), W2.ravel()])
    np.testing.assert_array_equal(theta_c[lay.perm], tl.pack(W1, W2))
    A = rng.normal(size=(lay.n, 2))
    np.testing.assert_array_equal(lay.rows_to_c(A)[lay.perm], A)


def test_loss_perturbations_are_the_even_part_of_delta_L() -> None:
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(30, 4)), rng.normal(size=(30, 1))
    W1, W2 = rng.normal(size=(3, 4)), rng.normal(size=(1, 3))
    V, U = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 1, 3))
    theta = 0.3
    for k in range(2):
        for direction, got in (
            (tl.pack(V[k], 0 * W2), ex._delta_L_W1(X, W2, V[k : k + 1])[0]),
            (tl.pack(0 * W1, U[k]), ex._delta_L_W2(X, W1, U[k : k + 1])[0]),
        ):
            norm = np.linalg.norm(direction)
            even = sum(tl.loss_perturbation(X, Y, W1, W2, direction, s * theta * norm)
                       for s in (1, -1)) / 2  # fmt: skip
            assert got == pytest.approx(even / theta**2, rel=1e-9)


def test_reproducible_and_validated() -> None:
    tiny = {**SMALL, "N_i": 5, "N_h": 4, "P": 40, "replicas": 2, "n_blocks": 2}
    tiny.update(prerun_tau=20.0, average_tau=5.0, sample_tau=20.0, relax_tau=0.0)
    a = ex.two_layer_cell(tiny, lambda _msg: None)
    b = ex.two_layer_cell(tiny, lambda _msg: None)
    xr.testing.assert_identical(a.drop_vars("elapsed_s"), b.drop_vars("elapsed_s"))
    assert "relax_acf" not in a
    with pytest.raises(ValueError, match="unknown"):
        ex.two_layer_cell({**tiny, "bogus": 1}, lambda _msg: None)
    with pytest.raises(ValueError, match="P > N_i"):
        ex.two_layer_cell({**tiny, "P": 5}, lambda _msg: None)


def test_figures_render(small_cell: xr.Dataset) -> None:
    import matplotlib.pyplot as plt

    for name, func in plots.FIGURES.items():
        fig = func(small_cell)
        assert fig.axes, name
        plt.close(fig)


@pytest.mark.slow
def test_acceptance_local_protocol_and_ivfr() -> None:
    """Issue 4: N_i = 50, N_h = 40, sigma_y^2 = 1, Glorot init, lr = 0.1, S = 10, P = 20 N_i."""
    block = {"N_i": 50, "N_h": 40, "P": 1000, "sigma_y2": 1.0, "lr": 0.1, "batch_size": 10}
    ds = ex.two_layer_cell(block, lambda _msg: None)
    # drift along the manifold of minima: D2 falls by more than half
    assert float(ds["d2_drift_factor"]) < 0.5
    assert float(ds["trG_local"]) < float(ds["trG_w0"])
    # protocol (b)
    assert 0.8 <= float(ds["tr_ratio_cov2_b"]) <= 1.15
    assert float(ds["err_cov2_b"]) <= 0.25
    assert 0.75 <= float(ds["tr_ratio_cov1_b"]) <= 1.1
    # IVFR along the eigenvectors of cov(dW2) (40 modes)
    assert int(np.isfinite(ds["ivfr_variance"].isel(replica=0)).sum()) >= 20
    assert float(ds["ivfr_spearman_mean"]) >= 0.8
    assert float(ds["ivfr_slope_mean"]) > 1.0
    # along cov(vec dW1): the drop beyond i = N_i; the linear theory gives exactly 0 there
    assert float(ds["delta_L1_drop_ratio"]) <= 0.3
    assert np.all(ds["delta_L1_linear"].values[50:] == 0)
    # protocol (a) vs (b): the local protocol is the better one
    assert float(ds["err_cov2_b"]) < float(ds["err_cov2_a_eq66"])
