"""Rule single_layer_sgd: SGD replicas of one cell run to stationarity and sampled (Eqs. 10-11)."""

import xarray as xr
from threadpoolctl import threadpool_limits

from weightdyn import data, io, seeds
from weightdyn.joblog import job_logger
from weightdyn.single_layer.datasets import sgd_dataset
from weightdyn.single_layer.protocol import SGDProtocol, run_stationary_sgd

log = job_logger("single_layer_sgd", snakemake.log[0])
cell = snakemake.params.cell
protocol = SGDProtocol(**snakemake.params.protocol)
with threadpool_limits(snakemake.threads), xr.open_dataset(snakemake.input.data) as raw:
    dataset = data.from_dataset(raw.load())
    w_star, result = run_stationary_sgd(
        dataset,
        cell["lr"],
        cell["batch_size"],
        cell["sampling"],
        protocol,
        seeds.generator("single_layer/sgd", cell),
        progress=log.info,
    )
    ds = sgd_dataset(dataset, w_star, result)
ds.attrs.update(io.provenance(cell))
ds.attrs["data_file"] = str(snakemake.input.data)
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s (diverged=%s, %.1f s)", snakemake.output[0], result.diverged, result.elapsed_s)
