"""`papa.unpad.dense_on_real_tokens`: dense layers on the real tokens only give the padded run's numbers at
every real position, on every family, patched or not, in every mode PAPA runs a model (forward, averaging,
gradients to the lambdas and constants, an MLM head), and leave the model as it was."""

import contextlib

import pytest
import torch
import transformers as tf

import papa
from papa import unpad
from papa.unpad import dense_on_real_tokens

from .conftest import TINY, tiny_model
from .test_patching import FAMILIES
from .test_patching import papa_batch as batch_of

#: 44 real tokens of 80 positions (55%): a batch gathered (at least unpad.MIN_ROWS real, at most MAX_REAL_SHARE)
LENGTHS = [4, 13, 9, 12, 6]


def states(model, batch):
    return torch.stack(model(**batch, output_hidden_states=True).hidden_states, 1)  # [B, L+1, N, H]


def hooks(model):
    return [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()]


def failing_pass(model, batch):
    """A forward pass of a BERT-type ``model`` that fails in its second layer (RuntimeError "boom")."""
    fail = model.encoder.layer[1].register_forward_hook(lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    try:
        states(model, batch)
    finally:
        fail.remove()


def assert_same_on_real_tokens(a, b, mask, tol=1e-6):
    real = mask.bool()
    diff = (a.transpose(1, 2)[real] - b.transpose(1, 2)[real]).abs().max().item()
    assert diff < tol, diff


@pytest.fixture(params=FAMILIES + ["minilm"])
def model(request, minilm):
    return minilm[0] if request.param == "minilm" else tiny_model(request.param)


@pytest.mark.parametrize("setting", ["plain", "static", "mix"])
def test_real_token_rows_give_the_padded_hidden_states(model, setting):
    L, H = papa.model_shape(model)
    batch = batch_of(model, LENGTHS)
    C = papa.average_attention(model, [batch_of(model, [16, 8], seed=5)])
    static = torch.zeros(L, H, dtype=torch.bool)
    static[0, 1:] = True  # a layer with one input-dependent head: BERT's pruned query/key projections
    static[-1, :2] = True
    kw = {"plain": None, "static": dict(static=static), "mix": dict(mix=True)}[setting]
    with torch.no_grad(), papa.patch(model, C, **kw) if kw else contextlib.nullcontext() as handle:
        if setting == "mix":
            handle.set_lambdas(torch.linspace(0.1, 0.9, L * H).view(L, H))  # both terms of every head count
        padded = states(model, batch)
        before = hooks(model)  # after a first pass: transformers installs its output recorders then
        with dense_on_real_tokens(model) as rows:
            real = states(model, batch)
        again = states(model, batch)
        after = hooks(model)
    assert_same_on_real_tokens(real, padded, batch["attention_mask"])
    assert torch.equal(again, padded)  # leaving the block gives the model back as it was
    assert after == before
    # every dense layer ran on the examples' real tokens only: 44 of 80 positions
    assert rows.enabled and rows.computed > 0
    assert rows.computed * 80 == rows.positions * 44


def test_a_patch_installed_inside_the_block_is_covered(minilm):
    model = minilm[0]
    L, H = papa.model_shape(model)
    batch = batch_of(model, LENGTHS)
    C = papa.average_attention(model, [batch_of(model, [16, 8], seed=5)])
    static = torch.ones(L, H, dtype=torch.bool)
    static[:, 0] = False  # one input-dependent head per layer: queries and keys of that head only
    with torch.no_grad():
        with papa.patch(model, C, static=static):
            padded = states(model, batch)
        with dense_on_real_tokens(model) as rows:
            states(model, batch)  # a first pass before the patch: the projections then were the model's
            plain = rows.computed
            with papa.patch(model, C, static=static):
                real = states(model, batch)
    assert_same_on_real_tokens(real, padded, batch["attention_mask"])
    # the second pass ran the pruned query/key projections on the real tokens too: as many gathers
    assert rows.computed == 2 * plain


@pytest.mark.parametrize("kind", ["average", "effective"])
@pytest.mark.parametrize("family", ["bert", "modernbert", "deberta", "deberta-v2", "mpnet", "albert"])
def test_averages_are_the_padded_ones(family, kind):
    """Recording reads the attention of real queries and keys only; effective attention also the values
    (on the dropout route through a hook on the value projection, which must see the scattered output)."""
    model = tiny_model(family)
    batches = [batch_of(model, LENGTHS), batch_of(model, [16, 2, 7, 3, 5, 8], seed=3)]
    padded = papa.average_attention(model, batches, kind=kind)
    with dense_on_real_tokens(model) as rows:
        real = papa.average_attention(model, batches, kind=kind)
    assert rows.computed < rows.positions
    assert (real.mean - padded.mean).abs().max() < 1e-6
    assert torch.equal(real.count, padded.count)
    if kind == "effective":
        assert (real.norm - padded.norm).abs().max() < 1e-6


@pytest.mark.parametrize("family", ["bert", "albert", "deberta-v2", "mpnet", "minilm"])
def test_gradients_to_lambdas_and_constants_are_the_padded_ones(family, minilm):
    """The scatter is differentiable: lambdas (mix) and trained constants get the padded run's gradients."""
    model = minilm[0] if family == "minilm" else tiny_model(family)
    L, H = papa.model_shape(model)
    batch = batch_of(model, LENGTHS)
    real_tok = batch["attention_mask"].bool()
    C = papa.average_attention(model, [batch_of(model, [16, 8], seed=5)])
    static = torch.zeros(L, H, dtype=torch.bool)
    static[:, ::2] = True

    def grads(**kw):
        with papa.patch(model, C, **kw) as h:
            out = states(model, batch)[:, -1][real_tok]  # the last layer's real tokens
            out.pow(2).sum().backward()
            return [p.grad.clone() for p in h.parameters()]

    for kw in (dict(mix=True), dict(static=static, trainable_constants=True)):
        padded = grads(**kw)
        with dense_on_real_tokens(model) as rows:
            real = grads(**kw)
        assert rows.computed < rows.positions
        for a, b in zip(real, padded, strict=True):
            assert torch.isfinite(a).all() and (a - b).abs().max() <= 1e-4 * b.abs().max() + 1e-7


def test_dropout_draws_the_padded_run_s_masks():
    """In train mode (the lambdas' backbone dropout) the dropout layers see full-size tensors, so one seed
    draws the same masks with and without the gathers: the same numbers at the real tokens."""
    model = tiny_model("bert")
    batch = batch_of(model, LENGTHS)
    model.train()
    try:
        with torch.no_grad():
            torch.manual_seed(3)
            padded = states(model, batch)
            with dense_on_real_tokens(model):
                torch.manual_seed(3)
                real = states(model, batch)
    finally:
        model.eval()
    assert_same_on_real_tokens(real, padded, batch["attention_mask"])


def test_an_mlm_head_scores_the_real_tokens_alike():
    torch.manual_seed(0)
    model = tf.BertForMaskedLM(tf.BertConfig(**TINY)).eval()
    batch = batch_of(model, LENGTHS)
    with torch.no_grad():
        padded = model(**batch).logits
        with dense_on_real_tokens(model) as rows:
            real = model(**batch).logits
    real_tok = batch["attention_mask"].bool()
    assert (real[real_tok] - padded[real_tok]).abs().max() < 1e-5
    # the vocabulary projection (and the head's transform) ran on the real tokens: 2 layers x 6 + 2 + ...
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert rows.positions == n_linear * 80 and rows.computed == n_linear * 44


def test_deberta_relative_positions_with_a_batch_s_shape():
    """DeBERTa-v2 projects its [1, 2 x position_buckets, H] relative embeddings through the attention's
    query/key projections: with one example of that length they have the batch's shape, and must not be
    gathered (the attention's projections run as they are on DeBERTa)."""
    torch.manual_seed(0)
    cfg = tf.DebertaV2Config(**TINY, relative_attention=True, position_buckets=32, max_relative_positions=64,
                             pos_att_type=["p2c", "c2p"])  # fmt: skip
    model = tf.AutoModel.from_config(cfg).eval()
    with torch.no_grad():  # relative positions that weigh: the random init's are too small to tell
        model.encoder.rel_embeddings.weight.mul_(100)
    batch = batch_of(model, [40], n=2 * cfg.position_buckets)  # one example, 40 real tokens of 64
    with torch.no_grad():
        padded = states(model, batch)
        with dense_on_real_tokens(model) as rows:
            real = states(model, batch)
    assert_same_on_real_tokens(real, padded, batch["attention_mask"])
    assert rows.computed < rows.positions


def test_deberta_v2_convolution_reads_no_gathered_pad_row():
    """DeBERTa-v2's optional convolution mixes neighbouring positions of the first layer's input; that input is
    the embeddings, zero at pads already, so the gathers change nothing it reads."""
    torch.manual_seed(0)
    cfg = tf.DebertaV2Config(**TINY, relative_attention=True, position_buckets=16, max_relative_positions=32,
                             pos_att_type=["p2c", "c2p"], conv_kernel_size=3)  # fmt: skip
    model = tf.AutoModel.from_config(cfg).eval()
    batch = batch_of(model, LENGTHS)
    with torch.no_grad():
        padded = states(model, batch)
        with dense_on_real_tokens(model):
            real = states(model, batch)
    assert_same_on_real_tokens(real, padded, batch["attention_mask"])


def test_batches_run_as_they_are_where_gathering_would_not_pay_or_would_round_otherwise(minilm):
    """A batch mostly real (gathers cost what they save) or with few real tokens (MKL rounds a product of a few
    rows otherwise: a lone 11-token example differed by ~2e-6) runs as it is: the padded numbers bit for bit,
    counted as computed in full."""
    model = minilm[0]
    mostly_real = batch_of(model, [16, 16, 14, 15])  # 61 of 64 real
    one_short = batch_of(model, [11], n=32)  # 11 real: fewer than unpad.MIN_ROWS
    gathered = batch_of(model, [30, 6], n=32)  # 36 of 64 real
    with torch.no_grad():
        for batch in (mostly_real, one_short):
            ref = states(model, batch)
            with dense_on_real_tokens(model) as rows:
                assert torch.equal(states(model, batch), ref)
            assert rows.computed == rows.positions > 0 and rows.fraction == 1.0
        with dense_on_real_tokens(model) as rows:
            states(model, gathered)
            states(model, mostly_real)
    n = rows.positions // (64 + 64)  # dense layer calls per forward pass
    assert rows.computed == n * (36 + 64) and rows.fraction < 1.0
    assert unpad.MIN_ROWS <= 36 and 36 / 64 <= unpad.MAX_REAL_SHARE < 61 / 64


def test_what_it_leaves_alone(minilm):
    model = minilm[0]
    part = batch_of(model, LENGTHS)
    with torch.no_grad():
        states(model, part)
        before = hooks(model)
        with dense_on_real_tokens(model, enabled=False) as off:
            assert hooks(model) == before
            states(model, part)
        assert not off.enabled and off.positions == 0
        with pytest.raises(RuntimeError, match="boom"), dense_on_real_tokens(model):
            raise RuntimeError("boom")
        with pytest.raises(RuntimeError, match="boom"), dense_on_real_tokens(model):  # mid-forward
            failing_pass(model, part)
        with dense_on_real_tokens(model) as rows:  # nothing stale from the failed pass
            real = states(model, part)
        assert rows.computed < rows.positions
    assert hooks(model) == before
    assert_same_on_real_tokens(real, states(model, part).detach(), part["attention_mask"])
    # on by default for a model on the CPU
    with dense_on_real_tokens(model) as on:
        assert on.enabled
    # enabled as a number (a config's 0 or 1) reads as the bool it stands for: 0 hooks nothing (mutation testing:
    # an `is False` check hooked the model while saying off), 1 says so as True
    with dense_on_real_tokens(model, enabled=0) as off:
        assert hooks(model) == before
    assert off.enabled is False
    with dense_on_real_tokens(model, enabled=1) as on:
        assert on.enabled is True
    # a batch without an attention mask (a notebook's input_ids alone) runs as it is, counted nothing: no test ran
    # one (the whole suite's line trace)
    ids = {"input_ids": part["input_ids"]}
    with torch.no_grad():
        with dense_on_real_tokens(model) as unmasked:
            inside = model(**ids).last_hidden_state
        assert torch.equal(inside, model(**ids).last_hidden_state)
    assert unmasked.positions == unmasked.computed == 0


def test_a_dense_layer_called_between_passes_runs_on_its_whole_input_and_a_model_off_the_cpu_is_left_alone(minilm):
    """The rows of a pass are forgotten when it ends, also when it fails: a dense layer a notebook calls by itself
    inside the block, after a pass, computes its whole input (mutation testing: the end of a pass, and of a failed
    one, went unchecked; the layer then gathered a pass's rows out of an input of that shape). By default a model
    on another device than the CPU (here the meta device) is left as it is."""
    model = minilm[0]
    part = batch_of(model, LENGTHS)
    layer = model.encoder.layer[0].intermediate.dense
    x = torch.randn(*part["attention_mask"].shape, layer.in_features, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        whole = layer(x)
        with dense_on_real_tokens(model) as rows:
            states(model, part)
            assert 0 < rows.computed < rows.positions  # the pass gathered
            assert torch.equal(layer(x), whole)
            with pytest.raises(RuntimeError, match="boom"):
                failing_pass(model, part)
            assert torch.equal(layer(x), whole)
    with torch.device("meta"):
        elsewhere = type(model)(model.config)
    before = hooks(elsewhere)
    with dense_on_real_tokens(elsewhere) as off:
        assert not off.enabled and hooks(elsewhere) == before


def test_the_scatter_copies_into_its_zero_buffer_in_place(minilm):
    """Each gathered layer's output goes back into a fresh zero buffer in place (``index_copy_``): the out-of-place
    ``index_copy`` cloned the whole padded buffer first, a fifth of the CPU of a probe job's encoding (the numbers,
    gradients included, are those of the padded run: the tests above)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(func)
            return func(*args, **(kwargs or {}))

    model = minilm[0]
    part = batch_of(model, LENGTHS)
    with torch.no_grad(), dense_on_real_tokens(model) as rows, Ops() as ops:
        states(model, part)
    assert rows.computed < rows.positions  # gathered
    copies = [f for f in ops.seen if "index_copy" in str(f)]
    assert copies and all(f == torch.ops.aten.index_copy_.default for f in copies), sorted(set(map(str, copies)))


def test_an_unsupported_model_fails_on_entering():
    model = tf.GPT2Model(tf.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50)).eval()
    with pytest.raises(papa.UnsupportedModelError, match="gpt2"), dense_on_real_tokens(model):
        pass


def test_a_batch_at_the_real_share_limit_is_gathered_and_its_pad_rows_are_zero(minilm):
    """What the module's and `DenseRows`' docstrings state that no test read (review DK's mutation testing): a batch
    with exactly `MAX_REAL_SHARE` of its positions real ("at most") is gathered; a gathered layer's output is 0 at
    every pad position (real rows not); `DenseRows.fraction` is 1.0 before any forward pass."""
    model = minilm[0]
    assert unpad.DenseRows(enabled=True).fraction == 1.0
    batch = batch_of(model, [12, 12, 12, 12], n=16)  # 48 of 64 real: the limit
    assert batch["attention_mask"].float().mean().item() == unpad.MAX_REAL_SHARE and 48 >= unpad.MIN_ROWS
    layer = model.encoder.layer[0].intermediate.dense
    seen = []
    hook = layer.register_forward_hook(lambda mod, args, out: seen.append(out.detach().clone()))
    try:
        with torch.no_grad(), dense_on_real_tokens(model) as rows:
            assert rows.fraction == 1.0  # no pass yet
            real = states(model, batch)
    finally:
        hook.remove()
    assert rows.computed < rows.positions and rows.fraction == pytest.approx(48 / 64)
    (out,) = seen
    pad = ~batch["attention_mask"].bool()
    assert out.shape[:2] == pad.shape and (out[pad] == 0).all() and (out[~pad] != 0).any(-1).all()
    assert_same_on_real_tokens(real, states(model, batch).detach(), batch["attention_mask"])


def test_a_stages_model_runs_padded_under_torch_compile():
    """`papa.pipeline.real_tokens_only`: a stage's model on the CPU computes its real tokens only when eager, and
    padded under ``torch.compile`` (the gather's shapes depend on the data; mutation testing: not checked)."""
    from papa import pipeline

    model = tiny_model("bert")
    for compile in ("default", "reduce-overhead"):
        with pipeline.real_tokens_only(model, compile) as rows:
            assert not rows.enabled, compile
    with pipeline.real_tokens_only(model) as rows:
        assert rows.enabled
    assert hooks(model) == [(0, 0)] * len(hooks(model))
