"""Snakemake adapter: masked-LM negative log-perplexity per fraction of input-dependent heads."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline

sm = snakemake  # noqa: F821
hp = dict(sm.params.hp)
pipeline.setup(sm.log[0], sm.threads, hp.get("seed", 0))
pipeline.run_mlm(sm.params.model, sm.input.constants, sm.input.train, sm.input.validation, hp, sm.params.fractions,
                 sm.output.scores, sm.output.lambdas, {"model": sm.wildcards.model, "dataset": sm.wildcards.dataset})
