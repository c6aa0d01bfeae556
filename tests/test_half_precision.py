"""A model in half precision (``load_encoder(dtype=torch.bfloat16)``, ``float16``: what a GPU user loads): the probe,
the lambdas and trained constants train as in float32. The encoder-live paths fed bfloat16 hidden states to a float32
probe (a dtype error), and the patch kept its trainable tensors in the model's dtype, where AdamW's steps fell below
half a bfloat16 step (4 distinct lambdas of 72 after three epochs) and float16 rounded its eps to 0 (NaN)."""

import copy

import numpy as np
import pytest
import torch

import papa
from papa.probe import TrainConfig, learn_lambdas, run_probe

HALF = [torch.bfloat16, torch.float16]
CFG = TrainConfig(lr=1e-3, extra_lr=5e-2, batch_size=8, epochs=2, seed=1)


@pytest.fixture(scope="module")
def task(minilm):
    model, tok = minilm
    texts = ["a great film", "awful acting", "i loved it", "boring and dull"] * 4
    enc = papa.encode(tok, texts, labels=[1, 0, 1, 0] * 4, max_length=16)
    C = papa.average_attention(model, enc.batches(16))
    lam, _ = learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], CFG)
    return model, enc, C, lam


@pytest.mark.slow  # ~10 s for float16 on a CPU: `make test`, not the fast tier
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_half_precision_model_learns_its_lambdas_as_a_float32_one(task, dtype):
    model32, enc, C, lam32 = task
    model = copy.deepcopy(model32).to(dtype)
    lam, rows = learn_lambdas(model, C, enc, enc, "sequence", 2, ["accuracy"], CFG)
    assert lam.dtype == torch.float32 and len(torch.unique(lam)) == lam.numel() == 72  # no ties
    assert np.corrcoef(lam.flatten().numpy(), lam32.flatten().numpy())[0, 1] > 0.98
    assert all(np.isfinite(r["train_loss"]) for r in rows)
    # the encoder live (features=None) and the trained constants: the probe is float32 whatever the model
    for trainable in (None, lambda: papa.patch(model, C, static=torch.ones(6, 12, dtype=torch.bool),
                                               trainable_constants=True)):  # fmt: skip
        rows = run_probe(model, enc, enc, "sequence", 2, ["accuracy"], CFG, trainable=trainable)
        assert rows and all(np.isfinite(r["train_loss"]) and isinstance(r["score"], float) for r in rows)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_a_half_precision_patch_trains_float32_tensors_and_runs_in_the_models_dtype(task, dtype):
    model32, enc, C, _ = task
    model = copy.deepcopy(model32).to(dtype)
    batch = next(enc.batches(4))
    with torch.no_grad():
        stock = model(**batch).last_hidden_state
    with papa.patch(model, C, mix=True) as handle:
        assert [p.dtype for p in handle.parameters()] == [torch.float32]
        handle.set_lambdas(1.0)  # lambda = 1 is the original model, in its own dtype
        with torch.no_grad():
            out = model(**batch).last_hidden_state
        assert out.dtype == dtype and torch.equal(out, stock)
        handle.set_lambdas(0.3)
        assert torch.allclose(handle.lambdas(), torch.tensor(0.3))  # not 0.30078 (bfloat16's nearest)
        # asked for its attention maps, the patch runs its heads as probabilities applied to the values (no test
        # ran that path in half precision): in the model's dtype, to the same outputs up to the rounding of half
        # precision's other order of products (up to 0.02 here)
        with torch.no_grad():
            fused = model(**batch).last_hidden_state
            maps = model(**batch, output_attentions=True)
        assert maps.last_hidden_state.dtype == dtype and {a.dtype for a in maps.attentions} == {dtype}
        torch.testing.assert_close(maps.last_hidden_state, fused, rtol=0.05, atol=0.05)
    static = torch.ones(6, 12, dtype=torch.bool)
    with papa.patch(model, C, static=static, trainable_constants=True) as handle:
        (param,) = handle.parameters()
        assert param.dtype == torch.float32 and torch.equal(param.detach(), C.mean)  # not rounded to the model's
        out = model(**batch).last_hidden_state
        assert out.dtype == dtype
        out.float().square().mean().backward()
        assert param.grad is not None and param.grad.dtype == torch.float32 and param.grad.abs().sum() > 0
        with torch.no_grad():  # its static heads as probabilities too
            maps = model(**batch, output_attentions=True)
        assert maps.last_hidden_state.dtype == dtype and {a.dtype for a in maps.attentions} == {dtype}
        torch.testing.assert_close(maps.last_hidden_state, out.detach(), rtol=0.05, atol=0.05)
    # mix with trained constants: every head reads its layer's whole float32 matrices, cast to the model's dtype
    with papa.patch(model, C, mix=True, trainable_constants=True) as handle:
        assert [p.dtype for p in handle.parameters()] == [torch.float32, torch.float32]
        out = model(**batch).last_hidden_state
        assert out.dtype == dtype
        out.float().square().mean().backward()
        grad = handle.constants.grad
        assert grad is not None and grad.dtype == torch.float32 and grad.abs().sum() > 0
    assert papa.average_attention(model, enc.batches(16)).metadata["dtype"] == str(dtype).removeprefix("torch.")


def test_effective_constants_in_float16_leave_every_token_finite(minilm):
    """float16 MiniLM, effective constants of inputs longer than d' = 32: a pad query's row was divided by its
    normaliser on the valid keys, a float16 subnormal (6e-8) there, so inf, and the pad mask's 0 made it NaN, which the
    next layer's values carried to every token of the padded examples (bfloat16 and float32 were finite)."""
    from .test_patching import hidden, papa_batch

    model = copy.deepcopy(minilm[0]).to(torch.float16)
    batch = papa_batch(model, [7, 46, 48, 3], seed=2, n=48)
    C = papa.average_attention(model, [batch], kind="effective")
    for kw in ({"static": torch.ones(6, 12, dtype=torch.bool)}, {"mix": True}):
        with papa.patch(model, C, **kw):
            assert torch.isfinite(hidden(model, batch)).all(), kw


def test_a_half_precision_models_averages_are_summed_in_float32(minilm):
    """A bfloat16 model's attention maps are summed over a batch in float32, then over batches in float64: the
    average is the naive float64 mean of its eager attention maps to float32's last bits (mutation testing: a batch
    summed in bfloat16, 32 examples, off by up to 3e-3 here, passed every test)."""
    from .test_effective import _naive_average
    from .test_patching import papa_batch

    model = copy.deepcopy(minilm[0]).to(torch.bfloat16)
    lengths = np.random.default_rng(0).integers(3, 17, 32).tolist()
    batch = papa_batch(model, lengths, seed=1, n=16)
    C = papa.average_attention(model, [batch])
    model.set_attn_implementation("eager")  # its maps, as the average's recording computes them
    valid = batch["attention_mask"].bool()
    pair = valid[:, :, None] & valid[:, None, :]
    assert C.metadata["dtype"] == "bfloat16" and torch.equal(C.count, pair.sum(0).double())
    torch.testing.assert_close(C.mean.double(), _naive_average(model, "bert", batch, False), rtol=0, atol=1e-6)
