# Figures drawn from the merged datasets (plotting never triggers simulation).


localrules:
    single_layer_merge,
    figure_fig4,
    figure_noise,
    noise_merge,
    figure_experiment,
    figure_two_layer,
    two_layer_merge,
    mean_field_summary,
    mean_field_merge,
    figure_mean_field,
    figure_discrete,


rule figure_fig4:
    input:
        "results/single_layer.nc",
    output:
        figure_report(
            expand("results/figures/{{fig}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/fig4.rst",
            category=SINGLE_LAYER_REPORT,
            subcategory=lambda w: FIGURE_GROUPS[w.fig],
        ),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig4a|fig4b|fig4c",
    params:
        cells=lambda w: sweep_cells(w.fig),
        style=sorted_params(config["figures"]),
        code=code_hash("plots"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_fig4.py"


rule figure_noise:
    input:
        lambda w: NOISE_FIGURE_INPUT.get(w.fig, "results/noise_spectrum.nc"),
    output:
        figure_report(
            expand("results/figures/{{fig}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/noise.rst",
            category=SINGLE_LAYER_REPORT,
            subcategory=lambda w: FIGURE_GROUPS[w.fig],
        ),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig1a|fig1b|fig2a_with|fig2a_without|fig2b|fig2c",
    params:
        main_p=lambda w: sorted(
            {c["P"] for c in NOISE_SPECTRUM.values() if c["n_batches"] > 0}
        ),
        style=sorted_params(config["figures"]),
        code=code_hash("plots"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_noise.py"


rule figure_experiment:
    input:
        lambda w: f"results/experiments/{EXPERIMENT_FIGURES[w.fig]}.nc",
    output:
        figure_report(
            expand("results/figures/{{fig}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/experiment.rst",
            category=SINGLE_LAYER_REPORT,
            subcategory=lambda w: FIGURE_GROUPS[w.fig],
        ),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig3|fig5a|fig5b|fig_sgd_sgf|fig_gbm",
    params:
        style=sorted_params(config["figures"]),
        code=code_hash("plots"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_experiment.py"


rule figure_discrete:
    input:
        "results/single_layer_lr.nc",
    output:
        figure_report(
            expand("results/figures/{{fig}}.{ext}", ext=FIGURE_FORMATS),
            caption="../report/discrete.rst",
            category=SINGLE_LAYER_REPORT,
            subcategory="Beyond the paper: exact discrete-time covariance",
        ),
    log:
        "logs/figures/{fig}.log",
    wildcard_constraints:
        fig="fig_discrete_trace|fig_discrete_spectra|fig_discrete_divergence",
    params:
        cells=lambda w: lr_sweep_cells(),
        style=sorted_params(config["figures"]),
        code=code_hash("plots"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    script:
        "../../scripts/figure_discrete.py"
