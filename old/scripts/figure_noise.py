"""Rule figure_noise: paper 000 Figs. 1a, 1b, 2a (per sampling mode), 2b and 2c."""

import xarray as xr

from weightdyn.joblog import job_logger
from weightdyn.plots import noise
from weightdyn.plots.common import save

log = job_logger("figure_noise", snakemake.log[0])
name = snakemake.wildcards.fig
with xr.open_dataset(snakemake.input[0]) as ds:
    ds = ds.load()
if name.startswith("fig2a_"):
    spec = ds.sel(sampling=name.removeprefix("fig2a_"))
    fig = noise.fig2a(spec.sel(P=snakemake.params.main_p))
elif name == "fig2b":
    fig = noise.fig2b(ds.isel(sampling=0), main_P=snakemake.params.main_p)
else:
    fig = getattr(noise, name)(ds)
save(fig, snakemake.output, dpi=snakemake.params.style.get("dpi", 200))
log.info("wrote %s", ", ".join(snakemake.output))
