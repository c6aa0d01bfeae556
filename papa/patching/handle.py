"""The patched model's handle: validating a patch, owning its trainable tensors, undoing it.

`patch` (the public entry) builds a `PatchHandle`. The handle checks the constants and the static
mask against the model, owns the tensors a patch trains (lambda logits, trainable constants),
builds one `LayerState` per layer and lets `papa.patching.routes.install` put them in place. Every
change installation makes is pushed onto the handle's undo stack (a `contextlib.ExitStack`);
`remove()` pops them all, so the model is exactly as before. What the patched layers compute is
`papa.patching.modes`; recording attention is `papa.patching.record_attention`.
"""

from __future__ import annotations

import warnings
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..io import caller_stacklevel
from ..models import (
    ConstantsFromAnotherModel,
    attention_modules,
    check_positions,
    family_of,
    model_differs,
    num_heads,
)
from ..spec import DATA_FREE
from . import routes
from .modes import Context, LayerState, Mode, OnAttention


class PatchHandle:
    """A patched model. Use as a context manager, or call `remove()`.

    Attributes:
        mode: the `Mode` of every patched layer.
        lambda_logits: [layers, heads] trainable logits ``w`` (``mix=True`` only);
            ``lambda = sigmoid(w)``.
        constants: [layers, heads, N, N] constant matrices in use (a Parameter when trainable).
        norm: their rows' normalisers (`papa.ConstantAttention.norm`, effective attention's), or None.
        static: bool [layers, heads] (on the CPU), the heads using their constant matrix alone.
    """

    def __init__(self, model, constants, static=None, mix: bool = False, trainable_constants: bool = False):
        self._setup(model, Mode.MIX if mix else Mode.STATIC, Context(), constants, static, trainable_constants)

    @classmethod
    def _recording(cls, model, on_attention: OnAttention, values: bool = False) -> PatchHandle:
        """A handle in `Mode.RECORD` (the constructor behind `papa.patching.record_attention`)."""
        self = cls.__new__(cls)
        self._setup(model, Mode.RECORD, Context(on_attention=on_attention, needs_values=values), None, None, False)
        return self

    def _setup(self, model, mode: Mode, ctx: Context, constants, static, trainable_constants: bool) -> None:
        self.model = model
        self.mode = mode
        self.family = family_of(model)
        self.modules = attention_modules(model)
        L, H = len(self.modules), num_heads(model)
        self.shape = (L, H)
        routes.check_unpatched(self.modules)
        device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        # what the patch trains (lambda logits, trainable constants) is kept in float32 at least, however the model
        # runs: in bfloat16 AdamW's steps fell below half a step of the logits (lambdas froze, most of them tied),
        # in float16 its eps rounded to 0 (NaN); the forward pass casts them to the model's dtype
        self.dtype, self.param_dtype = dtype, torch.promote_types(dtype, torch.float32)
        self.ctx = ctx
        self._undo = ExitStack()  # every installed change pushes its undo; remove() pops them all

        C_dtype = self.param_dtype if trainable_constants else dtype
        self.constants = None if mode is Mode.RECORD else self._checked_constants(constants, device, C_dtype)
        self.norm = None if mode is Mode.RECORD else self._checked_norm(constants, device, dtype)
        if trainable_constants:
            if self.norm is not None:  # papa.spec.TRAINABLE: the workflow's spec refuses effective_trained
                raise ValueError("effective-attention constants cannot be trained: their rows are scaled by the raw "
                                 "average's mass (their norm), which training would not follow, so a trained row's "
                                 "scale would be free; train average or toeplitz constants "
                                 "(papa.spec.TRAINABLE), or pass the effective ones fixed")  # fmt: skip
            self.constants = nn.Parameter(self.constants.clone(), requires_grad=True)
        self.static = self._checked_static(static)
        self.lambda_logits = (
            nn.Parameter(torch.zeros(L, H, device=device, dtype=self.param_dtype)) if mode is Mode.MIX else None
        )
        unused = (  # a trainable tensor no head reads: its gradient is 0, and training it changes nothing
            "the constant matrices (trainable_constants, no static head and no mix)"
            if trainable_constants and mode is Mode.STATIC and not self.static.any()
            else "the lambdas (mix, every head static)"
            if mode is Mode.MIX and bool(self.static.all())
            else None
        )
        if unused:
            warnings.warn(f"no head uses {unused}: training them changes nothing (their gradient is 0)",
                          stacklevel=caller_stacklevel())  # fmt: skip
        if mode is Mode.STATIC and not self.static.any() and not trainable_constants:
            return  # no head is static: leave the model untouched (fraction 1 is the stock model, at stock speed)

        try:
            routes.install(model, [self._layer_state(layer, device) for layer in range(L)], self._undo)
        except Exception:
            self.remove()
            raise

    # -- validation
    def _checked_constants(self, constants, device, dtype) -> torch.Tensor:
        L, H = self.shape
        C = getattr(constants, "mean", None) if hasattr(constants, "metadata") else constants  # a ConstantAttention
        if not isinstance(C, (torch.Tensor, np.ndarray)):
            raise TypeError(
                f"constants must be a papa.ConstantAttention, or its matrices as a tensor or NumPy array "
                f"[layers, heads, N, N]; got {type(constants).__name__}"
                + (": load a file with papa.ConstantAttention.load(path)" if isinstance(constants, (str, Path)) else "")
            )
        C = torch.as_tensor(C)
        if C.is_meta:
            raise ValueError("the constant matrices are on torch's meta device (they hold no values): load them with "
                             "papa.ConstantAttention.load, or compute them (papa.average_attention)")  # fmt: skip
        if not C.dtype.is_floating_point:  # integer or bool "matrices" are no attention weights (a mask, counts)
            raise TypeError(f"constant matrices must hold floating-point attention weights, got {C.dtype}")
        if not torch.isfinite(C).all():
            bad = int((~torch.isfinite(C)).sum())
            raise ValueError(
                f"Constant matrices hold {bad} NaN/inf values: they would make every output NaN. "
                f"Recompute them (papa.average_attention) or check the file they came from"
            )
        if C.dim() != 4 or tuple(C.shape[:2]) != (L, H) or C.shape[-1] != C.shape[-2]:
            raise ValueError(
                f"Constant matrices have shape {tuple(C.shape)}; this model needs [layers={L}, heads={H}, N, N]. "
                f"Were they averaged on another model?"
            )
        check_positions(self.model, C.shape[-1])  # inputs of that N could not run through this model
        self._warn_if_another_model(getattr(constants, "metadata", None) or {})
        return C.to(device=device, dtype=dtype)

    def _checked_norm(self, constants, device, dtype) -> torch.Tensor | None:
        """A `ConstantAttention`'s row normalisers (``norm``; effective attention's), checked; None without."""
        W = getattr(constants, "norm", None) if hasattr(constants, "metadata") else None
        if W is None:
            return None
        W = torch.as_tensor(W)
        if W.shape != self.constants.shape or not torch.isfinite(W).all() or (W < 0).any():
            raise ValueError(f"The constants' norm (their rows' normalisers) must be finite, non-negative and of "
                             f"the matrices' shape {tuple(self.constants.shape)}; got {tuple(W.shape)}")  # fmt: skip
        return W.to(device=device, dtype=dtype)

    def _warn_if_another_model(self, meta: dict) -> None:
        """A `ConstantsFromAnotherModel` warning when the constants' metadata names another model than the
        one patched (data-free kinds depend on the shape alone: never)."""
        if meta.get("kind") in DATA_FREE:
            return
        why = model_differs(meta.get("model"), meta.get("model_revision"), self.model)
        if why:
            warnings.warn(
                f"The constant matrices were computed on {why}. Their shapes fit, so they are used; if that is "
                f"not what you meant, average attention on the model you patch (papa.average_attention)",
                ConstantsFromAnotherModel,
                stacklevel=caller_stacklevel(),
            )

    def _checked_static(self, static) -> torch.Tensor:
        L, H = self.shape
        if static is None:
            static = torch.zeros(L, H, dtype=torch.bool)
        not_mask = TypeError(f"static must be a bool mask [layers={L}, heads={H}] (True = constant head), got "
                             f"{static!r}: every head constant is torch.ones({L}, {H}, dtype=torch.bool); "
                             f"papa.selection.select_static builds one from a head order")  # fmt: skip
        if isinstance(static, (str, bytes, dict, set, frozenset)) or not hasattr(static, "__len__"):
            raise not_mask  # a set of heads has a length, but no order torch could read as a mask
        try:
            given = torch.as_tensor(static)
        except (TypeError, ValueError, RuntimeError) as e:  # ragged rows, objects: torch's own words name no argument
            raise not_mask from e
        if given.dtype != torch.bool and not ((given == 0) | (given == 1)).all():
            raise ValueError(f"static must be a bool mask [layers={L}, heads={H}] (True = constant head), got "
                             f"{given.dtype} values {sorted(set(given.flatten().tolist()))[:6]}: a list of head "
                             f"indices or a score would be read as a mask; build the mask (papa.selection)"
                             )  # fmt: skip
        static = given.to(torch.bool)
        if tuple(static.shape) != (L, H):
            raise ValueError(f"static must be a bool mask of shape [layers={L}, heads={H}], got {tuple(static.shape)}")
        return static.cpu()

    # -- one layer's state
    def _layer_state(self, layer: int, device) -> LayerState:
        s_mask = self.static[layer]
        st = LayerState(
            ctx=self.ctx,
            layer=layer,
            mode=self.mode,
            static_idx=torch.nonzero(s_mask).flatten().to(device),
            dyn_idx=torch.nonzero(~s_mask).flatten().to(device),
        )
        if self.mode is Mode.STATIC:
            st.const = self._const_getter(layer, st.static_idx)
        elif self.mode is Mode.MIX:
            st.const = self._const_getter(layer, None)
            st.lam_logit = lambda: self.lambda_logits[layer]
        if self.norm is not None:  # never trained: its heads' rows are taken once
            W = _heads_of(self.norm[layer], st.static_idx if self.mode is Mode.STATIC else None)
            st.norm = lambda: W
        return st

    def _const_getter(self, layer, idx):
        if isinstance(self.constants, nn.Parameter):  # read at every call: the values change while training
            if idx is None:  # cast to the model's dtype (the parameter is float32 at least)
                return lambda: self.constants[layer].to(self.dtype)
            return lambda: self.constants[layer].index_select(0, idx).to(self.dtype)
        C = _heads_of(self.constants[layer], idx)
        return lambda: C

    # -- lambdas and trainable tensors
    def lambdas(self) -> torch.Tensor:
        """[layers, heads] current lambda = sigmoid(w) (mix mode), float32 (float64 for a float64 model). A head in
        ``static`` uses its constant matrix alone: its entry is unused (it stays at its initial 0.5)."""
        if self.lambda_logits is None:
            raise RuntimeError("lambdas() needs patch(..., mix=True)")
        return torch.sigmoid(self.lambda_logits.detach()).cpu()

    def set_lambdas(self, lam) -> None:
        """Set every lambda (values in [0, 1]; 1 is exactly the original attention)."""
        if self.lambda_logits is None:
            raise RuntimeError("set_lambdas() needs patch(..., mix=True)")
        try:  # "0.5" or None: torch named neither lambdas nor what they may be
            if isinstance(lam, (str, bytes)):
                raise TypeError
            lam = torch.as_tensor(lam, dtype=self.lambda_logits.dtype, device=self.lambda_logits.device)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"lambdas must be a number or a [layers, heads] = {list(self.shape)} tensor of numbers in "
                            f"[0, 1], got {lam!r}") from None  # fmt: skip
        if not bool(((lam >= 0) & (lam <= 1)).all()):  # NaN fails too
            raise ValueError(f"lambdas must lie in [0, 1] (1 = the head's own attention, 0 = its constant matrix); "
                             f"got values from {lam.min().item():g} to {lam.max().item():g}")  # fmt: skip
        try:
            lam = lam.expand(self.shape)
        except RuntimeError:
            raise ValueError(f"lambdas of shape {tuple(lam.shape)} do not fit the model's [layers, heads] = "
                             f"{list(self.shape)}: give one value, or one per head") from None  # fmt: skip
        with torch.no_grad():
            self.lambda_logits.copy_(torch.logit(lam))

    def parameters(self) -> list[nn.Parameter]:
        """Trainable tensors the patch adds (lambda logits, trainable constants)."""
        return [p for p in (self.lambda_logits, self.constants) if isinstance(p, nn.Parameter)]

    # -- undo
    def remove(self) -> None:
        """Undo the patch: the model is exactly as before. Only this handle's own changes are undone,
        once: removing a handle again (after another patch was installed) changes nothing."""
        self._undo.close()
        self._removed = True

    def __enter__(self):
        if getattr(self, "_removed", False):  # its patch is gone: the block would run the model unpatched
            raise RuntimeError("this patch was removed (remove() or the end of a with block): patch the model again "
                               "(papa.patch(model, constants, ...))")  # fmt: skip
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def _heads_of(T: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    """One layer's [heads, N, N] tensor, restricted to heads ``idx`` (None: all of them)."""
    return T if idx is None else T.index_select(0, idx).contiguous()


def patch(model, constants, static=None, mix: bool = False, trainable_constants: bool = False) -> PatchHandle:
    """Make heads of ``model`` use constant attention matrices.

    Args:
        model: a supported encoder (see ``papa.models.FAMILIES``).
        constants: `papa.ConstantAttention`, or a tensor or NumPy array [layers, heads, N, N]. A bare
            tensor has no row normalisers: pass effective-attention constants as the `ConstantAttention`
            itself (its ``norm`` renormalises their rows as the raw average would), not its ``mean``.
        static: bool [layers, heads]; True = that head uses its constant matrix. None = no head.
        mix: every non-static head uses ``sigmoid(w) * A + (1 - sigmoid(w)) * C_masked`` with a
            trainable logit ``w`` initialised at 0 (lambda = 0.5).
        trainable_constants: the constant matrices become trainable parameters (the paper's
            "labeled" matrices, Table 1).
    Returns:
        A `PatchHandle` (context manager); ``remove()`` restores the model exactly.

    Call the model you patched (``model(**inputs)``): the patch reads each batch's padding mask as the model's
    ``forward`` receives it, so a submodule called on its own (``model.encoder(...)``) would mask with the
    previous batch's. Change the model's dtype, device or attention implementation before patching, or after
    ``remove()``: a forward pass under a patch refuses a model changed since (`RuntimeError`).
    """
    return PatchHandle(model, constants, static=static, mix=mix, trainable_constants=trainable_constants)
