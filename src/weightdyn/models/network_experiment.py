"""Any differentiable network on any data set: paper 000 App. A's theory against SGD.

The ``network`` experiment trains a fully connected network (:class:`~weightdyn.models.MLP`,
any widths and any smooth activation, squared error or softmax cross-entropy, weight decay
``chi``) on a real data set (:mod:`weightdyn.datasets`: the sets bundled with scikit-learn, or a
user's ``.npz``/``.csv`` named ``file:<path>``) and runs the protocol of every model cell
(:mod:`weightdyn.models.cell`): the minimum, SGD about it, and the exact linearisation (Eq. 29
with the full Hessian of the loss used and the exact mini-batch noise), App. A's Gauss-Newton form
(Eqs. 79-81), detailed balance (Eq. 33) and the discrete recursion against SGD's stationary
covariance; the IVFR of Fig. 7a.

A network of one's own is :func:`network_experiment` with a function ``build(n_in, n_out,
params) -> Model`` (a :class:`~weightdyn.models.JaxModel` from ``apply(params, X)`` and an
initialiser), in a module named in the config's ``experiment_modules`` (README).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from weightdyn import datasets
from weightdyn.experiments import (
    REQUIRED,
    ConfigError,
    DataSet,
    Experiment,
    Param,
    Params,
    Progress,
)
from weightdyn.models import cell
from weightdyn.models.base import Model
from weightdyn.models.experiment import COMMON, FIGURES, agreement_rows, check_frame_settings
from weightdyn.models.jax_model import ACTIVATIONS, MLP, NONSMOOTH_ACTIVATIONS
from weightdyn.models.losses import LOSSES

__all__ = ["EXPERIMENTS", "mlp_model", "network_experiment", "parse_hidden"]

BUNDLED = tuple(n for n in datasets.NAMES if n != "file")
FILE_PREFIX = "file:"
ENGINES = ("auto", "jax", "kernel", "numpy")
_SHARED = (
    "init", "init_scale", "lr", "batch_size", "sampling", "data_seed", "replicas", "burn_tau",
    "sample_tau", "records_per_tau", "n_blocks", "max_steps", "gtol", "moment_modes",
    "moment_block", "flatness_block",
)  # fmt: skip
# fmt: off
DATA = (
    Param("dataset", str, REQUIRED, "data set: one bundled with scikit-learn "
          f"({', '.join(BUNDLED)}) or a user's file, 'file:<path>' (.npz with X and y, or .csv)",
          axis=True),
    Param("P", int, REQUIRED, "training-set size P (a seeded subsample of the training split)",
          axis=True, minimum=2),
    Param("split_seed", int, 0, "seed of the train/test split and of the subsample",
          axis=True, minimum=0),
    Param("test_size", float, 0.25, "test split: a fraction in (0, 1) or a sample count",
          exclusive_minimum=True, minimum=0),
    Param("task", str, None, "task of a user's file (a bundled set has its own)",
          allowed=datasets.TASKS),
    Param("target", str, None, "column of y in a user's .csv (name or index; default the last)"),
)
NETWORK = (
    Param("hidden", str, REQUIRED, "hidden widths, '-'-separated (e.g. '16-16'; '' for none)",
          axis=True),
    Param("activation", str, "tanh", "activation phi (smooth: the theory needs the Hessian; "
          "a kinked one only with allow_nonsmooth)", axis=True,
          allowed=(*ACTIVATIONS, *NONSMOOTH_ACTIVATIONS)),
    Param("allow_nonsmooth", bool, False, "run a kinked activation (relu, ...) knowingly: its "
          "Hessian misses the kinks, so the theory is not the network's"),
    Param("loss", str, "squared", "loss: squared error (the papers') or softmax cross-entropy",
          axis=True, allowed=tuple(LOSSES)),
    Param("weight_decay", float, 0.0, "weight decay chi (L2 term chi |theta|^2 / 2, paper 000 "
          "App. B)", axis=True, minimum=0),
    Param("engine", str, "auto", "SGD engine: auto (the fastest for the model), jax, kernel "
          "(numba, the hand-written models) or numpy", allowed=ENGINES),
)
# fmt: on


def parse_hidden(text: str) -> tuple[int, ...]:
    """``'16-16' -> (16, 16)``; ``''`` -> ``()``; ConfigError naming ``hidden`` otherwise."""
    parts = [p for p in str(text).replace(",", "-").split("-") if p.strip()]
    try:
        widths = tuple(int(p) for p in parts)
    except ValueError:
        widths = ()
        parts = ["bad"]
    if len(widths) != len(parts) or any(w < 1 for w in widths):
        raise ConfigError(
            f"hidden: {text!r} is not allowed; allowed: positive widths separated by '-', "
            "e.g. '16-16'"
        )
    return widths


def data_source(dataset: str) -> tuple[str, Path | None]:
    """``(name, path)`` of a ``dataset`` value: a bundled name, or ``file:<path>``."""
    if dataset.startswith(FILE_PREFIX):
        return "file", Path(dataset[len(FILE_PREFIX) :]).expanduser()
    if dataset not in BUNDLED:
        raise ConfigError(
            f"dataset: {dataset!r} is not allowed; allowed: {', '.join(BUNDLED)} or "
            f"'{FILE_PREFIX}<path>'"
        )
    return dataset, None


def _data_version(name: str, path: Path | None) -> str:
    """What identifies the data's content: the file's checksum (an edited file is a new data
    set, and its cells rerun), or scikit-learn's version for a bundled set."""
    if path is None:
        import sklearn

        return f"sklearn-{sklearn.__version__}"
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def derive(params: dict[str, Any]) -> dict[str, Any]:
    """Checks that need no data (the data set's name, file, task and test size; the hidden
    widths; ``batch_size <= P``) and the data version (:func:`_data_version`)."""
    name, path = data_source(params["dataset"])
    datasets.check_arguments(
        name, path=path, test_size=params["test_size"], split_seed=params["split_seed"],
        task=params.get("task"), target=params.get("target"),
    )  # fmt: skip
    if "hidden" in params:
        parse_hidden(params["hidden"])
    act = params.get("activation")
    if act in NONSMOOTH_ACTIVATIONS and not params.get("allow_nonsmooth", False):
        raise ConfigError(
            f"activation: {act!r} is refused: {NONSMOOTH_ACTIVATIONS[act][1]}; allowed: "
            f"{', '.join(ACTIVATIONS)}, or set allow_nonsmooth: true to run it knowingly"
        )
    if params["batch_size"] > params["P"]:
        raise ConfigError(
            f"batch_size: {params['batch_size']} exceeds P = {params['P']}; allowed: "
            "1 <= batch_size <= P"
        )
    layers = len(parse_hidden(params["hidden"])) if "hidden" in params else 2  # a user's: trust
    check_frame_settings({**params, "n_hidden_layers": layers})
    params["data_version"] = _data_version(name, path)
    return params


def make_data(params: Params) -> xr.Dataset:
    """The shared data file of a cell (:func:`weightdyn.datasets.make`)."""
    name, path = data_source(params["dataset"])
    return datasets.make({**params, "dataset": name, "data_file": path})


DATASET = DataSet(
    "real",
    keys=("dataset", "P", "split_seed", "task", "target"),
    make=make_data,
    load=datasets.load,
    settings=("test_size", "data_version"),
)


def mlp_model(n_in: int, n_out: int, params: Mapping[str, Any]) -> Model:
    """The built-in network: :class:`~weightdyn.models.MLP` of widths ``(n_in, *hidden,
    n_out)`` with the cell's activation (biases on every layer)."""
    widths = (n_in, *parse_hidden(params["hidden"]), n_out)
    return MLP(widths, params["activation"], allow_nonsmooth=params.get("allow_nonsmooth", False))


def _cell_params(params: Params) -> dict[str, Any]:
    """The cell's parameters without the loaded data set (seeds hash parameter values)."""
    return {k: v for k, v in params.items() if k != "data"}


def _data_attrs(data: datasets.RealData) -> dict[str, str]:
    return {
        "dataset": data.name,
        "dataset_source": data.source,
        "dataset_version": data.version,
        "dataset_sha256": data.sha256,
        "task": data.task,
    }


def cell_runner(build: Callable[[int, int, Mapping[str, Any]], Model]) -> Callable:
    """``run_cell`` of a network experiment: the model ``build(N_i, N_o, params)`` with the
    cell's loss and weight decay, on the cell's training set (:func:`weightdyn.models.cell.
    run_on_data`)."""

    def run_cell(params: Params, progress: Progress) -> xr.Dataset:
        data: datasets.RealData = params["data"]
        model = build(data.N_i, data.N_o, params)
        model = model.with_objective(params["loss"], params["weight_decay"])
        # a user's function that fails or gives NaN fails the cell here, with its traceback
        model.output(data.X_train, model.random_theta(np.random.default_rng(0)))
        progress(
            f"{data.name}: P = {data.P}, N_i = {data.N_i}, N_o = {data.N_o}; model "
            f"{getattr(model, 'name', type(model).__name__)}, n = {model.n_params}, loss "
            f"{params['loss']}, chi = {params['weight_decay']:g}"
        )
        cdata = cell.Data(data.X_train, data.Y_train, None)
        ds = cell.run_on_data(model, cdata, _cell_params(params), progress)
        ds.attrs.update(_data_attrs(data))
        return ds

    return run_cell


#: (N_i, N_o) of the bundled sets, for the memory estimate of a cell before its data exist
BUNDLED_DIMS = {"digits": (64, 10), "breast_cancer": (30, 2), "wine": (13, 3), "iris": (4, 3),
                "diabetes": (10, 1)}  # fmt: skip


def _widths(params: Params) -> tuple[int, ...] | None:
    """The built-in MLP's widths on a bundled set (None where they are not known before the
    data: a user's file or network)."""
    dims = BUNDLED_DIMS.get(params["dataset"])
    if dims is None or "hidden" not in params:
        return None
    return (dims[0], *parse_hidden(params["hidden"]), dims[1])


def _frame_dim(widths: tuple[int, ...], params: Params) -> int:
    """The dimension SGD's second moments are recorded in (``moment_modes``, the
    ``moment_block``'s size, or all parameters)."""
    n = sum((a + 1) * b for a, b in pairwise(widths))
    block = params.get("moment_block")
    if block == "output":
        return (widths[-2] + 1) * widths[-1]
    if block == "hidden" and len(widths) > 3:
        return widths[1] * widths[2]
    return min(n, params.get("moment_modes") or n)


def _resources(params: Params, attempt: int) -> dict[str, int]:
    """1 GB and six times the moment sums (``replicas n_blocks k^2`` floats, ``k`` the
    dimension of the recorded frame, :func:`_frame_dim`): measured 1.0 GB at n = 193 and 12.4
    GB at n = 1482 (16 replicas x 8 blocks; the sums, their jackknife copies and the theory's
    n x n matrices), and 12.4 GB at n = 6310 with k = 500 (the theory's n x n matrices: 40 of
    them are counted); 4 GB where n is not known; doubled per attempt."""
    widths = _widths(params)
    if widths is None:
        return {"mem_mb": 4000 * attempt, "runtime": 120 * attempt}
    n = sum((a + 1) * b for a, b in pairwise(widths))
    k = _frame_dim(widths, params)
    sums_mb = 8 * params["replicas"] * params["n_blocks"] * k * k / 1e6
    theory_mb = 40 * 8 * n * n / 1e6
    return {"mem_mb": int(1000 + 6 * sums_mb + theory_mb) * attempt, "runtime": 120 * attempt}


def network_experiment(
    name: str,
    build: Callable[[int, int, Mapping[str, Any]], Model],
    params: tuple[Param, ...] = (),
    title: str | None = None,
) -> Experiment:
    """An experiment of the network ``build(n_in, n_out, params) -> Model`` on any data set:
    the axes and settings of :data:`DATA`, the training settings of the model experiments, the
    loss, weight decay and engine, and ``params`` of one's own (e.g. a width)."""
    common = tuple(p for p in COMMON if p.name in _SHARED)
    builtin = ("hidden", "activation", "allow_nonsmooth")  # the MLP's; one's own has its own
    network = tuple(p for p in NETWORK if build is mlp_model or p.name not in builtin)
    return Experiment(
        name=name, family="models",
        title=title or f"{name}: a network on a data set, App. A's theory against SGD",
        source="paper 000 App. A, Eqs. 14, 29-33, 79-81; App. B (weight decay); Fig. 7a",
        params=DATA + network + common + tuple(params), run_cell=cell_runner(build),
        derive=derive,
        agreement=agreement_rows, figures=FIGURES, default_figures=("spectra", "ivfr"),
        resources=_resources, data=DATASET,
    )  # fmt: skip


EXPERIMENTS = {
    "network": network_experiment(
        "network",
        mlp_model,
        title="an MLP on a data set (bundled or a file): App. A's theory against SGD",
    )
}
