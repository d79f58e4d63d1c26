"""Rule mean_field_cell: one cell of a mean-field experiment of paper 002 (see mean_field.smk)."""

from threadpoolctl import threadpool_limits

from weightdyn import io
from weightdyn.joblog import job_logger
from weightdyn.mean_field import experiments

name, cell = snakemake.wildcards.mf, snakemake.params.cell
log = job_logger(f"mean_field_{name}", snakemake.log[0])
block = snakemake.config["mean_field"][name]
log.info("experiment %s, cell %s", name, cell)
with threadpool_limits(snakemake.threads):
    result = experiments.module(name).run_cell(block, cell, log.info)
result.attrs.update(io.provenance({"experiment": name, **cell}))
io.write_atomic(result, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
