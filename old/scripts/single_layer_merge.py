"""Rule single_layer_merge: all single-layer cells into results/single_layer.nc."""

import xarray as xr

import weightdyn
from weightdyn import io, sweep
from weightdyn.joblog import job_logger

log = job_logger("single_layer_merge", snakemake.log[0])


def cells(paths, cell_params):
    for path, cell in zip(paths, cell_params, strict=True):
        with xr.open_dataset(path) as ds:
            yield io.expand_cell(ds.load(), cell, sweep.SINGLE_LAYER_AXES)


theory = list(cells(snakemake.input.theory, snakemake.params.theory_cells))
sgd = list(cells(snakemake.input.sgd, snakemake.params.sgd_cells))
merged = io.merge_cells(
    theory + sgd,
    {
        "title": "weightdyn single-layer sweep: SGD vs theory (paper 000 Sec. II)",
        "weightdyn_version": weightdyn.__version__,
        "git_revision": io.git_revision(),
    },
)
merged.coords["p_over_n"] = merged["P"] / merged["N"]
merged["p_over_n"].attrs = io.attrs("sample ratio P/N", "1", "paper 000 Sec. II.1")
io.write_atomic(merged, snakemake.output[0])
log.info("merged %d theory and %d SGD cells", len(theory), len(sgd))
