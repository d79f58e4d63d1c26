"""Experiments beyond the paper's two models: deep linear and one-hidden-layer networks.

Paper 000 stops at two layers and says in App. A (Eqs. 79-81) that its linear framework carries
over to a nonlinear network at a minimum with the design matrix replaced by the Jacobian. Each
cell (:mod:`weightdyn.models.cell`) runs SGD about a minimum and compares its stationary
covariance with the exact linearisation (Eq. 29 with the full Hessian and the exact mini-batch
noise), App. A's ``X -> J`` form, detailed balance (Eq. 33) and the discrete-time recursion, and
measures the IVFR (curvature against variance along the covariance's eigenvectors, Fig. 7a).

- ``deep_linear``: ``f(x) = W_L ... W_1 x`` of depth ``depth`` and hidden width ``width``
  (:class:`~weightdyn.models.DeepLinear`; depth 2 is Sec. III's network); a linear teacher.
- ``one_hidden``: ``f(x) = W2 phi(W1 x + b1) + b2`` (:class:`~weightdyn.models.OneHidden`,
  ``phi`` tanh or softplus); a teacher of the same architecture (``orthogonal``: orthonormal
  first-layer rows, output weights +-1, no biases; ``network``: i.i.d. fan-in scaled weights) or
  a linear teacher. A random i.i.d. teacher is badly conditioned (Fisher eigenvalues ~1e-5 at
  P = 600): the full-batch minimum then runs off to saturated units (``null_dim > 0``, relaxation
  times of 1e10 steps and more); the orthogonal teacher gives an isolated minimum.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import io
from weightdyn.agreement import Agreement, agreement
from weightdyn.experiments import (
    REQUIRED,
    SCALAR,
    ConfigError,
    Experiment,
    Figure,
    LazyPlots,
    Param,
    Params,
    Progress,
)
from weightdyn.models import cell, feng_tu
from weightdyn.models.base import Model
from weightdyn.models.feng_tu import BLOCKS as FT_BLOCKS
from weightdyn.models.networks import ACTIVATIONS, DeepLinear, Linear, OneHidden

plots = LazyPlots("weightdyn.plots.models")

POSITIVE = {"minimum": 0, "exclusive_minimum": True}
INITS = ("minimum", "random")
TEACHERS = ("orthogonal", "network", "linear")
STARTS = ("random", "teacher")
# fmt: off
COMMON = (
    Param("N_i", int, REQUIRED, "input dimension N_i", axis=True, minimum=1),
    Param("N_o", int, 1, "output dimension N_o", axis=True, minimum=1),
    Param("width", int, REQUIRED, "hidden width", axis=True, minimum=1),
    Param("P", int, REQUIRED, "number of training samples P", axis=True, minimum=2),
    Param("noise", float, 0.25, "label noise variance sigma_eps^2", axis=True, minimum=0),
    Param("teacher_scale", float, 1.0, "teacher weight scale (fan-in units)", axis=True,
          **POSITIVE),
    Param("init", str, "minimum", "SGD start: at the minimum theta* or at the random "
          "initialisation theta* was found from", axis=True, allowed=INITS),
    Param("init_scale", float, 1.0, "scale of the random initialisation (fan-in units)",
          axis=True, **POSITIVE),
    Param("lr", float, REQUIRED, "learning rate lambda", axis=True, **POSITIVE),
    Param("batch_size", int, REQUIRED, "mini-batch size S", axis=True, minimum=1),
    Param("sampling", str, "with", "mini-batch sampling with or without replacement (App. C)",
          axis=True, allowed=("with", "without")),
    Param("data_seed", int, 0, "data and initialisation realisation index", axis=True,
          minimum=0),
    Param("replicas", int, 16, "independent SGD chains", minimum=2),
    Param("burn_tau", float, 20.0, "burn-in in slowest relaxation times", minimum=0),
    Param("sample_tau", float, 200.0, "sampling length per replica in slowest relaxation "
          "times", **POSITIVE),
    Param("records_per_tau", float, 4.0, "records per slowest relaxation time", minimum=1),
    Param("n_blocks", int, 8, "time blocks per replica for jackknife errors", minimum=2),
    Param("max_steps", int, 4_000_000, "cap on the burn-in and on the sampling steps",
          minimum=1),
    Param("gtol", float, 1e-9, "gradient-norm tolerance of a minimum", **POSITIVE),
    Param("moment_modes", int, None, "record SGD's covariance in the k stiffest Hessian modes "
          "at theta* only (k^2 floats per block instead of n^2; the run resolves the slowest "
          "of them; no output-layer IVFR); absent: all of range(H)", minimum=1),
    Param("moment_block", str, None, "record SGD's covariance in this block of coordinates "
          "only: 'output' (the output layer) or 'hidden' (an MLP's hidden-to-hidden weights); "
          "the run resolves all of range(H); absent: all of theta", allowed=("output", "hidden")),
    Param("flatness_block", str, None, "measure Feng & Tu's IVFR (variance against the width "
          "of the loss profile at e L_0) on this block: 'all' (the fluctuating part of the "
          "frame), 'output' (the output layer) or 'hidden' (the weights between the first two "
          "hidden layers of an MLP); absent: not measured", allowed=FT_BLOCKS),
    Param("weight_decay", float, None, "weight decay chi of the student (L2 term "
          "chi |theta|^2 / 2, paper 000 App. B; absent: 0)", axis=True, minimum=0),
    Param("loss", str, None, "the student's loss: squared error (absent, the papers') or "
          "softmax cross-entropy on the teacher's classes (noise: the probability of a "
          "uniformly redrawn class; needs N_o >= 2)", axis=True,
          allowed=("squared", "cross_entropy")),
)
DEEP = (
    Param("depth", int, 3, "number of weight layers L", axis=True, minimum=2),
)
ONE_HIDDEN = (
    Param("activation", str, "tanh", "activation phi (smooth)", axis=True,
          allowed=tuple(ACTIVATIONS)),
    Param("teacher", str, "orthogonal", "teacher: a network of the same architecture "
          "(orthogonal or i.i.d. weights) or a random linear map", axis=True, allowed=TEACHERS),
    Param("start", str, "random", "start of the full-batch minimisation: a random "
          "initialisation or the teacher's weights", axis=True, allowed=STARTS),
)
# fmt: on


def deep_linear_model(params: Params) -> DeepLinear:
    """``widths = [N_i, width, ..., width, N_o]`` with ``depth`` weight layers."""
    depth, width = int(params["depth"]), int(params["width"])
    return DeepLinear([params["N_i"]] + [width] * (depth - 1) + [params["N_o"]])


def one_hidden_model(params: Params) -> OneHidden:
    """``f(x) = W2 phi(W1 x + b1) + b2`` with biases."""
    return OneHidden(params["N_i"], params["width"], params["N_o"], params["activation"])


class OrthogonalTeacher(OneHidden):
    """A well-conditioned teacher: ``W1`` = ``scale`` times ``N_h`` orthonormal rows (Haar),
    ``b1 = 0``, output weights ``+-1`` (random signs), ``b2 = 0``; needs ``N_h <= N_i``."""

    def random_theta(self, rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
        Q, Rq = np.linalg.qr(rng.standard_normal((self.n_in, self.n_hidden)))
        W1 = scale * (Q * np.sign(np.diag(Rq))).T  # Haar: fix the signs of the QR
        W2 = rng.choice([-1.0, 1.0], size=(self.n_out, self.n_hidden))
        b1, b2 = np.zeros((self.n_hidden, 1)), np.zeros((self.n_out, 1))
        return np.concatenate([np.hstack([W1, b1]).ravel(order="F"),
                               np.hstack([W2, b2]).ravel(order="F")])  # fmt: skip


def _teacher(params: Params) -> Model:
    teacher = params.get("teacher", "linear")
    if teacher == "linear":
        return Linear(params["N_i"], params["N_o"])
    if teacher == "orthogonal":
        return OrthogonalTeacher(params["N_i"], params["width"], params["N_o"],
                                 params["activation"])  # fmt: skip
    return one_hidden_model(params)


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """``batch_size <= P``; the orthogonal teacher needs ``width <= N_i``; a start at the
    teacher needs a teacher of the student's architecture. An overparameterised cell
    (``n_params >= P N_o``) is not refused here: it runs and comes out flagged
    ``not_underparameterised`` (the sweep goes on)."""
    P, S = params["P"], params["batch_size"]
    if S > P:
        raise ConfigError(f"batch_size: {S} exceeds P = {P}; allowed: 1 <= batch_size <= P")
    if params.get("teacher") == "orthogonal" and params["width"] > params["N_i"]:
        raise ConfigError(f"width: {params['width']} exceeds N_i = {params['N_i']}; allowed "
                          "with teacher 'orthogonal': width <= N_i")  # fmt: skip
    if params.get("loss") == "cross_entropy" and params["N_o"] < 2:
        raise ConfigError(f"N_o: {params['N_o']} with loss 'cross_entropy'; allowed: N_o >= 2 "
                          "(classes)")  # fmt: skip
    if params.get("start") == "teacher" and params.get("teacher") == "linear":
        raise ConfigError("start: 'teacher' needs a teacher of the student's architecture; "
                          "allowed with teacher 'linear': 'random'")  # fmt: skip
    check_frame_settings(params)
    return params


def check_frame_settings(params: Mapping[str, Any]) -> None:
    """At most one of ``moment_modes`` and ``moment_block``; a ``hidden`` block needs an MLP
    with two hidden layers (``n_hidden_layers``, which the network experiment passes);
    ``flatness_block: output`` or ``hidden`` needs all of theta recorded (with a reduced frame
    the frame is the block: ``all``)."""
    block, modes = params.get("flatness_block"), params.get("moment_modes")
    if params.get("moment_block") is not None and modes is not None:
        raise ConfigError(f"moment_block: {params['moment_block']!r} with moment_modes = "
                          f"{modes}; allowed: one of them")  # fmt: skip
    frame_block = params.get("moment_block")
    reduced = f"moment_modes = {modes}" if modes is not None else None
    if frame_block is not None:
        reduced = f"moment_block = {frame_block!r}"
    if block in ("output", "hidden") and reduced:
        raise ConfigError(
            f"flatness_block: {block!r} with {reduced} (only that frame is recorded: it is the "
            "block); allowed there: 'all'"
        )
    if "hidden" in (block, frame_block) and params.get("n_hidden_layers", 0) < 2:
        raise ConfigError(
            f"{'flatness_block' if block == 'hidden' else 'moment_block'}: 'hidden' needs an "
            "MLP with at least two hidden layers (a hidden-to-hidden weight matrix: the "
            "network experiment's hidden: 'a-b'); allowed here: 'all' or 'output'"
        )


def _with_objective(model: Model, params: Params) -> tuple[Model, Params]:
    """The student with the cell's loss and weight decay, and the parameters without absent
    ones (a cell without ``loss`` or ``weight_decay`` keeps the random streams it had before
    those axes existed)."""
    absent = {k for k in ("loss", "weight_decay") if params.get(k) is None}
    params = {k: v for k, v in params.items() if k not in absent}
    return model.with_objective(params.get("loss"), params.get("weight_decay")), params


def run_deep(params: Params, progress: Progress) -> xr.Dataset:
    """One deep linear cell (:func:`weightdyn.models.cell.run`, linear teacher)."""
    model, params = _with_objective(deep_linear_model(params), params)
    return cell.run(model, Linear(params["N_i"], params["N_o"]), params, progress)


def run_one_hidden(params: Params, progress: Progress) -> xr.Dataset:
    """One one-hidden-layer cell (:func:`weightdyn.models.cell.run`)."""
    model, params = _with_objective(one_hidden_model(params), params)
    return cell.run(model, _teacher(params), params, progress)


def resources(params: Params, attempt: int) -> dict[str, int]:
    """A generous request: the step count follows the relaxation time, known only at run time
    (``max_steps`` caps it); doubled per attempt."""
    return {"mem_mb": 2000 * attempt, "runtime": 60 * attempt}


# ---------------------------------------------------------------------------- agreement


def cells_of(ds: xr.Dataset) -> list[xr.Dataset]:
    """Cells of a merged sweep (or the one cell of a bare file) that passed their checks, each
    as it was written (:func:`weightdyn.io.cell_datasets`)."""
    return [c for c in io.cell_datasets(ds) if int(c["status"]) == 0]


def flagged_cells(ds: xr.Dataset) -> list[str]:
    """``"<cell>: <status>"`` for every cell that failed a check (:data:`cell.STATUS`)."""
    parts = io.cell_datasets(ds)
    return [f"{cell_text(c, parts) or 'cell'}: {cell.STATUS[int(c['status'])]}"
            for c in parts if int(c["status"]) != 0]  # fmt: skip


def sweep_axes(ds: xr.Dataset) -> list[str]:
    """The sweep axes of a merged file or one of its cells (its ``sweep_axes`` attribute, in
    the order the experiment declares them; none for a bare cell file)."""
    return ds.attrs.get("sweep_axes", "").split()


def cell_text(c: xr.Dataset, cells: list[xr.Dataset]) -> str:
    """``axis=value, ...`` for the sweep axes (:func:`sweep_axes`) in which ``c`` differs from
    the other ``cells``."""

    def val(x: xr.Dataset, a: str) -> str:
        return str(x[a].values.item()) if a in x.coords else ""

    varying = [a for a in sweep_axes(c) if len({val(x, a) for x in cells}) > 1]
    return ", ".join(f"{a}={val(c, a)}" for a in varying)


def _cell_rows(c: xr.Dataset, name: str) -> list[Agreement]:
    se = c["eig_sgd_se"]
    rows = [agreement(f"{name}spectra", f"sorted eigenvalues of the SGD covariance on range(H) "
                      f"vs {cell.THEORIES[t][0]}", cell.THEORIES[t][1], c["eig_sgd"],
                      c[f"eig_{t}"], se) for t in cell.THEORIES]  # fmt: skip
    rows += [agreement(f"{name}trace", f"tr M, SGD vs {cell.THEORIES[t][0]}",
                       cell.THEORIES[t][1], c["trace_sgd"], c[f"trace_{t}"], c["trace_sgd_se"])
             for t in ("exact", "discrete", "minibatch", "jacobian", "exact_mean",
                       "discrete_mean")]  # fmt: skip
    rows.append(agreement(f"{name}ivfr", "IVFR Spearman rho of curvature vs variance, SGD vs "
                          "the exact linearisation", "Fig. 7a", c["ivfr_spearman_sgd"],
                          c["ivfr_spearman_exact"], c["ivfr_spearman_sgd_se"]))  # fmt: skip
    if "ft_psi_sgd" in c:  # Feng & Tu's form, where the cell measured it
        rows += [
            agreement(f"{name}feng_tu psi", "Feng & Tu's psi (sigma^2 ~ F^-psi), SGD vs the exact "
                      "linearisation at the SGD mean with the true loss profiles",
                      feng_tu.SOURCE, c["ft_psi_sgd"], c["ft_psi_theory"], c["ft_psi_sgd_se"]),
            agreement(f"{name}feng_tu slope", "log-log slope of kappa vs sigma^2 along the "
                      "principal directions of the block, SGD vs the exact linearisation",
                      feng_tu.SOURCE, c["ft_slope_sgd"], c["ft_slope_theory"],
                      c["ft_slope_sgd_se"]),
        ]  # fmt: skip
    if "layer_ivfr_slope_sgd" not in c:  # a model without a declared output layer
        return rows
    rows.append(
        agreement(
            f"{name}layer ivfr",
            "IVFR of the output layer's block (Fig. 7a's cov(vec dW_L)): log-log slope of "
            "curvature vs variance, SGD vs the exact linearisation",
            "Fig. 7a, Eq. 73",
            c["layer_ivfr_slope_sgd"],
            c["layer_ivfr_slope_exact"],
            c["layer_ivfr_slope_sgd_se"],
        )
    )
    return rows


def agreement_rows(ds: xr.Dataset, label: str) -> list[Agreement]:
    """Rows of every complete cell, named ``<label> [<cell>] <figure>``."""
    cells = cells_of(ds)
    rows = []
    for c in cells:
        text = cell_text(c, cells)
        rows += _cell_rows(c, f"{label} [{text}] " if text else f"{label} ")
    return rows


# ------------------------------------------------------------------------------ registry

_ERR = "error bars: jackknife over (replica, time block) groups, +-1 s.e."
FIGURES = {
    "scalar": SCALAR,
    "spectra": Figure(plots.spectra, per_cell=True, caption=(
        "Sorted eigenvalues of the stationary SGD covariance on range(H) at the local minimum "
        "against the exact linearisation (Eq. 29, full Hessian, exact mini-batch noise), "
        "App. A's Jacobian form (Gauss-Newton drift), detailed balance (Eq. 33), the "
        "discrete-time recursion, and the exact linearisation and the recursion at the SGD "
        f"mean (where SGD sits, O(lr) off the minimum); {_ERR}; one figure per cell.")),
    "ivfr": Figure(plots.ivfr, caption=(
        "Inverse variance-flatness relation (paper 000 Fig. 7a): curvature v^T H v along the "
        "eigenvectors v of the SGD covariance against their variance, log-log, one series per "
        f"cell, with the exact linearisation's (Eq. 29; lines); {_ERR}.")),
    "feng_tu": Figure(plots.feng_tu, caption=(
        "The inverse variance-flatness relation as Feng & Tu (PNAS 2021) measured it: variance "
        "sigma_i^2 of the SGD weights along their principal directions p_i against the full "
        "width F_i of the full-batch loss profile L(theta_bar + s p_i) at e L_0, log-log, with "
        "the fitted power law sigma^2 ~ F^-psi; beside it paper 000's form, the curvature "
        "kappa_i = p_i^T H p_i against sigma_i^2 (Eq. 73, Fig. 7a); crosses: the exact "
        "linearisation at the SGD mean (Eq. 29) with the true profiles along its own principal "
        f"directions; {_ERR}; needs the setting flatness_block.")),
    "trace_vs_lr": Figure(plots.trace_vs_lr, caption=(
        "tr M of the SGD covariance against the learning rate, with the exact linearisation "
        "(Eq. 29, continuous time) at the minimum and at the SGD mean, the discrete-time "
        "recursions and App. A's form; "
        f"{_ERR}.")),
}  # fmt: skip


def _experiment(name: str, title: str, params: tuple, run, derive) -> Experiment:
    return Experiment(
        name=name, family="models", title=title,
        source="paper 000 App. A, Eqs. 14, 29-33, 79-81; Fig. 7a (IVFR)",
        params=params, run_cell=run, derive=derive, agreement=agreement_rows,
        figures=FIGURES, default_figures=("spectra", "ivfr"), resources=resources,
    )  # fmt: skip


EXPERIMENTS = {
    "deep_linear": _experiment(
        "deep_linear",
        "deep linear network: stationary SGD covariance, IVFR, drift",
        COMMON + DEEP,
        run_deep,
        derive,
    ),
    "one_hidden": _experiment(
        "one_hidden",
        "one-hidden-layer network: App. A's Jacobian theory against SGD",
        COMMON + ONE_HIDDEN,
        run_one_hidden,
        derive,
    ),
}

__all__ = [
    "EXPERIMENTS",
    "OrthogonalTeacher",
    "cell_text",
    "cells_of",
    "deep_linear_model",
    "flagged_cells",
    "one_hidden_model",
]
