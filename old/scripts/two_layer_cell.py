"""Rule two_layer_cell: gradient flow, SGD pre-run and sampling, theory at W^0 and locally."""

from threadpoolctl import threadpool_limits

from weightdyn import io
from weightdyn.joblog import job_logger
from weightdyn.two_layer.experiments import two_layer_cell

log = job_logger("two_layer_cell", snakemake.log[0])
block = snakemake.params.block
with threadpool_limits(snakemake.threads):
    ds = two_layer_cell(block, log.info)
ds.attrs.update(io.provenance({"cell": snakemake.wildcards.tl, **block}))
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
