"""Result tables: per-run probe scores -> one probe table -> a per-fraction summary.

Pure pandas (plus ``scipy.stats.t`` when importable). Every public function validates
its input and raises ``ValueError`` naming what is wrong (e.g. the missing column).

Tables
------
``probe_table``
    One row per (model, task, constants, selection, fraction_dynamic, seed, epoch, metric):
    the concatenation of the per-run probe frames, deterministically sorted.
``summary_table``
    One row per (model, task, constants, selection, fraction_dynamic, metric): the mean
    over seeds of the *final-epoch* score, with a 95% t-interval and the relative drop
    from the fully input-dependent model (fraction_dynamic == 1) of the same
    model/task/constants/selection/metric.
``lambdas_table``
    One row per (model, task, constants, layer, head): the learned lambda and the
    replacement rank (rank 0 = the head replaced first).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

__all__ = [
    "PROBE_COLUMNS",
    "SUMMARY_COLUMNS",
    "LAMBDAS_COLUMNS",
    "MLM_COLUMNS",
    "mlm_table",
    "LAMBDA_COLUMNS",
    "probe_table",
    "summary_table",
    "lambdas_table",
    "t_critical",
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
#: Sort order of the probe table (fraction_dynamic descending, everything else ascending).
PROBE_SORT = PROBE_KEY
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
LAMBDA_COLUMNS = LAMBDAS_COLUMNS  # alias (workflow/scripts/aggregate.py uses this name)
LAMBDAS_KEY = ["model", "task", "constants", "layer", "head"]

#: Columns of ``mlm.parquet`` (paper Sec. 5.5): one row per model, corpus, head (``probe``: the
#: paper's trained probe; ``pretrained``: the checkpoint's frozen MLM head) and fraction.
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

# Two-sided 95% critical values t_{0.975, df} for df = 1..30 (fallback without scipy).
_T975 = {
    1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445, 5: 2.570582,
    6: 2.446912, 7: 2.364624, 8: 2.306004, 9: 2.262157, 10: 2.228139,
    11: 2.200985, 12: 2.178813, 13: 2.160369, 14: 2.144787, 15: 2.131450,
    16: 2.119905, 17: 2.109816, 18: 2.100922, 19: 2.093024, 20: 2.085963,
    21: 2.079614, 22: 2.073873, 23: 2.068658, 24: 2.063899, 25: 2.059539,
    26: 2.055529, 27: 2.051831, 28: 2.048407, 29: 2.045230, 30: 2.042272,
}
# Beyond 30 degrees of freedom: 40, 60, 120 and the normal limit, interpolated in 1/df.
_T975_TAIL = {40: 2.021075, 60: 2.000298, 120: 1.979930, math.inf: 1.959964}


def _t975_table(df: int) -> float:
    if df in _T975:
        return _T975[df]
    knots = [(30, _T975[30])] + sorted(_T975_TAIL.items())
    for (d0, t0), (d1, t1) in zip(knots, knots[1:]):
        if d0 < df <= d1:
            x0, x1, x = 1.0 / d0, (0.0 if math.isinf(d1) else 1.0 / d1), 1.0 / df
            return t0 + (t1 - t0) * (x - x0) / (x1 - x0)
    return _T975_TAIL[math.inf]


def t_critical(df: int, use_scipy: bool = True) -> float:
    """Two-sided 95% Student-t critical value ``t_{0.975, df}``; NaN for ``df < 1``.

    Uses ``scipy.stats.t.ppf`` when scipy is importable (and ``use_scipy``), otherwise a
    built-in table (exact to 6 decimals for df <= 30, interpolated in 1/df beyond).
    """
    if df is None or not np.isfinite(df) or df < 1:
        return float("nan")
    df = int(df)
    if use_scipy:
        try:
            from scipy.stats import t as _t
        except ImportError:  # pragma: no cover - scipy ships with scikit-learn here
            pass
        else:
            return float(_t.ppf(0.975, df))
    return float(_t975_table(df))


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
            metric) key (that would silently double-count a run).
    """
    df = _concat(frames, PROBE_COLUMNS, "probe_table")
    _check_unique(df, PROBE_KEY, "probe_table")
    ascending = [c != "fraction_dynamic" for c in PROBE_SORT]
    df = df.sort_values(PROBE_SORT, ascending=ascending, kind="mergesort").reset_index(drop=True)
    return df


def summary_table(
    probe: pd.DataFrame,
    main_metric: dict[str, str] | None = None,
    *,
    share_baseline: bool = False,
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
      ``fraction_dynamic == 1.0`` (NaN if that row is absent);
    * ``relative_drop`` = ``(baseline - mean) / baseline`` (NaN if the baseline is
      missing or 0; 0 at fraction 1 itself);
    * ``is_main``: ``metric == main_metric[task]`` when ``main_metric`` is given and has
      the task; True otherwise.

    Args:
        probe: the probe table (see :func:`probe_table`); extra columns are ignored.
        main_metric: task -> name of the metric the paper reports for it.
        share_baseline: with every head input-dependent the model does not depend on
            the constants or the selection order, so when True a missing fraction-1 row
            of one constants/selection falls back to the mean over the fraction-1 rows
            of the other constants/selections of the same model/task/metric. Default
            False: strictly the same model/task/constants/selection/metric.

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

    run_key = ["model", "task", "constants", "selection", "fraction_dynamic", "seed", "metric"]
    if len(df):
        last = df.groupby(run_key, sort=False)["epoch"].transform("max")
        df = df[df["epoch"] == last]

    grouped = df.groupby(SUMMARY_KEY, sort=True)
    out = grouped.agg(
        n_dynamic=("n_dynamic", "first"),
        n_seeds=("score", "count"),
        mean=("score", "mean"),
        std=("score", lambda s: s.std(ddof=1)),
    ).reset_index()

    n = out["n_seeds"].to_numpy(dtype="int64")
    std = out["std"].to_numpy(dtype="float64")
    std = np.where(n >= 2, std, np.nan)
    tcrit = np.array([t_critical(k - 1) for k in n], dtype="float64")
    with np.errstate(invalid="ignore", divide="ignore"):
        ci95 = tcrit * std / np.sqrt(n.astype("float64"))
    out["std"] = std
    out["ci95"] = ci95
    out["ci_low"] = out["mean"] - out["ci95"]
    out["ci_high"] = out["mean"] + out["ci95"]

    full = np.isclose(out["fraction_dynamic"].to_numpy(dtype="float64"), 1.0)
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
    _require_columns(summary, ["model", "task", "constants", "selection", "fraction_dynamic", "metric", "mean",
                               "ci95", "baseline", "relative_drop", "is_main"], "constant_kinds_table")
    df = summary[np.isclose(summary["fraction_dynamic"].astype("float64"), 0.0) & summary["constants"].isin(kinds)]
    df = df.sort_values(["model", "task", "constants", "metric", "selection"], kind="mergesort")
    df = df.drop_duplicates(["model", "task", "constants", "metric"])
    out = df[["model", "task", "constants", "metric", "n_seeds", "mean", "ci95", "baseline", "relative_drop",
              "is_main"]].rename(columns={"baseline": "original"})
    order = {k: i for i, k in enumerate(kinds)}
    out = out.assign(_o=out["constants"].map(order)).sort_values(["model", "task", "_o", "metric"], kind="mergesort")
    return out.drop(columns="_o").reset_index(drop=True)


def mlm_table(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate per-model masked-LM curves (paper Sec. 5.5, Fig. 6a) and add
    ``drop`` = score at fraction 1 minus score at each fraction (nats; higher = worse).

    Raises:
        ValueError: ``frames`` is empty, a column of :data:`MLM_COLUMNS` is missing, or a
            (model, dataset, head, fraction_dynamic) appears twice.
    """
    df = _concat(frames, MLM_COLUMNS, "mlm_table")
    _check_unique(df, MLM_KEY, "mlm_table")
    df = df.sort_values(MLM_KEY, ascending=[True, True, True, False], kind="mergesort")
    curve = ["model", "dataset", "head"]
    full = df[np.isclose(df["fraction_dynamic"], 1.0)].set_index(curve)["neg_log_ppl"]
    df["drop"] = [full.get(k, np.nan) - v for k, v in zip(df[curve].itertuples(index=False, name=None),
                                                           df["neg_log_ppl"])]
    return df.reset_index(drop=True)
