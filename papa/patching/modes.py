"""What a patched head computes: the three modes, each implemented once for both routes.

* `Mode.STATIC`: the heads in ``static`` use their constant matrix, the others attend as usual.
* `Mode.MIX`: every head uses ``lambda * A + (1 - lambda) * C_masked`` with ``lambda = sigmoid(w)``
  (heads in ``static`` use the constant alone).
* `Mode.RECORD`: heads attend as usual and hand their attention probabilities to a callback
  (`papa.patching.record_attention`).

A mode is a function ``(LayerState, Heads) -> tensor [B, H, N, X]``. `Heads` is what a route
(`papa.patching.routes`) hands it: one layer's attention in the route's terms. On the registry
route ``X = d`` (head outputs: ``dynamic`` runs attention, ``constant`` applies C to the values);
on the dropout route ``X = N`` (attention probabilities: ``dynamic`` is the model's own, ``constant``
the masked constant matrix), which the model then multiplies by the values itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import torch

from .kernels import check_length


class Mode(StrEnum):
    """How patched heads compute their attention (see the module docstring). Equal to its string value."""

    STATIC = "static"
    MIX = "mix"
    RECORD = "record"

    @classmethod
    def _missing_(cls, value):
        raise ValueError(f"Unknown patch mode {value!r}; choose from {', '.join(m.value for m in cls)}")


#: ``on_attention(layer, probs, valid, value, keys_masked)``: see `papa.patching.record_attention`.
OnAttention = Callable[[int, torch.Tensor, "torch.Tensor | None", "torch.Tensor | None", bool], None]


@dataclass
class Context:
    """Per-patch state shared by all attention modules of one model."""

    mask2d: torch.Tensor | None = None  # [B, N] bool, valid (non-pad) tokens of the current batch
    on_attention: OnAttention | None = None  # record mode's callback
    needs_values: bool = False  # record mode: the callback needs the per-head values
    calls: int = 0  # attention calls in this forward pass (a module shared by several layers)
    eager: bool = False  # registry route: the model ran eager attention, so input-dependent heads compute as eager
    maps: bool = False  # registry route: the forward pass asked for attention maps (output_attentions)


@dataclass
class LayerState:
    """One layer's patch: its mode, which heads are static, and where its constants/lambdas come from."""

    ctx: Context
    layer: int
    mode: Mode
    static_idx: torch.Tensor | None = None  # heads using the constant
    dyn_idx: torch.Tensor | None = None  # heads computing attention
    pruned: bool = False  # query/key projections hold input-dependent heads only (registry route)
    const: Callable[[], torch.Tensor] | None = None  # -> [static heads (STATIC) or all heads (MIX), N, N]
    norm: Callable[[], torch.Tensor] | None = None  # -> the same heads' row normalisers (None: |const|)
    lam_logit: Callable[[], torch.Tensor] | None = None  # -> [H] (MIX)
    extra: dict = field(default_factory=dict)  # route scratch (the dropout route's recorded values)
    reached: bool = False  # the route ran this layer's patch in the current forward pass (`routes.install`)

    def constants(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The constant matrices in use and their row normalisers (`papa.ConstantAttention.norm`)."""
        return self.const(), None if self.norm is None else self.norm()


class Heads(Protocol):
    """One layer's attention as a route exposes it to a mode (``X``: see the module docstring)."""

    n: int  # sequence length
    keys_masked: bool  # probs() is exactly 0 at pad keys already, and the model does not read it again

    def dynamic(self, idx: torch.Tensor | None = None) -> torch.Tensor:
        """[B, h, N, X] input-dependent result of heads ``idx`` (None: every head)."""

    def constant(self, C: torch.Tensor, idx: torch.Tensor | None = None, norm: torch.Tensor | None = None):
        """Result, broadcastable to [B, h, N, X], of constant matrices ``C`` [h, N, N] for heads ``idx``
        (None: every head), rows normalised by ``norm`` (None: ``|C|``); both hold exactly those heads."""

    def canvas(self) -> torch.Tensor:
        """A new [B, H, N, X] tensor to write per-head results into (its content is undefined)."""

    def probs(self) -> torch.Tensor:
        """[B, H, N, N] input-dependent attention probabilities (record mode)."""

    def apply(self, probs: torch.Tensor) -> torch.Tensor:
        """[B, H, N, X] result of attention probabilities ``probs`` (record mode)."""

    def values(self) -> torch.Tensor | None:
        """[B, H, N, d] this forward pass's values, if the route has them (record mode)."""


def static(st: LayerState, heads: Heads) -> torch.Tensor:
    """Static heads use their constant matrix, the others attend as usual. A layer without static heads
    (patched only with trainable constants) still runs the empty constant path, so the constants stay in
    the autograd graph with a zero gradient, as they always have on the registry route (the dropout route
    hands such a layer's probabilities back before calling a mode: `papa.patching.routes`)."""
    C, W = st.constants()  # [static heads, N, N]
    check_length(C.shape[-1], heads.n)
    out = heads.canvas()
    if st.dyn_idx.numel():
        out[:, st.dyn_idx] = heads.dynamic(st.dyn_idx)
    out[:, st.static_idx] = heads.constant(C, st.static_idx, W)
    return out


def mix(st: LayerState, heads: Heads) -> torch.Tensor:
    """``lambda * dynamic + (1 - lambda) * constant`` per head; static heads use the constant alone.
    ``0 * C`` is exact, so lambda = 1 reproduces the original model."""
    C, W = st.constants()  # [all heads, N, N]
    check_length(C.shape[-1], heads.n)
    dyn = heads.dynamic()
    lam = torch.sigmoid(st.lam_logit())[None, :, None, None].to(dyn.dtype)  # float32 logits, a half-precision model
    const = heads.constant(C, None, W)
    out = lam * dyn + (1 - lam) * const
    if st.static_idx is not None and st.static_idx.numel():
        out[:, st.static_idx] = const[:, st.static_idx]
    return out


def record(st: LayerState, heads: Heads) -> torch.Tensor:
    """Attend as usual and hand the probabilities (and values, when asked) to the context's callback."""
    probs = heads.probs()
    out = heads.apply(probs)
    # after the output is computed: the callback may zero pad-query rows of probs in place (keys_masked)
    st.ctx.on_attention(st.layer, probs, st.ctx.mask2d, heads.values(), heads.keys_masked)
    return out


#: The one implementation of each mode.
IMPLEMENTATIONS: dict[Mode, Callable[[LayerState, Heads], torch.Tensor]] = {
    Mode.STATIC: static,
    Mode.MIX: mix,
    Mode.RECORD: record,
}


def run(st: LayerState, heads: Heads) -> torch.Tensor:
    """The layer's mode applied to its heads."""
    return IMPLEMENTATIONS[st.mode](st, heads)
