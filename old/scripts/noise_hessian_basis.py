"""Rule noise_hessian_basis: <|V^T C V|> over data realisations (paper 000 Fig. 2c)."""

import xarray as xr
from threadpoolctl import threadpool_limits

from weightdyn import data, io
from weightdyn.joblog import job_logger
from weightdyn.single_layer.noise import hessian_basis_dataset

log = job_logger("noise_hessian_basis", snakemake.log[0])
cell = snakemake.params.cell
realisations = []
for path in snakemake.input.data:
    with xr.open_dataset(path) as raw:
        dataset = data.from_dataset(raw.load())
        realisations.append((dataset.X, dataset.y))
with threadpool_limits(snakemake.threads):
    ds = hessian_basis_dataset(realisations, cell["batch_size"])
ds.attrs.update(io.provenance(cell))
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s from %d data sets", snakemake.output[0], len(realisations))
