"""Rule figure_discrete: the exact discrete-time covariance vs SGD and Eq. 30 (lr sweeps)."""

import xarray as xr

from weightdyn.joblog import job_logger
from weightdyn.plots import discrete
from weightdyn.plots.common import save

FIGURES = {
    "fig_discrete_trace": discrete.fig_trace_vs_lr,
    "fig_discrete_spectra": discrete.fig_spectra_at_max_stable_lr,
    "fig_discrete_divergence": discrete.fig_divergence_lr,
}

log = job_logger("figure_discrete", snakemake.log[0])
cells = snakemake.params.cells
axes = ("N", "P", "sigma_eps2", "lr", "batch_size", "sampling", "data_seed")
with xr.open_dataset(snakemake.input[0]) as ds:
    sel = ds.sel({k: sorted({c[k] for c in cells}) for k in axes}).load()
fig = FIGURES[snakemake.wildcards.fig](sel)
save(fig, snakemake.output, dpi=snakemake.params.style.get("dpi", 200))
log.info("wrote %s from %d cells", ", ".join(snakemake.output), len(cells))
