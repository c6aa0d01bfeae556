"""Result tables: per-run files -> the tables of ``results/tables`` (and the figures' data).

Pure pandas (scipy's Student-t quantile, ``scipy.special.stdtrit``, for the confidence
intervals). The table builders validate their input and raise ``ValueError`` naming what is
wrong (e.g. the missing column; ``TypeError`` for an argument of the wrong type); ``t_critical``
returns NaN below one degree of freedom, as its docstring says.

Tables
------
``probe_table``
    One row per (model, task, constants, selection, fraction_dynamic, seed, epoch, metric):
    the concatenation of the per-run probe frames, deterministically sorted.
``summary_table``
    One row per (model, task, constants, selection, fraction_dynamic, metric): the mean
    over seeds of the *final-epoch* score, with a 95% t-interval and the relative drop
    from the fully input-dependent model (fraction_dynamic == 1) of the same
    model/task/metric: that of the same constants/selection, else (``share_baseline``, the
    default, as the workflow's summary) the mean of the others', as fraction 1 replaces no head.
``lambdas_table``
    One row per (model, task, constants, layer, head): the learned lambda and the
    replacement rank (rank 0 = the head replaced first).
``constant_kinds_table``
    Paper Tables 1-2: one row per (model, task, constants, metric) with all heads replaced.
``patterns_table``
    Paper Sec. 5.1: the per-(model, corpus, N) head-pattern frames, concatenated.
``mlm_table``
    Paper Sec. 5.5: one row per (model, dataset, head, fraction_dynamic) of the masked-LM curves.
``models_compared_table``
    Paper Fig. 3 (not written as a file; `papa.plots.plot_models_compared` draws it): one
    row per model, original score and relative drop with every head constant.
``all_constant_drop``
    The paper's headline number (not written as a file; the aggregate job logs it): per model and
    constants, the mean over the tasks of the relative drop in the main metric with every head constant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from . import spec

__all__ = [
    "PROBE_COLUMNS",
    "SUMMARY_COLUMNS",
    "LAMBDAS_COLUMNS",
    "PATTERNS_COLUMNS",
    "MLM_COLUMNS",
    "probe_table",
    "summary_table",
    "lambdas_table",
    "empty_lambdas_table",
    "constant_kinds_table",
    "patterns_table",
    "mlm_table",
    "models_compared_table",
    "all_constant_drop",
    "reads_as_drop",
    "NoDropToCompare",
    "t_critical",
    "last_epochs",
]

#: Required columns of a probe frame and their dtypes in the probe table.
PROBE_COLUMNS: dict[str, str] = {
    "model": "str",
    "task": "str",
    "constants": "str",
    "selection": "str",
    "fraction_dynamic": "float64",
    "n_dynamic": "int64",
    "seed": "int64",
    "epoch": "int64",
    "metric": "str",
    "score": "float64",
}

#: Columns that identify one row of the probe table.
PROBE_KEY = ["model", "task", "constants", "selection", "fraction_dynamic", "seed", "epoch", "metric"]
#: Columns that identify one seed's run of a setting: its rows over epochs (the summary keeps each run's last).
RUN_KEY = ["model", "task", "constants", "selection", "fraction_dynamic", "seed", "metric"]
#: Columns that identify one row of the summary table.
SUMMARY_KEY = ["model", "task", "constants", "selection", "fraction_dynamic", "metric"]
#: Columns of the summary table, in order.
SUMMARY_COLUMNS = SUMMARY_KEY + [
    "n_dynamic",
    "n_seeds",
    "mean",
    "std",
    "ci95",
    "ci_low",
    "ci_high",
    "baseline",
    "relative_drop",
    "is_main",
]

#: The columns of a head-patterns frame (`papa.pipeline.pattern_stats`) and their dtypes: those of
#: ``patterns.parquet`` also where the patterns analysis is off (no frame: none of its rows).
PATTERNS_COLUMNS: dict[str, str] = {
    "model": "str",
    "corpus": "str",
    "N": "int64",
    "attention": "str",
    "layer": "int64",
    "head": "int64",
    **dict.fromkeys(
        ("diag_mass", "diag_lift", "cls_mass", "sep_mass", "entropy", "entropy_norm", "dist_uniform", "neg_mass"),
        "float64",
    ),
    "diagonal": "bool",
    "cls_sep": "bool",  # nullable "boolean" where sep_mass is NaN (the standard layout: papa.patterns.classify)
}

#: Required columns of a lambdas frame and their dtypes.
LAMBDAS_COLUMNS: dict[str, str] = {
    "model": "str",
    "task": "str",
    "constants": "str",
    "layer": "int64",
    "head": "int64",
    "lambda": "float64",
    "rank": "int64",
}
LAMBDAS_KEY = ["model", "task", "constants", "layer", "head"]


def empty_lambdas_table() -> pd.DataFrame:
    """``lambdas.parquet`` of a run that learns no lambdas (no ``lambda``/``reversed`` order at a partial fraction):
    no rows, but the columns and dtypes of a run's that does, ``model_revision`` included (every column was text,
    ``model_revision`` missing: ``lam["lambda"].mean()`` raised TypeError, and a concat with another run's table
    made its numbers objects)."""
    return _empty_frame({**LAMBDAS_COLUMNS, "model_revision": "str"})


def _empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    """A frame of no rows with ``columns`` (name -> dtype), typed as a table of rows would be."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})


#: Columns every per-model masked-LM curve has (paper Sec. 5.5; rule ``mlm``): one row per model,
#: corpus, head (``probe``: the paper's trained probe; ``pretrained``: the checkpoint's frozen MLM
#: head), fraction and, where several, ``seed``. ``mlm.parquet`` (`mlm_table`) has one row per
#: fraction, the mean over the seeds.
MLM_COLUMNS: dict[str, str] = {
    "model": "str",
    "dataset": "str",
    "head": "str",
    "n_eval": "int64",
    "fraction_dynamic": "float64",
    "n_dynamic": "int64",
    "neg_log_ppl": "float64",
    "perplexity": "float64",
}
MLM_KEY = ["model", "dataset", "head", "fraction_dynamic"]


def t_critical(df: int) -> float:
    """Two-sided 95% Student-t critical value ``t_{0.975, df}``; NaN for ``df < 1``.

    ``scipy.special.stdtrit``, the function ``scipy.stats.t.ppf`` calls (the same values, bit for bit):
    importing ``scipy.stats`` for it cost each table job a second."""
    if df is None or not np.isfinite(df) or df < 1:
        return float("nan")
    from scipy.special import stdtrit  # scipy ships with scikit-learn; imported here, where it is used

    return float(stdtrit(int(df), 0.975))


def seed_spread(n_seeds, std) -> tuple[np.ndarray, np.ndarray]:
    """The spread over seeds of each row of a table (`summary_table`, `mlm_table`): ``std`` (ddof 1) where at
    least 2 seeds scored, else NaN, and ``ci95``, the half-width of the two-sided 95% Student-t interval,
    ``t_{0.975, n-1} * std / sqrt(n)``: NaN with one seed (no spread estimate; a zero-width band would claim
    certainty). ``n_seeds``: the seeds with a score, per row; ``std``: their sample standard deviation."""
    n = np.asarray(n_seeds, dtype="int64")
    std = np.where(n >= 2, np.asarray(std, dtype="float64"), np.nan)
    tcrit = np.array([t_critical(k - 1) for k in n], dtype="float64")
    with np.errstate(invalid="ignore", divide="ignore"):
        return std, tcrit * std / np.sqrt(n.astype("float64"))


# --------------------------------------------------------------------------- validation


def _require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"{what}: missing required column(s) {', '.join(repr(c) for c in missing)}; "
            f"got columns {list(map(str, df.columns))}"
        )


def _cast(df: pd.DataFrame, dtypes: Mapping[str, str], what: str) -> pd.DataFrame:
    """Cast ``df``'s columns to ``dtypes``; NaN in str/int columns is an error."""
    df = df.copy()
    for col, dtype in dtypes.items():
        s = df[col]
        if dtype == "str":
            if s.isna().any():
                raise ValueError(f"{what}: column {col!r} has missing values")
            df[col] = s.astype(str)
        elif dtype == "int64":
            num = pd.to_numeric(s, errors="coerce")
            if num.isna().any():
                raise ValueError(f"{what}: column {col!r} has missing or non-numeric values")
            arr = num.to_numpy(dtype="float64")
            if not (np.all(np.isfinite(arr)) and np.all(np.equal(np.round(arr), arr))):
                raise ValueError(f"{what}: column {col!r} has non-integer values")
            df[col] = arr.astype("int64")
        elif dtype == "float64":
            num = pd.to_numeric(s, errors="coerce")
            if (num.isna() & s.notna()).any():
                raise ValueError(f"{what}: column {col!r} has non-numeric values")
            df[col] = num.astype("float64")
        else:  # pragma: no cover - programming error
            raise AssertionError(dtype)
    return df


def _concat(frames: list[pd.DataFrame], columns: Mapping[str, str], what: str) -> pd.DataFrame:
    if frames is None or isinstance(frames, pd.DataFrame):
        raise ValueError(f"{what}: expected a list of DataFrames")
    frames = list(frames)
    if not frames:
        raise ValueError(f"{what}: no frames given (empty list)")
    for i, f in enumerate(frames):
        _require_columns(f, columns, f"{what}: frame {i}")
    nonempty = [f for f in frames if len(f)]
    df = pd.concat(nonempty or frames[:1], ignore_index=True, sort=False)
    df = _cast(df, columns, what)
    ordered = list(columns) + [c for c in df.columns if c not in columns]
    return df[ordered]


def _check_unique(df: pd.DataFrame, key: list[str], what: str) -> None:
    dup = df.duplicated(subset=key, keep=False)
    if dup.any():
        example = df.loc[dup, key].iloc[0].to_dict()
        raise ValueError(f"{what}: {int(dup.sum())} rows share the same key {key}; e.g. {example}")


def _check_vocabulary(df: pd.DataFrame, what: str) -> None:
    """Every label is the project's (`papa.spec`): a constants spec, a head order, a metric; counts are not
    negative. A row written by hand or by another version would otherwise be kept under a label no stage, plot or
    summary knows (it matches no baseline, no kind, no figure's order)."""
    problems = []
    for text in sorted(set(df["constants"])):
        try:
            spec.ConstantsSpec.parse(text)
        except ValueError as e:
            problems.append(f"constants {e}")
    for column, known in (("selection", spec.HEAD_ORDERS), ("metric", spec.ALL_METRICS)):
        unknown = sorted(set(df[column]) - set(known))
        if unknown:
            problems.append(f"{column} {', '.join(map(repr, unknown))} is none of {', '.join(known)}")
    for column in ("n_dynamic", "seed", "epoch"):
        if (df[column] < 0).any():
            problems.append(f"{column} is negative in {int((df[column] < 0).sum())} rows")
    if problems:
        raise ValueError(f"{what}: " + "; ".join(problems))


def _check_one_fraction_per_end(df: pd.DataFrame, what: str, key: list[str]) -> None:
    """Refuse two ``fraction_dynamic`` values that count as one end up to float noise (`papa.spec.is_original`,
    `is_all_constant`: 1 and 0.99999, 0 and 1e-09) among the rows of one ``key`` (a summary's run: model, task,
    constants, selection and metric; an MLM curve): both would be the baseline (the summary's merge failed on a
    pandas MergeError, "Merge keys are not unique", naming neither; an MLM curve's ``drop`` held frames) or the
    all-constant run (one kept, unsaid)."""
    for end, is_end in ((spec.ORIGINAL, spec.is_original), (spec.ALL_CONSTANT, spec.is_all_constant)):
        rows = df[is_end(df["fraction_dynamic"])]
        values = rows.groupby(key)["fraction_dynamic"].unique()
        several = values[values.map(len) > 1]
        if len(several):
            run, fractions = next(iter(several.items()))
            raise ValueError(f"{what}: fraction_dynamic {', '.join(f'{f:g}' for f in sorted(fractions))} are all "
                             f"{end:g} up to float noise (papa.spec.is_original, is_all_constant), in the runs of "
                             f"{dict(zip(key, run))}: keep the runs of one of them")  # fmt: skip


# --------------------------------------------------------------------------- tables


def probe_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate per-run probe frames into one deterministically sorted table.

    Args:
        frames: per-run frames, each with at least the columns of :data:`PROBE_COLUMNS`
            (model, task, constants, selection, fraction_dynamic, n_dynamic, seed, epoch,
            metric, score). Extra columns (``train_loss``, ...) are kept after them.

    Returns:
        A frame sorted by (model, task, constants, selection, fraction_dynamic
        *descending*, seed, epoch, metric) with a fresh RangeIndex and fixed dtypes
        (str / float64 / int64 as in :data:`PROBE_COLUMNS`).

    Raises:
        ValueError: ``frames`` is empty, a frame lacks a required column (named in the
            message), a key column holds missing/non-integer values, or two rows share
            the same (model, task, constants, selection, fraction_dynamic, seed, epoch,
            metric) key (that would silently double-count a run), a score is NaN, a
            fraction_dynamic lies outside [0, 1], a label is not the project's
            (constants spec, ``selection`` of `papa.spec.HEAD_ORDERS`, ``metric`` of
            `papa.spec.ALL_METRICS`), or ``n_dynamic``/``seed``/``epoch`` is negative.
    """
    df = _concat(frames, PROBE_COLUMNS, "probe_table")
    _check_unique(df, PROBE_KEY, "probe_table")
    if df["score"].isna().any():
        raise ValueError(f"probe_table: {int(df['score'].isna().sum())} rows have no score (NaN): rerun their probes")
    frac = df["fraction_dynamic"].to_numpy(dtype="float64")
    off = ~((frac >= 0) & (frac <= 1))  # NaN too
    if off.any():
        # np.unique: NaN once (a set kept one NaN a row)
        raise ValueError(f"probe_table: fraction_dynamic must lie in [0, 1]; {int(off.sum())} rows hold "
                         f"{np.unique(frac[off]).tolist()[:5]}")  # fmt: skip
    _check_vocabulary(df, "probe_table")
    # sorted by its key: fraction_dynamic descending, everything else ascending
    ascending = [c != "fraction_dynamic" for c in PROBE_KEY]
    df = df.sort_values(PROBE_KEY, ascending=ascending, kind="mergesort").reset_index(drop=True)
    return df


def last_epochs(probe: pd.DataFrame) -> pd.DataFrame:
    """The rows of each run's last epoch (`RUN_KEY`): the scores the summary averages over seeds."""
    if not len(probe):
        return probe
    return probe[probe["epoch"] == probe.groupby(RUN_KEY, sort=False)["epoch"].transform("max")]


def summary_table(
    probe: pd.DataFrame,
    main_metric: dict[str, str] | None = None,
    *,
    share_baseline: bool = True,
) -> pd.DataFrame:
    """Mean, spread and 95% CI over seeds of each run's final-epoch score.

    For each run (model, task, constants, selection, fraction_dynamic, seed) only the
    rows of its last epoch are used (the maximum ``epoch`` of that run and metric; in
    the usual case every metric is logged every epoch, so this is the run's last epoch).
    Then, per (model, task, constants, selection, fraction_dynamic, metric):

    * ``n_dynamic``: the first value (it is the same for every seed);
    * ``n_seeds``: number of seeds with a non-missing score;
    * ``mean``, ``std`` (ddof=1; NaN with a single seed);
    * ``ci95``: half-width of the two-sided 95% Student-t interval,
      ``t_{0.975, n-1} * std / sqrt(n)``. With a single seed there is no spread
      estimate, so ``ci95`` is **NaN** (not 0: a zero-width band would claim certainty);
    * ``ci_low``/``ci_high`` = ``mean -/+ ci95`` (NaN with a single seed);
    * ``baseline``: ``mean`` of the same model/task/constants/selection/metric at
      ``fraction_dynamic == 1.0`` (else, with ``share_baseline``, that of the other
      constants/selections; NaN if there is none);
    * ``relative_drop`` = ``(baseline - mean) / baseline`` (NaN if the baseline is
      missing or 0; 0 at fraction 1 itself);
    * ``is_main``: ``metric == main_metric[task]`` when ``main_metric`` is given and has
      the task; True otherwise.

    Args:
        probe: the probe table (see :func:`probe_table`); extra columns are ignored.
        main_metric: task -> name of the metric the paper reports for it.
        share_baseline: with every head input-dependent the model does not depend on
            the constants or the selection order, so when True (the default, as the
            workflow's ``summary.parquet``: its Sec. 5 analyses, the constant kinds, cross-corpus
            matrices and other head orders, run no fraction 1 of their own, while the main sweep
            runs it under each of its constants kinds and orders, the same probes each time,
            `papa.checks.probe_runs`) a missing fraction-1 row of one constants/selection falls back
            to the mean over the fraction-1 rows of the other constants/selections of the
            same model/task/metric. False: strictly the same model/task/constants/
            selection/metric (NaN where that run has no fraction-1 row).

    Returns:
        A frame with :data:`SUMMARY_COLUMNS`, sorted like the probe table.

    Raises:
        ValueError: a required column is missing (named), or ``probe`` has duplicate keys.
    """
    _require_columns(probe, PROBE_COLUMNS, "summary_table")
    if main_metric is not None and not isinstance(main_metric, Mapping):
        raise ValueError("summary_table: main_metric must be a dict task -> metric")
    df = _cast(probe[list(PROBE_COLUMNS)], PROBE_COLUMNS, "summary_table")
    _check_unique(df, PROBE_KEY, "summary_table")
    _check_one_fraction_per_end(df, "summary_table", ["model", "task", "constants", "selection", "metric"])
    # the rows in probe_table's order whatever their order here: pandas' sums over a group round by the order of the
    # whole frame's rows (the std of [0.1, 0.2, 0.7] and of its reverse differ in the last bit, and so does a group's
    # mean with another group's rows moved), so a frame read in another order (a notebook's concat of the probe
    # files) gave other numbers than the workflow's summary.parquet; probe_table's own frame keeps its order
    df = df.sort_values(PROBE_KEY, ascending=[c != "fraction_dynamic" for c in PROBE_KEY], kind="mergesort")
    df = last_epochs(df)

    grouped = df.groupby(SUMMARY_KEY, sort=True)
    out = grouped.agg(
        n_dynamic=("n_dynamic", "first"),
        n_seeds=("score", "count"),
        mean=("score", "mean"),
        std=("score", lambda s: s.std(ddof=1)),
    ).reset_index()

    out["std"], out["ci95"] = seed_spread(out["n_seeds"], out["std"])
    out["ci_low"] = out["mean"] - out["ci95"]
    out["ci_high"] = out["mean"] + out["ci95"]

    full = spec.is_original(out["fraction_dynamic"])
    base_key = ["model", "task", "constants", "selection", "metric"]
    base = out.loc[full, base_key + ["mean"]].rename(columns={"mean": "baseline"})
    out = out.merge(base, on=base_key, how="left", validate="many_to_one")
    if share_baseline:
        shared_key = ["model", "task", "metric"]
        shared = (
            out.loc[full, shared_key + ["mean"]]
            .groupby(shared_key, as_index=False)["mean"]
            .mean()
            .rename(columns={"mean": "_shared"})
        )
        out = out.merge(shared, on=shared_key, how="left", validate="many_to_one")
        out["baseline"] = out["baseline"].fillna(out["_shared"])
        out = out.drop(columns="_shared")
    b = out["baseline"].to_numpy(dtype="float64")
    m = out["mean"].to_numpy(dtype="float64")
    with np.errstate(invalid="ignore", divide="ignore"):
        out["relative_drop"] = np.where((b != 0) & np.isfinite(b), (b - m) / b, np.nan)

    if main_metric:
        scored = out.groupby("task")["metric"].agg(set).to_dict()
        absent = {t: m for t, m in main_metric.items() if t in scored and m not in scored[t]}
        if absent:  # no row would be main: query("is_main") would drop the task without a word
            raise ValueError("summary_table: main_metric names metrics the table lacks: " + "; ".join(
                f"task {t!r}: {m!r} (it has {', '.join(sorted(scored[t]))})" for t, m in absent.items()))  # fmt: skip
        wanted = out["task"].map(lambda t: main_metric.get(t))
        out["is_main"] = (wanted.isna() | (out["metric"] == wanted)).astype(bool)
    else:
        out["is_main"] = True

    out = out[SUMMARY_COLUMNS]
    ascending = [c != "fraction_dynamic" for c in SUMMARY_KEY]
    out = out.sort_values(SUMMARY_KEY, ascending=ascending, kind="mergesort").reset_index(drop=True)
    out = out.astype({"n_dynamic": "int64", "n_seeds": "int64", "is_main": "bool"})
    for c in ["fraction_dynamic", "mean", "std", "ci95", "ci_low", "ci_high", "baseline", "relative_drop"]:
        out[c] = out[c].astype("float64")
    return out


def lambdas_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate per-(model, task) head-importance frames.

    Args:
        frames: frames with at least the columns of :data:`LAMBDAS_COLUMNS` (model, task,
            constants, layer, head, lambda, rank); extra columns are kept after them.

    Returns:
        A frame sorted by (model, task, constants, layer, head) with fixed dtypes.

    Raises:
        ValueError: ``frames`` is empty, a required column is missing (named), a
            (model, task, constants, layer, head) appears twice, or within one
            (model, task, constants) the ranks are not a permutation of 0..n_heads-1.
    """
    df = _concat(frames, LAMBDAS_COLUMNS, "lambdas_table")
    _check_unique(df, LAMBDAS_KEY, "lambdas_table")
    lam = df["lambda"].to_numpy(dtype="float64")
    if not ((lam >= 0) & (lam <= 1)).all():  # sigmoid(w): NaN or outside [0, 1] is no learned lambda
        raise ValueError(f"lambdas_table: lambda must lie in [0, 1]; {int((~((lam >= 0) & (lam <= 1))).sum())} rows "
                         f"do not (NaN or out of range): learn them again")  # fmt: skip
    for key, g in df.groupby(["model", "task", "constants"], sort=True):
        ranks = np.sort(g["rank"].to_numpy())
        if not np.array_equal(ranks, np.arange(len(g))):
            raise ValueError(
                f"lambdas_table: ranks of {dict(zip(['model', 'task', 'constants'], key))} "
                f"are not a permutation of 0..{len(g) - 1}"
            )
    df = df.sort_values(LAMBDAS_KEY, kind="mergesort").reset_index(drop=True)
    return df


def constant_kinds_table(summary: pd.DataFrame, kinds: list[str]) -> pd.DataFrame:
    """Paper Table 1/2 analogue: the score with *all* heads replaced, per constants kind.

    Rows of ``summary`` at ``fraction_dynamic == 0`` whose ``constants`` is in ``kinds``
    (e.g. ``average``, ``identity``, ``average@wiki``), with ``original`` = the fully
    input-dependent model's score (the summary's ``baseline``). The head order does not
    matter with every head replaced, so one row per (model, task, constants, metric).
    """
    _require_columns(
        summary,
        [
            "model",
            "task",
            "constants",
            "selection",
            "fraction_dynamic",
            "metric",
            "mean",
            "ci95",
            "baseline",
            "relative_drop",
            "is_main",
        ],
        "constant_kinds_table",
    )
    if isinstance(kinds, str) or not hasattr(kinds, "__iter__"):
        raise TypeError(f"constant_kinds_table: kinds must be a list of constants specs, got {kinds!r}")
    kinds = list(kinds)
    for k in kinds:
        spec.ConstantsSpec.parse(k)  # a misspelt kind would give no row, silently
    df = _all_constant_rows(summary)
    df = df[df["constants"].isin(kinds)]
    out = df[
        ["model", "task", "constants", "metric", "n_seeds", "mean", "ci95", "baseline", "relative_drop", "is_main"]
    ].rename(columns={"baseline": "original"})
    order = {k: i for i, k in enumerate(kinds)}
    out = out.assign(_o=out["constants"].map(order)).sort_values(["model", "task", "_o", "metric"], kind="mergesort")
    return out.drop(columns="_o").reset_index(drop=True)


def reads_as_drop(frame: pd.DataFrame) -> pd.Series:
    """The summary's ``relative_drop``, ``(baseline - mean) / baseline``, where it reads as a drop: NaN where the
    ``baseline`` is below 0 (an MCC under 0), where its sign is a rise's for a fall (and NaN already where the
    baseline is 0 or missing). A frame without ``baseline`` keeps its drops. The aggregate log's headline and the
    report's table use it (Fig. 3 leaves such tasks out the same way, `models_compared_table`)."""
    if "baseline" not in frame.columns:
        return frame["relative_drop"]
    return frame["relative_drop"].where(~(frame["baseline"].astype("float64") < 0))


def _all_constant_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary's rows with every head constant (``fraction_dynamic`` 0), one per model, task, constants and
    metric: the head order replaces every head alike there, so of the rows of several orders (the same probes) the
    first in order of their names is kept."""
    df = summary[spec.is_all_constant(summary["fraction_dynamic"])]
    df = df.sort_values(["model", "task", "constants", "metric", "selection"], kind="mergesort")
    return df.drop_duplicates(["model", "task", "constants", "metric"])


def mlm_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Per-model masked-LM curves (paper Sec. 5.5, Fig. 6a), one row per (model, dataset, head,
    fraction_dynamic) over the seeds (a frame without ``seed``: one): ``neg_log_ppl`` their mean,
    ``n_seeds``, ``std`` (ddof 1) and ``ci95`` (Student-t half-width, NaN with one seed, as in
    `summary_table`), ``perplexity`` of the mean, ``train_loss`` their mean (trained probes), and
    ``drop`` = mean score at fraction 1 minus mean score at each fraction (nats; higher = worse).

    Raises:
        ValueError: ``frames`` is empty, a column of :data:`MLM_COLUMNS` is missing, or a
            (model, dataset, head, fraction_dynamic, seed) appears twice.
    """
    df = _concat(frames, MLM_COLUMNS, "mlm_table")
    df["seed"] = df["seed"].fillna(0) if "seed" in df.columns else 0  # a file without seeds: one seed
    _check_unique(df, MLM_KEY + ["seed"], "mlm_table")
    _check_one_fraction_per_end(df, "mlm_table", ["model", "dataset", "head"])
    extra = {c: (c, "mean") for c in ("train_loss",) if c in df.columns}
    extra.update({c: (c, "first") for c in ("model_revision",) if c in df.columns})
    df = (
        df.groupby(MLM_KEY, sort=False, dropna=False)
        .agg(
            n_eval=("n_eval", "first"),
            n_dynamic=("n_dynamic", "first"),
            n_seeds=("neg_log_ppl", "count"),
            neg_log_ppl=("neg_log_ppl", "mean"),
            std=("neg_log_ppl", lambda v: v.std(ddof=1)),
            **extra,
        )
        .reset_index()
    )
    df["std"], df["ci95"] = seed_spread(df["n_seeds"], df["std"])
    df["perplexity"] = np.exp(-df["neg_log_ppl"])
    first = list(MLM_COLUMNS) + ["n_seeds", "std", "ci95"]  # the columns of one seed's curve, then the spread
    df = df[first + [c for c in df.columns if c not in first]]
    df = df.sort_values(MLM_KEY, ascending=[True, True, True, False], kind="mergesort")
    curve = ["model", "dataset", "head"]
    full = df[spec.is_original(df["fraction_dynamic"])].set_index(curve)["neg_log_ppl"]
    df["drop"] = [
        full.get(k, np.nan) - v for k, v in zip(df[curve].itertuples(index=False, name=None), df["neg_log_ppl"])
    ]
    return df.reset_index(drop=True)


def patterns_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate the per-(model, corpus, N) head-pattern frames (`papa.pipeline.pattern_stats`);
    no frames (``analyses.patterns`` off, an empty list) give an empty frame of `PATTERNS_COLUMNS` (it had no
    columns: a query on a documented one failed)."""
    if frames is None or isinstance(frames, (pd.DataFrame, str)):
        raise TypeError(f"patterns_table: expected a list of DataFrames, got {type(frames).__name__}")
    frames = list(frames)
    if not all(isinstance(f, pd.DataFrame) for f in frames):
        raise TypeError(f"patterns_table: expected a list of DataFrames, got {[type(f).__name__ for f in frames]}")
    if not frames:
        return _empty_frame(PATTERNS_COLUMNS)
    for i, f in enumerate(frames):  # a frame without them made a table whose documented columns were NaN
        if missing := [c for c in PATTERNS_COLUMNS if c not in f.columns]:
            raise ValueError(f"patterns_table: frame {i} lacks {missing}: pass papa.pipeline.pattern_stats' frames")
    return pd.concat(frames, ignore_index=True)


def _prefer(values: pd.Series, preferred: str) -> str:
    """``preferred`` if ``values`` holds it, else the most frequent value (ties: the first in sort order)."""
    vals = sorted(values.unique())
    if preferred in vals:
        return preferred
    return values.value_counts().sort_index().idxmax()


class NoDropToCompare(ValueError):
    """`models_compared_table` has no task left whose relative drop is defined in every model (each shared task's
    original score is <= 0 in some model): the plot rule draws a figure that says so, not a failed job."""


def models_compared_table(
    summary: pd.DataFrame, constants: str | None = None, selection: str | None = None, models=None
) -> pd.DataFrame:
    """Fig. 3 analogue: per model, the original score and the relative drop with every head constant.

    Per model and task (main metric only, ``is_main``): ``orig`` = mean at fraction 1, ``free``
    = mean at fraction 0, drop = ``(orig - free) / orig``. Both are then averaged over the tasks
    that every model has at both fractions, so that models are compared on the same tasks. A task whose ``orig``
    is at or below 0 in some model (an MCC under 0) is left out for every model: its drop is undefined there, or
    has the sign of a rise for a fall (as in `all_constant_drop`); so is one whose ``orig`` or ``free`` is NaN in
    some model, so that ``orig`` and ``drop`` are means over the same tasks.

    Args:
        summary: a :func:`summary_table` frame.
        constants, selection: which rows to use; default the paper's method
            (`papa.spec.METHOD_CONSTANTS` / `METHOD_ORDER`) if present, else the most frequent
            value (at fractions 0 and 1 the selection order makes no difference).
        models: the models to compare (default: every model of ``summary``). The workflow passes
            `papa.checks.compared_models`, the models that run every task: a model probed on a few
            tasks for another figure (ELECTRA on MNLI in config/paper.yaml, Fig. 6b) would
            otherwise narrow every model's average to those tasks.

    Returns:
        One row per model (sorted): ``model, orig, drop`` and, the same on every row, the
        ``constants`` and ``selection`` used, ``tasks`` (the shared tasks, sorted,
        comma-separated) and ``metrics`` (each of those tasks' metric, in that order).

    Raises:
        ValueError: a column is missing, a model of ``models`` has no row, nothing is left to
            compare, no task is shared by all models at fractions 0 and 1, or every shared task has an
            original score at or below 0, or a NaN score, in some model.
    """
    _require_columns(
        summary,
        ["model", "task", "constants", "selection", "fraction_dynamic", "metric", "mean"],
        "models_compared_table",
    )
    df = summary[summary["is_main"].astype(bool)] if "is_main" in summary.columns else summary
    if models is not None:
        models = [models] if isinstance(models, str) else list(models)
        absent = sorted(set(models) - set(df["model"]))
        if absent:
            raise ValueError(f"models_compared_table: models {', '.join(absent)} have no row in the summary table")
        df = df[df["model"].isin(models)]
    if df.empty:
        raise ValueError("models_compared_table: nothing to compare")
    constants = constants or _prefer(df["constants"], spec.METHOD_CONSTANTS)
    selection = selection or _prefer(df["selection"], spec.METHOD_ORDER)
    df = df[(df["constants"] == constants) & (df["selection"] == selection)]
    frac = df["fraction_dynamic"].astype(float)
    key = ["model", "task", "metric"]
    orig = df[spec.is_original(frac)].set_index(key)["mean"].rename("orig")
    free = df[spec.is_all_constant(frac)].set_index(key)["mean"].rename("free")
    both = pd.concat([orig, free], axis=1, join="inner").reset_index()
    if both.empty:
        raise ValueError("models_compared_table: no (model, task) with both fraction 1 and fraction 0")
    tasks_per_model = both.groupby("model")["task"].apply(set)
    common = set.intersection(*tasks_per_model)
    if not common:
        raise ValueError("models_compared_table: no task is shared by all models at fractions 0 and 1")
    # a drop relative to an original score <= 0 (an MCC under 0) is undefined or has a rise's sign for a fall (as in
    # all_constant_drop): such a task leaves every model's averages, orig too, so the models share their tasks. So
    # does one whose score at fraction 0 is NaN in some model (its drop NaN, skipped by the mean while its orig counted)
    undefined = set(both.loc[both["task"].isin(common) & ~((both["orig"] > 0) & both["free"].notna()), "task"])
    if common <= undefined:
        raise NoDropToCompare(f"models_compared_table: every shared task ({', '.join(sorted(common))}) has an "
                              f"original score at or below 0 (or no score) in some model: no relative drop to "
                              f"compare")  # fmt: skip
    common -= undefined
    both = both[both["task"].isin(common)]
    both["drop"] = (both["orig"] - both["free"]) / both["orig"]
    per_model = both.groupby("model").agg(orig=("orig", "mean"), drop=("drop", "mean")).reset_index()
    # what the mean is of: each task's metric (several, "/"-joined, where a summary marks no main metric)
    metrics = both.groupby("task")["metric"].agg(lambda m: "/".join(sorted(set(m))))
    return per_model.assign(constants=constants, selection=selection, tasks=", ".join(sorted(common)),
                            metrics=", ".join(metrics[t] for t in sorted(common)))  # fmt: skip


def all_constant_drop(summary: pd.DataFrame) -> pd.DataFrame:
    """The paper's headline number: per model and constants, how much of each task's main metric (``is_main``) is
    lost with every head constant (``fraction_dynamic`` 0), relative to the original model, averaged over the tasks.

    The drop of a task is the summary's ``relative_drop`` at fraction 0 (``(baseline - mean) / baseline``; the head
    order replaces every head alike there, so of the rows of several orders, the same probes, the first in order of
    their names is taken, as in `constant_kinds_table`). A task whose drop is undefined (no fraction-1 baseline, or a
    baseline of 0) is left out of the mean and named in ``undefined``, and so is one whose baseline is below 0 (an
    MCC under 0), where the summary's ``relative_drop`` has the sign of a rise for a fall (and the reverse).

    Args:
        summary: a :func:`summary_table` frame.

    Returns:
        One row per (model, constants) that has a row at fraction 0, sorted by them: ``model, constants``,
        ``relative_drop`` (the mean over the tasks; NaN where no task's is defined; negative: the score rose),
        ``n_tasks`` (the tasks averaged), ``tasks`` and ``undefined`` (sorted, comma-separated; "" for none).

    Raises:
        ValueError: a column is missing, or a task marks several main metrics (a summary built without
            ``main_metric`` on a task of several metrics: the mean would count the task once per metric).
    """
    key = ["model", "task", "constants"]
    _require_columns(summary, key + ["selection", "fraction_dynamic", "metric", "relative_drop", "is_main"],
                     "all_constant_drop")  # fmt: skip
    df = _all_constant_rows(summary)
    df = df[df["is_main"].astype(bool)]
    df = df.assign(relative_drop=reads_as_drop(df))  # a drop relative to a negative baseline: not a drop
    several = df.groupby(key)["metric"].agg(list)
    several = several[several.map(len) > 1]
    if len(several):
        (model, task, _), metrics = next(iter(several.items()))
        raise ValueError(f"all_constant_drop: task {task!r} ({model}) marks several main metrics "
                         f"({', '.join(metrics)}): build the summary with main_metric (task -> metric)")  # fmt: skip
    rows = []
    for (model, constants), g in df.groupby(["model", "constants"], sort=True):
        defined = np.isfinite(g["relative_drop"].to_numpy(dtype="float64"))
        rows.append(dict(
            model=model,
            constants=constants,
            relative_drop=float(g.loc[defined, "relative_drop"].mean()) if defined.any() else float("nan"),
            n_tasks=int(defined.sum()),
            tasks=", ".join(sorted(g.loc[defined, "task"])),
            undefined=", ".join(sorted(g.loc[~defined, "task"])),
        ))  # fmt: skip
    columns = {"model": "str", "constants": "str", "relative_drop": "float64", "n_tasks": "int64", "tasks": "str",
               "undefined": "str"}  # fmt: skip
    return pd.DataFrame(rows, columns=list(columns)).astype(columns) if rows else _empty_frame(columns)
