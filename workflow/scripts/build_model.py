"""Snakemake adapter: build a tiny random model and its tokenizer (papa.pipeline.build_model)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import BuildModelStage, build_model

build_model(BuildModelStage.from_snakemake(snakemake))  # noqa: F821
