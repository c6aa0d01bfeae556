"""Snakemake adapter: figures from the tables (papa.plots)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from pathlib import Path

import pandas as pd

from papa import pipeline, plots
from papa.constants import ConstantAttention

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], 1)
summary = pd.read_parquet(sm.input.summary)
plots.plot_fraction_curves(summary, str(Path(sm.output.fig2[0]).with_suffix("")))
out = Path(sm.output.heatmaps)
out.mkdir(parents=True, exist_ok=True)
lam = pd.read_parquet(sm.input.lambdas)
for (model, task, constants), df in lam.groupby(["model", "task", "constants"]) if len(lam) else []:
    plots.plot_lambda_heatmap(df, str(out / f"lambdas_{model}_{task}_{constants}"))
for path in sm.input.constants:
    C = ConstantAttention.load(path)
    p = Path(path)
    name = f"constants_{p.parts[-4]}_{p.parts[-3]}_{p.parts[-2]}_{p.stem}"
    plots.plot_constant_heads(C.mean.numpy(), str(out / name), title=f"{p.parts[-4]} on {p.parts[-3]} ({p.stem})")
