"""Snakemake adapter: tokenize one split (papa.pipeline.tokenize_split)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], sm.threads)
pipeline.tokenize_split(sm.params.model, Path(sm.input.meta).parent, sm.wildcards.split, int(sm.wildcards.n),
                        sm.params.layout, sm.output[0], encoding=dict(sm.params.encoding))
