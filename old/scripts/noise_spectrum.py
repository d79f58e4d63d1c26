"""Rule noise_spectrum: mini-batch noise covariance at w*, empirical vs Eqs. 17 and 20."""

import xarray as xr
from threadpoolctl import threadpool_limits

from weightdyn import data, io, seeds
from weightdyn.joblog import job_logger
from weightdyn.single_layer.noise import noise_spectrum_dataset

log = job_logger("noise_spectrum", snakemake.log[0])
cell = snakemake.params.cell
with threadpool_limits(snakemake.threads), xr.open_dataset(snakemake.input.data) as raw:
    dataset = data.from_dataset(raw.load())
    log.info("%d mini-batches of size %d", cell["n_batches"], cell["batch_size"])
    ds = noise_spectrum_dataset(
        dataset.X,
        dataset.y,
        cell["batch_size"],
        cell["sampling"],
        cell["n_batches"],
        seeds.generator("noise/spectrum", cell),
        sigma_eps2=cell["sigma_eps2"],
    )
ds.attrs.update(io.provenance(cell))
ds.attrs["data_file"] = str(snakemake.input.data)
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s", snakemake.output[0])
