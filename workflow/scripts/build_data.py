"""Snakemake adapter: write GLUE/CoNLL-shaped local files (papa.rehearsal.build_data)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline, rehearsal

sm = snakemake  # noqa: F821
spec = dict(sm.params.build)
pipeline.setup(sm.log[0], sm.threads, spec["seed"])
rehearsal.build_data(spec["shape"], sm.output[0], spec.get("n_train", 64), spec.get("n_validation", 32), spec["seed"])
