"""Paper-scale cost of config/paper.yaml's GPU jobs: for the probe and lambda jobs cache sizes, the
strategy this project picks, encoder passes and GPU-hours vs the authors' procedure; for averaging and the
MLM analysis encoder passes and GPU-hours (papa.cost).

    python benchmarks/paper_cost.py [--config config/paper.yaml [more.yaml ...]] [--disk-budget-gb 500]

Throughput: each paper encoder's own, measured on an H100 (benchmarks/gpu_cost.py, kept in
benchmarks/reference/gpu_cost-h100.json: its feature pass at N = 64/128/256, fp32, batch 64, and
its lambda and trained-constant gradient steps at batch 16, in feature passes; gpu_cost-h100-tf32.json
for a config with `precision: tf32`); for a config with `compile` other than eager, the gradient steps
benchmarks/gpu_compile.py timed in that mode run faster by their measured speed-up (`--compiled`, default
benchmarks/reference/gpu_compile-h100-tf32.json: BERT-base and DeBERTa, tf32; the other encoders keep
their eager cost); `--measured ''`
instead uses the earlier assumption: the H100 forward of a BERT-base-shaped encoder (stock sdpa,
batch 64, N = 128, benchmarks/reference/gpu_check-h100.json) scaled linearly by padded length and
non-embedding parameters (large = 302M / 85M), a gradient pass at two forward passes.
The jobs are the workflow's own (snakemake --summary). Writes benchmarks/results/paper_cost.parquet
(one row per job) and prints a table per model and task.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import pandas as pd
from snakemake.utils import update_config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from papa.checks import ConfigError, check_config_files, validate_config  # noqa: E402
from papa.cost import DATASET_SOURCES, Throughput, estimate, workflow_jobs  # noqa: E402
from papa.io import atomic_path  # noqa: E402


def measured_tokens_per_s(path: Path) -> float:
    t = json.loads(path.read_text())["timings"]
    return t["batch"] * t["N"] / (t["stock_sdpa_ms"] / 1000)


def read_configs(paths: list[str]) -> tuple[dict, dict]:
    """The config files merged as Snakemake merges ``--configfile a.yaml b.yaml``, and the settings the workflow
    reads from them (`validate_config`: defaults filled in), each file checked first as the workflow checks it
    (`check_config_files`: a YAML or JSON mapping, no key given twice, an overlay after the file it updates); a
    `ConfigError` names what to change."""
    for path in paths:
        if not Path(path).is_file():
            what = "a folder" if Path(path).is_dir() else "not there"
            raise ConfigError(f"{path} is {what}: give config files (config/paper.yaml, or it and an overlay after it)")
    loaded = check_config_files(paths)  # each file read once, as the workflow reads it
    if unread := [p for p in paths if p not in {path for path, _ in loaded}]:  # a .json file that is no JSON
        raise ConfigError(f"{unread[0]} does not read as JSON: give a JSON or YAML config")
    config = {}
    for _, read in loaded:
        update_config(config, read)
    return config, validate_config(copy.deepcopy(config))


def _unreadable(option: str, path, e: Exception, give: str) -> str:
    """The one line paper_cost.py stops with when ``option``'s file can not be read as its JSON."""
    if isinstance(e, KeyError):
        why = f"it has no {e} field"
    else:
        why = f"it is not JSON ({e})" if isinstance(e, json.JSONDecodeError) else str(e)
    return f"paper_cost.py: {option} {path}: {why}; give {give}"


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])  # its first paragraph (a line stops mid-way)
    ap.add_argument(
        "--config",
        nargs="+",
        default=[str(ROOT / "config/paper.yaml")],
        help="config file(s), later ones updating earlier ones as Snakemake merges them (config/paper.yaml "
        "config/paper-authors.yaml: the authors' behaviour over the paper's grid)",
    )
    ap.add_argument(
        "--disk-budget-gb",
        type=float,
        default=500.0,
        help="node-local scratch a probe job may fill, in GiB (x 1024 MiB; cache.disk_budget_mb null = the free space "
        "there)",
    )
    ap.add_argument("--reference", default=str(ROOT / "benchmarks/reference/gpu_check-h100.json"))
    ap.add_argument(
        "--measured",
        default=None,
        help="benchmarks/gpu_cost.py's JSON: per-model throughput ('' = the scaled --reference alone); default: "
        "benchmarks/reference/gpu_cost-h100.json, or gpu_cost-h100-tf32.json for a config with precision: tf32",
    )
    ap.add_argument(
        "--compiled",
        default=str(ROOT / "benchmarks/reference/gpu_compile-h100-tf32.json"),
        help="benchmarks/gpu_compile.py's JSON: the gradient steps' speed-ups under the config's compile mode",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/paper_cost.parquet"))
    args = ap.parse_args(argv)
    # what the user gives (the config files, the measured JSON files) is read before anything is estimated, and a
    # mistake in it stops here with one line naming the option and what to give, not a traceback
    try:
        config, settings = read_configs(args.config)  # precision and compile as the workflow reads them (defaults)
    except (ConfigError, OSError, UnicodeDecodeError) as e:  # ConfigError: a misspelled key, an overlay given first
        sys.exit(f"paper_cost.py: --config {' '.join(args.config)}: {e}")
    try:
        tps = measured_tokens_per_s(Path(args.reference))
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(_unreadable("--reference", args.reference, e, "benchmarks/gpu_check.py's JSON (gpu_check-h100.json)"))
    if args.measured is None:
        tf32 = settings["precision"] == "tf32"
        args.measured = str(ROOT / f"benchmarks/reference/gpu_cost-h100{'-tf32' if tf32 else ''}.json")
    try:
        measured = Throughput.load(args.measured) if args.measured else None
    except (OSError, ValueError, KeyError) as e:
        sys.exit(_unreadable("--measured", args.measured, e, "benchmarks/gpu_cost.py's JSON, or '' for the assumption"))
    mode = settings["compile"]
    if measured and mode != "eager":
        try:
            measured = measured.compiled(args.compiled, mode)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(_unreadable("--compiled", args.compiled, e, "benchmarks/gpu_compile.py's JSON"))
    try:
        jobs = workflow_jobs(args.config, ROOT)
    except RuntimeError as e:  # the workflow's own refusal of the configs (its message names what to change)
        sys.exit(f"paper_cost.py: {e}")
    df = estimate(config, jobs.probes, jobs.lambdas, tps, args.disk_budget_gb * 1024, measured,
                  average_jobs=jobs.averages, mlm_jobs=jobs.mlm)  # fmt: skip
    with atomic_path(args.out) as tmp:  # an interrupted write leaves no table that looks whole
        df.to_parquet(tmp, index=False)

    probes = df[df.stage == "probe"]
    per_task = probes.groupby(["model", "task"], sort=False).agg(
        jobs=("jobs", "sum"),
        cache_gib=("cache_mb", lambda s: s.max() / 1024),  # cache_mb is MiB (papa.probe.MB)
        strategy=("strategy", lambda s: "/".join(sorted(set(s) - {"live"}))),
        passes_ours_M=("passes_ours", lambda s: s.sum() / 1e6),
        passes_authors_M=("passes_authors", lambda s: s.sum() / 1e6),
        gpu_h_ours=("gpu_h_ours", "sum"),
        gpu_h_authors=("gpu_h_authors", "sum"),
    )
    pd.set_option("display.width", 200)
    assumed = sorted(set(df.loc[df.throughput == "assumed", "model"]))
    scaled = (f"{tps:,.0f} padded tokens/s forward for an 85M-parameter encoder on one H100 (from "
              f"{Path(args.reference).name}), scaled by length and parameters")  # fmt: skip
    print(
        f"throughput: measured per model ({measured.source})" if measured else "throughput: assumed",
        f"; for {', '.join(assumed)}: {scaled}" if measured and assumed else "" if measured else f", {scaled}",
        f"; disk budget {args.disk_budget_gb:g} GiB; cache.budget_mb {config.get('cache', {}).get('budget_mb')}",
        sep="",
    )
    print(per_task.round(2).to_string())
    other = df[df.stage.isin(["average", "mlm"])]
    if len(other):
        per_model = other.groupby(["stage", "model"], sort=False).agg(
            jobs=("jobs", "sum"), passes_M=("passes_ours", lambda s: s.sum() / 1e6), gpu_h=("gpu_h_ours", "sum"),
            longest_h=("gpu_h_ours", "max"), throughput=("throughput", lambda s: "/".join(sorted(set(s)))),
        )  # fmt: skip
        print("\naveraging (every corpus, kind and N) and the MLM analysis:")
        print(per_model.round(2).to_string())
    if mode != "eager":
        grad = df[df.compile_speedup != 1.0].groupby("model").compile_speedup.agg(["min", "max"]).round(2)
        print(f"\ncompile {mode}: gradient steps faster by (others at their eager cost):\n{grad.to_string()}")
    total = df.groupby("stage")[["passes_ours", "passes_authors", "gpu_h_ours", "gpu_h_authors"]].sum()
    total.loc["all"] = total.sum()
    total[["passes_ours", "passes_authors"]] /= 1e6
    print("\ntotals (passes in millions of example-passes):")
    print(total.round(1).to_string())
    print("\nstrategies of the probe jobs:", probes.strategy.value_counts().to_dict())
    risky = df[df.runtime_share > 0.75].sort_values("runtime_share", ascending=False)
    cols = ["stage", "model", "task", "constants", "fraction_dynamic", "jobs", "gpu_h_ours", "runtime_min"]
    cols += ["runtime_share"]
    print(f"\njobs estimated above 75% of their runtime limit (a slower GPU would time them out): {len(risky)}")
    if len(risky):
        print(risky[cols].round(2).to_string(index=False))
    top = df.loc[df.runtime_share.idxmax()]
    print(
        f"the fullest: {top.stage} {top.model} {top.task} {top.constants}, {top.gpu_h_ours / top.jobs:.1f} GPU-h "
        f"a job ({top.jobs} job{'s' if top.jobs > 1 else ''}) of {top.runtime_min / 60:g} h ({top.runtime_share:.0%})"
    )
    print("\n" + DATASET_SOURCES)
    return df


if __name__ == "__main__":
    main()
