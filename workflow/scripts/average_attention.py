"""Snakemake adapter: constant matrices for one (model, corpus, N, kind) (papa.pipeline.average_constants)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import AverageStage, average_constants

average_constants(AverageStage.from_snakemake(snakemake))  # noqa: F821
