"""Single-job experiments of paper 000 Sec. II, each driven by one plain config block (a dict).

Each function takes the block, the SGD protocol settings (``single_layer.sgd``) and a progress
callback, and returns an xarray Dataset (or, for Table 1, markdown text). Data sets use the same
seed stream as the sweep's data rule, so an experiment on (N, P, sigma_eps2, data_seed) sees the
same data as the sweep cell with those values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import data, seeds
from weightdyn.single_layer import multiplicative, perturbation, relaxation, sgf, theory
from weightdyn.single_layer.protocol import SGDProtocol, initial_weights, run_stationary_sgd

Block = Mapping[str, Any]
Progress = Callable[[str], None]


def _cell_data(
    block: Block, N: int, P: int, sigma_eps2: float, seed: int
) -> data.TeacherStudentData:
    cell = {"N": N, "P": P, "sigma_eps2": sigma_eps2, "data_seed": seed}
    return data.teacher_student(
        N,
        P,
        sigma_eps2,
        seeds.generator("single_layer/data", cell),
        n_test=int(block.get("n_test", 1000)),
    )


def _protocol(protocol: Block, block: Block) -> SGDProtocol:
    """The sweep's SGD protocol with the block's own ``replicas`` / ``sample_steps``, if any."""
    settings = dict(protocol)
    for key in ("replicas", "sample_steps"):
        if key in block:
            settings[key] = block[key]
    return SGDProtocol(**settings)


def relaxation_experiment(block: Block, protocol: Block, progress: Progress) -> xr.Dataset:
    """Fig. 3: SGD from a random start near P/N = 1 against Eq. 27 (paper 000 Eqs. 25-27)."""
    N = int(block["N"])
    P = round(float(block["p_over_n"]) * N)
    d = _cell_data(block, N, P, float(block["sigma_eps2"]), int(block["data_seed"]))
    rng = seeds.generator("relaxation", dict(block))
    lr = float(block["lr"])
    tau = theory.slowest_relaxation_steps(theory.hessian(d.X), lr)
    n_steps = int(np.ceil(float(block["tau_multiple"]) * tau))
    progress(f"relaxation: N={N}, P={P}, tau={tau:.3g} steps, running {n_steps} steps")
    w_init = rng.normal(0.0, float(block["init_scale"]), size=N)
    run = relaxation.record_relaxation(
        d.X,
        d.y,
        lr,
        int(block["batch_size"]),
        str(block["sampling"]),
        w_init,
        relaxation.record_steps(n_steps, n_log=int(block["records"])),
        rng,
        replicas=int(block["replicas"]),
    )
    return relaxation.relaxation_dataset(run, sigma_x2=d.sigma_x2)


def perturbation_iid_experiment(block: Block, protocol: Block, progress: Progress) -> xr.Dataset:
    """Fig. 5a: delta L along the SGD covariance eigenvectors, iid inputs (Eq. 35)."""
    b = block["iid"]
    d = _cell_data(b, int(b["N"]), int(b["P"]), float(b["sigma_eps2"]), int(b["data_seed"]))
    progress(f"perturbation (iid): N={d.N}, P={d.P}")
    return perturbation.run_perturbation_cell(
        d,
        float(b["lr"]),
        int(b["batch_size"]),
        np.asarray(block["thetas"], dtype=float),
        seeds.generator("perturbation/iid", dict(b)),
        protocol=_protocol(protocol, b),
    )


def perturbation_correlated_experiment(
    block: Block, protocol: Block, progress: Progress
) -> xr.Dataset:
    """Fig. 5b: the same with correlated Gaussian inputs, averaged over data realisations."""
    b = block["correlated"]
    N, P = int(b["N"]), int(b["P"])
    cells = []
    for r in range(int(b["realisations"])):
        rng = seeds.generator("perturbation/correlated", {**b, "realisation": r})
        cov = data.input_covariance(N, str(b["input_covariance"]), float(b["correlation"]), rng)
        d = data.gaussian_teacher_student(N, P, float(b["sigma_eps2"]), rng, input_cov=cov)
        progress(f"perturbation (correlated): realisation {r + 1}/{b['realisations']}")
        cells.append(
            perturbation.run_perturbation_cell(
                d,
                float(b["lr"]),
                int(b["batch_size"]),
                np.asarray(block["thetas"], dtype=float),
                rng,
                protocol=_protocol(protocol, b),
            )
        )
    out = perturbation.average_over_realisations(cells)
    out.attrs["input_cov"] = f"{b['input_covariance']} ({b['correlation']})"
    return out


def table1_experiment(block: Block, protocol: Block, progress: Progress) -> str:
    """Table 1: measured steady-state properties across the interpolation threshold."""
    lr, S = float(block["lr"]), int(block["batch_size"])
    cells = []
    for sigma_eps2 in block["sigma_eps2"]:
        for N in block["N"]:
            d = _cell_data(block, int(N), int(block["P"]), float(sigma_eps2), 0)
            cell = {"N": int(N), "P": int(block["P"]), "sigma_eps2": float(sigma_eps2)}
            progress(f"table 1: {cell}")
            w_star, result = run_stationary_sgd(
                d, lr, S, "with", _protocol(protocol, block), seeds.generator("table1", cell)
            )
            cells.append((d, w_star, result))
    return perturbation.table1_markdown(perturbation.table1_rows(cells, lr, S))


def sgf_experiment(block: Block, protocol: Block, progress: Progress) -> xr.Dataset:
    """SGD, SGF with additive and with multiplicative noise (Eq. 13) and Eq. 30, one cell."""
    N = int(block["N"])
    P = round(float(block["p_over_n"]) * N)
    sigma_eps2, lr, S = float(block["sigma_eps2"]), float(block["lr"]), int(block["batch_size"])
    sampling = str(block["sampling"])
    d = _cell_data(block, N, P, sigma_eps2, int(block["data_seed"]))
    proto = _protocol(protocol, block)
    cell = dict(block)
    w_star, sgd_result = run_stationary_sgd(
        d, lr, S, sampling, proto, seeds.generator("sgf/sgd", cell), progress
    )
    results = {"SGD": sgd_result}
    for noise in ("additive", "multiplicative"):
        rng = seeds.generator(f"sgf/{noise}", cell)
        results[f"SGF {noise}"] = sgf.run_sgf(
            d.X,
            d.y,
            w_star,
            lr,
            S,
            sampling,
            initial_weights(w_star, proto, rng),
            sgd_result.burnin_steps,
            sgd_result.sample_steps,
            proto.thin,
            proto.n_blocks,
            rng,
            noise=noise,
            progress=progress,
        )
    return sgf.spectrum_dataset(d.X, d.y, lr, S, sampling, sigma_eps2, results)


def gbm_experiment(block: Block, protocol: Block, progress: Progress) -> xr.Dataset:
    """Eqs. 21-24: N = 1, no label noise, SGD ensembles vs geometric Brownian motion."""
    rng = seeds.generator("gbm", dict(block))
    x = rng.normal(0.0, 1.0, size=int(block["P"]))
    runs = []
    for lr in block["lr"]:
        progress(f"GBM ensemble at lr = {lr}")
        ds = multiplicative.gbm_dataset(
            x,
            float(block["wbar0"]),
            float(lr),
            int(block["batch_size"]),
            np.asarray(block["times"], dtype=float),
            int(block["replicas"]),
            rng,
        )
        runs.append(ds.expand_dims(lr=[float(lr)]))
    return xr.concat(runs, dim="lr", join="outer")


EXPERIMENTS: dict[str, Callable[[Block, Block, Progress], xr.Dataset | str]] = {
    "relaxation": relaxation_experiment,
    "perturbation_iid": perturbation_iid_experiment,
    "perturbation_correlated": perturbation_correlated_experiment,
    "table1": table1_experiment,
    "sgf": sgf_experiment,
    "gbm": gbm_experiment,
}
