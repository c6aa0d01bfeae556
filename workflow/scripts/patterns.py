"""Snakemake adapter: pattern statistics of raw and effective constant matrices (papa.patterns)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
import pandas as pd

from papa import io, pipeline
from papa.constants import ConstantAttention
from papa.patterns import classify, head_patterns, summary_line

sm = snakemake  # noqa: F821
pipeline.setup(sm.log[0], 1)
opts = dict(sm.params.patterns) if isinstance(sm.params.patterns, dict) else {}
frames = []
for attention, path in (("raw", sm.input.average), ("effective", sm.input.effective)):
    C = ConstantAttention.load(path)
    df = classify(head_patterns(C.mean, C.count, band=int(opts.get("band", 1))),
                  float(opts.get("diag_threshold", 0.3)), float(opts.get("special_threshold", 0.5)))
    pipeline.log.info("%s attention: %s", attention, summary_line(df))
    df.insert(0, "attention", attention)
    frames.append(df)
out = pd.concat(frames, ignore_index=True)
for k, v in reversed([("model", sm.wildcards.model), ("corpus", sm.wildcards.dataset), ("N", int(sm.wildcards.n))]):
    out.insert(0, k, v)
io.write_parquet(out, sm.output[0])
