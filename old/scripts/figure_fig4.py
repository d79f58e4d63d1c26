"""Rule figure_fig4: draw one panel family of paper 000 Fig. 4 from results/single_layer.nc."""

import xarray as xr

from weightdyn.joblog import job_logger
from weightdyn.plots.common import save
from weightdyn.plots.fig4 import FIGURES

log = job_logger("figure_fig4", snakemake.log[0])
with xr.open_dataset(snakemake.input[0]) as ds:
    fig = FIGURES[snakemake.wildcards.fig](ds.load(), snakemake.params.cells)
save(fig, snakemake.output, dpi=snakemake.params.style.get("dpi", 200))
log.info("wrote %s", ", ".join(snakemake.output))
