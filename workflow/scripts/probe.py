"""Snakemake adapter: probes for one (model, task, constants, selection, fraction), every seed."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline

sm = snakemake  # noqa: F821
cfg = sm.config
pipeline.setup(sm.log[0], sm.threads, sm.params.order_seed)
labels = {"model": sm.wildcards.model, "task": sm.wildcards.task, "constants": sm.wildcards.constants,
          "selection": sm.wildcards.selection}
cache = dict(cfg.get("cache", {}))
cache["dtype"] = sm.params.cache_dtype
hp = dict(sm.params.hp, order_seed=sm.params.order_seed)
pipeline.run_probes(sm.params.model, sm.input.constants, sm.input.lambdas or None, sm.wildcards.selection,
                    float(sm.wildcards.fraction), list(sm.params.seeds), sm.input.train, sm.input.validation,
                    {"metrics": sm.params.metrics}, hp, cache, list(sm.output), labels,
                    trained_constants=sm.wildcards.constants.split("@")[0].endswith("_trained"))
