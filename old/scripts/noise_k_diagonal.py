"""Rule noise_k_diagonal: sorted diagonal of K (paper 000 Eq. 18, Fig. 1b) of one data set."""

import xarray as xr
from threadpoolctl import threadpool_limits

from weightdyn import data, io, seeds
from weightdyn.joblog import job_logger
from weightdyn.single_layer.noise import k_diagonal_dataset

log = job_logger("noise_k_diagonal", snakemake.log[0])
cell = snakemake.params.cell
with threadpool_limits(snakemake.threads), xr.open_dataset(snakemake.input.data) as raw:
    dataset = data.from_dataset(raw.load())
    rng = seeds.generator("noise/k_diagonal", cell)
    ds = k_diagonal_dataset(dataset.X, dataset.y, rng, sigma_eps2=cell["sigma_eps2"])
ds.attrs.update(io.provenance(cell))
ds.attrs["data_file"] = str(snakemake.input.data)
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
