"""Snakemake adapter: per-model MLM curves -> mlm.parquet and its plot (papa.tables, papa.plots)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
import pandas as pd

from papa import io, pipeline, plots, tables

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], 1)
table = tables.mlm_table([pd.read_parquet(p) for p in sm.input])
io.write_parquet(table, sm.output.table)
plots.plot_mlm(table, Path(sm.output.plot[0]).with_suffix(""))
