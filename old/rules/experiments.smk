# Single-experiment rules of paper 000 Sec. II: relaxation (Fig. 3), loss perturbation (Fig. 5),
# Table 1, SGD vs stochastic gradient flow (Eq. 13) and the geometric Brownian motion (Eq. 24).

rule experiment:
    output:
        "results/experiments/{experiment}.{kind}",
    log:
        "logs/experiments/{experiment}.{kind}.log",
    wildcard_constraints:
        experiment="relaxation|perturbation_iid|perturbation_correlated|table1|sgf|gbm",
        kind="nc|md",
    params:
        block=lambda w: EXPERIMENTS[w.experiment.split("_")[0]],
        protocol=SGD_PROTOCOL,
        code=code_hash("single_layer"),
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    script:
        "../../scripts/experiment.py"
