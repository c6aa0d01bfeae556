"""The method's invariants on every family, under each attention implementation a family offers, through the public
API only: what `test_patching` checks on one input or within a tolerance, here on copies of an input, without
padding, bit for bit where the maths allows it, and against a naive loop on every family (not MiniLM alone)."""

import pytest
import torch

import papa
from papa.selection import head_order, select_static

from .conftest import tiny_model
from .test_patching import FAMILIES, N, hidden, papa_batch


def _model(family, impl="sdpa"):
    model = tiny_model(family).eval()
    if impl == "eager":
        model.set_attn_implementation("eager")
    return model


def _every_head(model):
    return torch.ones(papa.model_shape(model), dtype=torch.bool)


def _valid_rows(a, b, mask):
    """Largest difference of hidden states [B, L+1, N, d] over each example's real tokens."""
    return max((a[r][:, mask[r].bool()] - b[r][:, mask[r].bool()]).abs().max().item() for r in range(len(mask)))


@pytest.mark.parametrize(
    ("family", "kind"),
    [(f, "average") for f in FAMILIES] + [(f, "effective") for f in ("bert", "albert", "deberta", "mpnet")],
)
def test_constants_of_copies_of_one_input_reproduce_it_in_every_layer(family, kind):
    """Averaged over three copies of one input, padded or of full length, every head constant (static) or every
    lambda 0 (mix) gives that input's hidden states in every layer (1e-5; seen up to 5e-7)."""
    model = _model(family)
    for length in (9, N):
        batch = {k: v.repeat(3, 1) for k, v in papa_batch(model, [length]).items()}
        C = papa.average_attention(model, [batch], kind=kind)
        assert C.shape == (*papa.model_shape(model), N, N) and C.metadata["n_examples"] == 3
        ref = hidden(model, batch)
        with papa.patch(model, C, static=_every_head(model)):
            static = hidden(model, batch)
        with papa.patch(model, C, mix=True) as h:
            h.set_lambdas(0.0)
            mixed = hidden(model, batch)
        for out in (static, mixed):
            assert _valid_rows(ref, out, batch["attention_mask"]) < 1e-5, (length, kind)


@pytest.mark.parametrize(
    ("family", "impl"), [(f, "sdpa") for f in FAMILIES] + [(f, "eager") for f in ("roberta", "xlm-roberta", "electra")]
)
def test_lambda_one_and_fraction_one_are_the_stock_model_bit_for_bit(family, impl):
    """lambda = 1 and fraction_dynamic 1 are the stock model exactly (sdpa as well as eager); fraction 0 makes every
    head constant, as every lambda 0 does."""
    model = _model(family, impl)
    L, H = papa.model_shape(model)
    batch = papa_batch(model, [7, 12, N], seed=2)
    C = papa.average_attention(model, [papa_batch(model, [10, 5, N], seed=3)])
    ref = hidden(model, batch)
    with papa.patch(model, C, mix=True) as h:
        h.set_lambdas(1.0)
        assert torch.equal(hidden(model, batch), ref)
        h.set_lambdas(0.0)
        all_constant = hidden(model, batch)
    none = select_static(head_order("random", (L, H), seed=1), 1.0, (L, H))
    every = select_static(head_order("random", (L, H), seed=1), 0.0, (L, H))
    assert not none.any() and every.all()
    with papa.patch(model, C, static=none):
        assert torch.equal(hidden(model, batch), ref)
    with papa.patch(model, C, static=every):
        assert _valid_rows(hidden(model, batch), all_constant, batch["attention_mask"]) < 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_the_average_is_a_naive_loop_over_examples_on_every_family(family):
    """C[l, h, i, j] = mean of A_e[l, h, i, j] over the examples e where i and j are both real tokens (0 where none
    is), count [N, N] = that number; in one batch or two of other sizes alike."""
    model = _model(family, "eager")
    L, H = papa.model_shape(model)
    batch = papa_batch(model, [7, 12, N, 3], seed=5)
    sums = torch.zeros(L, H, N, N, dtype=torch.float64)
    count = torch.zeros(N, N, dtype=torch.float64)
    for r in range(4):
        one = {k: v[r : r + 1] for k, v in batch.items()}
        with torch.no_grad():
            maps = model(**one, output_attentions=True).attentions
        valid = one["attention_mask"][0].bool()
        pair = (valid[:, None] & valid[None, :]).double()
        sums += torch.stack([a[0].double() for a in maps]) * pair
        count += pair
    naive = torch.where(count > 0, sums / count.clamp_min(1), torch.zeros(()))
    C = papa.average_attention(model, [batch])
    split = papa.average_attention(model, [{k: v[:1] for k, v in batch.items()}, {k: v[1:] for k, v in batch.items()}])
    assert torch.equal(C.count, count) and torch.equal(split.count, count)
    assert (C.mean.double() - naive).abs().max() < 1e-6 and (split.mean - C.mean).abs().max() < 1e-6
    assert (C.mean[..., count == 0] == 0).all()


def _hook_counts(model):
    return [(n, len(m._forward_pre_hooks), len(m._forward_hooks)) for n, m in model.named_modules()]


@pytest.mark.parametrize("family", ["bert", "albert", "modernbert", "deberta", "mpnet"])
def test_a_stale_handle_leaves_a_later_patch_alone_and_remove_restores_everything(family):
    """A patched and removed, B patched, A removed again: B still patches; B removed: the stock model's outputs,
    weights, modules, hooks and attention implementation, bit for bit; a removed handle refuses a with block."""
    model = _model(family)
    batch = papa_batch(model, [7, N], seed=2)
    C = papa.average_attention(model, [batch])
    ref, state = hidden(model, batch), {k: v.clone() for k, v in model.state_dict().items()}
    modules, hooks, impl = (
        [(n, type(m)) for n, m in model.named_modules()],
        _hook_counts(model),
        model.config._attn_implementation,
    )
    a = papa.patch(model, C, static=_every_head(model))
    a.remove()
    b = papa.patch(model, C, mix=True)
    b.set_lambdas(0.0)
    patched = hidden(model, batch)
    a.remove()
    assert torch.equal(hidden(model, batch), patched) and not torch.equal(patched, ref)
    with pytest.raises(RuntimeError, match="already patched"):
        papa.patch(model, C, static=_every_head(model))
    b.remove()
    assert torch.equal(hidden(model, batch), ref)
    assert model.state_dict().keys() == state.keys() and all(
        torch.equal(v, state[k]) for k, v in model.state_dict().items()
    )
    assert [(n, type(m)) for n, m in model.named_modules()] == modules and _hook_counts(model) == hooks
    assert model.config._attn_implementation == impl and not any(hasattr(m, "_papa") for m in model.modules())
    with pytest.raises(RuntimeError, match="removed"), a:
        pass


@pytest.mark.parametrize("family", ["bert", "albert", "distilbert", "modernbert", "deberta", "deberta-v2", "mpnet"])
def test_gradients_reach_the_lambdas_of_mixed_heads_only_and_no_frozen_weight(family):
    """Under mix with some heads static: every mixed head's lambda gets a gradient, a static head's exactly 0, the
    trained constants a finite one, the frozen weights none."""
    model = _model(family)
    L, H = papa.model_shape(model)
    batch = papa_batch(model, [7, 12, N], seed=2)
    C = papa.average_attention(model, [papa_batch(model, [10, 5, N], seed=3)])
    static = torch.zeros(L, H, dtype=torch.bool)
    static[0, 1] = static[L - 1, H - 1] = True
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        with papa.patch(model, C, static=static, mix=True, trainable_constants=True) as h:
            model(**batch).last_hidden_state.pow(2).mean().backward()
            g = h.lambda_logits.grad
            assert (g[static] == 0).all() and (g[~static] != 0).all()
            assert torch.isfinite(h.constants.grad).all() and h.constants.grad.abs().sum() > 0
        assert all(p.grad is None for p in model.parameters())
    finally:
        for p in model.parameters():
            p.requires_grad_(True)


@pytest.mark.parametrize("family", ["bert", "mpnet"])
def test_data_free_constants_are_the_maps_the_heads_use(family):
    """Every head static on a data-free kind: each layer's map is the kind's matrix masked to the example's tokens and
    row-normalised (zeros: all 0, pruning), on both routes."""
    model = _model(family)
    L, H = papa.model_shape(model)
    batch = papa_batch(model, [7, N], seed=2)
    valid = batch["attention_mask"].bool()
    pair = (valid[:, :, None] & valid[:, None, :]).float()[:, None]
    for kind in ("identity", "uniform", "zeros", "toeplitz"):
        D = papa.data_free(kind, L, H, N)
        masked = D.mean[0, 0] * pair
        rows = masked.sum(-1, keepdim=True)
        expected = torch.where(rows > 0, masked / rows.clamp_min(1e-30), torch.zeros(()))
        with papa.patch(model, D, static=_every_head(model)), torch.no_grad():
            out = model(**batch, output_attentions=True)
        assert len(out.attentions) == L and torch.isfinite(out.last_hidden_state).all()
        for a in out.attentions:
            torch.testing.assert_close(a, expected.expand_as(a), atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("family", ["bert", "deberta"])
def test_half_precision_lambda_one_is_the_model_and_constants_stay_finite(family, dtype):
    model = tiny_model(family).to(dtype).eval()
    batch = papa_batch(model, [7, N], seed=2)
    ref = hidden(model, batch)
    for kind in ("average", "effective"):
        C = papa.average_attention(model, [batch], kind=kind)
        with papa.patch(model, C, mix=True) as h:
            h.set_lambdas(1.0)
            assert torch.equal(hidden(model, batch), ref)
            h.set_lambdas(0.0)
            assert torch.isfinite(hidden(model, batch)).all()
        with papa.patch(model, C, static=_every_head(model)):
            assert torch.isfinite(hidden(model, batch)).all()
