"""Snakemake adapter: figures from the tables (papa.pipeline.plot_figures)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parents[1]))  # noqa: F821  (papa from this checkout)
from papa.pipeline import PlotStage, plot_figures

plot_figures(PlotStage.from_snakemake(snakemake))  # noqa: F821
