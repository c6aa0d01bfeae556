"""Snakemake adapter: learn lambdas for one (model, task, constants) (papa.pipeline.learn_lambda)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import LambdaStage, learn_lambda

learn_lambda(LambdaStage.from_snakemake(snakemake))  # noqa: F821
