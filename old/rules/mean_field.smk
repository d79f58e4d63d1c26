# Mean-field dynamics of wide shallow networks (paper 002): one job per cell of each experiment,
# a summary per experiment, one merged results/mean_field.nc (a netCDF group per experiment).


wildcard_constraints:
    mf="|".join(MF_EXPERIMENTS),
    mfcell=r"[A-Za-z0-9_.+-]+",


rule mean_field_cell:
    output:
        "results/mean_field/{mf}/{mfcell}.nc",
    log:
        "logs/mean_field/{mf}/{mfcell}.log",
    params:
        settings=lambda w: MF_SETTINGS[w.mf],
        cell=lambda w: MF_CELLS[w.mf][w.mfcell],
        code=code_hash("mean_field"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/mean_field_cell.py"


rule mean_field_summary:
    input:
        lambda w: [f"results/mean_field/{w.mf}/{c}.nc" for c in MF_CELLS[w.mf]],
    output:
        "results/mean_field/{mf}.nc",
    log:
        "logs/mean_field/{mf}.log",
    params:
        settings=lambda w: MF_SETTINGS[w.mf],
        code=code_hash("mean_field"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/mean_field_summary.py"


rule mean_field_merge:
    input:
        expand("results/mean_field/{mf}.nc", mf=sorted(MF_CELLS)),
    output:
        "results/mean_field.nc",
    log:
        "logs/mean_field/merge.log",
    params:
        experiments=sorted(MF_CELLS),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/mean_field_merge.py"


rule figure_mean_field:
    input:
        "results/mean_field/{mf}.nc",
    output:
        figure_report(
            expand("results/figures/mean_field/{{mf}}_{{fig}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/mean_field.rst",
            category=MEAN_FIELD_REPORT,
            subcategory=lambda w: MEAN_FIELD_GROUPS[w.mf],
        ),
    log:
        "logs/figures/mean_field_{mf}_{fig}.log",
    params:
        style=sorted_params(config["figures"]),
        code=code_hash("plots"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_mean_field.py"
