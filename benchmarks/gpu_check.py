"""PAPA on a CUDA device: the invariants of tests/test_patching.py, then forward timings.

    python benchmarks/gpu_check.py [--out DIR]

Needs torch with CUDA and transformers; no model hub (randomly initialised models built from
configs: code paths and timings, not science). Writes ``gpu_check.json`` to ``--out``.

1. For tiny models of every family on ``cuda``: constant matrices averaged over one input
   and applied (all heads static) reproduce its hidden states; ``mix=True`` with every lambda
   at 1 is the original model; padding inside a batch changes no example's result.
2. A BERT-base-shaped encoder (12 x 12 heads, d' = 64) at N = 128: forward time of stock
   eager and sdpa attention vs PAPA with every fraction of heads static, and
   `papa.average_attention` vs an eager forward with ``output_attentions=True``.
3. Effective attention (`papa.constants.effective_attention`) on padded batches of MiniLM's shape
   (d' = 32, N = 64) and BERT-base's (d' = 64, N = 128): examples/s of one layer's projector by
   ``method="cholesky_qr"`` (the default) and ``"svd"``, their largest difference, and
   `papa.average_attention(kind="effective")` examples/s on the BERT-base-shaped encoder.
4. Half precision (float16, bfloat16) on every family and the real MiniLM (`REAL`), padded batches, ``average``
   and ``effective`` constants:
   lambda 1 is the stock half-precision model, lambda 0 and all heads static stay finite on every position
   (padding included), and all heads static against the float32 model's (`half_precision`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_cost import measure  # noqa: E402  (benchmarks/, this script's folder)

import papa  # noqa: E402
from papa.io import write_text  # noqa: E402
from papa.selection import head_order, select_static  # noqa: E402
from tests.conftest import tiny_model  # noqa: E402
from tests.test_patching import FAMILIES, hidden, papa_batch, single  # noqa: E402


def to(batch, device):
    return {k: v.to(device) for k, v in batch.items()}


def invariants(device) -> dict:
    out = {}
    for fam in FAMILIES:
        model = tiny_model(fam).to(device)
        L, H = papa.model_shape(model)
        batch = to(papa_batch(model, [9]), device)
        C = papa.average_attention(model, [batch], log_every=1e9)
        ref = hidden(model, batch)
        with papa.patch(model, C, static=torch.ones(L, H, dtype=torch.bool)):
            rep = (hidden(model, batch) - ref)[0][:, batch["attention_mask"][0].bool()].abs().max().item()
        with papa.patch(model, C, mix=True) as h:
            h.set_lambdas(torch.ones(L, H))
            mix = (hidden(model, batch) - ref).abs().max().item()
        padded = to(papa_batch(model, [5, 9, 16], seed=3), device)
        with papa.patch(model, C, static=select_static(head_order("random", (L, H), seed=0), 0.5, (L, H))):
            full = hidden(model, padded)
            pad = max(
                (full[r : r + 1] - hidden(model, single(padded, r)))[0][:, padded["attention_mask"][r].bool()]
                .abs()
                .max()
                .item()
                for r in range(3)
            )
        out[fam] = {
            "reproduce": rep,
            "mix_lambda_one": mix,
            "padding": pad,
            "ok": rep < 1e-4 and mix < 1e-4 and pad < 1e-4,
        }  # TF32/cuBLAS tolerance on GPU
        print(fam, out[fam], flush=True)
    return out


#: Families `half_precision` runs besides tiny ones: the real all-MiniLM-L6-v2 (`papa.load_encoder("minilm")`),
#: whose effective constants in float16 once gave NaN on padded examples (a random tiny model never did).
REAL = {"minilm": ([7, 46, 48, 3], 48)}


def _half_model(fam, device, dtype=torch.float32):
    if fam in REAL:
        return papa.load_encoder(fam, device=device, dtype=dtype)[0].eval()
    return tiny_model(fam).to(device=device, dtype=dtype).eval()


def half_precision(device, families=FAMILIES) -> dict:
    """Each family in float16 and bfloat16 on ``device``, a padded batch (lengths 7 and 16 of 16; `REAL` models
    their own): with the model's own constants (``average`` and ``effective``, averaged in the model's dtype) every
    lambda at 1 is the stock half-precision model (largest difference), every lambda at 0 and every head static
    give finite hidden states on every position, padding included (a float16 pad row once divided by a subnormal
    normaliser: NaN), and all heads static lie within a half precision's rounding of the float32 model's all-static
    output (largest difference over real tokens, relative to the float32 output's largest value)."""
    out = {}
    for fam in families:
        model32 = _half_model(fam, device)
        L, H = papa.model_shape(model32)
        every = torch.ones(L, H, dtype=torch.bool)
        lengths, n = REAL.get(fam, ([7, 16], 16))
        batch = to(papa_batch(model32, lengths, seed=2, n=n), device)
        valid = batch["attention_mask"].bool()
        for dtype in (torch.float16, torch.bfloat16):
            model = _half_model(fam, device, dtype)
            ref = hidden(model, batch)
            res = {}
            for kind in ("average", "effective"):
                C32 = papa.average_attention(model32, [batch], kind=kind, log_every=1e9)
                with papa.patch(model32, C32, static=every):
                    static32 = hidden(model32, batch)
                C = papa.average_attention(model, [batch], kind=kind, log_every=1e9)
                with papa.patch(model, C, mix=True) as h:
                    h.set_lambdas(1.0)
                    lam1 = (hidden(model, batch) - ref).abs().max().item()
                    h.set_lambdas(0.0)
                    lam0_finite = bool(torch.isfinite(hidden(model, batch)).all())
                with papa.patch(model, C, static=every):
                    static = hidden(model, batch)
                rel = (
                    max(
                        (static[r][:, valid[r]].float() - static32[r][:, valid[r]]).abs().max().item()
                        for r in range(len(valid))
                    )
                    / static32.abs().max().item()
                )
                res[kind] = {
                    "lambda_one_max_abs": lam1,
                    "lambda_zero_finite": lam0_finite,
                    "static_finite": bool(torch.isfinite(static).all()),
                    "static_vs_float32_rel": rel,
                }
            res["ok"] = all(
                r["lambda_one_max_abs"] == 0 and r["lambda_zero_finite"] and r["static_finite"] for r in res.values()
            )
            out[f"{fam}/{str(dtype).removeprefix('torch.')}"] = res
            print(fam, dtype, res, flush=True)
    return out


def timed(fn, reps=20, device="cuda"):
    """Median seconds of ``fn`` on ``device`` (`gpu_cost.measure`: one warm-up, calls synchronised on that GPU)."""
    return measure(fn, device, reps)["s"]


def timings(device, batch=64, n=128) -> dict:
    import transformers as tf

    torch.manual_seed(0)
    model = papa.models.prepare(tf.AutoModel.from_config(tf.BertConfig(), attn_implementation="sdpa"), device)
    ids = torch.randint(1000, 20000, (batch, n), device=device)
    mask = torch.ones(batch, n, dtype=torch.long, device=device)
    lengths = torch.randint(n // 4, n, (batch,), device=device)
    mask[torch.arange(n, device=device)[None] >= lengths[:, None]] = 0
    mask[:, -1] = 1
    inputs = {"input_ids": ids, "attention_mask": mask}
    C = papa.average_attention(model, [inputs], log_every=1e9)
    L, H = papa.model_shape(model)

    def run():
        with torch.inference_mode():
            model(**inputs)

    res = {}
    for impl in ("eager", "sdpa"):
        model.set_attn_implementation(impl)
        res[f"stock_{impl}_ms"] = timed(run, device=device) * 1e3
    model.set_attn_implementation("sdpa")
    order = head_order("random", (L, H), seed=0)
    for f in (1.0, 0.5, 0.125, 0.0625, 0.0):
        with papa.patch(model, C, static=select_static(order, f, (L, H))):
            res[f"papa_f{f:g}_ms"] = timed(run, device=device) * 1e3
    res["all_static_vs_eager"] = res["papa_f0_ms"] / res["stock_eager_ms"]
    res["all_dynamic_vs_sdpa"] = res["papa_f1_ms"] / res["stock_sdpa_ms"]
    avg = timed(lambda: papa.average_attention(model, [inputs], log_every=1e9), 10, device)
    model.set_attn_implementation("eager")

    def eager_attn():
        with torch.inference_mode():
            model(**inputs, output_attentions=True)

    res["averaging_vs_eager_output_attentions"] = timed(eager_attn, 10, device) / avg
    model.set_attn_implementation("sdpa")
    res.update(batch=batch, N=n, model="BERT-base shape, random init")
    print(res, flush=True)
    return res


def effective_timings(device) -> dict:
    import transformers as tf

    from papa.constants import effective_attention

    res = {}
    g = torch.Generator(device="cpu").manual_seed(0)
    for name, heads, n, d, batch in (("minilm_N64", 12, 64, 32, 32), ("bert_base_N128", 12, 128, 64, 32)):
        lengths = torch.randint(n // 4, n + 1, (batch,), generator=g)
        valid = (torch.arange(n)[None] < lengths[:, None]).to(device)
        probs = torch.softmax(torch.randn(batch, heads, n, n, generator=g), -1).to(device)
        value = torch.randn(batch, heads, n, d, generator=g).to(device)
        out = {}
        for method, reps in (("cholesky_qr", 10), ("svd", 2)):
            k = batch if method == "cholesky_qr" else 4  # the SVD runs one matrix at a time on CUDA
            p, v, m = probs[:k], value[:k], valid[:k]
            sec = timed(
                lambda p=p, v=v, m=m, method=method: effective_attention(p, v, valid=m, method=method), reps, device
            )
            out[f"{method}_examples_per_s_one_layer"] = k / sec
        a = effective_attention(probs[:4], value[:4], valid=valid[:4], method="cholesky_qr")
        b = effective_attention(probs[:4], value[:4], valid=valid[:4], method="svd")
        out["max_abs_diff"] = (a - b).abs().max().item()
        out["speedup"] = out["cholesky_qr_examples_per_s_one_layer"] / out["svd_examples_per_s_one_layer"]
        res[name] = out
        print(name, out, flush=True)
    torch.manual_seed(0)
    model = papa.models.prepare(tf.AutoModel.from_config(tf.BertConfig(), attn_implementation="sdpa"), device)
    batch, n = 32, 128
    ids = torch.randint(1000, 20000, (batch, n), device=device)
    lengths = torch.randint(n // 4, n + 1, (batch,), device=device)
    mask = (torch.arange(n, device=device)[None] < lengths[:, None]).long()
    inputs = {"input_ids": ids, "attention_mask": mask}
    sec = timed(lambda: papa.average_attention(model, [inputs], kind="effective", log_every=1e9), 3, device)
    res["average_attention_effective_bert_base_N128_examples_per_s"] = batch / sec
    print(res, flush=True)
    return res


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results"))
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("gpu_check.py needs a CUDA device")
    import transformers

    device = torch.device("cuda")
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "invariants": invariants(device),
        "half_precision": half_precision(device, FAMILIES + list(REAL)),
        "timings": timings(device),
        "effective_attention": effective_timings(device),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "gpu_check.json", json.dumps(result, indent=2) + "\n")
    if not all(v["ok"] for part in ("invariants", "half_precision") for v in result[part].values()):
        sys.exit(f"some invariant failed on the GPU: see {out / 'gpu_check.json'}")


if __name__ == "__main__":
    main()
