# weightdyn: theory vs simulation sweeps of SGD weight dynamics (see README.md).
import os

from snakemake.utils import min_version

min_version("9.0")


# The default sweep applies only when no --configfile is given: Snakemake would otherwise merge
# the two, so that sweeps and experiment blocks of the default leak into another config.
if not config:

    configfile: "config/config.yaml"


# the conda environment of every rule installs the package from this checkout (--sdm conda)
os.environ.setdefault("WEIGHTDYN_ROOT", workflow.basedir)


include: "workflow/rules/common.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/single_layer.smk"
include: "workflow/rules/noise.smk"
include: "workflow/rules/experiments.smk"
include: "workflow/rules/two_layer.smk"
include: "workflow/rules/mean_field.smk"
include: "workflow/rules/figures.smk"


rule all:
    input:
        expand("results/{group}.nc", group=SL_MERGES),
        figure_targets(),
        expand("results/figures/{fig}.{ext}", fig=experiment_figures(), ext=FIGURE_FORMATS),
        ["results/experiments/table1.md"] if "table1" in EXPERIMENTS else [],
        two_layer_targets(),
        mean_field_targets(),
        "results/agreement.html",
    default_target: True
