"""Rule agreement_table: theory-vs-simulation agreement per figure, as HTML (report) and CSV."""

from pathlib import Path

import xarray as xr

from weightdyn import agreement
from weightdyn.joblog import job_logger

log = job_logger("agreement_table", snakemake.log[0])


def load(path):
    with xr.open_dataset(path) as ds:
        return ds.load()


inputs = snakemake.input
rows = []
if "single_layer" in inputs.keys():
    rows += agreement.single_layer_rows(load(inputs.single_layer), snakemake.params.fig4_cells)
if "single_layer_lr" in inputs.keys():
    rows += agreement.discrete_rows(load(inputs.single_layer_lr), snakemake.params.discrete_cells)
for name, rows_of in (
    ("projector", agreement.projector_rows),
    ("k_diagonal", agreement.k_diagonal_rows),
    ("spectrum", agreement.spectrum_rows),
    ("hessian_basis", agreement.hessian_basis_rows),
    ("relaxation", agreement.relaxation_rows),
    ("sgf", agreement.sgf_rows),
    ("gbm", agreement.gbm_rows),
):
    if name in inputs.keys():
        rows += rows_of(load(inputs[name]))
for name, figure in (("perturbation_iid", "fig5a"), ("perturbation_correlated", "fig5b")):
    if name in inputs.keys():
        rows += agreement.perturbation_rows(load(inputs[name]), figure)
for path in inputs.two_layer if "two_layer" in inputs.keys() else []:
    rows += agreement.two_layer_rows(load(path), Path(path).stem)
if "mean_field" in inputs.keys():
    with xr.open_datatree(inputs.mean_field) as tree:
        rows += agreement.mean_field_rows(
            {k: v.to_dataset().load() for k, v in tree.children.items()}
        )

Path(snakemake.output.csv).write_text(agreement.table_csv(rows))
Path(snakemake.output.html).write_text(
    agreement.table_html(
        rows,
        "Relative deviation sim/theory - 1 per point, pooled per comparison: mean with its "
        "standard error (points treated as independent), largest |deviation| and largest "
        "|z| = |sim - theory| / SE, and the point where |z| (or |deviation| without SE) is "
        "largest. n/a: no standard error available.",
    )
)
log.info("wrote %d rows", len(rows))
