"""Snakemake adapter: prepare one dataset (papa.data); downloads are cached in $PAPA_CACHE or ~/.cache/papa."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import data, pipeline

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], sm.threads, sm.params.seed)
task = data.load_task(dict(sm.params.spec), None, seed=sm.params.seed)
data.save_task(task, Path(sm.output.meta).parent)
