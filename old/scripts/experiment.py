"""Rule experiment: one single-job experiment of paper 000 Sec. II (see experiments.smk)."""

from threadpoolctl import threadpool_limits

from weightdyn import io
from weightdyn.joblog import job_logger
from weightdyn.single_layer import experiments

log = job_logger("experiment", snakemake.log[0])
name = snakemake.wildcards.experiment
block = snakemake.params.block
with threadpool_limits(snakemake.threads):
    result = experiments.EXPERIMENTS[name](block, snakemake.params.protocol, log.info)
if snakemake.wildcards.kind == "md":
    io.write_text_atomic(result, snakemake.output[0])
else:
    result.attrs.update(io.provenance({"experiment": name, **block}))
    io.write_atomic(result, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
