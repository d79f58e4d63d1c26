"""Rule figure_mean_field: one figure of one mean-field experiment (paper 002)."""

import xarray as xr

from weightdyn.joblog import job_logger
from weightdyn.mean_field import experiments
from weightdyn.plots.common import save

name, fig_name = snakemake.wildcards.mf, snakemake.wildcards.fig
log = job_logger(f"figure_mean_field_{name}_{fig_name}", snakemake.log[0])
with xr.open_dataset(snakemake.input[0]) as summary:
    fig = experiments.module(name).plot(summary.load(), fig_name)
save(fig, snakemake.output, dpi=snakemake.params.style.get("dpi", 200))
log.info("wrote %s", list(snakemake.output))
