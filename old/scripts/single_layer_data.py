"""Rule single_layer_data: draw one teacher-student data set (paper 000 Eq. 1)."""

from weightdyn import data, io, seeds
from weightdyn.joblog import job_logger

log = job_logger("single_layer_data", snakemake.log[0])
cell = snakemake.params.cell
rng = seeds.generator("single_layer/data", cell)
dataset = data.teacher_student(
    cell["N"], cell["P"], cell["sigma_eps2"], rng, n_test=snakemake.params.n_test
)
ds = data.to_dataset(dataset)
ds.attrs.update(io.provenance(cell))
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s (N=%d, P=%d)", snakemake.output[0], dataset.N, dataset.P)
