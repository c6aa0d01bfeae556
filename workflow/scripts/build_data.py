"""Snakemake adapter: write GLUE/CoNLL-shaped local files (papa.pipeline.build_data)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import BuildDataStage, build_data

build_data(BuildDataStage.from_snakemake(snakemake))  # noqa: F821
