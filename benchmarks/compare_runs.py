"""Compare two finished runs of one config (e.g. CUDA vs CPU): their tables, and each rule's time.

    python benchmarks/compare_runs.py RESULTS_A RESULTS_B [--out FILE.json]
    python benchmarks/compare_runs.py --times RESULTS          # per-rule times of one run
    python benchmarks/compare_runs.py --probe-logs PARTIAL FINISHED   # a run stopped before `aggregate`

``RESULTS_*`` are ``results:`` folders of finished runs (``tables/*.parquet``, ``benchmarks/``).
For every table both runs have, rows are matched on the table's key columns (the settings a row
stands for: model, task, fraction_dynamic, seed, ...) and every other numeric column is compared:
the largest and the mean absolute difference. Scores are trained, so two devices agree on them only
up to the training noise: for ``summary`` the report also counts the rows whose mean differs by less
than the seed spread (the larger of the two runs' ``ci95``); ``lambdas`` are compared by the
Spearman correlation of each (model, task, constants)'s lambdas, ``patterns`` (no training: plain
statistics of averaged matrices) by absolute difference alone.

A run stopped before its tables (``--probe-logs``) is compared through its probe jobs' logs: the
score of every seed's last epoch (`probe_log_scores`, four decimals as logged) against the finished
run's probe table, per (task, constants, selection, fraction_dynamic, metric): the largest per-seed
difference and whether the seed means differ by less than the finished run's ``ci95``.

Per-rule times come from the rules' ``benchmark:`` files (Snakemake's ``s`` column: the job's wall
time, start-up included): jobs, total, median and largest seconds per rule.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from papa.io import UnreadableFileError, read_parquet, write_text  # noqa: E402 - checks the pages' checksums, names a corrupt file
from papa.layout import log_path, parse_result  # noqa: E402
from papa.tables import LAMBDAS_KEY, MLM_KEY, PROBE_KEY, RUN_KEY, SUMMARY_KEY, last_epochs  # noqa: E402

# The columns that say what a row stands for (the library's table keys); every other numeric column
# is a result. Columns derived from results (a lambda's rank, a probe's training loss) are results.
KEYS = {
    "summary": SUMMARY_KEY,
    "probe": PROBE_KEY,
    "lambdas": LAMBDAS_KEY,
    "mlm": MLM_KEY,
    "patterns": ["model", "corpus", "N", "attention", "layer", "head"],
    "constant_kinds": ["model", "task", "constants", "metric"],
}


class NothingToCompare(ValueError):
    """A folder given to compare_runs.py that is not there or lacks what the comparison reads: an empty comparison
    would read as two runs that agree, so main stops on it with this message (exit 1)."""


def check_folder(folder: str | Path, needs: str) -> Path:
    """``folder``, or a `NothingToCompare` when it is not a folder or holds nothing for ``needs``: ``"tables"`` (a
    finished run: ``tables/*.parquet``), ``"probe tables"`` (``tables/probe.parquet`` and ``summary.parquet``),
    ``"benchmarks"`` (``benchmarks/**/*.tsv``) or ``"probe logs"`` (`probe_logs`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise NothingToCompare(f"{folder} is {'a file' if folder.exists() else 'not there'}: give a results folder")
    if needs == "tables" and not any((folder / "tables").glob("*.parquet")):
        raise NothingToCompare(f"{folder} holds no tables/*.parquet: give the results folder of a finished run (for a "
                               f"run stopped before aggregate: --probe-logs PARTIAL FINISHED)")  # fmt: skip
    if needs == "probe tables":
        missing = [n for n in ("probe", "summary") if not (folder / "tables" / f"{n}.parquet").is_file()]
        if missing:
            raise NothingToCompare(f"{folder} holds no tables/{' or '.join(missing)}.parquet: give a finished run's "
                                   f"results folder second (--probe-logs PARTIAL FINISHED)")  # fmt: skip
    if needs == "benchmarks" and not any((folder / "benchmarks").rglob("*.tsv")):
        raise NothingToCompare(f"{folder} holds no benchmarks/ of its jobs (benchmarks/<rule>/...tsv): give a results "
                               f"folder of a run")  # fmt: skip
    if needs == "probe logs" and not probe_logs(folder):
        raise NothingToCompare(f"{folder} holds no probe logs ({log_path('', 'probe').lstrip('/')}, or "
                               f"{log_path('', 'probe_trained').lstrip('/')} of trained constants): give the stopped "
                               f"run's results folder first")  # fmt: skip
    return folder


def keys_of(name: str, df: pd.DataFrame) -> list[str]:
    """``KEYS[name]`` (those ``df`` has), else every non-float column."""
    if name in KEYS:
        return [k for k in KEYS[name] if k in df.columns]
    return [c for c in df.columns if not pd.api.types.is_float_dtype(df[c])]


def compare_table(name: str, a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """Rows matched on the keys; per numeric result column, the max and mean |a - b|."""
    keys = keys_of(name, a)
    m = a.merge(b, on=keys, how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"]
    out: dict = {
        "keys": keys,
        "rows_a": len(a),
        "rows_b": len(b),
        "matched": len(both),
        "only_a": int((m["_merge"] == "left_only").sum()),
        "only_b": int((m["_merge"] == "right_only").sum()),
        "columns": {},
    }
    for c in a.columns:
        if c in keys or c not in b.columns or not pd.api.types.is_numeric_dtype(a[c]) or a[c].dtype == bool:
            continue
        d = (both[f"{c}_a"].astype(float) - both[f"{c}_b"].astype(float)).abs()
        out["columns"][c] = {
            "max_abs": float(d.max()) if len(d) else None,
            "mean_abs": float(d.mean()) if len(d) else None,
        }
    if name == "summary" and {"mean_a", "ci95_a", "ci95_b"} <= set(both.columns):
        spread = np.maximum(both["ci95_a"].fillna(0), both["ci95_b"].fillna(0))
        within = (both["mean_a"] - both["mean_b"]).abs() <= spread
        out["means_within_seed_ci95"] = f"{int(within.sum())}/{len(both)}"
    if name == "lambdas" and len(both):
        rho = [
            g["lambda_a"].rank().corr(g["lambda_b"].rank())
            for _, g in both.groupby(["model", "task", "constants"])
            if len(g) > 1
        ]
        out["lambda_spearman"] = {"min": float(np.nanmin(rho)), "median": float(np.nanmedian(rho)), "groups": len(rho)}
    return out


def compare(a: str | Path, b: str | Path) -> dict:
    """Every table the two results folders both have, compared (`compare_table`); `NothingToCompare` when they have
    none in common."""
    ta, tb = Path(a) / "tables", Path(b) / "tables"
    names_a = {p.stem for p in ta.glob("*.parquet")}
    names_b = {p.stem for p in tb.glob("*.parquet")}
    res = {"a": str(a), "b": str(b), "only_in_a": sorted(names_a - names_b), "only_in_b": sorted(names_b - names_a)}
    if not names_a & names_b:  # an empty comparison read as agreement (review AX)
        raise NothingToCompare(f"{a} and {b} have no table in common ({', '.join(sorted(names_a))} against "
                               f"{', '.join(sorted(names_b))}): give two runs' results folders")  # fmt: skip
    res["tables"] = {
        n: compare_table(n, read_parquet(ta / f"{n}.parquet"), read_parquet(tb / f"{n}.parquet"))
        for n in sorted(names_a & names_b)
    }
    return res


def rule_times(results: str | Path) -> pd.DataFrame:
    """Per rule: jobs, total, median and largest wall seconds (``<results>/benchmarks/<rule>/...tsv``; the rule as
    `papa.layout.parse_result` reads it: rule probe_trained's jobs lie under ``benchmarks/probe/`` too, the folder
    of a file of no job layout, aggregate's or plot's, else)."""
    root = Path(results) / "benchmarks"
    rows = []
    for tsv in sorted(root.rglob("*.tsv")):
        rel = tsv.relative_to(root)
        job = parse_result(tsv, results)
        rule = job.rule if job is not None else rel.parts[0] if len(rel.parts) > 1 else rel.stem
        s = pd.read_csv(tsv, sep="\t")["s"]
        rows.append({"rule": rule, "s": float(s.iloc[0])})
    if not rows:
        return pd.DataFrame(columns=["rule", "jobs", "total_s", "median_s", "max_s"])
    df = pd.DataFrame(rows)
    return (
        df.groupby("rule")["s"]
        .agg(jobs="size", total_s="sum", median_s="median", max_s="max")
        .round(1)
        .reset_index()
        .sort_values("total_s", ascending=False)
    )


# "train loss X; validation <metric> <score>, ..." (before 2026-11-30: "train loss X, <metric> <score>, ...")
_LOG_LINE = re.compile(r"seed (\d+) epoch (\d+)/(\d+): train loss [-\d.naif]+(?:, |; validation )(.*?) \(")


def probe_logs(results: str | Path) -> dict:
    """The logs of the probe jobs under ``results`` (`papa.layout`: rule probe's ``logs/probe/<model>/<task>/
    <constants>/<selection>/fraction_dynamic=<f>.log``, every seed of a run, and rule probe_trained's
    ``.../fraction_dynamic=<f>/seed<s>.log``, one seed each), by path, with what each is the log of
    (`papa.layout.ResultPath`)."""
    found = {}
    for log in sorted((Path(results) / "logs" / "probe").rglob("*.log")):
        f = parse_result(log, results)
        if f is not None and f.stage == "probe" and f.file == "log":
            found[log] = f
    return found


def probe_log_scores(results: str | Path) -> pd.DataFrame:
    """The last epoch's scores of every seed from the probe jobs' logs (`probe_logs`; the probe stage's progress
    lines)."""
    rows = []
    for log, f in probe_logs(results).items():
        model, task, constants, selection, frac = f.model, f.task, str(f.constants), f.selection, f.fraction_dynamic
        for m in _LOG_LINE.finditer(log.read_text()):
            seed, epoch, epochs = map(int, m.groups()[:3])
            if epoch != epochs:
                continue
            for item in m.group(4).split(", "):
                metric, score = item.rsplit(" ", 1)
                rows.append(
                    {"model": model, "task": task, "constants": constants, "selection": selection,
                     "fraction_dynamic": frac, "seed": seed, "metric": metric, "score": float(score)}
                )  # fmt: skip
    return pd.DataFrame(rows)


def compare_probe_logs(partial: str | Path, finished: str | Path) -> dict:
    """`probe_log_scores` of ``partial`` against ``finished``'s probe and summary tables."""
    logs = probe_log_scores(partial)
    if logs.empty:
        raise NothingToCompare(f"{partial}'s probe logs hold no finished epoch of any seed: nothing to compare yet")
    last = last_epochs(read_parquet(Path(finished) / "tables" / "probe.parquet"))
    m = logs.merge(last[RUN_KEY + ["score"]], on=RUN_KEY, suffixes=("_a", "_b"))
    summary = read_parquet(Path(finished) / "tables" / "summary.parquet")
    m["diff"] = (m["score_a"] - m["score_b"]).abs()
    g = m.groupby(SUMMARY_KEY).agg(
        seeds=("seed", "size"), mean_a=("score_a", "mean"), mean_b=("score_b", "mean"), max_seed_diff=("diff", "max")
    )
    g = g.reset_index().merge(summary[SUMMARY_KEY + ["ci95"]], on=SUMMARY_KEY, how="left")
    within = (g["mean_a"] - g["mean_b"]).abs() <= g["ci95"].fillna(0)
    return {
        "partial": str(partial),
        "finished": str(finished),
        "jobs_logged": int(logs.groupby([k for k in SUMMARY_KEY if k != "metric"]).ngroups) if len(logs) else 0,
        "settings_compared": len(g),
        "seed_scores_compared": len(m),
        "max_seed_diff": float(g["max_seed_diff"].max()) if len(g) else None,
        "max_mean_diff": float((g["mean_a"] - g["mean_b"]).abs().max()) if len(g) else None,
        "means_within_ci95": f"{int(within.sum())}/{len(g)}",
        "rows": g.round(4).to_dict(orient="records"),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="one results folder (--times) or two (compare)")
    ap.add_argument("--times", action="store_true", help="print per-rule times of each folder")
    ap.add_argument("--probe-logs", action="store_true", help="compare a stopped run's probe logs with a finished run")
    ap.add_argument("--out", help="write the comparison as JSON here")
    args = ap.parse_args(argv)
    # a folder that is not there, or lacks what is compared, stops the script (exit 1, the folder named): an empty
    # comparison or table would read as agreement; so does an unreadable table (papa.io names it)
    try:
        if args.times:
            for r in args.results:
                check_folder(r, "benchmarks")
            for r in args.results:
                print(f"# {r}\n{rule_times(r).to_string(index=False)}\n")
            return
        if len(args.results) != 2:
            sys.exit("compare needs two results folders (or --times)")
        a, b = args.results
        if args.probe_logs:
            res = compare_probe_logs(check_folder(a, "probe logs"), check_folder(b, "probe tables"))
        else:
            res = compare(check_folder(a, "tables"), check_folder(b, "tables"))
    except (NothingToCompare, UnreadableFileError, OSError) as e:
        sys.exit(f"compare_runs.py: {e}")
    text = json.dumps(res, indent=2)
    if args.out:
        write_text(args.out, text + "\n")  # an interrupted write leaves the earlier file whole
    print(text)


if __name__ == "__main__":
    main()
