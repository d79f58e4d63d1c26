"""Paper-scale agreement of SGD with the Lyapunov theory (paper 000 Fig. 4b point, P/N = 2).

N = 100, lr = 0.1, S = 10, sigma_eps^2 = 0.25, P = 200, R = 64 replicas, burn-in >= 2 tau and
9e5 sampling steps (the ``single_layer`` experiment's default protocol), covariance about w*.
One cell of the registry, run as the workflow runs it. About a minute on one core.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from weightdyn import experiments, sweep
from weightdyn.single_layer.teacher_student import TEACHER_STUDENT

CELL = {"N": 100, "P": 200, "sigma_eps2": 0.25, "lr": 0.1, "batch_size": 10, "sampling": "with"}


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a / b - 1.0)


@pytest.fixture(scope="module")
def paper_point() -> xr.Dataset:
    exp = experiments.get("single_layer")
    (cell,) = sweep.expand_sweep("fig4b", {"experiment": "single_layer", **CELL}).cells
    data = TEACHER_STUDENT.load(TEACHER_STUDENT.make(cell.params))
    return exp.run_cell({**cell.params, "data": data}, lambda _: None)


@pytest.mark.slow
def test_sgd_covariance_matches_eq30(paper_point) -> None:
    ds = paper_point
    assert int(ds["burnin_steps"]) >= 2 * float(ds["tau_steps"])
    err30 = _relative(ds["eig_M_sgd"].values, ds["eig_M_lyapunov"].values)
    frob = float(ds["frobenius_error_eq30"])
    print(f"Eq. 30: median {np.median(err30):.4f}, max {err30.max():.4f}, Frobenius {frob:.4f}")
    assert np.median(err30) <= 0.025
    assert err30.max() <= 0.08
    assert frob <= 0.10


@pytest.mark.slow
def test_isotropic_and_detailed_balance_fail_where_eq30_holds(paper_point) -> None:
    ds = paper_point
    eig_sgd = ds["eig_M_sgd"].values
    err34 = _relative(np.full_like(eig_sgd, float(ds["M_isotropic"])), eig_sgd)
    err33 = _relative(ds["eig_M_detailed_balance"].values, eig_sgd)
    err30 = _relative(ds["eig_M_lyapunov"].values, eig_sgd)
    print(
        f"Eq. 34 median {np.median(err34):.3f}; Eq. 33 extreme {err33.max():.3f} "
        f"(median {np.median(err33):.3f}); Eq. 30 rms {np.sqrt(np.mean(err30**2)):.4f}, "
        f"Eq. 33 rms {np.sqrt(np.mean(err33**2)):.4f}"
    )
    assert np.median(err34) >= 0.5
    assert err33.max() >= 0.5
    assert np.sqrt(np.mean(err30**2)) < np.sqrt(np.mean(err33**2))


@pytest.mark.slow
def test_mean_variance_matches_trace_of_eq30(paper_point) -> None:
    ds = paper_point
    rel = float(ds["var_w_sgd"] / ds["var_w_theory"] - 1)
    z = float((ds["var_w_sgd_wstar"] - ds["var_w_theory"]) / ds["var_w_sgd_wstar_se"])
    print(f"var_w_sgd / tr(M)/N - 1 = {rel:.4f}; z-score about w* = {z:.2f}")
    assert abs(rel) <= 0.04
