"""Config ``compile``: the jobs that train through the frozen encoder (lambdas, trained constants) can run
it through ``torch.compile`` (`papa.models.compiled`). On a CPU the compiled kernels are Inductor's C++
ones; the lambdas and scores must be those of the eager run up to rounding, and the model must come back
unpatched and unchanged. Inductor's C++ code generation costs CI about a second of compiler time a kernel (67
kernels for the tiny BERT's lambdas and trained constants, 93 s from a cold cache; 190 s on CI's slower machine
of 2026-12, 60% of it the trained constants'): it runs for the BERT route's lambdas and the seeded dropout; the
BERT route's trained constants and the DeBERTa route go through dynamo and AOTAutograd (``aot_eager``: the graphs
captured and differentiated as Inductor gets them, without its code generation; DeBERTa 24 s instead of 62 s),
where that route differs from BERT's (the graph dynamo captures through the dropout hook)."""

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

import papa
import papa.pipeline as pipeline
from papa.encoding import Encoded
from papa.models import COMPILE_MODES, compiled
from papa.probe import LiveFeatures, TrainConfig, learn_lambdas, run_probe
from papa.selection import head_order, select_static

from .conftest import tiny_model


def _data(n: int, seed: int, length: int = 12) -> Encoded:
    g = np.random.default_rng(seed)
    ids = g.integers(5, 120, (n, length))
    lengths = g.integers(length // 2, length + 1, n)
    mask = (np.arange(length)[None] < lengths[:, None]).astype(np.int64)
    labels = (ids[:, 1] % 2).astype(np.int64)  # learnable from the tokens
    return Encoded(ids * mask, mask, None, labels, "papa", length)


def _compile_through(monkeypatch, backend: str) -> None:
    """``torch.compile`` as `papa.models.compiled` calls it, with dynamo's ``backend`` instead of Inductor (its
    ``mode`` is Inductor's, so dropped)."""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, mode=None: compile_(model, backend=backend))


CFG = TrainConfig(lr=1e-2, batch_size=8, epochs=2, eval_batch_size=16)


def test_modes_and_their_errors():
    model = tiny_model("bert")
    assert compiled(model, "eager") is model
    assert COMPILE_MODES[0] == "eager"  # the default, the schema's (tests/test_spec.py)
    with pytest.raises(ValueError, match="compile must be one of eager, default, reduce-overhead, got 'max'"):
        compiled(model, "max")
    with pytest.raises(ValueError, match="compile must be one of"):
        LiveFeatures(model, _data(4, 0), compile="fast")
    feats = (LiveFeatures(model, _data(4, 0)), LiveFeatures(model, _data(4, 1)))
    with pytest.raises(ValueError, match="compile applies to features=None"):
        run_probe(model, _data(4, 0), _data(4, 1), "sequence", 2, ["accuracy"], CFG, features=feats, compile="default")


def test_compile_workers_are_capped_at_the_jobs_threads(monkeypatch):
    """Inductor's pool of compile workers follows the cores the process may use (a node's, where a job is not
    bound to its cores): `compiled` caps it at torch's threads (the job's), unless the environment sets it."""
    import torch._inductor.config as inductor

    model = tiny_model("bert")
    threads = torch.get_num_threads()
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(inductor, "compile_threads", 32)
    try:
        torch.set_num_threads(1)
        compiled(model, "default")
        assert inductor.compile_threads == 1
        torch.set_num_threads(2)  # fewer workers than threads: kept as they are, never raised (mutation review)
        compiled(model, "default")
        assert inductor.compile_threads == 1
        monkeypatch.setattr(inductor, "compile_threads", 32)
        compiled(model, "eager")  # no compilation, nothing set
        assert inductor.compile_threads == 32
        monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "32")  # the user's word
        compiled(model, "reduce-overhead")
        assert inductor.compile_threads == 32
    finally:
        torch.set_num_threads(threads)


def test_a_fixed_matrix_probe_refuses_compile(tmp_path):
    """Fixed matrices run the encoder without gradients: compile would do nothing there, so asking for it is an
    error that says so (the workflow gives the param to probe_trained only)."""
    stage = pipeline.ProbeStage(
        model="m", constants="c", lambdas=None, train="t", validation="v", outs=["o"], metrics=["accuracy"],
        selection="random", fraction_dynamic=0.5, seeds=[0], hparams=CFG, compile="default", labels={},
    )  # fmt: skip
    with pytest.raises(ValueError, match="compile 'default' applies to trained constants"):
        pipeline.probe_heads(stage)


@pytest.mark.slow
@pytest.mark.parametrize(
    "family, backend",  # the two routes (attention registry, dropout hook); Inductor's C++ kernels on the first
    [("bert", "inductor"), ("deberta", "aot_eager")],
)
def test_compiled_lambdas_and_trained_constants_match_eager(family, backend, monkeypatch):
    """learn_lambdas and a trained-constant probe, eager and under ``torch.compile`` (mode default, as a CPU
    runs every mode): the same lambdas, constants' effect and scores up to rounding, over two epochs with
    evaluation in between (train/eval switches); the model is left as it was. ``aot_eager``: `compiled` as
    the jobs call it, its graphs through dynamo and AOTAutograd without Inductor's code generation (also the
    trained constants of the Inductor case: Inductor's kernels are the lambdas')."""
    if backend != "inductor":
        _compile_through(monkeypatch, backend)
    model = tiny_model(family)
    train, val = _data(16, 0), _data(16, 1)  # whole batches: each shape is a compilation (seconds)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    C = papa.average_attention(model, train.batches(8), log_every=1e9)
    L, H = papa.model_shape(model)
    static = select_static(head_order("random", (L, H), seed=0), 0.5, (L, H))
    runs, graphs = {}, {}
    for mode in ("eager", "default"):
        counters.clear()
        lam, rows = learn_lambdas(model, C, train, val, "sequence", 2, ["accuracy"], CFG, compile=mode)
        with monkeypatch.context() as m:
            if backend == "inductor":  # the trained constants' graphs through dynamo and AOTAutograd only (CI time)
                _compile_through(m, "aot_eager")
            probe_rows = run_probe(
                model, train, val, "sequence", 2, ["accuracy"], CFG, seeds=[0],
                trainable=lambda: papa.patch(model, C, static=static, trainable_constants=True), compile=mode,
            )  # fmt: skip
        runs[mode], graphs[mode] = (lam, rows, probe_rows), counters["stats"]["unique_graphs"]
        torch._dynamo.reset()
    assert graphs["eager"] == 0 and graphs["default"] > 0, graphs  # the compiled run went through dynamo
    (lam_e, rows_e, probe_e), (lam_c, rows_c, probe_c) = runs["eager"], runs["default"]
    assert not torch.equal(lam_e, torch.full_like(lam_e, 0.5))  # the lambdas moved: the check below means something
    torch.testing.assert_close(lam_c, lam_e, rtol=1e-4, atol=1e-5)
    for a, b in ((rows_c, rows_e), (probe_c, probe_e)):
        assert [(r["epoch"], r["metric"], r["score"]) for r in a] == [(r["epoch"], r["metric"], r["score"]) for r in b]
        np.testing.assert_allclose([r["train_loss"] for r in a], [r["train_loss"] for r in b], rtol=1e-4)
    assert not any(hasattr(m, "_papa") for m in model.modules())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


@pytest.mark.slow
def test_compiled_dropout_is_seeded():
    """With the encoder's dropout on (``backbone_dropout``, the authors' setting) compiled kernels draw their own
    masks, so the lambdas differ from eager ones, but from the seed: two compiled runs give the same lambdas."""
    model = tiny_model("bert")
    train, val = _data(16, 0), _data(16, 1)
    C = papa.average_attention(model, train.batches(8), log_every=1e9)
    runs = []
    for mode in ("eager", "default", "default"):
        args = (model, C, train, val, "sequence", 2, ["accuracy"], CFG)
        runs.append(learn_lambdas(*args, backbone_dropout=True, compile=mode)[0])
        torch._dynamo.reset()
    eager, first, second = runs
    assert torch.equal(first, second) and torch.isfinite(first).all()
    assert not torch.allclose(first, eager, atol=1e-4)  # other dropout draws: compile changes the numbers


@pytest.mark.parametrize("family", ["bert", "deberta", "mpnet"])
def test_a_patch_after_a_compiled_call_reaches_the_compiled_model(family, monkeypatch):
    """DeBERTa and MPNet are patched through a hook on their attention dropout, which torch's compiler does not
    check for by default once the model has run compiled: the compiled model kept computing the unpatched
    outputs. `compiled` turns the check on (its graphs here through dynamo's ``eager`` backend: the same
    guards as Inductor's, without the C++ compilation)."""
    _compile_through(monkeypatch, "eager")
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")  # leaves Inductor's config alone: no Inductor here
    model = tiny_model(family)
    batch = _data(4, 0).model_inputs()
    C = papa.average_attention(model, _data(8, 1).batches(8), log_every=1e9)
    L, H = papa.model_shape(model)
    runner = compiled(model, "default")
    try:
        with torch.no_grad():
            stock = runner(**batch).last_hidden_state  # compiled, unpatched
            with papa.patch(model, C, static=torch.ones(L, H, dtype=torch.bool)):
                eager, comp = model(**batch).last_hidden_state, runner(**batch).last_hidden_state
        assert (eager - stock).abs().max() > 1e-3  # the patch changes the outputs (by far more than the tolerance)
        torch.testing.assert_close(comp, eager, rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()
