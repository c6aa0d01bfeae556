"""Snakemake adapter: probes for one (model, task, constants, selection, fraction_dynamic), every seed
(rule probe) or one (rule probe_trained) (papa.pipeline.probe_heads)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import ProbeStage, probe_heads

probe_heads(ProbeStage.from_snakemake(snakemake))  # noqa: F821
