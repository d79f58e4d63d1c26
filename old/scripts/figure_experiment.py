"""Rule figure_experiment: paper 000 Figs. 3, 5a, 5b, SGD vs SGF, and the GBM check."""

import xarray as xr

from weightdyn.joblog import job_logger
from weightdyn.plots import perturbation, relaxation, sgf
from weightdyn.plots.common import save

log = job_logger("figure_experiment", snakemake.log[0])
name = snakemake.wildcards.fig
with xr.open_dataset(snakemake.input[0]) as ds:
    ds = ds.load()
if name == "fig_gbm":
    runs = []
    for lr in ds["lr"].values:
        run = ds.sel(lr=lr).dropna("t", how="all")
        run.attrs = {**ds.attrs, "lr": float(lr)}  # a new dict: sel shares the parent's attrs
        runs.append(run)
    fig = sgf.fig_gbm(runs)
else:
    draw = {
        "fig3": relaxation.fig3,
        "fig5a": perturbation.fig5a,
        "fig5b": perturbation.fig5b,
        "fig_sgd_sgf": sgf.fig_sgd_sgf,
    }[name]
    fig = draw(ds)
save(fig, snakemake.output, dpi=snakemake.params.style.get("dpi", 200))
log.info("wrote %s", ", ".join(snakemake.output))
