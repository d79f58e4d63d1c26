"""Rule noise_projector: off-diagonal variance of the projector X X^+ (paper 000 Fig. 1a)."""

from threadpoolctl import threadpool_limits

from weightdyn import io, seeds
from weightdyn.joblog import job_logger
from weightdyn.single_layer.noise import projector_dataset

log = job_logger("noise_projector", snakemake.log[0])
cell = snakemake.params.cell
with threadpool_limits(snakemake.threads):
    ds = projector_dataset(
        cell["N"], cell["P"], cell["realisations"], seeds.generator("noise/projector", cell)
    )
ds.attrs.update(io.provenance(cell))
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
