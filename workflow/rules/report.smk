localrules:
    aggregate,
    plot,


rule aggregate:
    """Per-run probe results -> probe.parquet, summary.parquet (mean, 95% CI, relative drop), lambdas.parquet."""
    input:
        probes=all_probe_files(),
        lambdas=all_lambda_files(),
    output:
        probe=f"{R}/tables/probe.parquet",
        summary=f"{R}/tables/summary.parquet",
        lambdas=f"{R}/tables/lambdas.parquet",
    params:
        main_metric=canon({t: tc.get("main_metric", tc["metrics"][0]) for t, tc in config["tasks"].items()}),
    conda:
        CONDA_ENV
    log:
        f"{R}/logs/aggregate.log",
    benchmark:
        f"{R}/benchmarks/aggregate.tsv"
    threads: 1
    resources:
        mem_mb=res("aggregate")["mem_mb"],
        runtime=res("aggregate")["runtime"],
    script:
        "../scripts/aggregate.py"


rule plot:
    """Fig. 2 analogue, lambda heatmaps and constant-matrix heatmaps (PNG and SVG)."""
    input:
        summary=rules.aggregate.output.summary,
        lambdas=rules.aggregate.output.lambdas,
        constants=lambda wc: sorted({constants_file(m, t, c) for m in config["models"] for t in config["tasks"]
                                     for c in CONSTANTS}),
    output:
        fig2=report(
            multiext(f"{R}/plots/fraction_curves", ".png", ".svg"),
            category="Probing",
            caption="../report/fraction_curves.rst",
        ),
        heatmaps=report(
            directory(f"{R}/plots/heads"),
            patterns=["{name}.png"],
            category="Heads",
            caption="../report/heads.rst",
        ),
    conda:
        CONDA_ENV
    log:
        f"{R}/logs/plot.log",
    benchmark:
        f"{R}/benchmarks/plot.tsv"
    threads: 1
    resources:
        mem_mb=res("plot")["mem_mb"],
        runtime=res("plot")["runtime"],
    script:
        "../scripts/plot.py"
