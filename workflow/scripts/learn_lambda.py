"""Snakemake adapter: learn lambdas for one (model, task, constants)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline

sm = snakemake  # noqa: F821
hp = dict(sm.params.hp)
pipeline.setup(sm.log[0], sm.threads, hp.get("seed", 0))
labels = {"model": sm.wildcards.model, "task": sm.wildcards.task, "constants": sm.wildcards.constants}
pipeline.run_lambda(sm.params.model, sm.input.constants, sm.input.train, sm.input.validation,
                    {"metrics": sm.params.metrics}, hp, sm.output.lambdas, sm.output.metrics, labels)
