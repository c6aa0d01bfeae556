"""Snakemake adapter: per-run Parquet files -> the three tables (papa.tables)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
import pandas as pd

from papa import io, pipeline, tables

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], 1)
probe = tables.probe_table([pd.read_parquet(p) for p in sm.input.probes])
io.write_parquet(probe, sm.output.probe)
io.write_parquet(tables.summary_table(probe, dict(sm.params.main_metric)), sm.output.summary)
lam = [pd.read_parquet(p) for p in sm.input.lambdas]
io.write_parquet(tables.lambdas_table(lam) if lam else pd.DataFrame(columns=tables.LAMBDA_COLUMNS), sm.output.lambdas)
