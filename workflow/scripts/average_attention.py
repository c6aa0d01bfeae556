"""Snakemake adapter: constant matrices for one (model, corpus, N, kind)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], sm.threads, sm.params.seed)
pipeline.make_constants(sm.params.model, sm.wildcards.kind, sm.input.tokens, sm.output[0],
                        batch_size=sm.params.batch_size or 32, max_examples=sm.params.max_examples,
                        corpus=sm.wildcards.dataset)
