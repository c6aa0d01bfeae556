"""Would `torch.compile` speed up the gradient jobs? The lambda and trained-constant steps, eager and compiled.

    python benchmarks/gpu_compile.py [--out DIR]               # on a CUDA device: gpu_compile-tf32.json
    python benchmarks/gpu_compile.py --tiny --device cpu --modes eager default   # the code path (tests)
    python benchmarks/gpu_compile.py --loop             # papa.probe's own loops, eager against compiled
    python benchmarks/gpu_compile.py --capture-scalars  # dynamo traces Tensor.item() (DeBERTa's graph breaks)
    python benchmarks/gpu_compile.py --no-steps --models bert-large-uncased   # the re-encoding feature pass only

`benchmarks/gpu_cost.py` found that with TF32 products (``precision: tf32``) the gradient steps of
`papa.probe.learn_lambdas` (``patch(mix=True)``) and of a ``*_trained`` probe (half the heads constant,
the constants trainable) stay slow at paper.yaml's batch of 16: BERT-base's lambda step takes 4.6 of
its forward passes, launch-bound (many small kernels, each waiting on Python). This script times the
same steps as `gpu_cost.py` (a forward pass with every hidden state, then the gradient of a loss on them
into the patch's parameters) on the patched model as it is (``eager``) and under ``torch.compile``:

* ``default``: Inductor's fused kernels (fewer, larger launches);
* ``reduce-overhead``: the same, replayed as CUDA graphs (one launch per graph).

For each it records the median step after the warm-up, the warm-up's seconds (the compilation, paid
once per job and again after each change of the patch), and how far the compiled gradients are from
the eager ones (largest absolute difference over the largest eager gradient). The JSON is rewritten
after every timing, so a run stopped at a time limit keeps what it finished.

It also records how many graphs dynamo cuts each patched forward pass into (``<step>_graphs``: graphs, graph
breaks and their reasons, from ``torch._dynamo.explain``): every break is a return to eager Python, which no
mode removes. DeBERTa's attention (transformers' ``modeling_deberta``) calls ``Tensor.item()`` on the
attention span in every layer, so dynamo cuts it into 19 graphs (tiny, two layers; BERT's: 2).
``--capture-scalars`` compiles and times with ``torch._dynamo.config.capture_scalar_outputs`` on, which
traces those calls instead (DeBERTa: 2 graphs, as BERT) and writes ``gpu_compile-<precision>-scalars.json``:
whether that makes DeBERTa's compiled steps pay needs a GPU.

It also times the feature pass of a fixed-matrix probe that re-encodes every epoch (``feature_batch8_<mode>``:
no gradients, at the probe's batch and length, paper.yaml's MNLI probes' 8 x 256 tokens; half of paper.yaml's
GPU-hours under tf32), which config ``compile`` does not reach (rule ``probe`` has no such param): whether it would
pay.

``--loop`` runs the library's own training instead (config ``compile``, `papa.models.compiled`):
`papa.probe.learn_lambdas` and a trained-constant `papa.probe.run_probe` for one epoch on random tokens
(with a partial last batch, and evaluation), eager and in the last of ``--modes``: wall seconds (the
compilations included), and how far the compiled lambdas are from the eager ones.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_cost  # noqa: E402

import papa  # noqa: E402
from papa.io import write_text  # noqa: E402
from papa.models import PRECISIONS, cuda_matmul_precision  # noqa: E402
from papa.selection import head_order, select_static  # noqa: E402

MODES = ("eager", "default", "reduce-overhead")
#: the base encoders are the launch-bound ones; DeBERTa-large runs the grid's longest gradient jobs
DEFAULT_MODELS = ("bert-base-uncased", "microsoft/deberta-base", "microsoft/deberta-large")
#: The re-encoding feature pass's batch and length: paper.yaml's MNLI probes (the grid's re-encoding ones).
REENCODE_BATCH, REENCODE_N = 8, 256
WARMUP = 3  # calls before timing: compilation on the first, CUDA-graph recording on the next ones


def one_model(
    hub_id: str, tiny: bool, device, reps: int, modes, batches, res: dict, save=lambda: None, feature_batch: int = 0
) -> dict:
    """Fill ``res`` with one encoder's timings, calling ``save`` after each."""
    model = gpu_cost.build(hub_id, tiny, device)
    L, H = papa.model_shape(model)
    half = select_static(head_order("random", (L, H), seed=0), 0.5, (L, H))
    C = papa.average_attention(model, [gpu_cost.inputs(model, 8, gpu_cost.TRAIN_N, device)], log_every=1e9)
    res.update(layers=L, heads=H)
    for batch_size in batches:
        small = gpu_cost.inputs(model, batch_size, gpu_cost.TRAIN_N, device, seed=1)
        # a loss with gradients well above rounding (gpu_cost.py's squared hidden states give ~1e-12 at
        # lambda = 0.5 on tiny shapes): the hidden states projected on a fixed random direction
        g = torch.Generator().manual_seed(3)
        direction = torch.randn(L, int(model.config.hidden_size), generator=g).to(device)
        with torch.no_grad():  # the feature pass at this batch, eager: the unit the steps are counted in
            r = gpu_cost.measure(lambda small=small: model(**small, output_hidden_states=True), device, reps)
        res[f"forward_batch{batch_size}"] = r["s"]
        for step_kind, kw in (("lambda", dict(mix=True)), ("trained", dict(static=half, trainable_constants=True))):
            if f"{step_kind}_graphs" not in res:  # the same at every batch size
                res[f"{step_kind}_graphs"] = graphs(model, C, kw, small)
                save()
            reference = None
            for mode in modes:
                runner = model if mode == "eager" else torch.compile(model, mode=mode)

                def step(params, runner=runner, small=small, direction=direction):
                    hidden = runner(**small, output_hidden_states=True).hidden_states
                    loss = sum((h.float() @ d).mean() for h, d in zip(hidden[1:], direction))
                    return torch.autograd.grad(loss, params)

                def timed(kw=kw, step=step, step_kind=step_kind):
                    with papa.patch(model, C, **kw) as h:
                        params = [h.lambda_logits] if step_kind == "lambda" else [h.constants]
                        r = gpu_cost.measure(lambda: step(params), device, reps, warmup=WARMUP)
                        return r, [g.detach().clone() for g in step(params)]

                key = f"{step_kind}_batch{batch_size}_{mode}"
                if (out := attempt(timed, res, key, hub_id, save)) is None:
                    continue
                r, grads = out
                r["over_forward"] = r["s"] / res[f"forward_batch{batch_size}"]
                if reference is None:
                    reference = grads
                else:
                    scale = max(g.abs().max().item() for g in reference) or 1.0
                    r["grad_deviation"] = max((g - e).abs().max().item() for g, e in zip(grads, reference)) / scale
                res[key] = r
                save()
                print(f"{hub_id} {key}: {r['s'] * 1e3:.1f} ms ({r['over_forward']:.1f} forward passes), "
                      f"warm-up {r['warmup_s']:.0f} s", flush=True)  # fmt: skip
    if feature_batch:
        feature_pass(model, half, feature_batch, device, reps, modes, res, save, hub_id)
    return res


def attempt(fn, res: dict, key: str, hub_id: str, save):
    """``fn()``, or None after recording its error under ``res[key]``: a mode that fails on a model is a finding,
    not the end of the run. Dynamo's caches are reset either way, so the next mode compiles afresh."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a mode that fails (dynamo's errors) is recorded, the others measured
        res[key] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
        print(f"{hub_id} {key}: {res[key]['error']}", flush=True)
        save()
        return None
    finally:
        torch._dynamo.reset()


def feature_pass(model, static, batch_size: int, device, reps: int, modes, res: dict, save, hub_id: str) -> None:
    """``feature_batch<B>_<mode>``: the feature pass of a fixed-matrix probe that re-encodes every epoch
    (cache strategy ``reencode``; paper.yaml's MNLI-large probes, 238 of its 480 GPU-hours under tf32): the
    encoder with ``static`` heads constant, no gradients, every hidden state, at the probe's batch (``batch_size``)
    and MNLI's length (`REENCODE_N`; the re-encoding probes' batches: their cache's 64 encodes only validation).
    ``deviation``: the compiled hidden states' largest difference from the eager ones over their std."""
    big = gpu_cost.inputs(model, batch_size, REENCODE_N, device, seed=2)
    C = papa.average_attention(model, [gpu_cost.inputs(model, 8, REENCODE_N, device)], log_every=1e9)  # at its N
    reference = None
    for mode in modes:
        runner = model if mode == "eager" else torch.compile(model, mode=mode)
        key = f"feature_batch{batch_size}_{mode}"

        def timed(runner=runner):
            with papa.patch(model, C, static=static), torch.no_grad():
                run = lambda: runner(**big, output_hidden_states=True).hidden_states  # noqa: E731
                return gpu_cost.measure(run, device, reps, warmup=WARMUP), torch.stack([h.float() for h in run()])

        if (out := attempt(timed, res, key, hub_id, save)) is None:
            continue
        r, hidden = out
        if reference is None:
            reference = hidden
        else:
            r["deviation"] = ((hidden - reference).abs().max() / reference.std()).item()
            eager = res.get(f"feature_batch{batch_size}_eager", {}).get("s")
            r["speedup"] = eager / r["s"] if eager else None
        res[key] = r
        save()
        print(f"{hub_id} {key}: {r['s'] * 1e3:.1f} ms, warm-up {r['warmup_s']:.0f} s", flush=True)


def graphs(model, C, patch_kw: dict, batch: dict) -> dict:
    """How dynamo cuts the forward pass of ``model`` patched with ``patch_kw`` into graphs (``torch._dynamo.explain``,
    under the dynamo config in force): graph count, graph breaks, and their distinct reasons (first lines)."""
    with papa.patch(model, C, **patch_kw):
        ex = torch._dynamo.explain(model)(**batch, output_hidden_states=True)
    torch._dynamo.reset()
    reasons = sorted({str(r.reason).strip().splitlines()[0][:200] for r in ex.break_reasons})
    return {"graphs": ex.graph_count, "breaks": ex.graph_break_count, "reasons": reasons}


def loop(hub_id: str, tiny: bool, device, mode: str, res: dict, save=lambda: None, n_train: int = 408) -> dict:
    """``--loop``: the library's lambda and trained-constant trainings, eager and under ``mode``."""
    import numpy as np

    from papa.encoding import Encoded
    from papa.probe import TrainConfig, learn_lambdas, run_probe

    model = gpu_cost.build(hub_id, tiny, device)
    n = 16 if tiny else gpu_cost.TRAIN_N

    def data(rows, seed):
        b = gpu_cost.inputs(model, rows, n, "cpu", seed=seed)
        ids, mask = b["input_ids"].numpy(), b["attention_mask"].numpy()
        return Encoded(ids * mask, mask, None, (ids[:, 1] % 2).astype(np.int64), "papa", n)

    train, val = data(n_train, 0), data(64, 1)
    cfg = TrainConfig(lr=1e-3, batch_size=gpu_cost.TRAIN_BATCH, epochs=1, eval_batch_size=64)
    first = train.subset(np.arange(min(64, n_train)))
    C = papa.average_attention(model, first.batches(32, device=device), log_every=1e9)
    L, H = papa.model_shape(model)
    static = select_static(head_order("random", (L, H), seed=0), 0.5, (L, H))
    lambdas = {}
    for m in ("eager", mode):
        gpu_cost.sync(device)
        t0 = time.perf_counter()
        lam, rows = learn_lambdas(model, C, train, val, "sequence", 2, ["accuracy"], cfg, compile=m)
        gpu_cost.sync(device)
        lambdas[m] = lam
        res[f"learn_lambdas_{m}"] = {"s": time.perf_counter() - t0, "accuracy": rows[-1]["score"]}
        save()
        t0 = time.perf_counter()
        rows = run_probe(
            model, train, val, "sequence", 2, ["accuracy"], cfg, seeds=[0],
            trainable=lambda: papa.patch(model, C, static=static, trainable_constants=True), compile=m,
        )  # fmt: skip
        gpu_cost.sync(device)
        res[f"trained_probe_{m}"] = {"s": time.perf_counter() - t0, "accuracy": rows[-1]["score"]}
        torch._dynamo.reset()
        save()
        print(f"{hub_id} {m}: learn_lambdas {res[f'learn_lambdas_{m}']['s']:.1f} s, trained probe "
              f"{res[f'trained_probe_{m}']['s']:.1f} s", flush=True)  # fmt: skip
    res["lambda_max_abs_diff"] = (lambdas[mode] - lambdas["eager"]).abs().max().item()
    res["lambda_spread"] = lambdas["eager"].std().item()
    res["n_train"], res["batches"] = n_train, -(-n_train // cfg.batch_size)
    save()
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    gpu_cost.common_arguments(ap, reps=20)
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), choices=list(gpu_cost.SHAPES))
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument(
        "--batches", nargs="+", type=int, help=f"training batch sizes (default {gpu_cost.TRAIN_BATCH}, --tiny 4)"
    )
    ap.add_argument(
        "--feature-batch",
        type=int,
        help=f"batch of the re-encoding feature pass (default {REENCODE_BATCH}, --tiny 8; 0: not timed)",
    )
    ap.add_argument("--no-steps", action="store_true", help="time the feature pass only, not the gradient steps")
    ap.add_argument("--precision", default="tf32", choices=PRECISIONS)
    ap.add_argument("--loop", action="store_true", help="papa.probe's lambda and trained-constant loops instead")
    ap.add_argument(
        "--capture-scalars",
        action="store_true",
        help="dynamo traces Tensor.item() (capture_scalar_outputs) instead of breaking the graph there",
    )
    args = ap.parse_args(argv)
    result = {
        **gpu_cost.header("gpu_compile.py", args.device, args.tiny, args.precision),
        "capture_scalar_outputs": args.capture_scalars,
        "N": gpu_cost.TRAIN_N,
        "reps": args.reps,
        "models": {},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = (
        out
        / f"gpu_compile{'-loop' if args.loop else ''}-{args.precision}{'-scalars' if args.capture_scalars else ''}.json"
    )

    def save():
        write_text(path, json.dumps(result, indent=2) + "\n")  # an interrupted save leaves the earlier whole

    for hub_id in args.models:
        t0 = time.perf_counter()
        res = result["models"][hub_id] = {}
        with (
            cuda_matmul_precision(args.precision),
            torch._dynamo.config.patch(capture_scalar_outputs=args.capture_scalars),
        ):
            if args.loop:
                loop(hub_id, args.tiny, args.device, args.modes[-1], res, save, n_train=40 if args.tiny else 408)
            else:
                batches = [] if args.no_steps else args.batches or [4 if args.tiny else gpu_cost.TRAIN_BATCH]
                feature_batch = (
                    args.feature_batch if args.feature_batch is not None else (8 if args.tiny else REENCODE_BATCH)
                )
                one_model(hub_id, args.tiny, args.device, args.reps, args.modes, batches, res, save, feature_batch)
        res["seconds"] = time.perf_counter() - t0
        save()
        gc.collect()
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
    return result


if __name__ == "__main__":
    main()
