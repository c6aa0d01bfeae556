"""Installing patched layers on a model: the two routes into a family's attention.

* **registry** (BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, ALBERT, ModernBERT): PAPA registers an
  attention function named ``"papa"`` in transformers' ``AttentionInterface`` (and the sdpa mask
  function under the same name in ``AttentionMaskInterface``, so the padding mask still arrives)
  and switches the model to it while patched. Input-dependent heads run through transformers'
  own sdpa attention function, like stock ``sdpa`` (on a model loaded with eager attention, as eager
  computes them). A forward pass asked for ``output_attentions`` gets the attention the patched heads
  used (constant, mixed or input-dependent probabilities), as eager attention gives its maps (the
  heads then run as probabilities applied to the values, as in training with dropout). In static
  mode, static heads never compute queries or keys: their query/key projections are replaced by
  projections of the input-dependent heads only (`HeadSubsetLinear`), and their output is
  ``C_masked @ V`` computed by `papa.patching.kernels.constant_output`.
* **dropout** (DeBERTa v1, DeBERTa-v2/v3, MPNet): these compute their own softmax; the attention
  probabilities pass through the module's dropout, where a forward pre-hook replaces them (so, in
  training, the dropout acts on the combined attention, as in the authors' code). When the
  values are recorded, a forward hook on the value projection (`papa.patching.values`) hands the
  same forward pass's per-head values to the recorder.

Either way a `LayerState` is attached to each attention module as ``module._papa`` and what it
computes is its mode's one implementation (`papa.patching.modes.run`). Every change is pushed
onto the caller's undo stack (`contextlib.ExitStack`); closing it leaves the model exactly as before.
"""

from __future__ import annotations

import inspect
import threading
from contextlib import ExitStack

import torch
import torch.nn.functional as F
from torch import nn

from ..models import attention_modules, family_of
from . import modes
from .kernels import bool_mask, constant_output, eager_probs, masked_constant, sdpa_heads
from .modes import LayerState, Mode
from .values import value_reader

ATTN_NAME = "papa"
_registered = False
_lock = threading.Lock()

# ----------------------------------------------------------------------------- registry route


class RegistryHeads:
    """One layer's heads as the registry attention function sees them: results are head outputs, or, while
    attention dropout is on (training; ``as_probs``), attention probabilities, which `papa_attention` drops
    out and applies to the values once combined (the authors' ``BertSelfAttention`` drops out the attention
    after constant or mixed heads are combined)."""

    def __init__(self, module, query, key, value, mask, scaling, dropout, st: LayerState):
        self.module, self.query, self.key, self.value = module, query, key, value
        self.mask, self.scaling, self.dropout, self.st = mask, scaling, dropout, st
        self.n = value.shape[-2]
        self.keys_masked = mask is not None
        self.as_probs = (bool(dropout) or st.ctx.maps) and st.mode is not Mode.RECORD

    def dynamic(self, idx=None):
        """sdpa of heads ``idx`` (their probabilities under ``as_probs``); with pruned projections,
        query/key already hold exactly those heads."""
        q, k, v = self.query, self.key, self.value
        if idx is not None:
            v = v.index_select(1, idx)
            if not self.st.pruned:
                q, k = q.index_select(1, idx), k.index_select(1, idx)
        if self.as_probs:
            return eager_probs(q, k, self.mask, self.scaling)
        if self.st.ctx.eager:  # a model loaded with eager attention: its heads as it computed them, bit for bit
            return torch.matmul(eager_probs(q, k, self.mask, self.scaling), v)
        return sdpa_heads(self.module, q, k, v, self.mask, self.scaling, self.dropout)

    def constant(self, C, idx=None, norm=None):
        if self.as_probs:
            return masked_constant(C, self.st.ctx.mask2d, norm).to(self.value.dtype)
        v = self.value if idx is None or idx.numel() == self.value.shape[1] else self.value.index_select(1, idx)
        return constant_output(C, v, self.st.ctx.mask2d, norm)

    def canvas(self):
        if self.as_probs:
            B, H, N, _ = self.value.shape
            return self.value.new_empty((B, H, N, N))
        return self.value.new_empty(self.value.shape)

    def probs(self):
        return eager_probs(self.query, self.key, self.mask, self.scaling)

    def apply(self, probs):
        return torch.matmul(probs, self.value)

    def values(self):
        return self.value if self.st.ctx.needs_values else None


def papa_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function PAPA registers in transformers' AttentionInterface: ``([B, N, H, d], None)``."""
    st = getattr(module, "_papa", None)
    if isinstance(st, dict):  # a module shared by several layers: they run in order
        ctx = next(iter(st.values())).ctx
        st, ctx.calls = st[ctx.calls], ctx.calls + 1
    if scaling is None:
        scaling = value.size(-1) ** -0.5
    mask = bool_mask(attention_mask)
    weights = None
    if st is None:  # not a patched module: stock sdpa behaviour
        out = sdpa_heads(module, query, key, value, mask, scaling, dropout)
    else:
        st.reached = True
        heads = RegistryHeads(module, query, key, value, mask, scaling, dropout, st)
        out = modes.run(st, heads)
        if heads.as_probs:  # the combined attention, dropped out, applied to the values (and the model's maps)
            weights = F.dropout(out, p=dropout, training=True) if dropout else out
            out = torch.matmul(weights, value)
    return out.transpose(1, 2).contiguous(), weights


def ensure_registered() -> None:
    """Register `papa_attention` (and the sdpa mask function) under `ATTN_NAME`, once per process."""
    global _registered
    with _lock:
        if _registered:
            return
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(ATTN_NAME, papa_attention)
        # without a mask function under the same name the padding mask silently arrives as None
        AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)
        _registered = True


class HeadSubsetLinear(nn.Module):
    """A query/key projection computing only the given heads (the input-dependent ones).

    It holds the original projection's own parameters (``weight``, ``bias``: the same tensors, so
    ``state_dict()``, ``parameters()`` and an optimiser see the model as it was) and slices the given
    heads out of them at every call: a gradient reaches the original weights, and whatever changes them
    (an optimiser step, ``load_state_dict``, ``model.to``) is what the next call computes with. The slice
    costs a few percent of the projection's product.
    """

    def __init__(self, linear: nn.Linear, heads: torch.Tensor, head_dim: int):
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias
        self.register_buffer("heads", heads.clone(), persistent=False)
        self.head_dim = head_dim
        self.empty = heads.numel() == 0

    def forward(self, x):
        if self.empty:  # a zero-cost stand-in of one head: the attention function never reads it
            return x.new_zeros(()).expand(*x.shape[:-1], self.head_dim)
        n_in = self.weight.shape[-1]
        w = self.weight.view(-1, self.head_dim, n_in).index_select(0, self.heads).reshape(-1, n_in)
        b = None if self.bias is None else self.bias.view(-1, self.head_dim).index_select(0, self.heads).reshape(-1)
        return F.linear(x, w, b)

    def restore(self, mod, attr: str, linear: nn.Linear) -> None:
        """Put ``linear`` back as ``mod.<attr>``, with the parameters this module holds now (a
        ``load_state_dict(assign=True)`` or a dtype conversion may have replaced them while patched)."""
        linear.weight, linear.bias = self.weight, self.bias
        setattr(mod, attr, linear)


# ----------------------------------------------------------------------------- dropout route


class DropoutHeads:
    """One layer's heads as the dropout hook sees them (results are attention probabilities)."""

    keys_masked = False  # the model goes on to use the probabilities the hook returns

    def __init__(self, probs: torch.Tensor, st: LayerState):
        self._probs, self.st = probs, st
        self.n = probs.shape[-1]

    def dynamic(self, idx=None):
        return self._probs if idx is None else self._probs[:, idx]

    def constant(self, C, idx=None, norm=None):
        if self._probs.dim() != 4:
            raise RuntimeError(f"Expected attention probabilities [B, H, N, N], got {tuple(self._probs.shape)}")
        return masked_constant(C, self.st.ctx.mask2d, norm).to(self._probs.dtype)

    def canvas(self):
        return self._probs.new_empty(self._probs.shape)

    def probs(self):
        return self._probs

    def apply(self, probs):
        return probs  # the module multiplies them by its values itself

    def values(self):
        # values of this forward pass (recorded only when asked); popped, so never reused
        return self.st.extra.pop("value", None)


def _dropout_hook(st: LayerState):
    """A forward pre-hook on the attention's dropout: the patched probabilities replace its input, so the
    dropout (in training) acts on them as combined."""

    def hook(mod, inputs):
        probs = inputs[0]
        st.reached = True
        if st.mode is Mode.STATIC and st.static_idx.numel() == 0:
            # no head of this layer replaced: the probabilities pass untouched, and (unlike the registry
            # route's empty constant path) trainable constants stay out of the autograd graph, as always here
            return None
        return (modes.run(st, DropoutHeads(probs, st)), *inputs[1:])

    return hook


def _value_hook(model, mod, st: LayerState, undo: ExitStack) -> None:
    """Keep the per-head values of ``mod``'s current forward pass in ``st.extra["value"]``."""
    attr, read = value_reader(model.config.model_type)

    def hook(proj, inputs, out):
        st.extra["value"] = read(mod, out)

    undo.callback(getattr(mod, attr).register_forward_hook(hook).remove)


# ----------------------------------------------------------------------------- installation


def check_unpatched(modules) -> None:
    """Fail if any of these attention modules already carries a PAPA patch."""
    for m in set(modules):
        if getattr(m, "_papa", None) is not None:
            raise RuntimeError("This model is already patched by PAPA; remove() the other patch first.")


def _release(mod, state) -> None:
    """Detach ``state`` from ``mod``, unless another patch has replaced it since."""
    if getattr(mod, "_papa", None) is state:
        del mod._papa


def _check_unchanged(model, patched_as: tuple, registry: bool) -> None:
    """A `RuntimeError` when the model changed under its patch in a way the patch cannot follow: its dtype or
    device (the constants and head indices were set up on the patch's: a raw torch error deep in a forward pass),
    or, on the registry route, its attention implementation (``set_attn_implementation("eager")`` left the patch
    half installed: outputs of neither model, or none of the patch)."""
    first = next(model.parameters())
    if (first.dtype, first.device) != patched_as:
        raise RuntimeError(
            f"the model is {first.dtype} on {first.device} now, {patched_as[0]} on {patched_as[1]} when PAPA patched "
            f"it: remove() the patch (or leave its with block), change the model, and patch it again"
        )
    impl = getattr(model.config, "_attn_implementation", ATTN_NAME)
    if registry and impl != ATTN_NAME:
        raise RuntimeError(
            f"the model's attention implementation is {impl!r} now, set while PAPA's patch was on: remove() the "
            f"patch (or leave its with block), set it, and patch again (the patch computes the input-dependent "
            f"heads as the model did when patched: eager as eager, sdpa as sdpa)"
        )


def _check_reached(model, fam, states: list[LayerState], impl: str | None) -> None:
    """A `RuntimeError` after a forward pass in which a patched layer's route never ran: the model's attention then
    computed as it always does, and the patch (constants, lambdas, the recorder) was silently no part of it (a
    family entry naming the parent module instead of the one that calls the attention function, a dropout-route
    family under sdpa attention, which takes a dropout rate and calls no dropout module: all-zero averages, and
    every fraction the original model's scores)."""
    missed = [st.layer for st in states if not st.reached]
    if missed:
        shown = ", ".join(map(str, missed[:8])) + (", ..." if len(missed) > 8 else "")
        how = (
            f"the {fam.attention_class} modules never called the attention function (is it the module that does? "
            f"papa.models.FAMILIES)"
            if fam.route == "registry"
            else f"{fam.attention_class}.{fam.dropout} never ran (the dropout route needs an eager attention that "
            f"calls that module: load the model with attn_implementation='eager', as papa.load_encoder does; a "
            f"family on transformers' attention interface calls a dropout function instead: give it route "
            f"'registry')"
        )
        raise RuntimeError(f"PAPA's patch was not reached in {len(missed)} of {len(states)} layers ({shown}) in this "
                           f"forward pass of a {model.config.model_type} model with {impl!r} attention: {how}; its "
                           f"outputs are the unpatched model's")  # fmt: skip


def install(model, states: list[LayerState], undo: ExitStack) -> None:
    """Make ``model``'s attention modules run ``states`` (one per layer), pushing every change onto ``undo``.

    On an exception the changes made so far stay on ``undo``: the caller closes it.
    """
    fam = family_of(model)
    ctx = states[0].ctx
    base = getattr(model, "base_model", model)
    sig = inspect.signature(base.forward)

    first = next(model.parameters())
    patched_as = (first.dtype, first.device)

    def capture_mask(mod, args, kwargs):
        _check_unchanged(model, patched_as, fam.route == "registry")
        bound = sig.bind_partial(*args, **kwargs).arguments
        mask = bound.get("attention_mask")
        ctx.mask2d = None if mask is None else mask.to(torch.bool)
        ctx.calls = 0
        maps = bound.get("output_attentions", (bound.get("kwargs") or {}).get("output_attentions"))
        ctx.maps = bool(getattr(model.config, "output_attentions", False) if maps is None else maps)
        for st in states:
            st.reached = False

    impl = getattr(model.config, "_attn_implementation", None)  # as loaded (the registry route sets its own)

    def check_reached(mod, args, output):
        _check_reached(model, fam, states, impl)

    undo.callback(base.register_forward_pre_hook(capture_mask, with_kwargs=True).remove)
    undo.callback(base.register_forward_hook(check_reached).remove)
    for mod, st in zip(attention_modules(model), states, strict=True):
        if st.mode is Mode.STATIC and fam.route == "registry" and fam.prunable and st.static_idx.numel():
            head_dim = getattr(mod, "attention_head_size", None) or mod.dim // mod.n_heads
            for attr in (fam.query, fam.key):
                orig = getattr(mod, attr)
                sub = HeadSubsetLinear(orig, st.dyn_idx, head_dim)
                setattr(mod, attr, sub)
                undo.callback(sub.restore, mod, attr, orig)
            st.pruned = True
        if fam.shared:
            if not isinstance(getattr(mod, "_papa", None), dict):
                mod._papa = {}
                undo.callback(_release, mod, mod._papa)
            mod._papa[st.layer] = st
        else:
            mod._papa = st
            undo.callback(_release, mod, st)
        if fam.route == "dropout":
            if st.mode is Mode.RECORD and ctx.needs_values:
                _value_hook(model, mod, st, undo)
            undo.callback(getattr(mod, fam.dropout).register_forward_pre_hook(_dropout_hook(st)).remove)
    if fam.route == "registry":
        ensure_registered()
        orig_impl = model.config._attn_implementation
        ctx.eager = orig_impl == "eager"
        model.set_attn_implementation(ATTN_NAME)
        undo.callback(model.set_attn_implementation, orig_impl)
        if model.config._attn_implementation != ATTN_NAME:  # a model whose attention computes its own softmax
            raise RuntimeError(
                f"this {model.config.model_type} model kept {model.config._attn_implementation!r} attention when "
                f"PAPA set its attention function: its attention does not call transformers' attention interface; "
                f"give its papa.models.FAMILIES entry route 'dropout' (README \"Adding a model family\")"
            )
