"""The benchmark script's own measuring code (the figures themselves come from `make bench`)."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a fresh Python process importing the benchmark and torch (~3 s): `make test`, not the fast tier
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


def test_peak_rss_without_proc_reads_ru_maxrss_in_the_platforms_unit(monkeypatch):
    """Without /proc (macOS), the peak is getrusage's ru_maxrss, which macOS gives in bytes and Linux in KiB: a Mac's
    `make bench` reported 1024 times its peak memory."""
    import resource
    import types

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import run

    def no_proc(self, *args, **kwargs):
        raise FileNotFoundError(self)

    monkeypatch.setattr(run.Path, "read_text", no_proc)
    peak = 300 * 2**20  # 300 MiB
    for platform, ru_maxrss in (("darwin", peak), ("linux", peak // 1024)):
        monkeypatch.setattr(run.sys, "platform", platform)
        monkeypatch.setattr(resource, "getrusage", lambda who, r=ru_maxrss: types.SimpleNamespace(ru_maxrss=r))
        assert run._peak_rss_mb() == 300, platform


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
    # rule probe_trained's jobs lie under benchmarks/probe/ too: they were counted as rule probe's (review BC)
    job = tmp_path / "a" / "benchmarks" / "probe" / "m" / "t" / "average"
    for folder, name, s in (
        ("random", "fraction_dynamic=0.5.tsv", 2.0),
        ("random/fraction_dynamic=0", "seed0.tsv", 4.0),
    ):
        for constants in ("average",) if name.startswith("fraction") else ("average_trained",):
            f = job.parent / constants / folder / name
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(f"s\th:m:s\n{s}\t0:00:0{int(s)}\n")
    times = compare_runs.rule_times(tmp_path / "a").set_index("rule")
    assert times.loc["probe", "jobs"] == 3 and times.loc["probe_trained", "jobs"] == 1
    assert times.loc["probe_trained", "total_s"] == 4.0


def test_compare_runs_reads_a_stopped_runs_probe_logs(tmp_path, compare_runs):
    """--probe-logs: the last epoch of every seed, parsed from the probe stage's log lines (today's "train loss X;
    validation ..." and the older "train loss X, ..."), against a finished run's probe table (earlier epochs and
    other settings ignored)."""
    import pandas as pd

    log = tmp_path / "partial" / "logs" / "probe" / "m" / "t" / "average" / "lambda" / "fraction_dynamic=0.5.log"
    log.parent.mkdir(parents=True)
    log.write_text(
        "x papa.probe INFO seed 0 epoch 1/2: train loss 0.7, accuracy 0.5000, f1 0.4000 (9 examples/s, ETA 1 s)\n"
        "x papa.probe INFO seed 0 epoch 2/2: train loss 0.6, accuracy 0.8000, f1 0.7000 (9 examples/s, ETA 0 s)\n"
        "x papa.probe INFO seed 1 epoch 2/2: train loss 0.6; validation accuracy 0.9000, f1 0.8000 (9 examples/s, "
        "ETA 0 s)\n"
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


def test_compare_runs_reads_the_trained_constants_probe_logs(tmp_path, compare_runs):
    """--probe-logs: rule probe_trained's jobs log one seed each, as .../fraction_dynamic=<f>/seed<s>.log
    (papa.layout); the glob of rule probe's fraction_dynamic=<f>.log never found them, so every trained-constants
    run was left out of the comparison, and a stopped run of trained constants alone had "no probe logs" (review
    AY)."""
    import pandas as pd

    from papa.layout import log_path

    partial, tables = tmp_path / "partial", tmp_path / "finished" / "tables"
    fields = dict(model="m", task="t", selection="lambda", fraction_dynamic="0.5")
    for seed in (0, 1):
        log = Path(log_path(partial, "probe_trained", constants="average_trained@wiki", seed=seed, **fields))
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"x papa.probe INFO seed {seed} epoch 1/1: train loss 0.6; validation accuracy 0.{8 + seed}000 "
                       f"(9 examples/s, ETA 0 s)\n")  # fmt: skip
    assert compare_runs.check_folder(partial, "probe logs") == partial
    fixed = Path(log_path(partial, "probe", constants="average", **fields))
    fixed.parent.mkdir(parents=True)
    fixed.write_text("x papa.probe INFO seed 0 epoch 1/1: train loss 0.6; validation accuracy 0.7000 (9 examples/s)\n")
    scores = compare_runs.probe_log_scores(partial)
    assert sorted(zip(scores["constants"], scores["seed"], scores["score"])) == [
        ("average", 0, 0.7), ("average_trained@wiki", 0, 0.8), ("average_trained@wiki", 1, 0.9)
    ]  # fmt: skip
    assert set(scores["fraction_dynamic"]) == {0.5}
    tables.mkdir(parents=True)
    key = {"model": "m", "task": "t", "selection": "lambda", "fraction_dynamic": 0.5, "epoch": 1, "metric": "accuracy"}
    rows = [("average", 0, 0.7), ("average_trained@wiki", 0, 0.8), ("average_trained@wiki", 1, 0.85)]
    probe = pd.DataFrame([{**key, "constants": c, "seed": s, "score": v} for c, s, v in rows])
    probe.to_parquet(tables / "probe.parquet")
    summary = probe.groupby(["model", "task", "constants", "selection", "fraction_dynamic", "metric"], as_index=False)
    summary.agg(mean=("score", "mean")).assign(ci95=0.01).to_parquet(tables / "summary.parquet")
    res = compare_runs.compare_probe_logs(partial, tmp_path / "finished")
    assert (res["jobs_logged"], res["settings_compared"], res["seed_scores_compared"]) == (2, 2, 3)
    assert res["max_seed_diff"] == pytest.approx(0.05)


def test_compare_runs_probe_log_line_is_the_probes_own(compare_runs):
    """`_LOG_LINE` reads the line papa.probe writes at each epoch's end: the format string of that log call, taken
    from papa/probe.py's source (a copy that has drifted from it would find no score)."""
    import ast

    calls = [
        node.args[0].value
        for node in ast.walk(ast.parse((ROOT / "papa" / "probe.py").read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", None) == "info"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and "train loss" in str(node.args[0].value)
    ]
    assert len(calls) == 1, calls
    line = calls[0] % (2, 3, 3, 0.4567, "accuracy 0.8000, f1 0.7000", 12.5, "ETA 0 s")
    m = compare_runs._LOG_LINE.search(f"2026 papa.probe INFO {line}")
    assert m is not None and m.groups() == ("2", "3", "3", "accuracy 0.8000, f1 0.7000"), line


def test_compare_runs_writes_its_out_file_whole_or_not_at_all(tmp_path, compare_runs, monkeypatch):
    """--out goes through papa.io.atomic_path: a write interrupted half-way leaves the earlier comparison whole (a
    plain write_text left half a JSON file)."""
    import pandas as pd

    for run in ("a", "b"):
        (tmp_path / run / "tables").mkdir(parents=True)
        pd.DataFrame({"model": ["m"], "mean": [0.5]}).to_parquet(tmp_path / run / "tables" / "summary.parquet")
    out = tmp_path / "cmp.json"
    compare_runs.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)])
    before = out.read_text()
    assert json.loads(before)["tables"]["summary"]["matched"] == 1
    real = Path.write_text

    def torn(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(KeyboardInterrupt):
        compare_runs.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)])
    monkeypatch.undo()
    assert out.read_text() == before and [p.name for p in tmp_path.iterdir() if p.is_file()] == ["cmp.json"]


def test_gpu_cost_measures_the_shapes_and_batches_papa_cost_and_paper_yaml_name(monkeypatch):
    """benchmarks/gpu_cost.py writes each paper encoder's shape and the paper run's batch sizes out again (issue 15:
    each concept once, or held equal): its configs have the layers and hidden size of `papa.cost.MODELS` (which
    scales its GPU-hours by them), its feature-pass and averaging batches are config/paper.yaml's."""
    import transformers as tf
    import yaml

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_cost

    from papa.cost import MODELS

    for hub_id, (model_type, keys) in gpu_cost.SHAPES.items():
        config = tf.AutoConfig.for_model(model_type, **keys)
        assert (config.num_hidden_layers, config.hidden_size) == MODELS[hub_id][:2], hub_id
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    assert gpu_cost.FORWARD_BATCH == paper["cache"]["batch_size"]
    assert gpu_cost.AVERAGE_BATCH == paper["averaging"]["batch_size"]


def test_gpu_cost_measures_every_paper_encoder_shape_and_papa_cost_reads_it(tmp_path, monkeypatch):
    """benchmarks/gpu_cost.py on its CPU code path (--tiny: two families, one per patching route) writes what
    `papa.cost.Throughput` reads; its shapes cover `papa.cost.MODELS`. The H100 figures themselves are
    benchmarks/reference/gpu_cost-h100.json."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_cost

    from papa.cost import MODELS, Throughput

    assert set(gpu_cost.SHAPES) == set(MODELS)
    ids = ["bert-base-uncased", "microsoft/deberta-base"]
    argv = ["--tiny", "--device", "cpu", "--reps", "1", "--precision", "tf32", "--out", str(tmp_path), "--models"]
    out = gpu_cost.main([*argv, *ids])
    assert json.loads((tmp_path / "gpu_cost-tf32.json").read_text()) == out and out["tiny"]
    assert out["precision"] == "tf32"
    for hub_id in ids:
        r = out["models"][hub_id]
        assert (r["layers"], r["heads"]) == (2, 4)
        timed = [f"{k}_N{n}" for k in ("forward", "average", "effective") for n in (64, 128, 256)]
        for key in (*timed, "lambda", "trained"):
            assert r[key]["s"] > 0 and r[key]["tokens_per_s"] > 0, key
        assert r["grad_pass_cost"]["lambda"] > 0 and r["grad_pass_cost"]["trained"] > 0
        assert r["deviation_from_fp32"]["max_abs"] == 0.0  # tf32 is CUDA's: the CPU's products stay exact
    with pytest.raises(ValueError, match="tiny shapes"):
        Throughput.load(tmp_path / "gpu_cost-tf32.json")
    t, bert = Throughput(out["models"]), out["models"]["bert-base-uncased"]
    assert t.tokens_per_s("bert-base-uncased", 128) == bert["forward_N128"]["tokens_per_s"]
    assert t.tokens_per_s("bert-base-uncased", 200) == bert["forward_N256"]["tokens_per_s"]  # the nearest N
    assert t.tokens_per_s("FacebookAI/roberta-base", 128) is None
    # averaging in feature passes: the feature pass's rate over averaging's at the same (nearest measured) N
    ratio = bert["forward_N256"]["tokens_per_s"] / bert["effective_N256"]["tokens_per_s"]
    assert t.average_cost("bert-base-uncased", 200, "effective") == pytest.approx(ratio)
    ratio = bert["forward_N64"]["tokens_per_s"] / bert["average_N64"]["tokens_per_s"]
    assert t.average_cost("bert-base-uncased", 64, "average") == pytest.approx(ratio)
    assert t.average_cost("FacebookAI/roberta-base", 64, "average") is None
    # an earlier file without averaging timings (the kept H100 ones): papa.cost assumes
    assert Throughput.load(ROOT / "benchmarks/reference/gpu_cost-h100.json").average_cost(ids[0], 64, "average") is None


@pytest.mark.slow  # 12 s (eager timings and dynamo's graph-break tracing on CPU): a tenth of the fast tier
def test_gpu_compile_code_path_and_its_reference_figures(tmp_path, monkeypatch):
    """benchmarks/gpu_compile.py on its CPU code path (--tiny, eager only: compiling is tests/test_compile.py's)
    writes every timing and how dynamo cuts each step (DeBERTa at Tensor.item(), unless --capture-scalars), its
    --loop runs papa.probe's own loops; the H100 figures it measured are kept, with the finding the config's
    ``compile`` description states (reduce-overhead: BERT-base's steps >= 3x faster)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_compile

    argv = [
        "--tiny",
        "--device",
        "cpu",
        "--reps",
        "1",
        "--modes",
        "eager",
        "--feature-batch",
        "2",
        "--out",
        str(tmp_path),
    ]
    out = gpu_compile.main([*argv, "--models", "bert-base-uncased", "microsoft/deberta-base"])
    assert json.loads((tmp_path / "gpu_compile-tf32.json").read_text()) == out
    for r in out["models"].values():
        for key in ("lambda_batch4_eager", "trained_batch4_eager"):
            assert r[key]["s"] > 0 and r[key]["over_forward"] > 0, key
        assert r["feature_batch2_eager"]["s"] > 0  # the re-encoding feature pass, fixed matrices
    # dynamo cuts DeBERTa's patched forward pass at transformers' Tensor.item() calls; --capture-scalars traces them
    bert, deberta = out["models"]["bert-base-uncased"], out["models"]["microsoft/deberta-base"]
    scalars = gpu_compile.main([*argv, "--capture-scalars", "--models", "microsoft/deberta-base"])
    assert json.loads((tmp_path / "gpu_compile-tf32-scalars.json").read_text()) == scalars
    assert scalars["capture_scalar_outputs"] and not out["capture_scalar_outputs"]
    for step in ("lambda", "trained"):
        cut = deberta[f"{step}_graphs"]
        assert cut["graphs"] > bert[f"{step}_graphs"]["graphs"] and any("item()" in r for r in cut["reasons"]), cut
        traced = scalars["models"]["microsoft/deberta-base"][f"{step}_graphs"]
        assert traced["graphs"] <= bert[f"{step}_graphs"]["graphs"] and not traced["reasons"], traced
    only = gpu_compile.main([*argv, "--no-steps", "--models", "bert-base-uncased"])["models"]["bert-base-uncased"]
    assert only["feature_batch2_eager"]["s"] > 0 and not any(k.startswith(("lambda", "trained")) for k in only)
    loop = gpu_compile.main([*argv, "--loop", "--models", "bert-base-uncased"])["models"]["bert-base-uncased"]
    assert loop["learn_lambdas_eager"]["s"] > 0 and loop["trained_probe_eager"]["s"] > 0
    assert loop["lambda_max_abs_diff"] == 0.0  # eager against eager: the same lambdas (a deterministic CPU run)

    ref = json.loads((ROOT / "benchmarks/reference/gpu_compile-h100-tf32.json").read_text())
    assert ref["device"].startswith("NVIDIA H100") and not ref["tiny"] and ref["precision"] == "tf32"
    bert = ref["models"]["bert-base-uncased"]
    for step in ("lambda", "trained"):
        eager, graphs = bert[f"{step}_batch16_eager"], bert[f"{step}_batch16_reduce-overhead"]
        assert eager["s"] / graphs["s"] >= 3 and graphs["grad_deviation"] < 1e-3, step
    looped = json.loads((ROOT / "benchmarks/reference/gpu_compile-loop-h100-tf32.json").read_text())
    lam = looped["models"]["bert-base-uncased"]
    assert lam["learn_lambdas_reduce-overhead"]["s"] > 0 and lam["lambda_max_abs_diff"] < lam["lambda_spread"] / 10


def test_cost_estimate_under_compile_takes_each_steps_measured_speedup(tmp_path):
    """Throughput.compiled: the gradient steps gpu_compile.py timed in the config's mode cost the eager cost over
    their measured speed-up (H100 reference: BERT-base's reduce-overhead steps); steps it did not time in that
    mode (DeBERTa-large's trained one), models it did not time and feature passes keep their cost."""
    import yaml

    from papa.cost import Throughput, estimate

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    base = Throughput.load(ROOT / "benchmarks/reference/gpu_cost-h100-tf32.json")
    ref = ROOT / "benchmarks/reference/gpu_compile-h100-tf32.json"
    steps = json.loads(ref.read_text())["models"]
    fast = base.compiled(ref, "reduce-overhead")
    for kind in ("lambda", "trained"):
        measured = (
            steps["bert-base-uncased"][f"{kind}_batch16_eager"]["s"]
            / steps["bert-base-uncased"][f"{kind}_batch16_reduce-overhead"]["s"]
        )
        assert measured >= 3 and fast.speedup("bert-base-uncased", kind) == pytest.approx(measured)
        assert fast.grad_pass_cost("bert-base-uncased", kind) == pytest.approx(
            base.grad_pass_cost("bert-base-uncased", kind) / measured
        )
        assert fast.speedup("FacebookAI/roberta-base", kind) == 1.0  # not timed under compile
        assert fast.grad_pass_cost("FacebookAI/roberta-base", kind) == base.grad_pass_cost(
            "FacebookAI/roberta-base", kind
        )
    assert "trained_batch16_reduce-overhead" not in steps["microsoft/deberta-large"]
    assert fast.speedup("microsoft/deberta-large", "trained") == 1.0
    assert base.compiled(ref, "eager").models == base.models
    assert (
        base.speedup("bert-base-uncased", "lambda") == 1.0 and "compile_speedup" not in base.models["bert-base-uncased"]
    )

    probes = [("bert-base", "cola", "average", "lambda", 0.5), ("bert-base", "cola", "average_trained", "lambda", 0)]
    lambdas = [("bert-base", "cola", "average")]
    eager = estimate(paper, probes, lambdas, 2e5, 500 * 1024, base).set_index(["stage", "constants"])
    compiled = estimate(paper, probes, lambdas, 2e5, 500 * 1024, fast).set_index(["stage", "constants"])
    for row, kind in ((("lambda", "average"), "lambda"), (("probe", "average_trained"), "trained")):
        assert compiled.loc[row, "compile_speedup"] == pytest.approx(fast.speedup("bert-base-uncased", kind))
        assert compiled.loc[row, "gpu_h_ours"] * compiled.loc[row, "compile_speedup"] == pytest.approx(
            eager.loc[row, "gpu_h_ours"]
        )
    feature = ("probe", "average")  # fixed matrices: a feature pass, no gradient step
    assert compiled.loc[feature, "compile_speedup"] == 1.0
    assert compiled.loc[feature, "gpu_h_ours"] == eager.loc[feature, "gpu_h_ours"]

    tiny = tmp_path / "tiny.json"
    tiny.write_text(json.dumps({"tiny": True, "models": {}}))
    with pytest.raises(ValueError, match="tiny"):
        base.compiled(tiny, "default")


def test_cost_of_averaging_and_the_mlm_analysis():
    """papa.cost.estimate's averaging rows cost the corpus's train split (drawn down to the config's caps) at the
    measured averaging cost, or at `AVERAGE_PASS_COST` feature passes plus `EFFECTIVE_HEAD_S` a head scaled by
    (N / 128)^2 for effective attention; its MLM rows the lambdas' gradient passes at their eager cost (compile does
    not reach rule mlm) and per fraction a probe's training and scoring passes; each against its rule's limit.
    The assumed constants are what benchmarks/reference/gpu_check-h100-effective.json measured."""
    import yaml

    from papa.cost import AVERAGE_PASS_COST, EFFECTIVE_HEAD_S, GRAD_PASS_COST, Throughput, estimate, gpu_hours

    t = json.loads((ROOT / "benchmarks/reference/gpu_check-h100-effective.json").read_text())
    timings = t["timings"]  # a BERT-base-shaped encoder, N 128; seconds an example below
    sdpa_s = timings["stock_sdpa_ms"] / 1e3 / timings["batch"]  # the feature pass
    average_s = timings["stock_eager_ms"] / 1e3 / timings["batch"] / timings["averaging_vs_eager_output_attentions"]
    effective_s = 1 / t["effective_attention"]["average_attention_effective_bert_base_N128_examples_per_s"]
    assert AVERAGE_PASS_COST == pytest.approx(average_s / sdpa_s, abs=0.005)
    assert EFFECTIVE_HEAD_S == pytest.approx((effective_s - average_s) / 144, rel=0.005)

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["averaging"]["max_examples"] = 100_000
    paper["resources"]["average_attention"]["runtime"] = 100
    tps = {"forward_N128": {"tokens_per_s": 2e5}, "forward_N256": {"tokens_per_s": 1e5}}
    measured = Throughput(
        {
            "bert-base-uncased": {**tps, "average_N256": {"tokens_per_s": 5e4}, "grad_pass_cost": {"lambda": 3.0}},
            "microsoft/deberta-large": tps,
        }
    )
    # as `Throughput.compiled` leaves it: the lambda steps twice as fast under the config's compile
    fast = copy.deepcopy(measured.models)
    fast["bert-base-uncased"].update(grad_pass_cost={"lambda": 1.5}, compile_speedup={"lambda": 2.0})
    fast = Throughput(fast)
    averages = [("bert-base", "mnli", 256, "average"), ("deberta-large", "mnli", 256, "effective"),
                ("deberta-large", "cola", 64, "average"), ("roberta-base", "sst2", 64, "effective")]  # fmt: skip
    mlm = [("bert-base", "wikitext103", 128), ("roberta-base", "wikitext103", 128)]
    for throughput in (measured, fast):
        df = estimate(paper, [], [], 2e5, None, throughput, average_jobs=averages, mlm_jobs=mlm)
        df = df.set_index(["stage", "model", "task", "N"])
        assert len(df) == len(averages) + len(mlm)
        bert = df.loc[("average", "bert-base", "mnli", 256)]  # measured: 2 feature passes an example
        assert bert.passes_ours == 100_000 and bert.throughput == "measured" and bert.constants == "average"
        assert bert.gpu_h_ours == pytest.approx(2 * 100_000 * 256 / 1e5 / 3600)
        assert bert.runtime_min == 100 and bert.runtime_share == pytest.approx(bert.gpu_h_ours * 60 / 100)
        large = df.loc[("average", "deberta-large", "mnli", 256)]  # the feature pass measured, effective assumed
        per_pass = 256 / 1e5
        extra = EFFECTIVE_HEAD_S * 24 * 16 * (256 / 128) ** 2
        assert large.throughput == "measured forward" and large.passes_ours == 100_000
        assert large.gpu_h_ours == pytest.approx((AVERAGE_PASS_COST * per_pass + extra) * 100_000 / 3600)
        cola = df.loc[("average", "deberta-large", "cola", 64)]  # CoLA's 8,551 training sentences, N 64 (nearest: 128)
        assert cola.passes_ours == 8_551
        assert cola.gpu_h_ours == pytest.approx(AVERAGE_PASS_COST * 8_551 * 64 / 2e5 / 3600)
        roberta = df.loc[("average", "roberta-base", "sst2", 64)]  # not measured: the scaled assumption
        assert roberta.throughput == "assumed"
        per_pass = gpu_hours(1, 64, 85e6, 2e5) * 3600
        extra = EFFECTIVE_HEAD_S * 12 * 12 * (64 / 128) ** 2
        assert roberta.gpu_h_ours == pytest.approx((AVERAGE_PASS_COST * per_pass + extra) * 67_349 / 3600)
        # MLM: paper.yaml's 20,000 training rows, 2 epochs, 3,000 scored, 5 fractions, a probe per seed (3) at each
        m = df.loc[("mlm", "bert-base", "wikitext103", 128)]
        grad, forward = 2 * 20_000, 5 * 3 * (2 * 20_000 + 3_000)
        assert m.passes_ours == grad + forward == 685_000 and m.runtime_min == 720 and m.throughput == "measured"
        assert m.gpu_h_ours == pytest.approx((3.0 * grad + forward) * 128 / 2e5 / 3600)  # eager under compile
        assert m.compile_speedup == 1.0
        r = df.loc[("mlm", "roberta-base", "wikitext103", 128)]
        assert r.gpu_h_ours == pytest.approx(gpu_hours(GRAD_PASS_COST * grad + forward, 128, 85e6, 2e5))
    paper["analyses"]["mlm"]["head"] = "pretrained"  # no probe to train: the lambdas and the scoring alone
    df = estimate(paper, [], [], 2e5, None, measured, mlm_jobs=mlm).set_index(["stage", "model"])
    assert df.loc[("mlm", "bert-base")].passes_ours == 2 * 20_000 + 5 * 3_000


def test_cost_estimate_counts_the_examples_a_config_draws():
    """A dataset's ``max_train``/``max_validation`` and a stage's own ``max_train`` (the MLM analysis's ``max_eval``)
    draw the published splits down: the probe and lambda jobs, averaging over the dataset and the MLM analysis pass
    over what is drawn."""
    import yaml

    from papa.cost import estimate

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["datasets"]["cola"].update(max_train=2_000, max_validation=500)
    paper["tasks"]["cola"]["probe"]["max_train"] = 800
    paper["tasks"]["cola"]["lambda"] = {"max_train": 1_500}  # the probe's other settings (15 epochs)
    paper["analyses"]["mlm"].update(max_train=4_000, max_eval=1_000)  # below the corpus's 20,000 and 3,000 rows
    probes, lambdas = [("bert-base", "cola", "average", "lambda", 0.5)], [("bert-base", "cola", "average")]
    df = estimate(paper, probes, lambdas, 2e5, None, average_jobs=[("bert-base", "cola", 64, "average")],
                  mlm_jobs=[("bert-base", "wikitext103", 128)])  # fmt: skip
    df = df.set_index("stage")
    assert df.loc["probe"].passes_ours == 800 + 500  # encoded once (memory)
    assert df.loc["lambda"].passes_ours == 15 * (1_500 + 500)
    assert df.loc["average"].passes_ours == 2_000
    # the lambdas 2 epochs of 4,000 rows; 5 fractions x 3 seeds of a probe's 2 epochs and its 1,000 rows scored
    assert df.loc["mlm"].passes_ours == 2 * 4_000 + 5 * 3 * (2 * 4_000 + 1_000)
    # a probe run's seeds are its own; a lambda job, an averaging job and the MLM job are one run each
    assert df["seeds"].to_dict() == {"probe": 3, "lambda": 1, "average": 1, "mlm": 1}


def test_cost_knows_the_split_sizes_of_every_hub_dataset():
    """Every hub dataset a config may name has its published sizes in `papa.cost.SPLIT_SIZES`, so that
    `benchmarks/paper_cost.py` estimates a config using it (qqp, qnli, rte, mnli_matched raised KeyError) and the
    two MNLI validation splits keep their own sizes."""
    from papa.cost import SPLIT_SIZES, split_sizes
    from papa.data.registry import HUB_TASKS

    assert set(HUB_TASKS) <= set(SPLIT_SIZES), sorted(set(HUB_TASKS) - set(SPLIT_SIZES))
    config = {"datasets": {"mnli_matched": {"source": "hub", "max_train": 1_000}}}
    assert split_sizes(config, "mnli_matched") == (1_000, 9_815)
    assert split_sizes({"datasets": {}}, "mnli") == (392_702, 9_832)


def test_cost_knows_a_datasets_sizes_under_another_key():
    """A config's dataset key need not be its papa.data name (``datasets: {glue_rte: {source: hub, name: rte}}``, the
    config check's "name: the papa.data task name (default the dataset's key)"): papa.cost looked the key up in
    `SPLIT_SIZES` and stopped on a KeyError telling the user to add 'glue_rte' there. It reads the named dataset's
    sizes, capped by that entry's max_train, in the probe, lambda and averaging estimates alike."""
    import yaml

    from papa.cost import estimate, split_sizes

    config = {"datasets": {"glue_rte": {"source": "hub", "name": "rte", "max_train": 1_000}}}
    assert split_sizes(config, "glue_rte") == (1_000, 277)
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["datasets"]["glue_rte"] = {"source": "hub", "name": "rte"}
    paper["tasks"]["glue_rte"] = {**paper["tasks"]["mrpc"], "dataset": "glue_rte"}
    probes, lambdas = [("bert-base", "glue_rte", "average", "lambda", 0.5)], [("bert-base", "glue_rte", "average")]
    df = estimate(paper, probes, lambdas, 2e5, None, average_jobs=[("bert-base", "glue_rte", 64, "average")])
    df = df.set_index("stage")
    assert df.loc["probe"].passes_ours == 2_490 + 277 and df.loc["average"].passes_ours == 2_490


def test_cost_estimate_reads_the_lambda_stages_own_settings_and_names_a_model_without_sizes():
    """A lambda job's row takes the task's ``lambda`` block (its epochs, where they differ from the probe's) and rule
    learn_lambda's time limit, not the probe's; a hub model `papa.cost.MODELS` lacks stops the estimate naming the
    table to extend (mutation review of papa/cost.py)."""
    import yaml

    from papa.cost import estimate, split_sizes

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["tasks"]["cola"]["lambda"] = {**paper["tasks"]["cola"]["probe"], "epochs": 7}
    paper["resources"]["learn_lambda"]["runtime"] = 300
    df = estimate(paper, [("bert-base", "cola", "average", "lambda", 0.5)], [("bert-base", "cola", "average")], 2e5,
                  None).set_index("stage")  # fmt: skip
    lam, probe = df.loc["lambda"], df.loc["probe"]
    assert (lam.epochs, lam.passes_ours) == (7, 7 * sum(split_sizes(paper, "cola")))
    assert (lam.runtime_min, probe.runtime_min, probe.epochs) == (300, 720, 15)
    paper["models"]["mine"] = "me/encoder"
    with pytest.raises(KeyError, match=r"no published size for 'me/encoder'; add it to papa\.cost\.MODELS"):
        estimate(paper, [("mine", "cola", "average", "lambda", 0.5)], [], 2e5, None)


def test_cost_estimate_re_encodes_a_probe_under_backbone_dropout_and_the_authors_overlay_costs_their_procedure():
    """A probe job with ``backbone_dropout`` re-encodes every epoch of every seed, whatever the cache could hold
    (`papa.probe.prepare_features`); papa.cost costed it as cached (memory or disk), so the authors' overlay
    (config/paper-authors.yaml) read as cheaper than their procedure it runs."""
    import copy

    import yaml
    from snakemake.utils import update_config

    from papa.checks import validate_config
    from papa.cost import estimate

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    probes = [("bert-base", "cola", "average", "lambda", 0.5)]
    cached = estimate(validate_config(copy.deepcopy(paper)), probes, [], 2e5, None).set_index("stage").loc["probe"]
    assert cached.strategy == "memory" and cached.passes_ours < cached.passes_authors
    authors = copy.deepcopy(paper)  # as Snakemake merges --configfile config/paper.yaml config/paper-authors.yaml
    update_config(authors, yaml.safe_load((ROOT / "config/paper-authors.yaml").read_text()))
    df = estimate(validate_config(authors), probes, [], 2e5, None).set_index("stage").loc["probe"]
    assert df.strategy == "reencode" and df.passes_ours == df.passes_authors == 3 * 15 * (8_551 + 1_043)
    assert df.gpu_h_ours == df.gpu_h_authors


def test_cost_estimate_takes_each_models_measured_throughput():
    """papa.cost.estimate with a `Throughput`: a measured model's jobs cost example-passes x N at its own
    rate for that N, its gradient jobs its measured step cost; a model the file lacks keeps the scaled
    assumption (`gpu_hours`, `GRAD_PASS_COST`), marked ``assumed``."""
    import yaml

    from papa.cost import GRAD_PASS_COST, Throughput, estimate, gpu_hours

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    measured = Throughput(
        {
            "bert-large-uncased": {
                "forward_N64": {"tokens_per_s": 5e4},
                "forward_N128": {"tokens_per_s": 7e4},
                "grad_pass_cost": {"lambda": 2.5, "trained": 3.0},
            }
        }
    )
    probes = [("bert-large", "cola", "average", "lambda", 0.5), ("bert-large", "mnli", "average_trained", "lambda", 0),
              ("bert-base", "cola", "average", "lambda", 0.5)]  # fmt: skip
    lambdas = [("bert-large", "cola", "average"), ("bert-base", "cola", "average")]
    df = estimate(paper, probes, lambdas, 2e5, 500 * 1024, measured).set_index(["stage", "model", "task"])
    cola = df.loc[("probe", "bert-large", "cola")]  # N = 64
    assert cola.throughput == "measured" and cola.gpu_h_ours == pytest.approx(cola.passes_ours * 64 / 5e4 / 3600)
    mnli = df.loc[("probe", "bert-large", "mnli")]  # N = 256 (the nearest measured: 128), trained constants
    assert mnli.N == 256 and mnli.gpu_h_ours == pytest.approx(3.0 * mnli.passes_ours * 256 / 7e4 / 3600)
    lam = df.loc[("lambda", "bert-large", "cola")]
    assert lam.gpu_h_ours == pytest.approx(2.5 * lam.passes_ours * 64 / 5e4 / 3600)
    base = df.loc[("lambda", "bert-base", "cola")]
    assert base.throughput == "assumed"
    assert base.gpu_h_ours == pytest.approx(GRAD_PASS_COST * gpu_hours(base.passes_ours, 64, 85e6, 2e5))
    # each job against its time limit as the workflow asks for it: paper.yaml's MNLI probes 1,440 min, the others 720
    assert (mnli.runtime_min, cola.runtime_min, lam.runtime_min) == (1440, 720, 720)
    # trained constants run a job per seed (rule probe_trained): each fills a third of the run's hours
    assert (mnli.jobs, cola.jobs, lam.jobs) == (3, 1, 1)
    assert mnli.runtime_share == pytest.approx(mnli.gpu_h_ours / 3 * 60 / 1440)
    assert cola.runtime_share == pytest.approx(cola.gpu_h_ours * 60 / 720)
    # a trained seed's job against rule probe_trained's limit (resources.probe_trained over the probe's)
    paper["tasks"]["mnli"]["resources"]["probe_trained"] = {"runtime": 1200}
    df = estimate(paper, probes, lambdas, 2e5, 500 * 1024, measured).set_index(["stage", "model", "task"])
    assert df.loc[("probe", "bert-large", "mnli")].runtime_min == 1200
    assert df.loc[("probe", "bert-large", "cola")].runtime_min == 720
    reference = Throughput.load(ROOT / "benchmarks/reference/gpu_cost-h100.json")
    assert all(reference.tokens_per_s(m, 128) and reference.grad_pass_cost(m, "trained") for m in reference.models)
    # paper_cost.py's header names the file and the GPU it was measured on
    device = json.loads((ROOT / "benchmarks/reference/gpu_cost-h100.json").read_text())["device"]
    assert "H100" in device and reference.source == f"gpu_cost-h100.json ({device})"


def test_cost_of_a_probe_that_re_encodes_runs_at_the_probes_batch():
    """A probe that re-encodes (and the authors' procedure, always) runs the encoder over its training text at
    the probe's batch, not the cache's: fewer tokens a pass, at the rate gpu_cost.py timed for its small batch
    (16 x 128 tokens) as a share of the full batch's, interpolated in log tokens up to the full batch (review
    AE: at batch 64's rate MNLI-large's re-encoding was understated, under tf32 by half)."""
    import math

    import yaml

    from papa.cost import Throughput, estimate

    models = {"bert-large-uncased": {"forward_N128": {"tokens_per_s": 8e4}, "forward_N256": {"tokens_per_s": 1e5},
                                     "forward_batch16_N128": {"tokens_per_s": 4e4}}}  # fmt: skip
    t = Throughput(models, forward_batch=64)
    assert t.tokens_per_s("bert-large-uncased", 256) == 1e5  # the full batch's rate
    assert t.tokens_per_s("bert-large-uncased", 256, 64) == 1e5
    assert t.tokens_per_s("bert-large-uncased", 256, 8) == pytest.approx(0.5e5)  # 2,048 tokens: half, as measured
    assert t.tokens_per_s("bert-large-uncased", 64, 8) == pytest.approx(0.5 * 8e4)  # fewer still: the smallest timed
    w = math.log(32 * 256 / 2048) / math.log(64 * 256 / 2048)  # 8,192 tokens, between 2,048 and 16,384
    assert t.tokens_per_s("bert-large-uncased", 256, 32) == pytest.approx(1e5 * (0.5 + 0.5 * w))
    # without the batch the full passes were timed at, or without a small pass, the full batch's rate
    assert Throughput(models).tokens_per_s("bert-large-uncased", 256, 8) == 1e5
    del models["bert-large-uncased"]["forward_batch16_N128"]
    assert Throughput(models, forward_batch=64).tokens_per_s("bert-large-uncased", 256, 8) == 1e5
    models["bert-large-uncased"]["forward_batch16_N128"] = {"tokens_per_s": 4e4}
    # the kept H100 files carry the batch; compiled keeps it
    h100 = Throughput.load(ROOT / "benchmarks/reference/gpu_cost-h100.json")
    assert h100.forward_batch == 64
    compiled = h100.compiled(ROOT / "benchmarks/reference/gpu_compile-h100-tf32.json", "reduce-overhead")
    assert compiled.forward_batch == 64
    assert h100.tokens_per_s("bert-large-uncased", 256, 8) < h100.tokens_per_s("bert-large-uncased", 256)

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())  # MNLI: batch 8, N 256, 4 epochs, 3 seeds
    probes = [("bert-large", "mnli", "average", "lambda", 0.5)]
    for budget, strategy in ((1, "reencode"), (None, "disk")):
        row = estimate(paper, probes, [], 2e5, budget, t).iloc[0]
        assert row.strategy == strategy
        train, validation = 392_702, 9_832
        # the training text at the probe's batch (half the rate), validation at the cache's (full), every epoch
        epoch = (train * 256 / 0.5e5 + validation * 256 / 1e5) / 3600
        assert row.gpu_h_authors == pytest.approx(3 * 4 * epoch)
        assert row.gpu_h_ours == pytest.approx(3 * 4 * epoch if strategy == "reencode" else
                                               (train + validation) * 256 / 1e5 / 3600)  # fmt: skip
    paper["sweep"]["batch_order"] = "shared"  # one encoder pass an epoch for all seeds
    assert estimate(paper, probes, [], 2e5, 1, t).iloc[0].gpu_h_ours == pytest.approx(4 * epoch)


@pytest.mark.slow
def test_the_real_tokens_figure_measures_both_ways_and_compares_them(monkeypatch, minilm):
    """benchmarks/run.py's ``real_tokens`` figure (a small size): both variants timed, the gathered one on the
    corpus's real-token share of the rows, and the numbers of the two compared."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import run

    model, tok = minilm
    fig = run.bench_real_tokens(model, tok, 32, 16, 1)
    assert 0.2 < fig["real_token_share"] < 0.75 and fig["dense_rows_share"] == pytest.approx(fig["real_token_share"])
    for name in ("encode", "lambda_step"):
        f = fig[name]
        assert f["padded_cpu_s"] > 0 and f["real_tokens_cpu_s"] > 0 and f["ratio"] > 0
        assert f["max_abs_diff"] < 1e-5 and f["bit_identical"] == (f["max_abs_diff"] == 0.0)


@pytest.fixture
def bench_run(monkeypatch):
    """benchmarks/run.py, imported as a module, with the model load stubbed (its figures are stubbed per test)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import run

    monkeypatch.setattr(run.papa, "load_encoder", lambda *a, **k: (None, None))
    return run


def test_run_only_refuses_unknown_or_no_names_and_keeps_the_other_figures(tmp_path, monkeypatch, bench_run, capsys):
    """benchmarks/run.py --only: a misspelled name or none at all is refused before anything is measured or written
    (it used to run nothing, or everything, and replace figures.json with one without figures); a subset updates its
    own figures in the existing figures.json and keeps the others, each kept figure measured on another machine
    carrying that machine."""
    run = bench_run
    earlier = {
        "machine": {"platform": "the 12-minute run's"},
        "model": "all-MiniLM-L6-v2 (6 layers x 12 heads, d'=32)",
        "forward": {"all_static_vs_eager": 0.75, "curve": []},
        "averaging": {"throughput_ratio": 0.97},
        "noop_dry_run": {"seconds_median": 1.2},
    }
    figures = tmp_path / "figures.json"
    figures.write_text(json.dumps(earlier))
    for bad in (["--only", "fowrard"], ["--only"], ["--only", "noop", "fowrard"]):
        with pytest.raises(SystemExit) as e:
            run.main([*bad, "--out", str(tmp_path)])
        assert e.value.code == 2, bad
    assert "invalid choice: 'fowrard'" in capsys.readouterr().err
    assert json.loads(figures.read_text()) == earlier
    assert set(run.BENCHMARKS) == {"forward", "averaging", "memory", "encode_once", "real_tokens", "noop"}

    monkeypatch.setattr(run, "bench_averaging", lambda *a, **k: {"throughput_ratio": 0.99})
    monkeypatch.setattr(run, "bench_noop_dry_run", lambda: None)  # no finished default run to time now
    run.main(["--only", "averaging", "noop", "--out", str(tmp_path)])
    new = json.loads(figures.read_text())
    assert new["machine"]["torch_threads"] == 2 and new["model"] == earlier["model"]  # this run's
    assert new["averaging"] == {"throughput_ratio": 0.99}  # rerun here: no machine of its own
    assert new["forward"] == {**earlier["forward"], "machine": earlier["machine"]}  # kept, with its machine
    assert new["noop_dry_run"] == {**earlier["noop_dry_run"], "machine": earlier["machine"]}  # nothing measured: kept
    assert not list(tmp_path.glob(".figures.json*"))  # written through papa.io.atomic_path, no temporary left
    figures.write_text("{")  # not figures.json's JSON: refused before anything is measured, and left as it is
    monkeypatch.setattr(run.papa, "load_encoder", lambda *a, **k: pytest.fail("measured before reading figures.json"))
    with pytest.raises(SystemExit, match="is not JSON"):
        run.main(["--only", "noop", "--out", str(tmp_path)])
    assert figures.read_text() == "{"


def test_cuda_workflow_checks_its_arguments_before_removing_anything_and_fails_with_a_failed_run(tmp_path):
    """benchmarks/cuda_workflow.sh: bad arguments (none, OUT forgotten, an empty or odd NAME, a NAME twice, a missing
    CONFIG or one where the copies leave it out, CORES not a whole number > 0, a misspelled :cpu) print the usage
    and exit 2 before anything is created or removed (an empty NAME used to empty the whole WORK folder); a run
    that fails still has its archive packed, and the script exits 1 naming it (it used to exit 0, the failure only
    in runs.tsv). No GPU: snakemake is a stub that exits 0 for one run and 3 for the other."""
    import os

    work, out = tmp_path / "work", tmp_path / "out"
    (work / "keepme").mkdir(parents=True)
    script = str(ROOT / "benchmarks/cuda_workflow.sh")

    def sh(*args, **env):
        return subprocess.run(["bash", script, *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "WORK": str(work), **env})  # fmt: skip

    smoke = "config/smoke.yaml"
    for args in (
        [],
        [str(out)],
        [f"a={smoke}:1"],  # OUT forgotten
        [f"a={smoke}:1", f"b={smoke}:1"],
        [str(out), f"={smoke}:1"],  # an empty NAME: rm -rf "$WORK/"
        [str(out), f"../x={smoke}:1"],
        [str(out), f"..={smoke}:1"],
        [str(out), f"a={smoke}:1", f"a={smoke}:1"],
        [str(out), "a=config/smokee.yaml:1"],
        [str(out), "a=config:1"],
        [str(out), f"a={smoke}"],
        [str(out), f"a={smoke}:0"],
        [str(out), f"a={smoke}:two"],
        [str(out), f"a={smoke}:1:cup"],
        [str(out), f"a={smoke}:1:cpu:x"],
        [str(out), smoke],
        # files of the checkout its copies leave out (a config under results*/ passed and was missing there)
        *[[str(out), f"a={f}:1"] for f in ("./.git/HEAD", ".venv/pyvenv.cfg") if (ROOT / f).is_file()],
    ):
        p = sh(*args)
        assert p.returncode == 2 and "usage: bash benchmarks/cuda_workflow.sh OUT" in p.stderr, (args, p.stderr)
        assert "cuda_workflow.sh: " in p.stderr.splitlines()[0] and "unbound" not in p.stderr, (args, p.stderr)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["work"] and [*work.iterdir()] == [work / "keepme"], args
    assert sh(str(out), f"a={smoke}:1", LIMIT="0").returncode == 2

    stub = tmp_path / "bin" / "snakemake"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\necho "stub snakemake $*"\ncase "$*" in *smoke.yaml*) exit 0 ;; esac\nexit 3\n')
    stub.chmod(0o755)
    path = f"{stub.parent}{os.pathsep}{os.environ['PATH']}"
    p = sh(str(out), f"ok={smoke}:1", "broken=config/config.yaml:1:cpu", PATH=path)
    assert p.returncode == 1 and "1 run(s) failed" in p.stderr and ": broken;" in p.stderr, p.stderr
    assert sorted(x.name for x in out.iterdir()) == ["broken.tar.gz", "ok.tar.gz", "runs.tsv"]
    rows = [line.split("\t") for line in (out / "runs.tsv").read_text().splitlines()[1:]]
    assert sorted((r[0], r[2], r[4]) for r in rows) == [("broken", "cpu", "3"), ("ok", "gpu", "0")]
    assert (work / "keepme").is_dir()
    assert sh(str(out), f"ok={smoke}:1", PATH=path).returncode == 0


def test_paper_cost_stops_on_bad_input_with_one_line(tmp_path, monkeypatch, capsys):
    """benchmarks/paper_cost.py: a config file that is not there, a folder, a misspelled key, an overlay given
    before the file it updates, and a --measured/--reference/--compiled file that is missing or not the right
    JSON each stop with one line naming the option and what to give, before anything is estimated (they were
    tracebacks: FileNotFoundError, IsADirectoryError, ConfigError, RuntimeError, KeyError)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import paper_cost

    monkeypatch.setattr(paper_cost, "workflow_jobs", lambda *a: pytest.fail("estimated a bad input"))
    typo = tmp_path / "typo.yaml"
    typo.write_text((ROOT / "config/paper.yaml").read_text().replace("\nsweep:", "\nsweeep:"))
    tiny = tmp_path / "tiny.json"
    tiny.write_text(json.dumps({"tiny": True, "models": {}}))
    paper, authors = str(ROOT / "config/paper.yaml"), str(ROOT / "config/paper-authors.yaml")
    gpu_check = str(ROOT / "benchmarks/reference/gpu_check-h100.json")
    compiles = tmp_path / "compiles.yaml"  # a config with compile other than eager: --compiled is read
    compiles.write_text((ROOT / "config/paper.yaml").read_text() + "compile: reduce-overhead\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [bert\n")
    for args, says in (
        (["--config", "config/papr.yaml"], "--config config/papr.yaml: config/papr.yaml is not there: give config"),
        (["--config", str(ROOT / "config")], "is a folder: give config files"),
        (["--config", str(typo)], "'sweeep' is not known: did you mean 'sweep'?"),
        (["--config", authors, paper], "give it after"),
        (
            ["--config", str(broken)],
            "broken.yaml is not valid YAML (nor JSON): expected ',' or ']', but got '<stream end>' at line 2, column 1",
        ),  # yaml's five lines, the line under a caret
        (["--measured", str(tmp_path / "gone.json")], "--measured " + str(tmp_path / "gone.json") + ": [Errno 2]"),
        (["--measured", gpu_check], "it has no 'models' field; give benchmarks/gpu_cost.py's JSON"),
        (["--measured", str(tiny)], "tiny shapes"),
        (["--reference", str(ROOT / "README.md")], "--reference " + str(ROOT / "README.md") + ": it is not JSON"),
        (["--config", str(compiles), "--compiled", str(tmp_path / "gone.json")], "--compiled"),
    ):
        with pytest.raises(SystemExit) as e:
            paper_cost.main([*args, "--out", str(tmp_path / "cost.parquet")])
        assert isinstance(e.value.code, str) and e.value.code.startswith("paper_cost.py: ") and says in e.value.code, (
            args,
            e.value.code,
        )
        assert "\n" not in e.value.code, e.value.code
    assert not (tmp_path / "cost.parquet").exists()


def test_gpu_benchmarks_refuse_a_misspelled_model_or_device_with_their_usage(monkeypatch, capsys):
    """benchmarks/gpu_cost.py --models takes papa.cost.MODELS' hub ids (a typo was a KeyError traceback after the
    other models' timings) and at least one; gpu_cost.py and gpu_compile.py --device a name torch reads as a
    device (a typo was torch's RuntimeError traceback): argparse's usage and exit 2, before anything runs."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_compile
    import gpu_cost

    monkeypatch.setattr(gpu_cost, "one_model", lambda *a: pytest.fail("measured after a bad argument"))
    for main, argv, says in (
        (gpu_cost.main, ["--models", "bert-bse"], "invalid choice: 'bert-bse'"),
        (gpu_cost.main, ["--models"], "expected at least one argument"),
        (gpu_cost.main, ["--device", "cdua"], "argument --device: 'cdua' is not a torch device: give cuda, cuda:N"),
        (gpu_compile.main, ["--device", "cdua"], "argument --device: 'cdua' is not a torch device"),
        # an empty list ran nothing and wrote a result of no model, no mode, or no gradient step
        (gpu_compile.main, ["--models"], "argument --models: expected at least one argument"),
        (gpu_compile.main, ["--modes"], "argument --modes: expected at least one argument"),
        (gpu_compile.main, ["--batches"], "argument --batches: expected at least one argument"),
    ):
        with pytest.raises(SystemExit) as e:
            main(["--tiny", *argv])
        assert e.value.code == 2 and says in capsys.readouterr().err, argv
    assert gpu_cost.device_name("cuda:1") == "cuda:1" and gpu_cost.device_name("cpu") == "cpu"
    # a GPU index past the machine's: torch failed at the first tensor, after the header named GPU 0 as the one used
    monkeypatch.setattr(gpu_cost.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_cost.torch.cuda, "device_count", lambda: 2)
    with pytest.raises(SystemExit) as e:
        gpu_cost.header("gpu_cost.py", "cuda:2", False, "fp32")
    assert e.value.code == "gpu_cost.py: --device cuda:2, but this machine has 2 CUDA device(s), cuda:0 to cuda:1"


def test_compare_runs_stops_on_a_folder_without_what_it_compares(tmp_path, compare_runs):
    """benchmarks/compare_runs.py exits 1 naming the folder when it is not there or lacks what is compared: tables
    (it printed an empty comparison, exit 0, as if the runs agreed), benchmarks/ for --times (an empty table), probe
    logs and a finished run's probe tables for --probe-logs (a pyarrow traceback); an unreadable table is named."""
    import pandas as pd

    gone, empty, file = tmp_path / "gone", tmp_path / "empty", tmp_path / "file"
    empty.mkdir()
    file.write_text("x")
    run = tmp_path / "run"
    (run / "tables").mkdir(parents=True)
    pd.DataFrame({"model": ["m"], "mean": [0.5]}).to_parquet(run / "tables" / "summary.parquet")
    partial = tmp_path / "partial" / "logs" / "probe" / "m" / "t" / "average" / "lambda"
    partial.mkdir(parents=True)
    (partial / "fraction_dynamic=0.5.log").write_text("x papa.probe INFO loading\n")  # no epoch finished yet
    for argv, names, says in (
        ([gone, tmp_path / "gone2"], gone, "is not there: give a results folder"),
        ([run, empty], empty, "holds no tables/*.parquet"),
        ([file, run], file, "is a file"),
        (["--times", run], run, "holds no benchmarks/"),
        (["--times", gone], gone, "is not there"),
        (["--probe-logs", empty, run], empty, "holds no probe logs"),
        (["--probe-logs", tmp_path / "partial", run], run, "holds no tables/probe.parquet"),
    ):
        with pytest.raises(SystemExit) as e:
            compare_runs.main([*map(str, argv)])
        code = e.value.code
        assert code.startswith(f"compare_runs.py: {names} ") and says in code and "\n" not in code, (argv, code)
    pd.DataFrame({"seed": [0]}).to_parquet(run / "tables" / "probe.parquet")
    with pytest.raises(SystemExit, match="hold no finished epoch of any seed"):
        compare_runs.main(["--probe-logs", str(tmp_path / "partial"), str(run)])
    (empty / "tables").mkdir()
    (empty / "tables" / "summary.parquet").write_bytes(b"PAR1 torn")
    with pytest.raises(SystemExit, match=r"^compare_runs.py: .*summary.parquet"):
        compare_runs.main([str(run), str(empty)])
    # two folders with tables, none in common: an empty comparison, exit 0, was read as agreement (review AX)
    other = tmp_path / "other"
    (other / "tables").mkdir(parents=True)
    pd.DataFrame({"x": [1]}).to_parquet(other / "tables" / "mlm.parquet")
    with pytest.raises(SystemExit, match=r"have no table in common \(probe, summary against mlm\)"):
        compare_runs.main([str(run), str(other)])


@pytest.mark.parametrize("script", ["run", "paper_cost", "gpu_cost", "gpu_compile", "gpu_check", "compare_runs"])
def test_benchmark_scripts_help_shows_their_first_paragraph_whole(script, monkeypatch, capsys):
    """Each benchmark script's --help describes it with at least the first paragraph of its docstring, whole
    (paper_cost.py's stopped mid-sentence: it took the docstring's first line)."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    module = importlib.import_module(script)
    with pytest.raises(SystemExit) as e:
        module.main(["--help"])
    assert e.value.code == 0
    first = "".join(module.__doc__.split("\n\n")[0].split())  # whitespace aside: argparse wraps at hyphens too
    assert first.endswith(".") and first in "".join(capsys.readouterr().out.split())


@pytest.mark.slow  # 5 s: the real MiniLM in three dtypes
def test_gpu_check_half_precision_runs_its_checks_on_the_cpu_too(monkeypatch):
    """benchmarks/gpu_check.py's half-precision section (CUDA only in the script) on the CPU, a tiny BERT and the real
    MiniLM (the one whose float16 effective constants gave NaN; a tiny model never did): lambda 1 is
    the stock float16/bfloat16 model to the bit, lambda 0 and every head static stay finite on padded positions (a
    float16 pad row once divided by a subnormal normaliser: NaN), all heads static within a half's rounding of the
    float32 model's (bfloat16 keeps 8 bits: ~1% of the largest value)."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    gpu_check = importlib.import_module("gpu_check")
    res = gpu_check.half_precision(gpu_check.torch.device("cpu"), families=["bert", "minilm"])
    assert set(res) == {f"{f}/{d}" for f in ("bert", "minilm") for d in ("float16", "bfloat16")}
    for name, r in res.items():
        assert r["ok"], (name, r)
        for kind in ("average", "effective"):
            assert r[kind]["lambda_one_max_abs"] == 0 and r[kind]["static_finite"], (name, kind, r)
            assert 0 < r[kind]["static_vs_float32_rel"] < {"float16": 5e-3, "bfloat16": 3e-2}[name.split("/")[1]]


@pytest.mark.slow  # a python that imports papa and transformers (~5 s), then the invariants on the CPU (~4 s)
def test_gpu_check_sees_the_gpu_it_checks_and_its_invariants_run_on_the_cpu(monkeypatch):
    """benchmarks/gpu_check.py imports `tiny_model` from tests/conftest.py, whose import hid CUDA (the suite's setting,
    then made at import): on every GPU machine the script said it needs a CUDA device. The suite's settings are
    made when pytest starts; the import leaves the environment alone. Its invariants (all heads static reproduce an
    input, lambda 1 is the model, padding changes nothing) hold on the CPU for every family."""
    import importlib
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "PAPA_TEST_CUDA")}
    code = "import os, sys; sys.path[:0] = ['benchmarks', '.']; import gpu_check; "
    code += "print(os.environ.get('CUDA_VISIBLE_DEVICES'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.split()[-1] == "None", (out.stdout, out.stderr[-2000:])
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    gpu_check = importlib.import_module("gpu_check")
    res = gpu_check.invariants(gpu_check.torch.device("cpu"))
    assert set(res) == set(gpu_check.FAMILIES) and all(r["ok"] for r in res.values()), res


def test_gpu_cost_times_and_weighs_the_gpu_it_was_given(monkeypatch):
    """gpu_cost.measure (gpu_check's and gpu_compile's timer too) synchronised, reset and read the peak memory of the
    current GPU, GPU 0, where the model ran on cuda:1: timings stopped before its kernels ended, the peak was
    another GPU's."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_cost

    calls = []
    cuda = gpu_cost.torch.cuda
    monkeypatch.setattr(cuda, "synchronize", lambda device=None: calls.append(("synchronize", device)))
    monkeypatch.setattr(cuda, "reset_peak_memory_stats", lambda device=None: calls.append(("reset", device)))
    monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: calls.append(("peak", device)) or 2**30)
    out = gpu_cost.measure(lambda: None, "cuda:1", 2)
    assert out["peak_gib"] == 1 and calls and all(str(d) == "cuda:1" for _, d in calls), calls
    assert [c for c, _ in calls] == ["synchronize", "reset", "synchronize", "synchronize", "peak"]


def test_cost_of_a_model_no_throughput_measured_scales_by_its_parameters():
    """Review DK's mutation testing: every assumed figure the tests read was a BERT-base-sized encoder's (85e6
    parameters, a scale of 1), so `gpu_hours` without its parameter scaling passed them. The assumed hours are
    passes x N / tokens_per_s x params / 85e6, written out here; a large encoder's lambda job on the same data costs
    302/85 of a base one's."""
    import yaml

    from papa.cost import GRAD_PASS_COST, MODELS, estimate, gpu_hours

    assert gpu_hours(1_000, 128, 302e6, 2e5) == pytest.approx(1_000 * 128 / 2e5 * (302e6 / 85e6) / 3600)
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    lambdas = [("bert-large", "cola", "average"), ("bert-base", "cola", "average")]
    df = estimate(paper, [], lambdas, 2e5, None).set_index("model")
    large, base = df.loc["bert-large"], df.loc["bert-base"]
    assert large.throughput == base.throughput == "assumed" and large.passes_ours == base.passes_ours
    params = MODELS["bert-large-uncased"][2]
    assert large.gpu_h_ours == pytest.approx(GRAD_PASS_COST * large.passes_ours * 64 / 2e5 * params / 85e6 / 3600)
    assert large.gpu_h_ours / base.gpu_h_ours == pytest.approx(params / MODELS["bert-base-uncased"][2])


def test_a_smaller_batch_never_runs_at_a_higher_rate_than_the_full_one():
    """`Throughput.tokens_per_s` at a probe's batch takes the small pass's rate as a share of the full batch's,
    capped at 1 (review DK's mutation testing found the cap unread): where timing noise made the small pass faster
    than the full one, a re-encoding probe would have cost less than at the full batch's rate."""
    from papa.cost import Throughput

    models = {"bert-large-uncased": {"forward_N128": {"tokens_per_s": 8e4}, "forward_N256": {"tokens_per_s": 1e5},
                                     "forward_batch16_N128": {"tokens_per_s": 9e4}}}  # fmt: skip
    t = Throughput(models, forward_batch=64)
    for n, batch in ((256, 8), (256, 32), (128, 4), (128, 16)):
        assert t.tokens_per_s("bert-large-uncased", n, batch) == t.tokens_per_s("bert-large-uncased", n)
    # nor where the full batch holds fewer tokens than the small pass timed (64 x 16 = 1,024 against 16 x 128): no
    # share to take between them, the full batch's rate (mutation review of papa/cost.py)
    timed = {"forward_N16": {"tokens_per_s": 5e4}, "forward_N128": {"tokens_per_s": 8e4},
             "forward_batch16_N128": {"tokens_per_s": 4e4}}  # fmt: skip
    short = Throughput({"bert-large-uncased": timed}, forward_batch=64)
    assert short.tokens_per_s("bert-large-uncased", 16, 8) == 5e4
    assert short.tokens_per_s("bert-large-uncased", 128, 8) == 4e4  # a share, there


def test_throughput_reads_each_timing_at_its_own_length():
    """`Throughput` at lengths between the timed ones (mutation review of papa/cost.py): a tie goes to the shorter
    length whatever the JSON's order; a timing whose name goes on after the length is not a length; the small pass's
    share is taken against a full pass at its own length only, and averaging's cost against a feature pass at its
    own length only (else the rate or cost is not compared across lengths: the full rate, the assumption)."""
    from papa.cost import Throughput

    m = "bert-large-uncased"
    t = Throughput({m: {"forward_N128": {"tokens_per_s": 2e5}, "forward_N64": {"tokens_per_s": 1e5},
                        "forward_N64_half": {"tokens_per_s": 9e9}}})  # fmt: skip
    assert t.tokens_per_s(m, 96) == 1e5 and t.tokens_per_s(m, 97) == 2e5
    assert t.tokens_per_s(m, 64) == 1e5  # not the half-precision timing's
    # the small pass at N 128, full passes at 64 and 256 only: no share to take
    apart = {m: {"forward_N64": {"tokens_per_s": 8e4}, "forward_N256": {"tokens_per_s": 1e5},
                 "forward_batch16_N128": {"tokens_per_s": 4e4}}}  # fmt: skip
    assert Throughput(apart, forward_batch=64).tokens_per_s(m, 256, 8) == 1e5
    timed = {m: {"forward_N64": {"tokens_per_s": 1e5}, "forward_N256": {"tokens_per_s": 1e5},
                 "average_N128": {"tokens_per_s": 5e4}, "average_N256": {"tokens_per_s": 8e4}}}  # fmt: skip
    assert Throughput(timed).average_cost(m, 128, "average") is None
    assert Throughput(timed).average_cost(m, 256, "average") == pytest.approx(1.25)
    # averaging timed at 128 only, feature passes at 128 and 256: at N 200 the feature pass compared is 128's (the
    # averaging's length), not the one closest to 200
    once = {m: {"forward_N128": {"tokens_per_s": 1e5}, "forward_N256": {"tokens_per_s": 9e4},
                "average_N128": {"tokens_per_s": 8e4}}}  # fmt: skip
    assert Throughput(once).average_cost(m, 200, "average") == pytest.approx(1.25)


def test_a_compiled_step_that_failed_keeps_its_eager_cost(tmp_path):
    """gpu_compile.py records a step that failed to compile as ``{"error": ...}`` (no ``s``): `Throughput.compiled`
    keeps that step's eager cost and gives it no speed-up, and takes the other step's."""
    from papa.cost import Throughput

    m = "bert-base-uncased"
    base = Throughput({m: {"forward_N128": {"tokens_per_s": 1e5}, "grad_pass_cost": {"lambda": 3.0, "trained": 4.0}}})
    ref = tmp_path / "compile.json"
    ref.write_text(json.dumps({"models": {m: {
        "lambda_batch16_eager": {"s": 0.03}, "lambda_batch16_default": {"error": "BackendCompilerFailed: ..."},
        "trained_batch16_eager": {"s": 0.04}, "trained_batch16_default": {"s": 0.02},
        "lambda_batch32_eager": {"s": 0.04}, "lambda_batch32_default": {"s": 0.01}}}}))  # fmt: skip
    fast = base.compiled(ref, "default")
    assert (fast.grad_pass_cost(m, "lambda"), fast.speedup(m, "lambda")) == (3.0, 1.0)
    assert (fast.grad_pass_cost(m, "trained"), fast.speedup(m, "trained")) == (pytest.approx(2.0), pytest.approx(2.0))
    # another batch's steps, where asked for (mutation review of papa/cost.py): those timed at it, not batch 16's
    at32 = base.compiled(ref, "default", batch=32)
    assert (at32.grad_pass_cost(m, "lambda"), at32.speedup(m, "lambda")) == (pytest.approx(0.75), pytest.approx(4.0))
    assert (at32.grad_pass_cost(m, "trained"), at32.speedup(m, "trained")) == (4.0, 1.0)
    # a model whose gradient steps were not timed (``grad_pass_cost`` null): no measured cost, none to speed up
    untimed = Throughput({m: {"forward_N128": {"tokens_per_s": 1e5}, "grad_pass_cost": None}})
    assert untimed.grad_pass_cost(m, "lambda") is None
    assert untimed.compiled(ref, "default").grad_pass_cost(m, "trained") is None


def test_the_cache_estimate_is_every_layers_hidden_states_of_the_kept_tokens():
    """A probe's cache holds the embeddings' and every layer's hidden states (L + 1) of each kept token, at most N a
    sequence: a task padded below its published mean length keeps N tokens an example (mutation review of
    papa/cost.py: the estimate with L layers, or with the mean length past N, passed every test)."""
    import yaml

    from papa.cost import MODELS, SPLIT_SIZES, estimate
    from papa.probe import MB, features_nbytes

    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["tasks"]["mrpc"]["max_length"] = 32  # MRPC's sentence pairs: ~53 word pieces
    probes = [("bert-large", "mrpc", "average", "lambda", 0.5), ("bert-large", "cola", "average", "lambda", 0.5)]
    df = estimate(paper, probes, [], 2e5, None).set_index("task")
    layers, hidden, _ = MODELS["bert-large-uncased"]
    dtype = paper["cache"]["dtype"]
    for task, kept in (("mrpc", 32), ("cola", SPLIT_SIZES["cola"]["tokens"])):
        examples = SPLIT_SIZES[task]["train"] + SPLIT_SIZES[task]["validation"]
        expected = features_nbytes(round(examples * kept), layers + 1, hidden, dtype) / MB
        assert df.loc[task, "cache_mb"] == pytest.approx(expected)
