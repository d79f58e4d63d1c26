"""Rule figure: one view (an experiment's figure function on the merged cells or the summary)."""

import numpy as np
import xarray as xr

from weightdyn import experiments, io
from weightdyn.joblog import job_logger
from weightdyn.plots.common import save

log = job_logger("figure", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
figure = experiments.get(snakemake.params.experiment).figures[snakemake.params.figure]
parts = io.load_all(snakemake.input)
if figure.source == "cells":
    ds = xr.concat(parts, dim="cell", data_vars="all", join="outer") if len(parts) > 1 else parts[0]
    keep = np.isin(ds["cell_id"].values, snakemake.params.cells)
    _, first = np.unique(ds["cell_id"].values, return_index=True)
    keep &= np.isin(np.arange(ds.sizes["cell"]), first)  # a cell in two sweeps is drawn once
    ds = ds.isel(cell=np.flatnonzero(keep))
else:
    ds = parts[0] if len(parts) == 1 else parts
fig = figure.plot(ds, **snakemake.params.options)
save(fig, snakemake.output, dpi=snakemake.params.dpi)
log.info("wrote %s", ", ".join(snakemake.output))
