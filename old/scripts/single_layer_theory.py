"""Rule single_layer_theory: theory of one cell (paper 000 Eqs. 4-34) from its data set."""

import xarray as xr
from threadpoolctl import threadpool_limits

from weightdyn import data, io
from weightdyn.joblog import job_logger
from weightdyn.single_layer.datasets import theory_dataset

log = job_logger("single_layer_theory", snakemake.log[0])
cell = snakemake.params.cell
with threadpool_limits(snakemake.threads), xr.open_dataset(snakemake.input.data) as raw:
    dataset = data.from_dataset(raw.load())
    ds = theory_dataset(dataset, cell["lr"], cell["batch_size"], cell["sampling"])
ds.attrs.update(io.provenance(cell))
ds.attrs["data_file"] = str(snakemake.input.data)
io.write_atomic(ds, snakemake.output[0])
log.info("wrote %s: tau = %.3g steps", snakemake.output[0], float(ds["tau_steps"]))
