"""Snakemake adapter: masked-LM negative log-perplexity per fraction_dynamic (papa.pipeline.mlm_curves)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import MLMStage, mlm_curves

mlm_curves(MLMStage.from_snakemake(snakemake))  # noqa: F821
