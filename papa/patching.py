"""Replacing attention matrices with constant ones.

Two routes, one semantics:

* **registry** (BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT): PAPA registers an
  attention function named ``"papa"`` in transformers' ``AttentionInterface`` (and the
  sdpa mask function under the same name in ``AttentionMaskInterface``, so the padding
  mask still arrives) and switches the model to it while patched. Static heads never
  compute queries or keys: their query/key projections are replaced by projections of
  the input-dependent heads only, and their output is ``C_masked @ V`` computed as
  ``(C @ (m * V)) / (C @ m)`` without materialising a per-example N x N matrix.
  Input-dependent heads run through ``torch``'s scaled-dot-product attention, like
  stock ``sdpa``.
* **dropout** (DeBERTa v1, DeBERTa-v2/v3, MPNet): these compute their own softmax; the
  attention probabilities pass through the module's dropout, where a forward hook replaces
  them. When effective attention is recorded, a forward hook on the value projection
  (``_VALUE_READERS``) hands the same forward pass's per-head values to the recorder.

A constant matrix ``C`` [N, N] is used, per example, restricted to the valid (non-pad)
key and query positions and row-normalised (L1); rows of pad queries are zero.
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .models import attention_modules, family_of, num_heads

ATTN_NAME = "papa"
_registered = False
_lock = threading.Lock()


class SequenceLengthMismatch(ValueError):
    """Constant matrices and inputs disagree on the sequence length N."""


def _check_length(n_const: int, n_input: int) -> None:
    if n_const != n_input:
        raise SequenceLengthMismatch(
            f"The constant matrices are {n_const}x{n_const} but the input has sequence length {n_input}. "
            f"Tokenize with papa.encode(..., max_length={n_const}) (papa layout pads every input to N), or "
            f"average attention again at max_length={n_input}."
        )


# ----------------------------------------------------------------------------- shared state


@dataclass
class _Context:
    """Per-patch state shared by all attention modules of one model."""

    mask2d: torch.Tensor | None = None  # [B, N] bool, valid (non-pad) tokens of the current batch
    recorder: object | None = None  # papa.constants._Recorder while averaging
    calls: int = 0


@dataclass
class _ModuleState:
    ctx: _Context
    layer: int
    mode: str  # "static" | "mix" | "record"
    static_idx: torch.Tensor | None = None  # heads using the constant
    dyn_idx: torch.Tensor | None = None  # heads computing attention
    n_heads: int = 0
    pruned: bool = False  # query/key projections hold input-dependent heads only
    const: object = None  # callable -> [heads_of_interest, N, N]
    lam_logit: object = None  # callable -> [H]
    extra: dict = field(default_factory=dict)


def constant_output(C: torch.Tensor, v: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """Output of heads using constant matrices, masked and row-normalised per example.

    Args:
        C: [h, N, N] constant matrices.
        v: [B, h, N, d] values of those heads.
        valid: [B, N] bool (non-pad tokens) or None (all valid).
    Returns:
        [B, h, N, d] equal to ``normalise(C * valid_q valid_k^T) @ v`` with pad-query rows zero.
        Rows are L1-normalised (divided by the sum of absolute values over valid keys): for
        the usual non-negative matrices that is the paper's "rows sum to 1"; signed matrices
        (effective attention) stay well defined where a signed row sum would be near 0.
    """
    B, h, N, d = v.shape
    tiny = torch.finfo(v.dtype).tiny
    Cabs = C.abs()
    m = None if valid is None else valid.to(v.dtype)  # [B, N]
    if m is not None:
        v = v * m[:, None, :, None]
    # one [h, N, N] @ [h, N, B*d] product: broadcasting C over the batch would copy it B times
    vt = v.permute(1, 2, 0, 3).reshape(h, N, B * d)
    num = torch.bmm(C, vt).view(h, N, B, d).permute(2, 0, 1, 3)  # [B, h, N, d]
    if m is None:
        den = Cabs.sum(-1)[None, :, :, None]
    else:
        den = torch.matmul(Cabs, m.t()).permute(2, 0, 1)[..., None]  # [B, h, N, 1]
    out = num / den.clamp_min(tiny)
    return out if m is None else out * m[:, None, :, None]


def masked_constant(C: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """The per-example matrices [B, h, N, N] that `constant_output` applies implicitly."""
    tiny = torch.finfo(C.dtype).tiny
    if valid is None:
        return (C / C.abs().sum(-1, keepdim=True).clamp_min(tiny))[None]
    m = valid.to(C.dtype)
    Cm = C[None] * m[:, None, None, :]
    Cm = Cm / Cm.abs().sum(-1, keepdim=True).clamp_min(tiny)
    return Cm * m[:, None, :, None]


def _split_heads(mod, out: torch.Tensor) -> torch.Tensor:
    """A value projection's output [B, N, H * d] as per-head values [B, H, N, d]
    (DeBERTa-v2/v3 ``value_proj``, MPNet ``v``; neither adds anything after the projection)."""
    B, N, _ = out.shape
    return out.view(B, N, mod.num_attention_heads, -1).transpose(1, 2)


def _deberta_values(mod, out: torch.Tensor) -> torch.Tensor:
    """DeBERTa v1: ``in_proj`` yields, per head, its query, key and value rows in turn
    ([B, N, H * 3d]); the value is the last third, plus ``v_bias``."""
    B, N, _ = out.shape
    H = mod.num_attention_heads
    v = out.view(B, N, H, 3, -1)[:, :, :, 2]  # [B, N, H, d]
    return (v + mod.v_bias.view(H, -1).to(v.dtype)).transpose(1, 2)


#: dropout-route model type -> (attribute of the value projection, reader of its output as [B, H, N, d])
_VALUE_READERS = {
    "deberta": ("in_proj", _deberta_values),
    "deberta-v2": ("value_proj", _split_heads),
    "mpnet": ("v", _split_heads),
}


def _bool_mask(attention_mask):
    if attention_mask is None or attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > torch.finfo(attention_mask.dtype).min / 2  # additive float mask -> keep


def _papa_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """The attention function PAPA registers in transformers' AttentionInterface."""
    st = getattr(module, "_papa", None)
    if isinstance(st, dict):  # a module shared by several layers: they run in order
        ctx = next(iter(st.values())).ctx
        st, ctx.calls = st[ctx.calls], ctx.calls + 1
    if scaling is None:
        scaling = value.size(-1) ** -0.5
    mask = _bool_mask(attention_mask)
    if st is None:  # not a patched module: stock sdpa behaviour
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling)
        return out.transpose(1, 2).contiguous(), None
    valid = st.ctx.mask2d
    n = value.shape[-2]

    if st.mode == "record":
        scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # as eager attention computes it
        if mask is not None:
            scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, value)
        # after the output is computed: the recorder may zero pad-query rows of probs in place
        st.ctx.recorder.add(st.layer, probs, valid, value, keys_masked=mask is not None)
        return out.transpose(1, 2).contiguous(), None

    if st.mode == "mix":
        C = st.const()
        _check_length(C.shape[-1], n)
        dyn = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling)
        lam = torch.sigmoid(st.lam_logit())[None, :, None, None]
        # 0 * C is exact, so lambda = 1 reproduces the original; skip the constant path then
        const = constant_output(C, value, valid)
        out = lam * dyn + (1 - lam) * const
        if st.static_idx is not None and st.static_idx.numel():
            out[:, st.static_idx] = const[:, st.static_idx]
        return out.transpose(1, 2).contiguous(), None

    # static mode
    C = st.const()  # [n_static, N, N]
    _check_length(C.shape[-1], n)
    n_dyn = st.dyn_idx.numel()
    if n_dyn == 0:
        out = constant_output(C, value, valid)
        return out.transpose(1, 2).contiguous(), None
    out = value.new_empty(value.shape)
    v_dyn = value.index_select(1, st.dyn_idx)
    q, k = (query, key) if st.pruned else (query.index_select(1, st.dyn_idx), key.index_select(1, st.dyn_idx))
    out[:, st.dyn_idx] = F.scaled_dot_product_attention(q, k, v_dyn, attn_mask=mask, dropout_p=dropout, scale=scaling)
    out[:, st.static_idx] = constant_output(C, value.index_select(1, st.static_idx), valid)
    return out.transpose(1, 2).contiguous(), None


def _ensure_registered() -> None:
    global _registered
    with _lock:
        if _registered:
            return
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(ATTN_NAME, _papa_attention)
        # without a mask function under the same name the padding mask silently arrives as None
        AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)
        _registered = True


class _HeadSubsetLinear(nn.Module):
    """A query/key projection computing only the given heads (the input-dependent ones)."""

    def __init__(self, linear: nn.Linear, heads: torch.Tensor, head_dim: int):
        super().__init__()
        w = linear.weight.detach().view(-1, head_dim, linear.in_features)[heads].reshape(-1, linear.in_features)
        self.register_buffer("weight", w.clone(), persistent=False)
        if linear.bias is not None:
            b = linear.bias.detach().view(-1, head_dim)[heads].reshape(-1)
            self.register_buffer("bias", b.clone(), persistent=False)
        else:
            self.bias = None
        self.head_dim = head_dim
        self.empty = heads.numel() == 0

    def forward(self, x):
        if self.empty:  # a zero-cost stand-in of one head: the attention function never reads it
            return x.new_zeros(()).expand(*x.shape[:-1], self.head_dim)
        return F.linear(x, self.weight, self.bias)


# ----------------------------------------------------------------------------- public handle


class PatchHandle:
    """A patched model. Use as a context manager, or call `remove()`.

    Attributes:
        lambda_logits: [layers, heads] trainable logits ``w`` (``mix=True`` only);
            ``lambda = sigmoid(w)``.
        constants: [layers, heads, N, N] constant matrices in use (a Parameter when trainable).
    """

    def __init__(self, model, constants, static=None, mix=False, trainable_constants=False, _record=None):
        self.model = model
        self.family = family_of(model)
        self.modules = attention_modules(model)
        L, H = len(self.modules), num_heads(model)
        self.shape = (L, H)
        for m in set(self.modules):
            if getattr(m, "_papa", None) is not None:
                raise RuntimeError("This model is already patched by PAPA; remove() the other patch first.")
        device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        self.ctx = _Context(recorder=_record)
        self._hooks = []
        self._swapped = []  # (module, attribute, original)
        self._orig_impl = None
        self._owned = []  # (module, the _papa state this handle set on it): remove() undoes only these
        self._active = True

        mode = "record" if _record is not None else ("mix" if mix else "static")
        if mode != "record":
            C = constants if isinstance(constants, torch.Tensor) else constants.mean
            C = torch.as_tensor(C)
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
            C = C.to(device=device, dtype=dtype)
            self.constants = nn.Parameter(C.clone(), requires_grad=True) if trainable_constants else C
        else:
            self.constants = None
        if static is None:
            static = torch.zeros(L, H, dtype=torch.bool)
        static = torch.as_tensor(static, dtype=torch.bool)
        if tuple(static.shape) != (L, H):
            raise ValueError(f"static must be a bool mask of shape [layers={L}, heads={H}], got {tuple(static.shape)}")
        self.static = static.cpu()
        self.lambda_logits = nn.Parameter(torch.zeros(L, H, device=device, dtype=dtype)) if mode == "mix" else None
        if mode == "static" and not self.static.any() and not trainable_constants:
            return  # no head is static: leave the model untouched (fraction 1 is the stock model, at stock speed)

        try:
            self._install(mode, device)
        except Exception:
            self.remove()
            raise

    # -- installation
    def _install(self, mode, device):
        fam = self.family
        base = getattr(self.model, "base_model", self.model)
        sig = inspect.signature(base.forward)

        def capture_mask(mod, args, kwargs):
            bound = sig.bind_partial(*args, **kwargs).arguments
            mask = bound.get("attention_mask")
            self.ctx.mask2d = None if mask is None else mask.to(torch.bool)
            self.ctx.calls = 0

        self._hooks.append(base.register_forward_pre_hook(capture_mask, with_kwargs=True))
        H = self.shape[1]
        for layer, mod in enumerate(self.modules):
            st = _ModuleState(ctx=self.ctx, layer=layer, mode=mode, n_heads=H)
            s_mask = self.static[layer]
            st.static_idx = torch.nonzero(s_mask).flatten().to(device)
            st.dyn_idx = torch.nonzero(~s_mask).flatten().to(device)
            if mode == "static":
                st.const = self._const_getter(layer, st.static_idx)
            elif mode == "mix":
                st.const = self._const_getter(layer, None)
                st.lam_logit = lambda layer=layer: self.lambda_logits[layer]
            if mode == "static" and fam.route == "registry" and fam.prunable and st.static_idx.numel():
                head_dim = getattr(mod, "attention_head_size", None) or mod.dim // mod.n_heads
                for attr in (fam.query, fam.key):
                    orig = getattr(mod, attr)
                    setattr(mod, attr, _HeadSubsetLinear(orig, st.dyn_idx, head_dim))
                    self._swapped.append((mod, attr, orig))
                st.pruned = True
            if fam.shared:
                if not isinstance(getattr(mod, "_papa", None), dict):
                    mod._papa = {}
                    self._owned.append((mod, mod._papa))
                mod._papa[layer] = st
            else:
                mod._papa = st
                self._owned.append((mod, st))
            if fam.route == "dropout":
                if mode == "record" and self.ctx.recorder.effective:
                    self._hooks.append(self._value_hook(mod, st))
                self._hooks.append(getattr(mod, fam.dropout).register_forward_hook(self._dropout_hook(st)))
        if fam.route == "registry":
            _ensure_registered()
            self._orig_impl = self.model.config._attn_implementation
            self.model.set_attn_implementation(ATTN_NAME)

    def _const_getter(self, layer, idx):
        if isinstance(self.constants, nn.Parameter):
            if idx is None:
                return lambda: self.constants[layer]
            return lambda: self.constants[layer].index_select(0, idx)
        C = self.constants[layer] if idx is None else self.constants[layer].index_select(0, idx).contiguous()
        return lambda: C

    def _value_hook(self, mod, st: _ModuleState):
        """Keep the per-head values of ``mod``'s current forward pass in ``st.extra["value"]``."""
        model_type = self.model.config.model_type
        if model_type not in _VALUE_READERS:
            raise ValueError(
                f"Effective attention needs the values, and PAPA does not know where model type "
                f"{model_type!r} computes them; add it to papa.patching._VALUE_READERS"
            )
        attr, read = _VALUE_READERS[model_type]

        def hook(proj, inputs, out):
            st.extra["value"] = read(mod, out)

        return getattr(mod, attr).register_forward_hook(hook)

    def _dropout_hook(self, st: _ModuleState):
        def hook(mod, inputs, probs):
            valid = st.ctx.mask2d
            if st.mode == "record":
                # values of this forward pass (effective attention only); popped, so never reused
                st.ctx.recorder.add(st.layer, probs, valid, st.extra.pop("value", None))
                return probs
            if st.mode == "static" and st.static_idx.numel() == 0:
                return probs
            if probs.dim() != 4:
                raise RuntimeError(f"Expected attention probabilities [B, H, N, N], got {tuple(probs.shape)}")
            C = st.const()
            _check_length(C.shape[-1], probs.shape[-1])
            Cm = masked_constant(C, valid).to(probs.dtype)
            if st.mode == "mix":
                lam = torch.sigmoid(st.lam_logit())[None, :, None, None]
                out = lam * probs + (1 - lam) * Cm
                if st.static_idx.numel():
                    out[:, st.static_idx] = Cm[:, st.static_idx]
                return out
            out = probs.clone()
            out[:, st.static_idx] = Cm
            return out

        return hook

    # -- public
    def lambdas(self) -> torch.Tensor:
        """[layers, heads] current lambda = sigmoid(w) (mix mode)."""
        if self.lambda_logits is None:
            raise RuntimeError("lambdas() needs patch(..., mix=True)")
        return torch.sigmoid(self.lambda_logits.detach()).cpu()

    def set_lambdas(self, lam) -> None:
        """Set every lambda (values in [0, 1]; 1 is exactly the original attention)."""
        lam = torch.as_tensor(lam, dtype=self.lambda_logits.dtype, device=self.lambda_logits.device)
        with torch.no_grad():
            self.lambda_logits.copy_(torch.logit(lam.expand(self.shape)))

    def parameters(self) -> list[nn.Parameter]:
        """Trainable tensors the patch adds (lambda logits, trainable constants)."""
        return [p for p in (self.lambda_logits, self.constants) if isinstance(p, nn.Parameter)]

    def remove(self) -> None:
        """Undo the patch: the model is exactly as before. Only this handle's own changes are undone,
        once: removing a handle again (after another patch was installed) changes nothing."""
        if not self._active:
            return
        self._active = False
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        for mod, attr, orig in reversed(self._swapped):
            setattr(mod, attr, orig)
        self._swapped.clear()
        for mod, state in self._owned:
            if getattr(mod, "_papa", None) is state:
                del mod._papa
        self._owned.clear()
        if self._orig_impl is not None:
            self.model.set_attn_implementation(self._orig_impl)
            self._orig_impl = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def patch(model, constants, static=None, mix: bool = False, trainable_constants: bool = False) -> PatchHandle:
    """Make heads of ``model`` use constant attention matrices.

    Args:
        model: a supported encoder (see ``papa.models.FAMILIES``).
        constants: `papa.ConstantAttention` or a tensor [layers, heads, N, N].
        static: bool [layers, heads]; True = that head uses its constant matrix. None = no head.
        mix: every non-static head uses ``sigmoid(w) * A + (1 - sigmoid(w)) * C_masked`` with a
            trainable logit ``w`` initialised at 0 (lambda = 0.5).
        trainable_constants: the constant matrices become trainable parameters (the paper's
            "labeled" matrices, Table 1).
    Returns:
        A `PatchHandle` (context manager); ``remove()`` restores the model exactly.
    """
    return PatchHandle(model, constants, static=static, mix=mix, trainable_constants=trainable_constants)
