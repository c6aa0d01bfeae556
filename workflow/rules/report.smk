# The reporting end: per-run files -> tables (rule aggregate) -> figures (rules plot, mlm_table).

localrules:
    aggregate,
    plot,
    mlm_table,


rule aggregate:
    """Per-run probe results -> probe.parquet, summary.parquet (mean, 95% CI, relative drop), lambdas.parquet."""
    input:
        probes=all_probe_files(),
        lambdas=all_lambda_files(),
        patterns=pattern_files(),
    output:
        probe=f"{R}/tables/probe.parquet",
        summary=f"{R}/tables/summary.parquet",
        lambdas=f"{R}/tables/lambdas.parquet",
        constant_kinds=f"{R}/tables/constant_kinds.parquet",
        patterns=f"{R}/tables/patterns.parquet",
    params:
        code=code("aggregate.py"),  # the papa code the script reaches: a change reruns this rule
        kinds=constant_kinds_rows(),
        main_metric=canon({t: tc["main_metric"] for t, tc in config["tasks"].items()}),
    conda:
        CONDA_ENV
    log:
        f"{R}/logs/aggregate.log",
    benchmark:
        f"{R}/benchmarks/aggregate.tsv"
    threads: res("aggregate")["threads"]
    resources:
        mem_mb=grows("aggregate", "mem_mb"),
        runtime=grows("aggregate", "runtime"),
    script:
        "../scripts/aggregate.py"


rule plot:
    """Fig. 2 analogue, lambda heatmaps and constant-matrix heatmaps (PNG and SVG), the summary's numbers (HTML)."""
    input:
        summary=rules.aggregate.output.summary,
        lambdas=rules.aggregate.output.lambdas,
        kinds=rules.aggregate.output.constant_kinds,
        constants=lambda wc: list(drawn_constants()),
    output:
        fig2=report(
            multiext(f"{R}/plots/fraction_curves", ".png", ".svg"),
            category="Probing",
            caption="../report/fraction_curves.rst",
        ),
        kinds=report(
            multiext(f"{R}/plots/constant_kinds", ".png", ".svg"),
            category="Analyses",
            caption="../report/constant_kinds.rst",
        ),
        orders=report(
            multiext(f"{R}/plots/head_orders", ".png", ".svg"),
            category="Analyses",
            caption="../report/head_orders.rst",
        ),
        models=report(
            multiext(f"{R}/plots/models_compared", ".png", ".svg"),
            category="Analyses",
            caption="../report/models_compared.rst",
        ),
        table=report(
            f"{R}/plots/summary.html",
            category="Probing",
            caption="../report/summary_table.rst",
        ),
        heatmaps=report(
            directory(f"{R}/plots/heads"),
            patterns=["{name}.png"],
            category="Heads",
            caption="../report/heads.rst",
        ),
    conda:
        CONDA_ENV
    params:
        code=code("plot.py"),  # the papa code the script reaches: a change reruns this rule
        # the constants as the sweep's runs are labelled (papa.checks.sweep_constants: kind@<a task's own corpus> is
        # kind on that task)
        # (sweep_own_tasks: such a label is drawn on those tasks only; absent where none, as in the default configs)
        sweep=canon({"constants": checks.sweep_constants(config), "selections": SELECTIONS}
                    | ({"own": own} if (own := checks.sweep_own_tasks(config)) else {})),
        matrices=lambda wc: list(drawn_constants().values()),  # what each of input.constants holds, in order
        compared_models=checks.compared_models(config),  # Fig. 3: the models that run every task
    log:
        f"{R}/logs/plot.log",
    benchmark:
        f"{R}/benchmarks/plot.tsv"
    threads: res("plot")["threads"]
    resources:
        mem_mb=grows("plot", "mem_mb"),
        runtime=grows("plot", "runtime"),
    script:
        "../scripts/plot.py"


rule mlm_table:
    """Masked-LM curves of every model -> mlm.parquet and the Fig. 6(a) analogue."""
    input:
        mlm_files(),
    output:
        table=f"{R}/tables/mlm.parquet",
        plot=report(
            multiext(f"{R}/plots/mlm", ".png", ".svg"),
            category="Analyses",
            caption="../report/mlm.rst",
        ),
    params:
        code=code("mlm_table.py"),  # the papa code the script reaches: a change reruns this rule
    conda:
        CONDA_ENV
    log:
        f"{R}/logs/mlm_table.log",
    benchmark:
        f"{R}/benchmarks/mlm_table.tsv"
    threads: res("aggregate")["threads"]
    resources:
        mem_mb=grows("aggregate", "mem_mb"),
        runtime=grows("aggregate", "runtime"),
    script:
        "../scripts/mlm_table.py"
