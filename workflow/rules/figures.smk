# Figures drawn from the merged datasets (plotting never triggers simulation).


localrules:
    single_layer_merge,
    figure_fig4,


rule figure_fig4:
    input:
        "results/single_layer.nc",
    output:
        expand("results/figures/{{fig}}.{ext}", ext=FIGURE_FORMATS),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig4a|fig4b|fig4c",
    params:
        cells=lambda w: sweep_cells(w.fig),
        style=sorted_params(config["figures"]),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_fig4.py"
