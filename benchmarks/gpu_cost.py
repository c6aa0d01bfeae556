"""The throughput behind papa.cost's GPU-hours, measured per paper encoder on one GPU.

    python benchmarks/gpu_cost.py [--out DIR]          # on a CUDA device: writes gpu_cost.json
    python benchmarks/gpu_cost.py --precision tf32     # config precision: tf32 (gpu_cost-tf32.json)
    python benchmarks/gpu_cost.py --tiny --device cpu  # the code path, on tiny shapes (tests)

`benchmarks/paper_cost.py` turns encoder passes into GPU-hours. Without this file it assumes one
throughput (a BERT-base-shaped forward, `gpu_check.json`) scaled by parameters, a gradient pass at
two forward passes (`papa.cost.GRAD_PASS_COST`), and no extra cost for DeBERTa's relative attention.
This script measures instead, for every encoder of `papa.cost.MODELS` (the paper's), built from its
hub config's shape with random weights (no hub; timings, not science), on the stages' own calls:

* ``forward``: the probe stage's feature pass (`papa.probe`: frozen encoder, ``inference_mode``,
  every hidden state), the cache's batch of 64, at N = 64, 128 and 256, unpatched (fraction 1) and
  with half the heads constant (`papa.patch`, static);
* ``lambda``: a step of `papa.probe.learn_lambdas` (``patch(mix=True)``: every head mixes its
  attention and its constant, gradients through the frozen encoder into the lambda logits), and
  ``trained``: a step of a ``*_trained`` probe (half the heads constant, the constants trainable),
  both at N = 128 and paper.yaml's training batch of 16;
* ``average`` and ``effective``: averaging (`papa.average_attention`, rule average_attention: every layer's
  attention probabilities recorded, or their effective attention), paper.yaml's averaging batch of 32, at
  N = 64, 128 and 256 (`papa.cost.Throughput.average_cost` reads them against the feature pass);
* the peak GPU memory of each.

Each timing is the median of ``--reps`` calls after a warm-up; inputs are padded batches (lengths
drawn between N/4 and N), the way the stages see them. Weights in float32, as the workflow loads them;
their matrix products in ``--precision`` (fp32 or tf32, set as the stages set the config's ``precision``),
and under tf32 also how far it moves the hidden states from fp32 (``deviation_from_fp32``).
benchmarks/reference/gpu_cost-h100-tf32.json was measured by this script's earlier ``--matmul high``
(``torch.set_float32_matmul_precision("high")``: on CUDA the same TF32 products).
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

import papa  # noqa: E402
from papa.cost import MODELS  # noqa: E402
from papa.io import write_text  # noqa: E402
from papa.models import FAMILIES, PRECISIONS, cuda_matmul_precision, prepare  # noqa: E402
from papa.selection import head_order, select_static  # noqa: E402

_ROBERTA = dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)  # fmt: skip
_DEBERTA = dict(vocab_size=50265, max_position_embeddings=512, type_vocab_size=0, relative_attention=True,
                max_relative_positions=-1, pos_att_type=["c2p", "p2c"], position_biased_input=False,
                layer_norm_eps=1e-7)  # fmt: skip
_LARGE = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)

#: hub id -> (model_type, the config keys of its hub config.json that set its shape and cost); every
#: other key is transformers' default, which for BERT, RoBERTa and DeBERTa is the base shape (12 layers
#: x 12 heads, hidden 768, feed-forward 3072; ELECTRA's default is the small discriminator, so its base
#: shape is given). Total parameters, checked: 110M, 335M, 125M, 355M, 139M, 405M, 110M.
SHAPES = {
    "bert-base-uncased": ("bert", {}),
    "bert-large-uncased": ("bert", _LARGE),
    "FacebookAI/roberta-base": ("roberta", _ROBERTA),
    "FacebookAI/roberta-large": ("roberta", {**_ROBERTA, **_LARGE}),
    "microsoft/deberta-base": ("deberta", _DEBERTA),
    "microsoft/deberta-large": ("deberta", {**_DEBERTA, **_LARGE}),
    "google/electra-base-discriminator": (
        "electra",
        dict(embedding_size=768, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
    ),
}
#: --tiny: every family's code path at a shape that runs in seconds on a CPU
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, embedding_size=32)
#: (and batches of 8 and 4)

FORWARD_BATCH = 64  # paper.yaml's cache.batch_size: the feature pass
TRAIN_BATCH = 16  # paper.yaml's probe/lambda batch sizes are 8 to 32
AVERAGE_BATCH = 32  # paper.yaml's averaging.batch_size
LENGTHS = (64, 128, 256)
TRAIN_N = 128


def build(hub_id: str, tiny: bool, device) -> torch.nn.Module:
    """A randomly initialised encoder of ``hub_id``'s shape, attention as `papa.load_encoder` sets it."""
    import transformers as tf

    model_type, keys = SHAPES[hub_id]
    cfg = tf.AutoConfig.for_model(model_type, **{**keys, **(TINY if tiny else {})})
    impl = "sdpa" if FAMILIES[model_type].route == "registry" else None
    torch.manual_seed(0)
    with torch.device(device):
        model = tf.AutoModel.from_config(cfg, **({"attn_implementation": impl} if impl else {}))
    return prepare(model, device)


def inputs(model, batch: int, n: int, device, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, min(20000, model.config.vocab_size), (batch, n), generator=g)
    lengths = torch.randint(n // 4, n + 1, (batch,), generator=g)
    mask = (torch.arange(n)[None] < lengths[:, None]).long()
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)  # the GPU given (cuda:1 too), not the current one


def measure(fn, device, reps: int, warmup: int = 1) -> dict:
    """Median seconds of ``fn`` over ``reps`` calls after ``warmup`` calls (``warmup_s``: their seconds, where
    a compiled ``fn`` compiles), and the peak memory of a call."""
    cuda = torch.device(device).type == "cuda"
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    sync(device)
    warm = time.perf_counter() - t0
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync(device)
        ts.append(time.perf_counter() - t0)
    out = {"s": sorted(ts)[len(ts) // 2], "warmup_s": warm}
    if cuda:
        out["peak_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return out


def deviation(model, device, precision: str) -> dict:
    """How far ``precision`` moves the feature pass from full fp32: the largest absolute difference of any
    hidden state, and its ratio to the hidden states' standard deviation."""
    batch = inputs(model, 8, TRAIN_N, device, seed=2)
    out = {}
    for p in ("fp32", precision):
        with cuda_matmul_precision(p), torch.inference_mode():
            out[p] = torch.stack(model(**batch, output_hidden_states=True).hidden_states[1:]).float()
    diff = (out[precision] - out["fp32"]).abs().max().item()
    return {"max_abs": diff, "relative_to_std": diff / out["fp32"].std().item()}


def one_model(hub_id: str, tiny: bool, device, reps: int, precision: str = "fp32") -> dict:
    """Every timing of one encoder, its matrix products in ``precision`` (the config's, applied as the
    workflow's stages apply it: `papa.models.cuda_matmul_precision`)."""
    model = build(hub_id, tiny, device)
    dev = deviation(model, device, precision) if precision != "fp32" else None
    with cuda_matmul_precision(precision):
        res = _timings(model, tiny, device, reps)
    if dev is not None:
        res["deviation_from_fp32"] = dev
    return res


def _timings(model, tiny: bool, device, reps: int) -> dict:
    fwd, train, avg = (8, 4, 4) if tiny else (FORWARD_BATCH, TRAIN_BATCH, AVERAGE_BATCH)
    L, H = papa.model_shape(model)
    half = select_static(head_order("random", (L, H), seed=0), 0.5, (L, H))
    res = {"layers": L, "heads": H, "hidden": int(model.config.hidden_size),
           "parameters": sum(p.numel() for p in model.parameters())}  # fmt: skip

    def features(batch):
        with torch.inference_mode():
            return model(**batch, output_hidden_states=True).hidden_states

    for n in LENGTHS:
        batch = inputs(model, fwd, n, device)
        r = measure(lambda batch=batch: features(batch), device, reps)
        res[f"forward_N{n}"] = {**r, "tokens_per_s": fwd * n / r["s"]}
    for n in LENGTHS:
        batch = inputs(model, avg, n, device, seed=3)
        for kind in ("average", "effective"):
            r = measure(lambda b=batch, k=kind: papa.average_attention(model, [b], kind=k, log_every=1e9), device, reps)
            res[f"{kind}_N{n}"] = {**r, "tokens_per_s": avg * n / r["s"]}
    batch = inputs(model, fwd, TRAIN_N, device)
    C = papa.average_attention(model, [batch], log_every=1e9)
    with papa.patch(model, C, static=half):
        r = measure(lambda: features(batch), device, reps)
    res[f"forward_half_constant_N{TRAIN_N}"] = {**r, "tokens_per_s": fwd * TRAIN_N / r["s"]}

    small = inputs(model, train, TRAIN_N, device, seed=1)
    r = measure(lambda: features(small), device, reps)
    res[f"forward_batch{train}_N{TRAIN_N}"] = {**r, "tokens_per_s": train * TRAIN_N / r["s"]}

    def step(params):  # forward, then the gradient of a loss on every hidden state into ``params``
        hidden = model(**small, output_hidden_states=True).hidden_states
        return torch.autograd.grad(sum(h.float().pow(2).mean() for h in hidden[1:]), params)

    with papa.patch(model, C, mix=True) as h:
        r = measure(lambda: step([h.lambda_logits]), device, reps)
    res["lambda"] = {**r, "tokens_per_s": train * TRAIN_N / r["s"]}
    with papa.patch(model, C, static=half, trainable_constants=True) as h:
        r = measure(lambda: step([h.constants]), device, reps)
    res["trained"] = {**r, "tokens_per_s": train * TRAIN_N / r["s"]}
    base = res[f"forward_N{TRAIN_N}"]["tokens_per_s"]
    # what papa.cost multiplies a gradient job's example-passes by: its time per token against the feature pass's
    res["grad_pass_cost"] = {k: base / res[k]["tokens_per_s"] for k in ("lambda", "trained")}
    return res


def device_name(value: str) -> str:
    """``--device``: a name torch reads as a device (cuda, cuda:1, cpu); argparse refuses any other with its usage
    (torch's own refusal is a RuntimeError traceback from deep inside the first call that places a tensor)."""
    try:
        torch.device(value)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a torch device: give cuda, cuda:N or cpu") from None
    return value


def common_arguments(ap: argparse.ArgumentParser, reps: int) -> None:
    """The options every GPU benchmark here takes: where to write, on what device, tiny shapes, repetitions."""
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    ap.add_argument("--device", default="cuda", type=device_name, help="cuda (default), cuda:N, or cpu with --tiny")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes: the code path, not the timings")
    ap.add_argument("--reps", type=int, default=reps)


def header(script: str, device, tiny: bool, precision: str) -> dict:
    """The first fields of a result JSON (where it ran, on what); exits if ``device`` is CUDA and none is there."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit(f"{script} needs a CUDA device (or --device cpu --tiny for the code path)")
    if dev.type == "cuda" and (dev.index or 0) >= torch.cuda.device_count():  # torch's error came at the first tensor
        sys.exit(f"{script}: --device {device}, but this machine has {torch.cuda.device_count()} CUDA device(s), "
                 f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")  # fmt: skip
    import transformers

    return {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",  # the GPU used, not GPU 0
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tiny": tiny,
        "precision": precision,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(ap, reps=10)
    # choices: a misspelled hub id is refused by argparse (it was a KeyError after the other models' timings)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS), metavar="HUB_ID",
                    help=f"hub ids of papa.cost.MODELS (default: all of them: {', '.join(MODELS)})")  # fmt: skip
    ap.add_argument(
        "--precision",
        default="fp32",
        choices=PRECISIONS,
        help="CUDA's float32 matmuls, as the config's precision sets them (fp32: the workflow's default)",
    )
    args = ap.parse_args(argv)
    missing = set(MODELS) - set(SHAPES)
    if missing:
        sys.exit(f"gpu_cost.py has no shape for {', '.join(sorted(missing))}: add it to SHAPES")
    result = {
        **header("gpu_cost.py", args.device, args.tiny, args.precision),
        "forward_batch": 8 if args.tiny else FORWARD_BATCH,
        "train_batch": 4 if args.tiny else TRAIN_BATCH,
        "average_batch": 4 if args.tiny else AVERAGE_BATCH,
        "models": {},
    }
    for hub_id in args.models:
        t0 = time.perf_counter()
        result["models"][hub_id] = one_model(hub_id, args.tiny, args.device, args.reps, args.precision)
        gc.collect()  # the model of one_model, before the next one is built
        if torch.device(args.device).type == "cuda":
            torch.cuda.empty_cache()
        r = result["models"][hub_id]
        print(f"{hub_id}: forward N128 {r['forward_N128']['tokens_per_s']:,.0f} tokens/s, gradient passes "
              f"{r['grad_pass_cost']['lambda']:.2f}x (lambda) and {r['grad_pass_cost']['trained']:.2f}x (trained), "
              f"averaging N256 {r['average_N256']['tokens_per_s']:,.0f} tokens/s "
              f"({r['effective_N256']['tokens_per_s']:,.0f} effective), "
              f"{time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "gpu_cost.json" if args.precision == "fp32" else f"gpu_cost-{args.precision}.json"
    write_text(out / name, json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
