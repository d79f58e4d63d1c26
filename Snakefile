# weightdyn: theory vs simulation sweeps of SGD weight dynamics (see README.md).
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/single_layer.smk"
include: "workflow/rules/figures.smk"


rule all:
    input:
        "results/single_layer.nc",
        figure_targets(),
    default_target: True
