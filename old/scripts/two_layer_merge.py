"""Rule two_layer_merge: all two-layer cells into results/two_layer.nc, one dim per sweep axis."""

import xarray as xr

import weightdyn
from weightdyn import io, sweep
from weightdyn.joblog import job_logger

log = job_logger("two_layer_merge", snakemake.log[0])
cells = []
for path, cell in zip(snakemake.input, snakemake.params.cells, strict=True):
    with xr.open_dataset(path) as ds:
        ds = ds.load().drop_vars(sweep.TWO_LAYER_AXES, errors="ignore")
        cells.append(io.expand_cell(ds, cell, sweep.TWO_LAYER_AXES))
merged = io.merge_cells(cells)
merged.attrs = {
    "title": "weightdyn two-layer cells (paper 000 Sec. III)",
    "weightdyn_version": weightdyn.__version__,
    "git_revision": io.git_revision(),
}
io.write_atomic(merged, snakemake.output[0])
log.info("merged %d cells", len(cells))
