"""Snakemake adapter: prepare one dataset (papa.pipeline.prepare_data; downloads are cached in $PAPA_CACHE
or ~/.cache/papa)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import PrepareDataStage, prepare_data

prepare_data(PrepareDataStage.from_snakemake(snakemake))  # noqa: F821
