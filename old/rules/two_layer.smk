# Two-layer linear network (paper 000 Sec. III): one job per named cell, then a merge.


wildcard_constraints:
    tl=r"Ni\d+_Nh\d+_No\d+_P\d+_s[0-9.e-]+_[a-z_]+[0-9.e-]+_lr[0-9.e-]+_S\d+_(with|without)_d\d+",


rule two_layer_cell:
    output:
        "results/two_layer/{tl}.nc",
    log:
        "logs/two_layer/{tl}.log",
    params:
        block=lambda w: TWO_LAYER_CELLS[w.tl],
        code=code_hash("two_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=lambda w, attempt: two_layer_request(w, attempt)["mem_mb"],
        runtime=lambda w, attempt: two_layer_request(w, attempt)["runtime"],
    script:
        "../../scripts/two_layer_cell.py"


rule two_layer_merge:
    input:
        expand("results/two_layer/{tl}.nc", tl=sorted(TWO_LAYER_CELLS)),
    output:
        "results/two_layer.nc",
    log:
        "logs/two_layer/merge.log",
    params:
        cells=[TWO_LAYER_CELLS[name] for name in sorted(TWO_LAYER_CELLS)],
        code=code_hash("two_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/two_layer_merge.py"


rule figure_two_layer:
    input:
        "results/two_layer/{tl}.nc",
    output:
        figure_report(
            expand("results/figures/two_layer/{{tl}}_{{fig}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/two_layer.rst",
            category=TWO_LAYER_REPORT,
            subcategory="{tl}",
        ),
    log:
        "logs/figures/two_layer_{tl}_{fig}.log",
    wildcard_constraints:
        fig="fig6a|fig6bc|fig7a|fig7b|fig_drift|fig_relaxation",
    params:
        style=sorted_params(config["figures"]),
        code=code_hash("plots"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_two_layer.py"
