"""PAPA benchmarks, measured side by side in one run.

    python benchmarks/run.py            # or: make bench
    python benchmarks/run.py --quick    # smaller sizes, same figures

Writes ``benchmarks/results/figures.json`` (every figure, plus machine and versions) and
``benchmarks/results/forward.parquet`` (the forward-time curve over fractions). ``--only NAME ...``
reruns those benchmarks alone (names: the keys of `BENCHMARKS`) and updates their figures in an
existing figures.json, keeping the others (each kept figure measured on another machine or model
carries its own ``machine``/``model``).

Figures:
1. ``encode_once``: a sweep (5 fractions x 3 seeds x E epochs) of probes trained from hidden
   states encoded once per fraction vs re-encoded every epoch; speedup and the largest score
   difference between the two paths.
2. ``averaging``: `papa.average_attention` throughput vs a plain eager forward with
   ``output_attentions=True`` on the same batches. ``averaging_memory``: whole-process peak RSS
   of the pipeline's averaging job (streaming its token file) over a 1k vs a 10k corpus, each
   run a fresh process.
3. ``forward``: forward time with k% of heads static vs stock eager and stock sdpa at N=128,
   next to the paper's per-head FLOP formula (2n^2d' + 3nd'^2 dynamic, n^2d' + nd'^2 constant).
4. ``real_tokens``: CPU time of encoding and of a lambda step with the dense layers on the real tokens
   only (`papa.unpad`) over the padded run, and whether the numbers are the same bit for bit.
5. ``noop_dry_run``: seconds of ``snakemake -n`` on a finished default run (when ``results/``
   holds one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import papa  # noqa: E402
from papa.io import atomic_path, write_text  # noqa: E402
from papa.probe import TrainConfig, extract_features, run_probe  # noqa: E402
from papa.selection import head_order, n_dynamic, select_static  # noqa: E402

FRACTIONS = [1.0, 0.5, 0.125, 0.0625, 0.0]


def texts(n: int, seed: int = 0, splits: str = "train") -> tuple[list[str], list[int]]:
    """``n`` Rotten Tomatoes sentences and labels (``splits="all"``: every split, 10,568 sentences)."""
    import pandas as pd

    from papa.data import load_task

    task = load_task({"name": "rt_sentiment", "source": "package"}, seed=seed)
    df = task.splits["train"] if splits == "train" else pd.concat(list(task.splits.values()), ignore_index=True)
    reps = -(-n // len(df))  # the corpus repeated when more examples are asked for than it has
    return (df.text.tolist() * reps)[:n], (df.label.tolist() * reps)[:n]


def bench_forward(model, tok, n_tokens: int, batch: int, reps: int) -> tuple[list[dict], dict]:
    sents, _ = texts(batch)
    enc = papa.encode(tok, sents, max_length=n_tokens)
    inputs = enc.model_inputs()
    L, H = papa.model_shape(model)
    C = papa.average_attention(model, enc.batches(batch))
    d = model.config.hidden_size // H
    n = n_tokens

    def run():
        with torch.inference_mode():
            model(**inputs)

    @contextlib.contextmanager
    def stock(impl):
        model.set_attn_implementation(impl)
        try:
            yield
        finally:
            model.set_attn_implementation("sdpa")

    order = head_order("random", (L, H), seed=0)
    variants = [(f"stock {impl}", None, lambda impl=impl: stock(impl)) for impl in ("eager", "sdpa")]
    variants += [
        ("papa", f, lambda f=f: papa.patch(model, C, static=select_static(order, f, (L, H)))) for f in FRACTIONS
    ]
    # interleaved rounds (every variant once per round, the first round a warm-up), so drifts of
    # the machine's speed hit all variants alike; ratios are paired within a round (variant time
    # over the stock times of the same round), then the median over rounds
    times = [[] for _ in variants]
    for r in range(reps + 1):
        for i, (_, _, ctx) in enumerate(variants):
            with ctx():
                t0 = time.perf_counter()
                run()
                if r:
                    times[i].append(time.perf_counter() - t0)
    rows = []
    for (name, f, _), ts in zip(variants, times):
        row = {
            "variant": name,
            "fraction_dynamic": 1.0 if f is None else f,
            "seconds": statistics.median(ts),
            "vs_eager": statistics.median(t / e for t, e in zip(ts, times[0])),
            "vs_sdpa": statistics.median(t / e for t, e in zip(ts, times[1])),
        }
        if f is not None:
            k = n_dynamic(f, L * H)
            flops = k * (2 * n * n * d + 3 * n * d * d) + (L * H - k) * (n * n * d + n * d * d)
            row |= {"n_dynamic": k, "attention_flops_rel": flops / (L * H * (2 * n * n * d + 3 * n * d * d))}
        rows.append(row)
    papa_rows = {r["fraction_dynamic"]: r for r in rows if r["variant"] == "papa"}
    summary = {
        "N": n_tokens,
        "batch": batch,
        "all_static_vs_eager": papa_rows[0.0]["vs_eager"],
        "all_dynamic_vs_sdpa": papa_rows[1.0]["vs_sdpa"],
        "target_all_static_vs_eager": 0.8,
        "target_all_dynamic_vs_sdpa": 1.05,
    }
    return rows, summary


def bench_averaging(model, tok, n: int, batch: int, reps: int = 5) -> dict:
    sents, _ = texts(n)
    enc = papa.encode(tok, sents, max_length=64)
    batches = list(enc.batches(batch))

    def average():
        papa.average_attention(model, batches, log_every=1e9)

    def eager_forward():
        with torch.inference_mode():
            for b in batches:
                model(**b, output_attentions=True)

    # interleaved (eager, average, eager, average, ...) so drifts of the machine hit both alike
    def eager_timed():
        model.set_attn_implementation("eager")
        try:
            t0 = time.perf_counter()
            eager_forward()
            return time.perf_counter() - t0
        finally:
            model.set_attn_implementation("sdpa")

    def average_timed():
        t0 = time.perf_counter()
        average()
        return time.perf_counter() - t0

    eager_timed(), average_timed()  # warm-up
    pairs = [(eager_timed(), average_timed()) for _ in range(reps)]
    t_eager = statistics.median(p[0] for p in pairs)
    t_avg = statistics.median(p[1] for p in pairs)
    return {
        "examples": n,
        "rounds": reps,
        "averaging_ex_per_s": n / t_avg,
        "eager_forward_ex_per_s": n / t_eager,
        "throughput_ratio": statistics.median(e / a for e, a in pairs),
        "target_ratio": 0.95,
    }


def peak_memory_child(tokens: str, threads: int) -> None:
    """Child process: the pipeline's averaging job (`papa.pipeline.make_constants`, which streams
    the token file) over one corpus; prints the whole process's peak RSS (MB) and its time."""
    from papa import pipeline

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        C = pipeline.make_constants("minilm", "average", tokens, Path(tmp) / "C.safetensors", batch_size=32)
    print(
        json.dumps(
            {"examples": C.metadata["n_examples"], "seconds": time.perf_counter() - t0, "peak_rss_mb": _peak_rss_mb()}
        )
    )


def _peak_rss_mb() -> float:
    """This process's peak RSS. Linux: ``VmHWM`` of /proc/self/status, the high-water mark of
    this program's own address space; ``getrusage``'s ``ru_maxrss`` is not used there because
    it also carries the parent's peak across the fork/vfork + exec of a subprocess. Elsewhere ``ru_maxrss``: bytes
    on macOS, KiB on Linux and the BSDs."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (2**20 if sys.platform == "darwin" else 1024)


def bench_memory(tok, small: int, large: int, repeats: int = 2) -> dict:
    """Whole-process peak RSS of the averaging job over a small and a 10x larger corpus.

    Each run is a fresh process (model loading included, nothing reset), ``repeats`` times per
    size, interleaved; the ratio is the worst case, largest large-corpus peak over smallest
    small-corpus peak.
    """
    from papa import pipeline

    sents, labels = texts(large, splits="all")
    runs = {small: [], large: []}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for n in (small, large):
            enc = papa.encode(tok, sents[:n], labels=labels[:n], max_length=64)
            paths[n] = Path(tmp) / f"tokens{n}.parquet"
            pipeline.write_tokens(
                enc,
                paths[n],
                {
                    "model": "minilm",
                    "dataset": "rt_sentiment",
                    "split": "all",
                    "kind": "sequence",
                    "label_names": ["negative", "positive"],
                },
            )
        for _ in range(repeats):
            for n in (small, large):
                p = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--memory-child",
                        str(paths[n]),
                        "--threads",
                        str(torch.get_num_threads()),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[n].append(json.loads(p.stdout.strip().splitlines()[-1]))
    peak = {n: [r["peak_rss_mb"] for r in runs[n]] for n in runs}
    return {
        "small_examples": small,
        "large_examples": large,
        "threads": torch.get_num_threads(),
        "peak_rss_mb_small": peak[small],
        "peak_rss_mb_large": peak[large],
        "seconds_small": [r["seconds"] for r in runs[small]],
        "seconds_large": [r["seconds"] for r in runs[large]],
        "ratio": max(peak[large]) / min(peak[small]),
        "target_ratio_max": 1.10,
    }


def bench_encode_once(model, tok, n_train: int, n_val: int, epochs: int, seeds: list[int]) -> dict:
    sents, labels = texts(n_train + n_val, seed=1)
    enc = papa.encode(tok, sents, labels=labels, max_length=64)
    train, val = enc.subset(np.arange(n_train)), enc.subset(np.arange(n_train, n_train + n_val))
    C = papa.average_attention(model, train.batches(32))
    L, H = papa.model_shape(model)
    order = head_order("random", (L, H), seed=0)
    metrics = ["accuracy", "f1"]
    times = {"cached": 0.0, "reencode": 0.0}
    max_diff = 0.0
    for f in FRACTIONS:
        with papa.patch(model, C, static=select_static(order, f, (L, H))):
            t0 = time.perf_counter()
            feats = (extract_features(model, train, dtype="float32"), extract_features(model, val, dtype="float32"))
            cached = [
                run_probe(
                    model,
                    train,
                    val,
                    "sequence",
                    2,
                    metrics,
                    TrainConfig(lr=1e-3, epochs=epochs, seed=s),
                    features=feats,
                )
                for s in seeds
            ]
            times["cached"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            live = [
                run_probe(model, train, val, "sequence", 2, metrics, TrainConfig(lr=1e-3, epochs=epochs, seed=s))
                for s in seeds
            ]
            times["reencode"] += time.perf_counter() - t0
        for a_rows, b_rows in zip(cached, live):
            for a, b in zip(a_rows, b_rows):
                max_diff = max(max_diff, abs(a["score"] - b["score"]))
    return {
        "fractions": len(FRACTIONS),
        "seeds": len(seeds),
        "epochs": epochs,
        "train": n_train,
        "validation": n_val,
        "cached_s": times["cached"],
        "reencode_s": times["reencode"],
        "speedup": times["reencode"] / times["cached"],
        "max_score_diff": max_diff,
        "target_speedup": 5.0,
    }


def bench_real_tokens(model, tok, n_examples: int, batch: int, reps: int) -> dict:
    """The encoder's dense layers on the real tokens only (`papa.unpad.dense_on_real_tokens`, what the
    workflow's model jobs run on the CPU) vs on every padded position, in the two ways a job runs the
    encoder: encoding hidden states with half the heads constant (a probe's cache, averaging) and one
    lambda step (mix, gradients to the lambdas through the frozen encoder). Rotten Tomatoes at N = 64,
    as the default run tokenizes it; interleaved rounds, median of per-round ratios of CPU time; the
    hidden states and gradients at the real tokens compared bit for bit."""
    from papa.unpad import dense_on_real_tokens

    sents, _ = texts(n_examples, seed=2)
    enc = papa.encode(tok, sents, max_length=64)
    real = torch.as_tensor(enc.attention_mask != 0)
    L, H = papa.model_shape(model)
    C = papa.average_attention(model, enc.batches(batch))
    static = select_static(head_order("random", (L, H), seed=0), 0.5, (L, H))
    chunks = [np.arange(i, min(i + batch, len(enc))) for i in range(0, len(enc), batch)]

    def encode():
        out = []
        with torch.inference_mode(), papa.patch(model, C, static=static):
            for idx in chunks:
                h = torch.stack(model(**enc.model_inputs(idx), output_hidden_states=True).hidden_states, 1)
                out.append(h.transpose(1, 2)[real[idx]])
        return torch.cat(out)

    def lambda_step():
        with papa.patch(model, C, mix=True) as handle:
            for idx in chunks:
                h = model(**enc.model_inputs(idx)).last_hidden_state[real[idx]]
                h.pow(2).mean().backward()
            (lam,) = handle.parameters()
            return lam.grad.clone()

    results = {}
    for name, work in (("encode", encode), ("lambda_step", lambda_step)):
        times = {"padded": [], "real_tokens": []}
        outs = {}
        for r in range(reps + 1):  # the first round a warm-up
            for variant in times:
                with dense_on_real_tokens(model, enabled=variant == "real_tokens") as rows:
                    t0 = time.process_time()
                    outs[variant] = work()
                    if r:
                        times[variant].append(time.process_time() - t0)
        a, b = outs["real_tokens"], outs["padded"]
        results[name] = {
            "padded_cpu_s": statistics.median(times["padded"]),
            "real_tokens_cpu_s": statistics.median(times["real_tokens"]),
            "ratio": statistics.median(t / p for t, p in zip(times["real_tokens"], times["padded"])),
            "bit_identical": bool(torch.equal(a, b)),
            "max_abs_diff": float((a - b).abs().max()),
        }
    return {
        "examples": n_examples,
        "N": 64,
        "batch": batch,
        "real_token_share": float(real.float().mean()),
        "dense_rows_share": rows.fraction,
        **results,
    }


def bench_noop_dry_run() -> dict | None:
    if not (ROOT / "results/tables/summary.parquet").exists():
        return None
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = subprocess.run([snakemake, "-n"], cwd=ROOT, capture_output=True, text=True)
        ts.append(time.perf_counter() - t0)
    nothing = "Nothing to be done" in p.stdout + p.stderr
    out = {"seconds_median": statistics.median(ts), "nothing_to_do": nothing, "target_seconds": 5.0}
    # snakemake-executor-plugin-slurm runs `scontrol show config` at every Snakemake start (for
    # its help text): instant without Slurm or with a reachable controller, up to its 10 s
    # timeout when the Slurm client is installed but the controller is down
    if shutil.which("scontrol"):
        t0 = time.perf_counter()
        q = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30)
        out |= {"scontrol_seconds": time.perf_counter() - t0, "slurm_controller_reachable": q.returncode == 0}
    else:
        out["scontrol_seconds"] = None
    return out


#: ``--only``'s names -> the key of the figure each writes in figures.json (the order they run in)
BENCHMARKS = {
    "forward": "forward",
    "averaging": "averaging",
    "memory": "averaging_memory",
    "encode_once": "encode_once",
    "real_tokens": "real_tokens",
    "noop": "noop_dry_run",
}
#: figures.json's keys that describe the run that wrote it, not a figure
RUN_KEYS = ("machine", "model")


def earlier_figures(path: Path) -> dict:
    """The figures an earlier run wrote to ``path`` (none: ``{}``), read before anything is measured: a file that is
    not figures.json's JSON stops the run here rather than after minutes of measuring, and is not overwritten."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as e:
        sys.exit(f"run.py: cannot read {path} ({e}): move it away or give another --out")
    try:
        figures = json.loads(text)
    except ValueError as e:
        sys.exit(f"run.py: {path} is not JSON ({e}): move it away or give another --out")
    if not isinstance(figures, dict):
        sys.exit(f"run.py: {path} is not a figures.json (a JSON object of figures): move it away or give another --out")
    return figures


def merge_figures(earlier: dict, new: dict) -> dict:
    """``new`` (this run's machine, model and figures) over ``earlier`` (the file's): the figures of benchmarks not
    rerun are kept, each one measured on another machine or model than this run's carrying the one it was measured
    on (its own ``machine``/``model``, or the earlier file's); a benchmark rerun that measured nothing (``noop``
    without a finished default run: None) keeps the earlier figure."""
    merged = {k: new[k] for k in RUN_KEYS}
    for key, fig in earlier.items():
        if key in RUN_KEYS:
            continue
        if isinstance(fig, dict):
            fig = dict(fig)
            for k in RUN_KEYS:
                if k in earlier and k not in fig and earlier[k] != new[k]:
                    fig[k] = earlier[k]
        merged[key] = fig
    for key, fig in new.items():
        if key not in RUN_KEYS and (fig is not None or key not in merged):
            merged[key] = fig
    return merged


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a few minutes)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    # nargs="+": a bare --only (no name) is refused rather than running everything; choices: a misspelled name is
    # refused rather than running nothing (and writing a figures.json without figures)
    ap.add_argument(
        "--only",
        nargs="+",
        choices=list(BENCHMARKS),
        metavar="NAME",
        help=f"run only these ({', '.join(BENCHMARKS)}); the other figures of figures.json are kept",
    )
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    args = ap.parse_args(argv)
    if args.memory_child:
        return peak_memory_child(args.memory_child, args.threads)
    out = Path(args.out)
    earlier = earlier_figures(out / "figures.json")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    import transformers

    model, tok = papa.load_encoder("minilm", device="cpu")
    q = args.quick
    only = set(args.only or BENCHMARKS)
    figures = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "model": "all-MiniLM-L6-v2 (6 layers x 12 heads, d'=32)",
    }
    out.mkdir(parents=True, exist_ok=True)
    if "forward" in only:
        rows, figures["forward"] = bench_forward(model, tok, 128, 16 if q else 32, 3 if q else 11)
        import pandas as pd

        with atomic_path(out / "forward.parquet") as tmp:
            pd.DataFrame(rows).to_parquet(tmp, index=False)
        figures["forward"]["curve"] = rows
    if "averaging" in only:
        figures["averaging"] = bench_averaging(model, tok, 256 if q else 1024, 32, 3 if q else 5)
    if "memory" in only:
        figures["averaging_memory"] = bench_memory(tok, 500 if q else 1000, 5000 if q else 10000)
    if "encode_once" in only:
        figures["encode_once"] = bench_encode_once(
            model, tok, 200 if q else 400, 100 if q else 200, 2 if q else 4, [0, 1, 2]
        )
    if "real_tokens" in only:
        figures["real_tokens"] = bench_real_tokens(model, tok, 256 if q else 512, 32, 3 if q else 5)
    if "noop" in only:
        figures["noop_dry_run"] = bench_noop_dry_run()
    merged = merge_figures(earlier, figures)
    write_text(out / "figures.json", json.dumps(merged, indent=2, default=str) + "\n")  # the earlier whole if cut
    kept = sorted(k for k in merged if k not in RUN_KEYS and k not in figures)
    if kept:
        print(f"figures.json: kept the earlier {', '.join(kept)}", file=sys.stderr)
    if figures.get("noop_dry_run", 0) is None and merged.get("noop_dry_run") is not None:
        print("figures.json: no finished default run in results/ to time: kept the earlier noop_dry_run",
              file=sys.stderr)  # fmt: skip
    print(
        json.dumps(
            {k: v for k, v in figures.items() if k != "forward"}
            | {"forward": {k: v for k, v in figures.get("forward", {}).items() if k != "curve"}},
            indent=2,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
