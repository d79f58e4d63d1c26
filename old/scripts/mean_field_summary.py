"""Rule mean_field_summary: the cells of one experiment into its summary dataset with its fits."""

import xarray as xr

from weightdyn import io
from weightdyn.joblog import job_logger
from weightdyn.mean_field import experiments

name = snakemake.wildcards.mf
log = job_logger(f"mean_field_{name}_summary", snakemake.log[0])
results = []
for path in snakemake.input:
    with xr.open_dataset(path) as ds:
        results.append(ds.load())
summary = experiments.module(name).summarize(snakemake.config["mean_field"][name], results)
summary.attrs.update(io.provenance({"experiment": name}))
io.write_atomic(summary, snakemake.output[0])
log.info("summarised %d cells into %s", len(results), snakemake.output[0])
