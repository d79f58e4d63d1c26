# Snakemake report (`snakemake --report report.html`): figures with captions (figure_report in
# common.smk), grouped by experiment and sweep, and the agreement table of this config's sweeps.
# The table is the config's own (results/agreement/<NAME>.*, NAME from common.smk): a config run
# after another in the same folder leaves the other's table alone, and a report embeds the table
# of the config it is made with.


report: "../report/workflow.rst"


def report_requested():
    """Whether this Snakemake writes a report (`--report [FILE]`; not `--report-after-run`,
    which brings every output up to date first)."""
    return any(a == "--report" or a.startswith("--report=") for a in sys.argv[1:])


def recovery_command():
    """The command that brings this config's outputs up to date (its --configfile, if given)."""
    cmd = ["python3", "run.py", "sweep"]
    for path in workflow.config_settings.configfiles:
        cmd += ["--configfile", os.path.relpath(path)]
    return shlex.join(cmd)


def _short(reason, width=100):
    """Snakemake's reason for a job, on one line of at most ``width`` characters."""
    text = " ".join(str(reason).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def outdated_report_message(dag):
    """What a report would show out of date (jobs the DAG would run, with Snakemake's reasons),
    or None if everything is up to date."""
    jobs = sorted((j for j in dag.needrun_jobs() if j.output), key=lambda j: str(j.output))
    if not jobs:
        return None
    lines = [f"  {', '.join(job.output)}: {_short(dag.reason(job))}" for job in jobs[:10]]
    if len(jobs) > 10:
        lines.append(f"  ... and {len(jobs) - 10} more jobs")
    return (
        f"no report written: {len(jobs)} job(s) of config {NAME!r} are out of date or not run, "
        "so it would show stale or missing results:\n"
        + "\n".join(lines)
        + f"\nbring them up to date first: {recovery_command()}"
    )


def refuse_outdated_report():
    """With `--report`: stop after the DAG is built, before a report is written, if a job whose
    output it would show is out of date (Snakemake itself writes the report from whatever files
    exist, without a word). Wraps the workflow's DAG building (Snakemake 9 internals: another
    version writes its report unchecked)."""
    build = getattr(workflow, "_build_dag", None)
    if build is None or not report_requested():
        return

    def build_then_check():
        build()
        message = outdated_report_message(workflow.dag)
        if message:
            print(message, file=sys.stderr)
            raise SystemExit(1)

    workflow._build_dag = build_then_check


refuse_outdated_report()


rule agreement_table:
    input:
        [sweep_source(name) for name in sorted(SWEEPS)],
    output:
        html=report(
            f"results/agreement/{NAME}.html",
            caption="../report/agreement.rst",
            category="Summary",
            labels={"table": f"theory vs simulation per sweep of config {NAME}"},
        ),
        csv=f"results/agreement/{NAME}.csv",
    log:
        f"logs/agreement/{NAME}.log",
    conda:
        "../envs/weightdyn.yaml"
    threads: 1
    params:
        # sorted: a reordered config is no params change
        sweeps={name: (SWEEPS[name].experiment, SWEEPS[name].label) for name in sorted(SWEEPS)},
    script:
        "../../scripts/agreement_table.py"
