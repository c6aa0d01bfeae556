"""Snakemake adapter: build a tiny random model and its tokenizer (papa.rehearsal.build_model)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa import pipeline, rehearsal

sm = snakemake  # noqa: F821
spec = dict(sm.params.build)
pipeline.setup(sm.log[0], sm.threads, spec["seed"])
rehearsal.build_model(spec["family"], sm.output[0], spec.get("config"), spec["seed"], spec.get("vocab_size", 4000))
