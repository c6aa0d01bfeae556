"""Figures of the paper (Hassid et al., 2022), drawn from the tables in :mod:`papa.tables`.

Every function draws on a fresh :class:`matplotlib.figure.Figure` with an Agg canvas
(no pyplot, so the global backend and any open notebook figures are left alone), writes
``<out>.png`` and ``<out>.svg`` atomically (`papa.io.atomic_path`) and returns the list of paths
written. ``out`` is a path stem:
``results/plots/fig2`` -> ``results/plots/fig2.png`` and ``results/plots/fig2.svg``.

* :func:`plot_fraction_curves`  -- Fig. 2: score vs fraction of input-dependent heads.
* :func:`plot_selection_orders` -- Fig. 5: the same, one line per head-selection method.
* :func:`plot_models_compared`  -- Fig. 3: original score vs relative drop at fraction 0
  (:func:`papa.tables.models_compared_table`).
* :func:`plot_lambda_heatmap`   -- learned head importance (lambda), layer x head.
* :func:`plot_constant_heads`   -- Fig. 4: constant matrices of representative heads.
* :func:`plot_constant_kinds`   -- Table 1: the score with every head constant, per constants kind.
* :func:`plot_mlm`              -- Fig. 6(a): negative log-perplexity vs fraction of input-dependent heads.
* :func:`plot_summary_table`    -- the summary's numbers as an HTML table (``<out>.html``), for the report.

Each figure (and the table) carries the record of what drew it (:func:`recorded`, read back by :func:`figure_record`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import os
import textwrap
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import PowerNorm, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .io import atomic_path, write_text
from .spec import (
    HEAD_ORDERS,
    METHOD_CONSTANTS,
    METHOD_ORDER,
    is_all_constant,
    is_original,
    metric_label,
    renamed_arguments,
)
from .tables import models_compared_table, reads_as_drop

__all__ = [
    "plot_fraction_curves",
    "plot_selection_orders",
    "selection_orders_frame",
    "plot_lambda_heatmap",
    "plot_constant_heads",
    "plot_models_compared",
    "plot_mlm",
    "representative_heads",
    "fraction_label",
    "plot_constant_kinds",
    "plot_summary_table",
    "summary_table_frame",
    "recorded",
    "figure_record",
    "plot_note",
    "NothingToPlot",
]

FORMATS = ("png", "svg")
DPI = 150
#: The head orders in the plots' legend order: `papa.spec.HEAD_ORDERS` (this name is kept for notebooks).
SELECTION_ORDER = HEAD_ORDERS

SELECTION_LABELS = {
    "lambda": "PAPA (lambda, ours)",
    "reversed": "Reversed lambda",
    "first_to_last": "First to last layer",
    "last_to_first": "Last to first layer",
    "random": "Random",
}
_LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (3, 1, 1, 1, 1, 1))]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

_SUMMARY_NEEDS = ["model", "task", "constants", "selection", "fraction_dynamic", "metric", "mean", "ci_low", "ci_high"]
_RC = {"svg.hashsalt": "papa", "svg.fonttype": "path", "axes.titlesize": 11, "axes.labelsize": 10}


# --------------------------------------------------------------------------- helpers


def _stem(out: str | os.PathLike) -> Path:
    out = Path(out)
    if out.suffix.lower() in {".png", ".svg", ".pdf", ".html"}:
        out = out.with_suffix("")
    return out


def _new_figure(figsize, layout: str | None = None) -> Figure:
    fig = Figure(figsize=figsize, layout=layout)
    FigureCanvasAgg(fig)
    return fig


#: The record the figures saved now carry (`recorded`), None outside such a block.
_RECORD: contextvars.ContextVar[dict | None] = contextvars.ContextVar("papa_figure_record", default=None)


@contextlib.contextmanager
def recorded(record: dict):
    """Figures saved inside this block carry ``record`` (the workflow's: the plot stage's provenance, as its tables
    carry theirs) as JSON in their ``Description`` metadata: a PNG text chunk, the SVG's ``dc:description``. No
    time goes in, so the same inputs still give the same bytes. `figure_record` reads it back."""
    token = _RECORD.set(record)
    try:
        yield
    finally:
        _RECORD.reset(token)


@contextlib.contextmanager
def default_style():
    """Figures drawn and saved inside this block start from matplotlib's own defaults, not from a matplotlibrc's
    settings (the working folder's, where Snakemake runs the jobs, ``$MATPLOTLIBRC``'s, ``~/.config/matplotlib``'s,
    read as matplotlib is imported) or a style set before; the block's settings are undone as it ends. The workflow's
    plot and mlm_table jobs draw in it: such a file is no input of theirs, and under another one their figures came
    out otherwise (other fonts, line widths, colours) while Snakemake reran nothing."""
    with matplotlib.rc_context():
        matplotlib.rcdefaults()  # matplotlib's defaults, the backend kept (matplotlib.style.core.STYLE_BLACKLIST)
        yield


def figure_record(path: str | os.PathLike) -> dict | None:
    """The record a figure was saved with (`recorded`), None when it carries none."""
    import html
    import re

    path = Path(path)
    if path.suffix.lower() == ".png":
        from PIL import Image

        with Image.open(path) as im:
            text = im.text.get("Description")
    elif path.suffix.lower() == ".html":  # the report's table (`plot_summary_table`)
        found = re.search(r'<meta name="papa-record" content="([^"]*)">', path.read_text(encoding="utf-8"))
        text = html.unescape(found.group(1)) if found else None
    else:
        found = re.search(r"<dc:description>(.*?)</dc:description>", path.read_text(encoding="utf-8"), re.S)
        text = html.unescape(found.group(1)) if found else None
    return json.loads(text) if text else None


def _save(fig: Figure, out: str | os.PathLike) -> list[str]:
    """Write ``fig`` as ``<out>.png`` and ``<out>.svg`` atomically, with the record of a `recorded` block; return
    the paths."""
    stem = _stem(out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    record = _RECORD.get()
    try:
        for fmt in FORMATS:
            path = stem.parent / f"{stem.name}.{fmt}"
            meta = {"Date": None} if fmt == "svg" else {"Software": None}
            if record is not None:
                meta["Description"] = json.dumps(record, sort_keys=True, default=str)
            with atomic_path(path) as tmp, matplotlib.rc_context(_RC):
                fig.savefig(tmp, format=fmt, dpi=DPI, metadata=meta, bbox_inches="tight")
            written.append(str(path))
    finally:
        fig.clear()
    return written


class NothingToPlot(ValueError):
    """A figure's table holds no row the figure draws (a ``ValueError``, as it was before it had a class)."""


def plot_note(out, title: str, text: str) -> list[str]:
    """A figure that says why it shows nothing (``title``, then ``text``): the workflow's plot rule writes every
    figure it declares, and a config may run nothing one of them draws (a sweep without the method's own
    matrices has no head-order curve); it drew nothing and failed the rule, after every probe had run."""
    import textwrap

    fig = _new_figure((6.0, 2.2))
    fig.text(0.5, 0.66, title, ha="center", va="center", fontsize=11, weight="bold")
    fig.text(0.5, 0.34, textwrap.fill(text, 80), ha="center", va="center", fontsize=9, color="0.3")
    return _save(fig, out)


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: missing required column(s) {', '.join(repr(c) for c in missing)}")


def fraction_label(x: float) -> str:
    """``0.0625`` -> ``"1/16"``, ``0`` -> ``"0"``, ``1`` -> ``"1"``."""
    f = Fraction(float(x)).limit_denominator(1024)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


def _main_only(summary: pd.DataFrame, main_only: bool) -> pd.DataFrame:
    if main_only and "is_main" in summary.columns:
        summary = summary[summary["is_main"].astype(bool)]
    return summary


def _panels(df: pd.DataFrame, by: list[str], title_of=None) -> list[tuple[str, pd.DataFrame, str]]:
    """Split into panels by ``by`` (+ metric if a panel would hold several metrics); ``title_of`` makes a panel's
    title of its ``by`` values (default: joined by " / "). Each panel: its title, its rows and its y axis's label
    (its metric as the figures name it, `papa.spec.metric_label`)."""
    multi_metric = (df.groupby(by)["metric"].nunique() > 1).any()
    keys = by + (["metric"] if multi_metric else [])
    panels = []
    for key, g in df.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        title = title_of(key[: len(by)]) if title_of else " / ".join(map(str, key[: len(by)]))
        metrics = sorted(g["metric"].unique())
        if multi_metric:
            title += f" ({metric_label(key[-1])})"
        panels.append((title, g, ", ".join(map(metric_label, metrics))))
    return panels


def _grid(fig: Figure, n: int, ncols_max: int = 3):
    ncols = min(n, ncols_max)
    nrows = math.ceil(n / ncols)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.set_visible(False)
    return axes[:n]


def _curves(
    summary: pd.DataFrame,
    out,
    *,
    panel_by: list[str],
    hue: str,
    style: list[str],
    hue_order: list[str] | None,
    title: str,
    hue_labels: dict[str, str] | None = None,
    panel_title=None,
) -> list[str]:
    """Shared drawing code of Fig. 2 / Fig. 5: categorical fraction axis (1 on the left, 0 on the right, as the
    paper's), mean + CI band."""
    df = summary.copy()
    df["fraction_dynamic"] = df["fraction_dynamic"].astype(float)
    # the paper's axis (Fig. 2: "decreasing number of attention heads"; Figs. 5-6 alike): 1 on the left, 0 on the right
    fractions = sorted(df["fraction_dynamic"].unique(), reverse=True)
    xpos = {f: i for i, f in enumerate(fractions)}
    if hue_order is None:
        hue_order = sorted(df[hue].unique())
    else:
        hue_order = [h for h in hue_order if h in set(df[hue])] + sorted(set(df[hue]) - set(hue_order))
    palette = dict(zip(hue_order, sns.color_palette("colorblind" if len(hue_order) <= 10 else "husl", len(hue_order))))
    style_keys = sorted(df[style].drop_duplicates().itertuples(index=False, name=None)) if style else [()]
    styles = {k: (_LINESTYLES[i % len(_LINESTYLES)], _MARKERS[i % len(_MARKERS)]) for i, k in enumerate(style_keys)}
    hue_labels = hue_labels or {}

    panels = _panels(df, panel_by, panel_title)
    n = len(panels)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    with sns.axes_style("whitegrid"), matplotlib.rc_context(_RC):
        fig = _new_figure((4.2 * ncols + 2.4, 3.4 * nrows + 0.5))
        axes = _grid(fig, n)
        for ax, (ptitle, g, ylabel) in zip(axes, panels):
            for (h, *skey), line in g.groupby([hue] + style, sort=True):
                line = line.sort_values("fraction_dynamic")
                x = line["fraction_dynamic"].map(xpos).to_numpy(dtype=float)
                ls, marker = styles[tuple(skey)]
                color = palette[h]
                ax.plot(x, line["mean"], color=color, linestyle=ls, marker=marker, markersize=5, linewidth=1.6)
                lo, hi = line["ci_low"].to_numpy(dtype=float), line["ci_high"].to_numpy(dtype=float)
                if np.isfinite(lo).any():
                    ax.fill_between(x, lo, hi, color=color, alpha=0.18, linewidth=0)
            ax.set_xticks(range(len(fractions)))
            ax.set_xticklabels([fraction_label(f) for f in fractions])
            ax.set_xlim(-0.3, len(fractions) - 0.7)
            ax.set_title(ptitle)
            ax.set_xlabel("fraction of input-dependent heads")
            ax.set_ylabel(ylabel)

        handles = [Line2D([], [], color="none", label=hue.replace("_", " "))]
        handles += [Line2D([], [], color=palette[h], linewidth=2, label=hue_labels.get(h, h)) for h in hue_order]
        if len(style_keys) > 1:
            handles.append(Line2D([], [], color="none", label=" / ".join(style)))
            for k in style_keys:
                ls, marker = styles[k]
                handles.append(Line2D([], [], color="0.3", linestyle=ls, marker=marker, label=" / ".join(map(str, k))))
        fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, fontsize=9)
        fig.suptitle(title + "  (mean over seeds, 95% CI)")
        fig.tight_layout()
        return _save(fig, out)


# --------------------------------------------------------------------------- figures


def plot_fraction_curves(summary: pd.DataFrame, out, main_only: bool = True) -> list[str]:
    """Fig. 2 analogue: probe score vs fraction of input-dependent heads.

    One panel per task (separate y axes), one colour per model, one line style per
    (constants, selection); the x axis is categorical and decreasing, as the paper's (1, 1/2, 1/8,
    1/16, 0 -- whatever fractions the table holds) so that 0 is shown; bands are the 95% CIs.
    Models of different sizes (their number of attention heads, read from ``n_dynamic``) get panels
    of their own, smaller models first, as the paper's Fig. 2(a) BASE and 2(b) LARGE: each model is
    compared with those of its size (a model's colour is the same in every panel). Where a model's size
    cannot be read (no row above fraction 0), every model shares a panel per task.

    Args:
        summary: a :func:`papa.tables.summary_table` frame.
        out: path stem; ``<out>.png`` and ``<out>.svg`` are written.
        main_only: keep only ``is_main`` rows (each task's reported metric).

    Returns:
        The paths written.
    """
    _require(summary, _SUMMARY_NEEDS, "plot_fraction_curves")
    df = _main_only(summary, main_only)
    if df.empty:
        raise NothingToPlot("plot_fraction_curves: nothing to plot")
    heads = _model_heads(df) if "n_dynamic" in df.columns else {}
    # a model without a row above fraction 0 shows no size: split by size only when every model's is read (a NaN
    # size was a key groupby drops, and the model's curve vanished without a word)
    by_size = len(set(heads.values())) > 1 and set(heads) >= set(df["model"])
    if by_size:
        df = df.assign(heads=df["model"].map(heads))
    return _curves(
        df,
        out,
        panel_by=["heads", "task"] if by_size else ["task"],
        hue="model",
        style=["constants", "selection"],
        hue_order=None,
        title="Probe score vs input-dependent heads",
        panel_title=(lambda key: f"{key[1]} ({key[0]}-head models)") if by_size else None,
    )


def _model_heads(summary: pd.DataFrame) -> dict[str, int]:
    """Each model's number of attention heads (layers x heads per layer), read back from a summary's
    ``n_dynamic``: at fraction 1 it is the total; without that row, a total that gives each of the model's rows
    above fraction 0 its ``n_dynamic`` (`papa.spec.n_dynamic`, rounded), one another model shows at fraction 1
    first, else the nearest to n_dynamic / fraction at its largest fraction (0.3 of 144 heads is 43, which 142 to
    144 give alike). A model without a row above fraction 0 is left out."""
    from .spec import is_original, n_dynamic

    df = summary[summary["fraction_dynamic"].astype(float) > 0]
    rows = {m: sorted({(float(f), int(n)) for f, n in zip(g["fraction_dynamic"], g["n_dynamic"])}, reverse=True)
            for m, g in df.groupby("model", sort=True)}  # fmt: skip
    out = {m: r[0][1] for m, r in rows.items() if is_original(r[0][0])}
    known = set(out.values())
    for m, r in rows.items():
        if m not in out:
            f, n = r[0]
            guess = max(1, round(n / f))
            fits = [t for t in range(max(1, int((n - 1) / f)), int((n + 1) / f) + 2)
                    if all(n_dynamic(x, t) == k for x, k in r)]  # fmt: skip
            out[m] = min(fits, key=lambda t: (t not in known, abs(t - n / f))) if fits else guess
    return out


def selection_orders_frame(summary: pd.DataFrame, task: str | None = None) -> pd.DataFrame:
    """The rows Fig. 5 draws: the main metric (``is_main``) of the (model, task, constants) on which
    several head orders ran (all of them where none did, or ``task``'s alone), each order with the
    end points it shares with the others: at fraction_dynamic 1 and 0 the order makes no
    difference (every head input-dependent, every head constant), so the workflow runs those
    once, under the method's order (`papa.spec.METHOD_ORDER`), and every order's curve starts
    and ends there, as in the paper's Fig. 5."""
    df = _main_only(summary, True)
    if task is not None:
        df = df[df["task"] == task]
    key = ["model", "task", "constants"]
    orders = df.groupby(key)["selection"].nunique()
    analysed = orders[orders > 1].index
    if len(analysed):
        df = df[pd.MultiIndex.from_frame(df[key]).isin(analysed)]
    ends = df[is_original(df["fraction_dynamic"]) | is_all_constant(df["fraction_dynamic"])]
    shared = []
    for keys, panel in df.groupby(key, sort=False):
        own = ends[(ends[key] == pd.Series(keys, index=key)).all(axis=1)]
        source = own[own["selection"] == METHOD_ORDER]
        for order in panel["selection"].unique():
            have = set(np.round(own.loc[own["selection"] == order, "fraction_dynamic"], 12))
            missing = source[~np.round(source["fraction_dynamic"], 12).isin(have)]
            if order != METHOD_ORDER and len(missing):
                shared.append(missing.assign(selection=order))
    return pd.concat([df, *shared], ignore_index=True) if shared else df


def plot_selection_orders(summary: pd.DataFrame, out, task: str | None = None) -> list[str]:
    """Fig. 5 analogue: one line per head-selection method (lambda, reversed, ...).

    Uses the main metric (``is_main``), on the (model, task, constants) where several orders ran,
    each order's curve with the shared end points at 1 and 0 (:func:`selection_orders_frame`). One
    panel per (model, task), or per (model, task, constants) when several constant kinds are present.

    Args:
        summary: a :func:`papa.tables.summary_table` frame.
        out: path stem.
        task: restrict to one task (the paper uses MNLI); None = every task.

    Returns:
        The paths written.
    """
    _require(summary, _SUMMARY_NEEDS, "plot_selection_orders")
    df = selection_orders_frame(summary, task)
    if df.empty:
        raise NothingToPlot(f"plot_selection_orders: nothing to plot (task={task!r})")
    panel_by = ["model", "task"] + (["constants"] if df["constants"].nunique() > 1 else [])
    return _curves(
        df,
        out,
        panel_by=panel_by,
        hue="selection",
        style=[],
        hue_order=list(HEAD_ORDERS),
        hue_labels=SELECTION_LABELS,
        title="Head selection methods" + (f" on {task}" if task else ""),
    )


def plot_lambda_heatmap(lambdas_df: pd.DataFrame, out) -> list[str]:
    """Heatmap (layer x head) of the learned lambdas of one (model, task).

    Cells are annotated with their value when a layer has at most 16 heads.

    Raises:
        ValueError: a column is missing, the frame is empty, or it holds more than one
            (model, task, constants) -- filter it first.
    """
    _require(lambdas_df, ["model", "task", "constants", "layer", "head", "lambda"], "plot_lambda_heatmap")
    if lambdas_df.empty:
        raise ValueError("plot_lambda_heatmap: empty lambdas frame")
    groups = lambdas_df[["model", "task", "constants"]].drop_duplicates()
    if len(groups) > 1:
        raise ValueError(
            f"plot_lambda_heatmap: expected one (model, task, constants), got {len(groups)}; filter the frame first"
        )
    model, task, constants = groups.iloc[0]
    grid = lambdas_df.pivot(index="layer", columns="head", values="lambda").sort_index().sort_index(axis=1)
    n_layers, n_heads = grid.shape
    annot = n_heads <= 16
    with sns.axes_style("white"), matplotlib.rc_context(_RC):
        fig = _new_figure((max(5.0, 0.62 * n_heads + 2.0), max(3.5, 0.42 * n_layers + 1.4)))
        ax = fig.subplots()
        sns.heatmap(
            grid,
            ax=ax,
            cmap="viridis",
            annot=annot,
            fmt=".2f",
            annot_kws={"fontsize": 7},
            cbar_kws={"label": "lambda (low = replaced first)"},
            linewidths=0.3 if annot else 0,
            linecolor="white",
        )
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.tick_params(axis="y", rotation=0)
        suffix = "" if constants == METHOD_CONSTANTS else f" [{constants}]"
        ax.set_title(f"Head importance lambda: {model} / {task}{suffix}")
        fig.tight_layout()
        return _save(fig, out)


def _as_array(mean) -> np.ndarray:
    if hasattr(mean, "detach"):  # torch tensor
        mean = mean.detach().float().cpu().numpy()
    arr = np.asarray(mean, dtype="float64")
    if arr.ndim != 4 or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"expected constant matrices of shape [layers, heads, N, N], got {arr.shape}")
    return arr


def representative_heads(mean, count=None, separators=None, band: int = 1) -> list[tuple[int, int, str]]:
    """Pick up to three distinct heads that show the paper's three patterns (Sec. 5.1), by the
    statistics of `papa.patterns.head_patterns` (the patterns table's):

    * ``diagonal``: largest ``diag_mass`` (within ``band`` of the diagonal);
    * ``[CLS]/[SEP]``: largest ``cls_mass + sep_mass``;
    * ``spread``: largest ``entropy_norm``.

    Args:
        mean: ``[layers, heads, N, N]`` constant matrices (raw or effective).
        count: ``[N, N]`` how many examples had (i, j) valid (``ConstantAttention.count``); None =
            every entry valid, equally often.
        separators: the separator columns (the constants' ``separator_positions``); None = N-1.

    Returns:
        ``[(layer, head, criterion), ...]`` (0-based), without repeating a head.
    """
    import torch

    from .patterns import head_patterns

    c = _as_array(mean)
    n = c.shape[-1]
    cnt = np.ones((n, n)) if count is None else np.asarray(count, dtype=np.float64)
    stats = head_patterns(torch.from_numpy(np.ascontiguousarray(c)), torch.from_numpy(cnt), band, separators)
    chosen: list[tuple[int, int, str]] = []
    special = stats["cls_mass"] + stats["sep_mass"].fillna(0.0)
    for name, score in [("diagonal", stats["diag_mass"]), ("[CLS]/[SEP]", special), ("spread", stats["entropy_norm"])]:
        score = np.nan_to_num(score.to_numpy(dtype=np.float64), nan=-np.inf)
        for flat in np.argsort(-score, kind="stable"):
            lh = (int(stats["layer"].iat[flat]), int(stats["head"].iat[flat]))
            if all((l_, h_) != lh for l_, h_, _ in chosen):
                chosen.append((lh[0], lh[1], name))
                break
    return chosen


def plot_constant_heads(
    mean,
    out,
    heads: list[tuple[int, int]] | None = None,
    title: str = "",
    count=None,
    separators=None,
) -> list[str]:
    """Fig. 4 analogue: the constant matrices ``C^h`` of a few heads.

    Args:
        mean: array (or torch tensor) ``[layers, heads, N, N]``, e.g. ``ConstantAttention.mean``.
        out: path stem.
        heads: ``[(layer, head), ...]`` (0-based); None picks three representative heads
            with :func:`representative_heads` (diagonal, [CLS]/[SEP], spread).
        title: figure title (e.g. model and corpus).
        count, separators: passed to :func:`representative_heads` (``ConstantAttention.count``, the
            constants' ``separator_positions``).

    Each panel is titled ``(layer, head)``; all panels share one colour scale (0 to the
    largest entry shown), square-root (``PowerNorm(0.5)``) so the diagonal and spread
    heads stay visible next to heavy [CLS]/[SEP] columns. Signed matrices (effective attention)
    get a diverging scale centred on 0 instead, negative entries in red.
    """
    c = _as_array(mean)
    n_layers, n_heads, n, _ = c.shape
    if heads is None:
        picked = representative_heads(c, count, separators)
    else:
        picked = []
        for lh in heads:
            layer, head = (int(v) for v in lh)
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise ValueError(
                    f"plot_constant_heads: head {(layer, head)} outside {n_layers} layers x {n_heads} heads"
                )
            picked.append((layer, head, ""))
    if not picked:
        raise ValueError("plot_constant_heads: no heads to plot")
    k = len(picked)
    ncols = min(k, 4)
    nrows = math.ceil(k / ncols)
    with sns.axes_style("white"), matplotlib.rc_context(_RC):
        fig = _new_figure((3.9 * ncols + 0.8, 3.7 * nrows + (0.4 if title else 0.0)), layout="constrained")
        axes = _grid(fig, k, ncols_max=ncols)
        shown = np.stack([c[layer, head] for layer, head, _ in picked])
        finite = np.isfinite(shown).any()
        vmax = float(np.nanmax(shown)) if finite and np.nanmax(shown) > 0 else 1.0
        vmin = float(np.nanmin(shown)) if finite else 0.0
        if vmin < 0:  # signed (effective attention): diverging around 0, one scale for all panels
            norm, cmap, label = TwoSlopeNorm(0.0, vmin=vmin, vmax=vmax), "RdBu_r", "signed attention weight"
        else:  # one square-root scale for all panels: comparable
            norm, cmap, label = PowerNorm(0.5, vmin=0.0, vmax=vmax), "Blues", "attention weight (sqrt scale)"
        for ax, (layer, head, why) in zip(axes, picked):
            im = ax.imshow(c[layer, head], cmap=cmap, norm=norm, interpolation="nearest")
            ax.set_title(f"({layer}, {head})" + (f"\n{why}" if why else ""))
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
        if title:
            fig.suptitle(title)
        fig.colorbar(im, ax=list(axes), fraction=0.025, pad=0.02, label=label)
        return _save(fig, out)


@renamed_arguments(summary="table")
def plot_models_compared(
    table: pd.DataFrame,
    out,
    constants: str | None = None,
    selection: str | None = None,
) -> list[str]:
    """Fig. 3 analogue: original score vs relative drop with every head constant, one point per model.

    Args:
        table: a :func:`papa.tables.models_compared_table` frame (the score of each model averaged
            over the tasks every model has; they are listed under the figure). A
            :func:`papa.tables.summary_table` frame is accepted too and reduced first, with
            ``constants`` and ``selection`` passed on.
        out: path stem.

    Returns:
        The paths written.
    """
    if isinstance(table, pd.DataFrame) and "drop" not in table.columns:
        table = models_compared_table(table, constants, selection)
    _require(table, ["model", "orig", "drop", "constants", "tasks"], "plot_models_compared")
    if table.empty:
        raise NothingToPlot("plot_models_compared: nothing to plot")

    with sns.axes_style("whitegrid"), matplotlib.rc_context(_RC):
        fig = _new_figure((6.0, 4.6))
        ax = fig.subplots()
        colors = sns.color_palette("colorblind", len(table))
        for (_, row), color in zip(table.iterrows(), colors):
            ax.scatter(row["drop"] * 100, row["orig"], s=60, color=color, zorder=3)
            ax.annotate(
                row["model"], (row["drop"] * 100, row["orig"]), xytext=(6, 4), textcoords="offset points", fontsize=9
            )
        ylabel, tasks = _models_compared_text(table)
        ax.set_xlabel("relative score drop with all heads constant (%)")
        ax.set_ylabel(ylabel)
        ax.set_title("Original score vs drop without input-dependent attention")
        ax.margins(x=0.25, y=0.2)
        # paper.yaml's six tasks with their metrics run past the figure's width on one line
        note = textwrap.wrap(f"mean over tasks: {tasks}; constants={table['constants'].iloc[0]}", 120)
        fig.text(0.01, 0.005, "\n".join(note), fontsize=7, color="0.35", ha="left", va="bottom")
        fig.tight_layout(rect=(0, 0.04 + 0.022 * (len(note) - 1), 1, 1))
        return _save(fig, out)


def _models_compared_text(table: pd.DataFrame) -> tuple[str, str]:
    """Fig. 3's y label and its note's tasks. The y axis names the one metric every task scores (``original MCC``),
    else says it is the mean of the tasks' metrics (Fig. 3 averages MCC, accuracy, F1 ... over the tasks); the note
    names each task's metric as the figures do (`papa.spec.metric_label`: ``cola=MCC``). A table without
    ``metrics`` (a notebook's own) says "score" and names the tasks alone."""
    tasks, score = str(table["tasks"].iloc[0]), "original score"
    if "metrics" in table.columns:
        names, metrics = tasks.split(", "), str(table["metrics"].iloc[0]).split(", ")
        labels = [" / ".join(map(metric_label, m.split("/"))) for m in metrics]
        if len(names) == len(labels):  # else not models_compared_table's: the tasks as they are
            tasks = ", ".join(f"{t}={label}" for t, label in zip(names, labels, strict=True))
            score = f"original {labels[0]}" if len(set(labels)) == 1 else "original score: mean of the tasks' metrics\n"
    return score + ("" if score.endswith("\n") else " ") + "(all heads input-dependent)", tasks


def plot_constant_kinds(table: pd.DataFrame, out) -> list[str]:
    """Table 1 analogue: score with all heads replaced, per constants kind (a point, the mean over seeds, with its
    95% CI), one panel per (model, task); the dashed line is the original model. Points, not bars: the y axis starts
    near the lowest score (kinds a few points apart stay apart), and a bar's length would then mean nothing.

    Args:
        table: a :func:`papa.tables.constant_kinds_table` frame (main metrics are used).
        out: path stem.
    """
    _require(
        table, ["model", "task", "constants", "metric", "mean", "ci95", "original", "is_main"], "plot_constant_kinds"
    )
    df = table[table["is_main"].astype(bool)]
    if df.empty:
        raise NothingToPlot("plot_constant_kinds: nothing to plot")
    groups = list(df.groupby(["model", "task"], sort=True))
    ncols = min(3, len(groups))
    # the style of the other score figures (a grid to read scores off; it was matplotlib's defaults here)
    with sns.axes_style("whitegrid"), matplotlib.rc_context(_RC):
        nrows = math.ceil(len(groups) / ncols)
        fig = _new_figure((4.2 * ncols, 3.4 * nrows), layout="constrained")
        kinds = list(dict.fromkeys(df["constants"]))
        palette = dict(zip(kinds, sns.color_palette("deep", len(kinds))))
        for i, ((model, task), g) in enumerate(groups):
            ax = fig.add_subplot(nrows, ncols, i + 1)
            x = np.arange(len(g))
            for xi, kind, mean, ci in zip(x, g["constants"], g["mean"], g["ci95"].fillna(0)):
                ax.errorbar(xi, mean, yerr=ci, fmt="o", color=palette[kind], capsize=3, markersize=6)
            ax.set_xlim(-0.6, len(g) - 0.4)
            ax.axhline(float(g["original"].iloc[0]), color="black", linestyle="--", linewidth=1, label="original")
            ax.set_xticks(x, g["constants"], rotation=35, ha="right")
            ax.set_title(f"{task} ({model})")
            ax.set_ylabel(metric_label(g["metric"].iloc[0]))
            # below every lower whisker too: an axis cut between a mean and its CI's end drew a narrower interval
            lo = min(float((g["mean"] - g["ci95"].fillna(0)).min()), float(g["original"].iloc[0]))
            ax.set_ylim(max(0.0, lo - 0.1) if lo >= 0 else lo - 0.1, None)
            ax.legend(loc="lower right", fontsize=8)
        fig.suptitle("All heads replaced: constant matrix kinds")
    return _save(fig, out)


def plot_mlm(table: pd.DataFrame, out) -> list[str]:
    """Fig. 6(a) analogue: negative log-perplexity vs fraction of input-dependent heads (1 on the left, as the
    paper's), one line per model (and corpus, and MLM head when the table has several): the mean over the seeds,
    with its 95% interval (``ci95``) where there are several.

    Args:
        table: a :func:`papa.tables.mlm_table` frame.
        out: path stem.
    """
    _require(table, ["model", "dataset", "head", "fraction_dynamic", "neg_log_ppl"], "plot_mlm")
    if table.empty:
        raise NothingToPlot("plot_mlm: nothing to plot")
    with sns.axes_style("whitegrid"), matplotlib.rc_context(_RC):
        fig = _new_figure((6.0, 4.2))
        ax = fig.subplots()
        several_heads = table["head"].nunique() > 1
        groups = list(table.groupby(["model", "dataset", "head"], sort=True))
        colors = sns.color_palette("colorblind", len(groups))
        for i, ((model, dataset, head), g) in enumerate(groups):
            g = g.sort_values("fraction_dynamic")
            label = model if table["dataset"].nunique() == 1 else f"{model} ({dataset})"
            label += f", {head} head" if several_heads else ""
            ax.plot(
                g["fraction_dynamic"],
                g["neg_log_ppl"],
                marker=_MARKERS[i % len(_MARKERS)],
                linestyle=_LINESTYLES[i % len(_LINESTYLES)],
                color=colors[i],
                label=label,
            )
            if "ci95" in g and np.isfinite(g["ci95"].to_numpy(dtype="float64")).any():  # several seeds
                ci = g["ci95"].to_numpy(dtype="float64")
                ax.fill_between(g["fraction_dynamic"], g["neg_log_ppl"] - ci, g["neg_log_ppl"] + ci,
                                color=colors[i], alpha=0.2, linewidth=0)  # fmt: skip
        ax.set_xscale("symlog", linthresh=1 / 16)
        ticks = sorted(table["fraction_dynamic"].unique())
        ax.set_xticks(ticks)
        ax.set_xticklabels([fraction_label(t) for t in ticks])
        ax.invert_xaxis()  # as the paper's Figs. 2, 5 and 6: 1 (every head input-dependent) on the left, 0 right
        ax.set_xlabel("fraction of input-dependent heads")
        ax.set_ylabel("negative log-perplexity (nats, higher is better)")
        ax.set_title("Masked LM with replaced heads" + ("" if several_heads else f" ({table['head'].iloc[0]} head)"))
        ax.legend(fontsize=8)
        fig.tight_layout()
        return _save(fig, out)


# --------------------------------------------------------------------------- the report's table

_TABLE_KEYS = ["model", "task", "metric", "constants", "selection"]
_TABLE_STYLE = (
    "table{border-collapse:collapse;font:13px sans-serif}th,td{border:1px solid #ccc;padding:3px 8px}"
    "td{text-align:right;white-space:nowrap}th{background:#f3f3f3;text-align:left}"
)


def summary_table_frame(summary: pd.DataFrame, main_only: bool = True) -> pd.DataFrame:
    """The summary table as the report shows it: a row per (model, task, metric, constants, head order), a column
    per fraction_dynamic (``1`` first, labelled as in the figures: ``1/2``, ``1/16``), each cell the mean over
    seeds, the 95% CI's half-width (``±``, none with one seed) and the relative drop from every head
    input-dependent (the summary's ``relative_drop``; negative: the score rose; none where the ``baseline`` is below
    0, an MCC, whose drop would read a fall as a rise), and ``[n seeds]`` where a cell has fewer seeds than the
    table's most. Only each task's reported metric (``is_main``) unless ``main_only`` is
    False."""
    _require(summary, [*_TABLE_KEYS, "fraction_dynamic", "mean", "ci95", "relative_drop", "n_seeds"],
             "summary_table_frame")  # fmt: skip
    df = _main_only(summary, main_only)
    fractions = sorted(df["fraction_dynamic"].unique(), reverse=True)
    seeds = int(df["n_seeds"].max()) if len(df) else 0

    # under a baseline below 0 (an MCC) the summary's relative_drop has a rise's sign for a fall: no drop shown
    df = df.assign(relative_drop=reads_as_drop(df))

    def cell(r) -> str:
        text = f"{r.mean:.3f}" + (f" ± {r.ci95:.3f}" if np.isfinite(r.ci95) else "")
        if np.isfinite(r.relative_drop) and not is_original(r.fraction_dynamic):
            text += f" (drop {100 * r.relative_drop:.1f}%)"
        return text + (f" [{r.n_seeds} seeds]" if r.n_seeds < seeds else "")

    rows = {
        keys: {fraction_label(r.fraction_dynamic): cell(r) for r in g.itertuples(index=False)}
        for keys, g in df.groupby(_TABLE_KEYS, sort=True)
    }
    columns = [fraction_label(f) for f in fractions]
    index = pd.MultiIndex.from_tuples(list(rows), names=_TABLE_KEYS) if rows else None
    table = pd.DataFrame(list(rows.values()), index=index, columns=columns).fillna("")
    table.columns.name = "fraction_dynamic"
    table.attrs["n_seeds"] = seeds  # the most seeds of a cell: `plot_summary_table`'s caption
    return table


def plot_summary_table(summary: pd.DataFrame, out, main_only: bool = True) -> list[str]:
    """`summary_table_frame` as ``<out>.html`` (the workflow's report shows it beside the figures; its metrics
    named as the figures name them, `papa.spec.metric_label`, where the frame keeps their ids), written
    atomically, with the record of a `recorded` block (`figure_record` reads it back); the same table gives the
    same bytes. Returns the path written."""
    import html

    table = summary_table_frame(summary, main_only)
    if len(table):  # each metric as the figures name it (MCC, span F1 (seqeval)); the frame and Parquet keep ids
        table = table.rename(index=metric_label, level="metric")
    record = _RECORD.get()
    meta = "" if record is None else (
        f'<meta name="papa-record" content="{html.escape(json.dumps(record, sort_keys=True, default=str))}">\n'
    )  # fmt: skip
    what = "each task's reported metric" if main_only else "every metric"
    text = (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">\n{meta}<title>papa: summary</title>\n'
        f"<style>{_TABLE_STYLE}</style></head><body>\n"
        f"<p>Probe scores, {what}: the mean over seeds (up to {table.attrs['n_seeds']}) &plusmn; the 95% confidence "
        f"interval's half-width, and the relative drop from every head input-dependent (fraction_dynamic 1), per "
        f"fraction of input-dependent heads; metrics named as in the figures. All metrics and columns (metric ids): "
        f"tables/summary.parquet.</p>\n"
        + (table.to_html(escape=True) if len(table) else "<p>No probe results.</p>")
        + "\n</body></html>\n"
    )
    stem = _stem(out)
    path = stem.parent / f"{stem.name}.html"
    write_text(path, text)
    return [str(path)]
