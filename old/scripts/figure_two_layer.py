"""Rule figure_two_layer: one figure of one two-layer cell (paper 000 Figs. 6-7 and beyond)."""

import xarray as xr

from weightdyn.joblog import job_logger
from weightdyn.plots.common import save
from weightdyn.plots.two_layer import FIGURES

log = job_logger("figure_two_layer", snakemake.log[0])
with xr.open_dataset(snakemake.input[0]) as ds:
    fig = FIGURES[snakemake.wildcards.fig](ds.load())
save(fig, snakemake.output, dpi=snakemake.params.style.get("dpi", 200))
log.info("wrote %s", ", ".join(snakemake.output))
