"""Two-layer experiment of paper 000 Sec. III (Figs. 6-7): registry entry, dataset contract,
identities, the SGF cell, figures, agreement rows, acceptance."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from weightdyn import experiments, io, sweep
from weightdyn.experiments import ConfigError
from weightdyn.two_layer import linalg
from weightdyn.two_layer import theory as tl
from weightdyn.two_layer.merged import dynamics_groups

EXP = experiments.get("two_layer")
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
TINY = {**SMALL, "N_i": 5, "N_h": 4, "P": 40, "replicas": 2, "n_blocks": 2}
TINY.update(prerun_tau=20.0, average_tau=5.0, sample_tau=20.0, relax_tau=0.0)


def params(block: dict) -> dict:
    """The full parameters of the one cell of ``block`` (defaults, derive)."""
    (cell,) = sweep.expand_sweep("t", {"experiment": "two_layer", **block}).cells
    return cell.params


def run(block: dict) -> xr.Dataset:
    return EXP.run_cell(params(block), lambda _msg: None)


def merged(cells: list[tuple[dict, xr.Dataset]]) -> xr.Dataset:
    """Cells stacked as the merge rule stacks them (one coordinate per axis)."""
    coords = {a.name: ([p[a.name] for p, _ in cells], a.attrs()) for a in EXP.axes}
    return io.stack_cells([ds for _, ds in cells], coords)


@pytest.fixture(scope="module")
def small_cell() -> xr.Dataset:
    return run(SMALL)


@pytest.fixture(scope="module")
def tiny_pair() -> xr.Dataset:
    """A tiny SGD cell and its SGF twin, merged."""
    cells = [params({**TINY, "dynamics": d}) for d in ("sgd", "sgf")]
    return merged([(p, EXP.run_cell(p, lambda _msg: None)) for p in cells])


# ---------------------------------------------------------------------- params and derive


def test_registry_params() -> None:
    assert {p.name for p in EXP.axes} == {
        "N_i", "N_h", "N_o", "P", "sigma_y2", "init", "init_scale", "lr", "batch_size",
        "sampling", "data_seed", "dynamics",
    }  # fmt: skip
    assert EXP.param("dynamics").allowed == ("sgd", "sgf")
    for p in EXP.params:
        assert p.long_name and p.units == "1", p.name
    full = params(SMALL)
    assert full["dynamics"] == "sgd" and full["replicas"] == 3 and full["relax_modes"] == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"P": 8}, r"sweeps\.t\.P: 8 must exceed N_i = 8; allowed: P > N_i"),
        ({"batch_size": 81}, r"sweeps\.t\.batch_size: 81 exceeds P = 80; allowed: 1 <= "),
        ({"N_o": 7}, r"sweeps\.t\.N_o: 7 exceeds N_h = 6; allowed: N_o <= N_h"),
        ({"average_tau": 200.0}, r"sweeps\.t\.average_tau: 200.0 exceeds prerun_tau"),
        ({"dynamics": "langevin"}, r"sweeps\.t\.dynamics: 'langevin' is not allowed"),
        ({"replicas": 1}, r"sweeps\.t\.replicas: 1 is out of range"),
        ({"lr": 0.0}, r"sweeps\.t\.lr: 0.0 is out of range"),
        ({"local_point": "elsewhere"}, r"sweeps\.t\.local_point: 'elsewhere' is not allowed"),
        (
            {"precision": "float16"},
            r"sweeps\.t\.precision: 'float16' is not allowed; allowed: 'float64', 'float32'",
        ),
    ],
)
def test_config_errors_name_the_key(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        params({**SMALL, **change})


#: the id of the TINY cell before the setting ``precision`` existed (commit ce5d029)
TINY_ID = ("N_i=5_N_h=4_N_o=1_P=40_sigma_y2=1_init=gaussian_init_scale=1_lr=0.1_batch_size=5_"
           "sampling=with_data_seed=0_dynamics=sgd__2e016d1b")  # fmt: skip


def test_precision_keeps_the_ids_of_float64_cells() -> None:
    """``precision`` absent or ``float64`` (the default, stored as absent) leaves a cell's id,
    hence its output path, as it was before the setting existed; ``float32`` is another cell."""

    def cell(block: dict) -> sweep.Cell:
        (c,) = sweep.expand_sweep("t", {"experiment": "two_layer", **block}).cells
        return c

    assert cell(TINY).id == cell({**TINY, "precision": "float64"}).id == TINY_ID
    assert cell(TINY).params["precision"] is None
    f32 = cell({**TINY, "precision": "float32"})
    assert f32.id != TINY_ID and f32.params["precision"] == "float32"


def test_missing_and_unknown_keys() -> None:
    with pytest.raises(ConfigError, match=r"sweeps\.t\.lr: missing"):
        params({k: v for k, v in SMALL.items() if k != "lr"})
    with pytest.raises(ConfigError, match=r"unknown keys \['bogus'\]"):
        params({**SMALL, "bogus": 1})


def test_resources_scale_with_dynamics() -> None:
    p = params({**SMALL, "N_i": 50, "N_h": 40, "P": 1000, "batch_size": 10, "replicas": 8})
    sgd = EXP.resources(p, 1)
    sgf = EXP.resources({**p, "dynamics": "sgf"}, 1)
    assert sgf["runtime"] > 2 * sgd["runtime"]
    assert EXP.resources({**p, "dynamics": "sgf"}, 2)["runtime"] == 2 * sgf["runtime"]
    # the paper's SGF cell (Fig. 7) is long enough for two threads, which sample two replicas
    # at a time (and hold their second moments); the SGD cell keeps one
    assert (sgd["threads"], sgf["threads"]) == (1, 2)
    assert sgf["mem_mb"] > sgd["mem_mb"]


# --------------------------------------------------------------------------- the dataset


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
        "delta_L1_drop_ratio", "d2_drift_factor", "diverged",
    ):  # fmt: skip
        assert name in ds, name
    for name, var in ds.variables.items():
        assert {"long_name", "units"} <= set(var.attrs), name
        if name in ds.data_vars:
            assert "source" in var.attrs, name
    assert np.isfinite(ds["M_z_sgd"]).all()
    assert ds["M_isotropic"] == pytest.approx(0.1 / (2 * 5))
    assert int(ds["gf_converged"]) == 1 and int(ds["diverged"]) == 0


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
    lay = linalg.Layout(4, 3, 2)
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
            (tl.pack(V[k], 0 * W2), linalg.delta_L_W1(X, W2, V[k : k + 1])[0]),
            (tl.pack(0 * W1, U[k]), linalg.delta_L_W2(X, W1, U[k : k + 1])[0]),
        ):
            norm = np.linalg.norm(direction)
            even = sum(tl.loss_perturbation(X, Y, W1, W2, direction, s * theta * norm)
                       for s in (1, -1)) / 2  # fmt: skip
            assert got == pytest.approx(even / theta**2, rel=1e-9)


def test_reproducible_and_seeded_by_dynamics(tiny_pair: xr.Dataset) -> None:
    a = run(TINY)
    b = run(TINY)
    xr.testing.assert_identical(a.drop_vars("elapsed_s"), b.drop_vars("elapsed_s"))
    assert "relax_acf" not in a
    sgd, sgf = io.cell_datasets(tiny_pair)
    # same data and W^0 (streams two_layer/data, two_layer/init), different chains
    for name in ("eig_cov1_eq66", "eig_cov2_exact_w0", "tau0_steps", "M_z_eq66"):
        np.testing.assert_array_equal(sgd[name].values, sgf[name].values)
    assert not np.array_equal(sgd["eig_cov2_sgd_a"].values, sgf["eig_cov2_sgd_a"].values)
    np.testing.assert_array_equal(sgd["eig_cov2_sgd_a"].values, a["eig_cov2_sgd_a"].values)


def test_float32_cell_is_its_float64_twin_to_single_precision() -> None:
    """A float32 cell draws the streams of its float64 twin (precision is no seed key): its
    spectra and estimates agree to single-precision rounding, far inside their errors."""
    a, b = run(TINY), run({**TINY, "precision": "float32"})
    for name in ("eig_cov1_sgd_b", "eig_cov2_sgd_b", "eig_cov2_sgd_a", "M_z_sgd", "trace_D2",
                 "delta_L2_sgd", "tau_int_slowest"):  # fmt: skip
        x, y = a[name].values, b[name].values
        assert np.nanmax(np.abs(x - y)) <= 1e-5 * np.nanmax(np.abs(x)), name


def test_sgf_cell_agrees_with_the_linearisation(tiny_pair: xr.Dataset) -> None:
    """The SGF of Eqs. 51-52 has the same stationary state as SGD to the order of the
    linearisation: its local-protocol trace ratios are near 1 (loose: two short chains)."""
    _, sgf = io.cell_datasets(tiny_pair)
    assert str(sgf["dynamics"].values) == "sgf" and int(sgf["diverged"]) == 0
    assert 0.5 < float(sgf["tr_ratio_cov2_b"]) < 1.5
    assert 0.5 < float(sgf["tr_ratio_cov1_b"]) < 1.5
    assert np.isfinite(sgf["delta_L1_sgd"].values).all()


def test_divergence_gives_a_flagged_dataset() -> None:
    ds = run({**TINY, "lr": 50.0})
    assert int(ds["diverged"]) == 1 and ds.attrs["diverged_in"] == "pre-run"
    assert np.isnan(ds["eig_cov2_sgd_a"]).all() and np.isfinite(ds["eig_cov2_eq66"]).all()
    fig = EXP.figures["fig6bc"].plot(merged([(params({**TINY, "lr": 50.0}), ds)]))
    assert "diverged" in fig.axes[0].texts[0].get_text()
    plt.close(fig)


# ------------------------------------------------------------------- figures and agreement


def test_figures_render(small_cell: xr.Dataset) -> None:
    ds = merged([(params(SMALL), small_cell)])
    for name, figure in EXP.figures.items():
        if name == "scalar":  # needs the options y and x: tests/test_views.py
            continue
        fig = figure.plot(ds)
        assert fig.axes, name
        plt.close(fig)


def test_fig7_draws_the_sgf_curve_beside_sgd(tiny_pair: xr.Dataset) -> None:
    """Fig. 7 pairs the SGD cell with its SGF twin and draws the paper's dash-dotted curve."""
    assert [sorted(g) for g in dynamics_groups(io.cell_datasets(tiny_pair))] == [["sgd", "sgf"]]
    for name in ("fig7a", "fig7b"):
        fig = EXP.figures[name].plot(tiny_pair)
        left = fig.axes[0]
        labels = [line.get_label() for line in left.get_lines()]
        assert any(label.startswith("SGF") for label in labels), (name, labels)
        dashdot = [ln for ln in left.get_lines() if ln.get_linestyle() == "-."]
        assert dashdot and np.all(np.isfinite(dashdot[0].get_ydata()))
        plt.close(fig)
    sgd_only = tiny_pair.isel(cell=[0])
    fig = EXP.figures["fig7b"].plot(sgd_only)
    assert not any(ln.get_linestyle() == "-." for ln in fig.axes[0].get_lines())
    plt.close(fig)


def test_agreement_rows_name_sweep_and_cell(tiny_pair: xr.Dataset) -> None:
    rows = EXP.agreement(tiny_pair, "tinylabel")
    figures = {r.figure for r in rows}
    assert "tinylabel [dynamics=sgd] fig6bc" in figures
    assert "tinylabel [dynamics=sgf] fig7b" in figures
    assert "tinylabel fig7b" in figures  # SGD vs SGF
    assert all(r.points > 0 for r in rows)


@pytest.mark.slow
def test_acceptance_local_protocol_and_ivfr() -> None:
    """Issue 4: N_i = 50, N_h = 40, sigma_y^2 = 1, Glorot init, lr = 0.1, S = 10, P = 20 N_i."""
    block = {"N_i": 50, "N_h": 40, "P": 1000, "sigma_y2": 1.0, "lr": 0.1, "batch_size": 10}
    ds = run(block)
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
