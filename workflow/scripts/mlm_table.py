"""Snakemake adapter: per-model MLM curves -> mlm.parquet and its plot (papa.pipeline.tabulate_mlm)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import MLMTableStage, tabulate_mlm

tabulate_mlm(MLMTableStage.from_snakemake(snakemake))  # noqa: F821
