"""Rule two_layer_merge: the named two-layer cells along a `cell` dimension."""

import xarray as xr

from weightdyn import io
from weightdyn.joblog import job_logger

log = job_logger("two_layer_merge", snakemake.log[0])
cells = []
for path, name in zip(snakemake.input, snakemake.params.names, strict=True):
    with xr.open_dataset(path) as ds:
        cells.append(ds.load().expand_dims(cell=[name]))
merged = xr.concat(cells, dim="cell", join="outer", combine_attrs="drop_conflicts")
merged.attrs = {
    "title": "weightdyn two-layer cells (paper 000 Sec. III)",
    "weightdyn_version": snakemake.params.version,
    "git_revision": io.git_revision(),
}
io.write_atomic(merged, snakemake.output[0])
log.info("merged %d cells", len(cells))
