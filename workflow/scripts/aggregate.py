"""Snakemake adapter: per-run Parquet files -> the tables (papa.tables)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
import pandas as pd

from papa import io, pipeline, tables

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], 1)
probe = tables.probe_table([io.read_parquet(p) for p in sm.input.probes])
io.write_parquet(probe, sm.output.probe)
summary = tables.summary_table(probe, dict(sm.params.main_metric), share_baseline=True)
io.write_parquet(summary, sm.output.summary)
lam = [io.read_parquet(p) for p in sm.input.lambdas]
io.write_parquet(tables.lambdas_table(lam) if lam else pd.DataFrame(columns=tables.LAMBDA_COLUMNS), sm.output.lambdas)
io.write_parquet(tables.constant_kinds_table(summary, list(sm.params.kinds)), sm.output.constant_kinds)
pat = [io.read_parquet(p) for p in sm.input.patterns]
io.write_parquet(pd.concat(pat, ignore_index=True) if pat else pd.DataFrame(), sm.output.patterns)
