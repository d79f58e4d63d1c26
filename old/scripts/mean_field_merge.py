"""Rule mean_field_merge: every experiment summary as one group of results/mean_field.nc."""

import xarray as xr

from weightdyn import io
from weightdyn.joblog import job_logger

log = job_logger("mean_field_merge", snakemake.log[0])
groups = {}
for name, path in zip(snakemake.params.experiments, snakemake.input, strict=True):
    with xr.open_dataset(path) as ds:
        groups[f"/{name}"] = ds.load()
tree = xr.DataTree.from_dict(groups)
tree.attrs = {
    "title": "weightdyn mean-field experiments (paper 002), one group per experiment",
    "git_revision": io.git_revision(),
}
io.write_atomic(tree, snakemake.output[0])
log.info("merged %s", sorted(groups))
