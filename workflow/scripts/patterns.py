"""Snakemake adapter: pattern statistics of raw and effective constant matrices (papa.pipeline.pattern_stats)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import PatternsStage, pattern_stats

pattern_stats(PatternsStage.from_snakemake(snakemake))  # noqa: F821
