"""Snakemake adapter: tokenize one split (papa.pipeline.tokenize)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import TokenizeStage, tokenize

tokenize(TokenizeStage.from_snakemake(snakemake))  # noqa: F821
