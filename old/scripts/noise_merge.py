"""Rule noise_merge: the cells of one noise experiment into results/noise_<kind>.nc."""

import xarray as xr

import weightdyn
from weightdyn import io
from weightdyn.joblog import job_logger

log = job_logger("noise_merge", snakemake.log[0])


def cells():
    for path, cell in zip(snakemake.input, snakemake.params.cells, strict=True):
        with xr.open_dataset(path) as ds:
            ds = ds.load()
        if "sampling" in cell:  # a sweep axis of the spectrum cells: make it a dimension
            ds = io.expand_cell(ds.drop_vars("sampling", errors="ignore"), cell, ["sampling"])
        yield ds


merged = io.merge_cells(
    list(cells()),
    {
        "title": f"weightdyn noise experiment {snakemake.wildcards.kind} (paper 000 Figs. 1-2)",
        "weightdyn_version": weightdyn.__version__,
        "git_revision": io.git_revision(),
    },
)
io.write_atomic(merged, snakemake.output[0])
log.info("merged %d cells", len(snakemake.input))
