"""Snakemake adapter: per-run Parquet files -> the tables (papa.pipeline.aggregate)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import AggregateStage, aggregate

aggregate(AggregateStage.from_snakemake(snakemake))  # noqa: F821
