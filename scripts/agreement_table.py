"""Rule agreement_table: every sweep's theory-vs-simulation rows, as HTML (report) and CSV."""

from pathlib import Path

from weightdyn import agreement, experiments, io
from weightdyn.joblog import job_logger

log = job_logger("agreement_table", snakemake.log[0])
experiments.register_modules(snakemake.config.get("experiment_modules", []))
rows = []
for path, (experiment, label) in zip(
    snakemake.input, snakemake.params.sweeps.values(), strict=True
):
    exp = experiments.get(experiment)
    if exp.agreement is None:
        continue
    rows += exp.agreement(agreement.with_flags(io.load(path)), label)
Path(snakemake.output.csv).write_text(agreement.table_csv(rows))
Path(snakemake.output.html).write_text(agreement.table_html(rows, agreement.CAPTION))
log.info("wrote %d rows", len(rows))
