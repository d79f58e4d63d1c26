# Report helpers: categories, figure groups and the inputs of the agreement table (report.smk).


SINGLE_LAYER_REPORT = "Paper 000, Sec. II: single-layer network"
TWO_LAYER_REPORT = "Paper 000, Sec. III: two-layer network"
MEAN_FIELD_REPORT = "Paper 002: mean-field dynamics of wide shallow networks"
MEAN_FIELD_GROUPS = {
    "width": "E1: finite width vs the infinite-width limit (Eqs. 6, 12)",
    "pde": "E2: the transport equation (Eqs. 9-10) on a grid",
    "small_output": "E3: small output weights (Eqs. 19-26)",
    "gaussian": "E4: Gaussian ansatz (Eqs. 27-30)",
    "linearisation": "E5: linearisation at a zero-loss state (Eqs. 14-18)",
}
FIGURE_GROUPS = {
    "fig1a": "Fig. 1: projector and the matrix K",
    "fig1b": "Fig. 1: projector and the matrix K",
    "fig2a_with": "Fig. 2: mini-batch noise covariance",
    "fig2a_without": "Fig. 2: mini-batch noise covariance",
    "fig2b": "Fig. 2: mini-batch noise covariance",
    "fig2c": "Fig. 2: mini-batch noise covariance",
    "fig3": "Fig. 3: relaxation",
    "fig4a": "Fig. 4: stationary weight covariance",
    "fig4b": "Fig. 4: stationary weight covariance",
    "fig4c": "Fig. 4: stationary weight covariance",
    "fig5a": "Fig. 5: loss perturbation",
    "fig5b": "Fig. 5: loss perturbation",
    "fig_sgd_sgf": "SGD vs stochastic gradient flow (Eq. 13)",
    "fig_gbm": "Multiplicative noise, geometric Brownian motion (Eqs. 21-24)",
}


def figure_report(files, caption, category, subcategory):
    """Figure outputs with the PNG (else the first format) marked for the report."""
    shown = next((f for f in files if f.endswith(".png")), files[0])
    labels = {"figure": "{fig}"}
    flagged = report(shown, caption, category, subcategory, labels)
    return [flagged if f == shown else f for f in files]


def agreement_inputs():
    """Named datasets of the figures present in the config, for the agreement table."""
    inputs = {group: f"results/{group}.nc" for group in SL_MERGES}
    for kind in ("projector", "k_diagonal", "spectrum"):
        if kind in NOISE_CELLS:
            inputs[kind] = f"results/noise_{kind}.nc"
    if "hessian_basis" in NOISE_CELLS:
        inputs["hessian_basis"] = "results/noise/hessian_basis.nc"
    for fig in experiment_figures():
        inputs[EXPERIMENT_FIGURES[fig]] = f"results/experiments/{EXPERIMENT_FIGURES[fig]}.nc"
    if TWO_LAYER_CELLS:
        inputs["two_layer"] = [f"results/two_layer/{name}.nc" for name in sorted(TWO_LAYER_CELLS)]
    if MF_CELLS:
        inputs["mean_field"] = "results/mean_field.nc"
    return inputs
