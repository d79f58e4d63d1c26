# Config validation and the sweep cells every rule draws its parameters from.
from snakemake.utils import validate

from weightdyn import resources, sweep
from weightdyn.codehash import code_hash
from weightdyn.io import format_number


validate(config, schema="../../config/schema.yaml")


def _single_layer_sweeps():
    """{sweep name: [cells]} from config; raises a message naming the offending key."""
    blocks = config["single_layer"]["sweeps"]
    try:
        return {name: sweep.single_layer_cells(name, block) for name, block in blocks.items()}
    except sweep.SweepError as err:
        raise ValueError(f"invalid config: {err}") from None


SL_SWEEPS = _single_layer_sweeps()
SL_CELLS = {
    sweep.cell_name(cell): cell
    for cell in sweep.unique_cells(c for cells in SL_SWEEPS.values() for c in cells)
}
SL_SIMULATED = sorted(
    {
        sweep.cell_name(cell)
        for name, cells in SL_SWEEPS.items()
        if config["single_layer"]["sweeps"][name].get("simulate", True)
        for cell in cells
    }
)

def _merge_group(name):
    """Merged file of a named single-layer sweep. A merged dataset is the outer product of its
    axes' values, so the lr sweeps of the exact discrete-time theory (many lr and S values) get
    their own file instead of multiplying the grid of the paper's figure sweeps."""
    return "single_layer_lr" if name.startswith("lr_") else "single_layer"


SL_MERGES = {}
for _name, _cells in SL_SWEEPS.items():
    SL_MERGES.setdefault(_merge_group(_name), set()).update(sweep.cell_name(c) for c in _cells)
SL_MERGES = {group: sorted(names) for group, names in sorted(SL_MERGES.items())}
NOISE_CONFIG = config.get("noise", {})
try:
    NOISE_CELL_PARAMS = sweep.noise_cells(NOISE_CONFIG)
except sweep.SweepError as err:
    raise ValueError(f"invalid config: {err}") from None
NOISE_CELLS = {kind: sorted(cells) for kind, cells in NOISE_CELL_PARAMS.items()}
NOISE_PROJECTOR = NOISE_CELL_PARAMS.get("projector", {})
NOISE_SPECTRUM = NOISE_CELL_PARAMS.get("spectrum", {})
NOISE_BASIS_DATA = list(NOISE_CELL_PARAMS.get("hessian_basis", {}).values())
SL_DATA = {
    sweep.data_name(cell): sweep.data_cell(cell)
    for cell in [
        *SL_CELLS.values(),
        *NOISE_CELL_PARAMS.get("k_diagonal", {}).values(),
        *NOISE_SPECTRUM.values(),
        *NOISE_BASIS_DATA,
    ]
}
FIGURE_FORMATS = config["figures"]["formats"]


def sorted_params(mapping):
    """A config mapping with keys sorted at every level: a reordered YAML is no params change."""
    return {
        key: sorted_params(value) if isinstance(value, dict) else value
        for key, value in sorted(mapping.items())
    }


def sweep_cells(name):
    """The cells of one named single-layer sweep (empty if the config omits it)."""
    return SL_SWEEPS.get(name, [])


def noise_figures():
    """Noise figures drawn for the experiments present in the config."""
    figs = []
    if "projector" in NOISE_CELLS:
        figs.append("fig1a")
    if "k_diagonal" in NOISE_CELLS:
        figs.append("fig1b")
    if "spectrum" in NOISE_CELLS:
        figs += [f"fig2a_{s}" for s in NOISE_CONFIG["spectrum"]["sampling"]] + ["fig2b"]
    if "hessian_basis" in NOISE_CELLS:
        figs.append("fig2c")
    return figs


def lr_sweep_cells():
    """Cells of the learning-rate sweeps (named ``lr_*``) of the exact discrete-time theory."""
    return [cell for name, cells in SL_SWEEPS.items() if name.startswith("lr_") for cell in cells]


DISCRETE_FIGURES = ("fig_discrete_trace", "fig_discrete_spectra", "fig_discrete_divergence")


def figure_targets():
    """Figure files drawn for the sweeps and experiments present in the config."""
    figs = [fig for fig in ("fig4a", "fig4b", "fig4c") if fig in SL_SWEEPS] + noise_figures()
    figs += list(DISCRETE_FIGURES) if lr_sweep_cells() else []
    return [f"results/figures/{fig}.{ext}" for fig in figs for ext in FIGURE_FORMATS]


EXPERIMENTS = {
    key: sorted_params(config[key])
    for key in ("relaxation", "perturbation", "table1", "sgf", "gbm")
    if key in config
}
SGD_PROTOCOL = sorted_params(config["single_layer"]["sgd"])


NOISE_FIGURE_INPUT = {
    "fig1a": "results/noise_projector.nc",
    "fig1b": "results/noise_k_diagonal.nc",
    "fig2b": "results/noise_spectrum.nc",
    "fig2c": "results/noise/hessian_basis.nc",
}


EXPERIMENT_FIGURES = {
    "fig3": "relaxation",
    "fig5a": "perturbation_iid",
    "fig5b": "perturbation_correlated",
    "fig_sgd_sgf": "sgf",
    "fig_gbm": "gbm",
}


def experiment_figures():
    """Figures of the single-job experiments present in the config."""
    return [
        fig for fig, exp in EXPERIMENT_FIGURES.items() if exp.split("_")[0] in EXPERIMENTS
    ]


def _two_layer_cells():
    """{canonical cell name: cell} over all named two-layer sweeps."""
    cells = {}
    try:
        for name, block in config.get("two_layer", {}).get("sweeps", {}).items():
            for cell_name, cell in sweep.two_layer_cells(name, block).items():
                cells.setdefault(cell_name, sorted_params(cell))
    except sweep.SweepError as err:
        raise ValueError(f"invalid config: {err}") from None
    return cells


TWO_LAYER_CELLS = _two_layer_cells()
TWO_LAYER_FIGURES = ("fig6a", "fig6bc", "fig7a", "fig7b", "fig_drift", "fig_relaxation")


def two_layer_targets():
    """Merged two-layer dataset and every figure of every named cell (empty without cells)."""
    if not TWO_LAYER_CELLS:
        return []
    return ["results/two_layer.nc"] + [
        f"results/figures/two_layer/{name}_{fig}.{ext}"
        for name in sorted(TWO_LAYER_CELLS)
        for fig in TWO_LAYER_FIGURES
        for ext in FIGURE_FORMATS
    ]


def _mean_field():
    """Shared settings and cells of the mean-field experiments (paper 002) present in config."""
    from weightdyn.mean_field import experiments as mf

    blocks = {name: sorted_params(block) for name, block in config.get("mean_field", {}).items()}
    try:
        cells = mf.experiment_cells(blocks)
    except ValueError as err:
        raise ValueError(f"invalid config: {err}") from None
    settings = {name: mf.shared_settings(name, block) for name, block in blocks.items()}
    figures = {name: mf.module(name).FIGURES for name in blocks}
    return list(mf.MODULES), settings, cells, figures


MF_EXPERIMENTS, MF_SETTINGS, MF_CELLS, MF_FIGURES = _mean_field()


def mean_field_targets():
    """Merged mean-field dataset and every figure of every experiment (empty without any)."""
    if not MF_CELLS:
        return []
    return ["results/mean_field.nc"] + [
        f"results/figures/mean_field/{name}_{fig}.{ext}"
        for name, figs in MF_FIGURES.items()
        for fig in figs
        for ext in FIGURE_FORMATS
    ]


# Cluster requests scaled with each cell's size (weightdyn.resources); they grow with each retry.
def data_request(w, attempt):
    return resources.single_layer_data(SL_DATA[w.data], config["single_layer"]["n_test"], attempt)


def theory_request(w, attempt):
    return resources.single_layer_theory(SL_CELLS[w.cell], attempt)


def sgd_request(w, attempt):
    return resources.single_layer_sgd(SL_CELLS[w.cell], SGD_PROTOCOL, attempt)


def two_layer_request(w, attempt):
    return resources.two_layer_cell(TWO_LAYER_CELLS[w.tl], attempt)
