"""Snakemake adapter: figures from the tables (papa.plots)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
import pandas as pd

from papa import io, pipeline, plots
from papa.constants import ConstantAttention

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], 1)
summary = io.read_parquet(sm.input.summary)
sweep = summary[summary.constants.isin(sm.params.sweep["constants"])
                & summary.selection.isin(sm.params.sweep["selections"])]
plots.plot_fraction_curves(sweep, Path(sm.output.fig2[0]).with_suffix(""))
kinds = io.read_parquet(sm.input.kinds)
plots.plot_constant_kinds(kinds, Path(sm.output.kinds[0]).with_suffix(""))
average = summary[summary.constants == "average"]
plots.plot_selection_orders(average, Path(sm.output.orders[0]).with_suffix(""))
plots.plot_models_compared(summary, Path(sm.output.models[0]).with_suffix(""))
out = Path(sm.output.heatmaps)
out.mkdir(parents=True, exist_ok=True)
lam = io.read_parquet(sm.input.lambdas)
for (model, task, constants), df in lam.groupby(["model", "task", "constants"]) if len(lam) else []:
    plots.plot_lambda_heatmap(df, out / f"lambdas_{model}_{task}_{constants}")
for path in sm.input.constants:
    C = ConstantAttention.load(path)
    p = Path(path)
    model, corpus, n, kind = p.parts[-4], p.parts[-3], p.parts[-2], p.stem
    if kind in ("identity", "toeplitz", "zeros", "uniform"):
        continue  # the same matrix for every head: nothing to see
    plots.plot_constant_heads(C.mean.numpy(), out / f"constants_{model}_{corpus}_{n}_{kind}",
                              title=f"{model}: {kind} attention on {corpus} ({n})")
