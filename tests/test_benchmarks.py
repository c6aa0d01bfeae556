"""The benchmark script's own measuring code (the figures themselves come from `make bench`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_child_peak_rss_is_not_the_parents():
    """A subprocess's ru_maxrss also carries its parent's peak (fork/vfork + exec); the memory
    benchmark's children report their own VmHWM instead."""
    ballast = bytearray(800 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: 800 MB resident
    code = (
        "import json, resource, sys; sys.path.insert(0, 'benchmarks'); import run; "
        "print(json.dumps([run._peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    own, ru_maxrss = json.loads(out.stdout.strip().splitlines()[-1])
    del ballast
    # the child itself (python, torch, papa: a few hundred MB) is far smaller than the ballast
    assert 50 < own < 600, (own, ru_maxrss)


@pytest.fixture
def compare_runs(monkeypatch):
    """benchmarks/compare_runs.py, imported as a module."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import compare_runs

    return compare_runs


def test_compare_runs_matches_rows_on_keys_and_reports_differences(tmp_path, compare_runs):
    """benchmarks/compare_runs.py: rows matched on the table's keys whatever their order, the
    largest difference per result column, rows present on one side only, per-rule times."""
    import pandas as pd

    def summary(means, ci):
        return pd.DataFrame(
            {
                "model": "m",
                "task": "t",
                "constants": "average",
                "selection": "lambda",
                "fraction_dynamic": [1.0, 0.5, 0.0][: len(means)],
                "metric": "accuracy",
                "mean": means,
                "ci95": ci,
            }  # fmt: skip
        )

    for run, means, ci in (("a", [0.9, 0.8, 0.7], [0.01, 0.01, 0.01]), ("b", [0.85, 0.8], [0.01, 0.02])):
        (tmp_path / run / "tables").mkdir(parents=True)
        df = summary(means, ci)
        (df.iloc[::-1] if run == "b" else df).to_parquet(tmp_path / run / "tables" / "summary.parquet")  # order differs
    bench = tmp_path / "a" / "benchmarks" / "probe" / "m"
    bench.mkdir(parents=True)
    for i, s in enumerate((3.0, 5.0)):
        (bench / f"{i}.tsv").write_text(f"s\th:m:s\n{s}\t0:00:0{int(s)}\n")
    res = compare_runs.compare(tmp_path / "a", tmp_path / "b")["tables"]["summary"]
    assert (res["matched"], res["only_a"], res["only_b"]) == (2, 1, 0)
    assert res["columns"]["mean"]["max_abs"] == pytest.approx(0.05)
    assert res["columns"]["ci95"]["max_abs"] == pytest.approx(0.01)
    assert res["means_within_seed_ci95"] == "1/2"  # 0.05 apart is outside both runs' ci95
    times = compare_runs.rule_times(tmp_path / "a").set_index("rule")
    assert times.loc["probe", "jobs"] == 2 and times.loc["probe", "total_s"] == 8.0


def test_compare_runs_reads_a_stopped_runs_probe_logs(tmp_path, compare_runs):
    """--probe-logs: the last epoch of every seed, parsed from the probe stage's log lines, against a
    finished run's probe table (earlier epochs and other settings ignored)."""
    import pandas as pd

    log = tmp_path / "partial" / "logs" / "probe" / "m" / "t" / "average" / "lambda" / "fraction_dynamic=0.5.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "x papa.probe INFO seed 0 epoch 1/2: train loss 0.7, accuracy 0.5000, f1 0.4000 (9 examples/s, ETA 1 s)\n"
        "x papa.probe INFO seed 0 epoch 2/2: train loss 0.6, accuracy 0.8000, f1 0.7000 (9 examples/s, ETA 0 s)\n"
        "x papa.probe INFO seed 1 epoch 2/2: train loss 0.6, accuracy 0.9000, f1 0.8000 (9 examples/s, ETA 0 s)\n"
    )
    scores = compare_runs.probe_log_scores(tmp_path / "partial")
    assert sorted(zip(scores["seed"], scores["metric"], scores["score"])) == [
        (0, "accuracy", 0.8), (0, "f1", 0.7), (1, "accuracy", 0.9), (1, "f1", 0.8)
    ]  # fmt: skip
    tables = tmp_path / "finished" / "tables"
    tables.mkdir(parents=True)
    key = {"model": "m", "task": "t", "constants": "average", "selection": "lambda", "fraction_dynamic": 0.5}
    pd.DataFrame(
        [
            {**key, "seed": s, "epoch": e, "metric": "accuracy", "score": v}
            for s, e, v in ((0, 1, 0.1), (0, 2, 0.75), (1, 2, 0.9))
        ]  # fmt: skip
    ).to_parquet(tables / "probe.parquet")
    pd.DataFrame([{**key, "metric": "accuracy", "ci95": 0.01}]).to_parquet(tables / "summary.parquet")
    res = compare_runs.compare_probe_logs(tmp_path / "partial", tmp_path / "finished")
    assert (res["settings_compared"], res["seed_scores_compared"]) == (1, 2)
    assert res["max_seed_diff"] == pytest.approx(0.05) and res["max_mean_diff"] == pytest.approx(0.025)
    assert res["means_within_ci95"] == "0/1"
