"""Run an encoder's position-wise dense layers on its real tokens only.

PAPA feeds every input padded to one length N (constant matrices are N x N), so a batch is
mostly padding where sentences are short (42-81% of positions are real in the default corpora).
Every ``nn.Linear`` of an encoder acts on each position by itself, and no real token reads a pad
position's output except through attention, where pad keys weigh exactly 0 (input-dependent heads:
the attention mask; constant heads: `papa.patching.kernels.constant_output` zeroes pad values and
keys). `dense_on_real_tokens` hands each such layer the real positions only and scatters its output
back, pad rows 0: real tokens get the same numbers at the cost of the real tokens alone.

A batch is gathered only where that pays and keeps the numbers: at most `MAX_REAL_SHARE` of its
positions real (the gathers and scatters cost about what the skipped rows save at ~80% real on this
project's CPU) and at least `MIN_ROWS` real tokens (MKL computes a product of up to ~11 rows with other
kernels than a larger one, so a lone short example gathered would round differently in the last bits);
other batches run as they are. On the CPU the default run's tables are identical bit for bit with and
without it (under ``MKL_CBWR=AUTO,STRICT``, which `papa.io.seed_everything` sets and every workflow job has;
without it MKL's last bits may differ); on a GPU cuBLAS may pick other kernels for fewer rows (last-bit
differences) and the gathers add kernel launches to a launch-bound loop, so it is on by default for models on
the CPU only (unmeasured on a GPU: ``enabled=True`` asks for it).
"""

from __future__ import annotations

import inspect
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = ["MAX_REAL_SHARE", "MIN_ROWS", "DenseRows", "dense_on_real_tokens"]

#: A batch is gathered only when at most this share of its positions is real (CPU time, MiniLM, batch 32 x 64,
#: one thread, gathered over padded: 0.45x at 30% real, 0.64x at 50%, 0.89x at 70%, 1.00x at 80%, 1.1x at 90-95%).
MAX_REAL_SHARE = 0.75
#: ... and holds at least this many real tokens (MKL rounds products of few rows differently).
MIN_ROWS = 32


@dataclass
class DenseRows:
    """What `dense_on_real_tokens` did: ``computed`` rows its dense layers ran on, of the ``positions`` they
    would have run on padded (summed over layers and forward passes with an attention mask, gathered or not);
    ``enabled`` whether it acted."""

    enabled: bool
    computed: int = 0
    positions: int = 0
    _rows: torch.Tensor | None = field(default=None, repr=False)
    _shape: tuple | None = field(default=None, repr=False)
    _gathered: set = field(default_factory=set, repr=False)

    @property
    def fraction(self) -> float:
        """The share of the padded rows the dense layers computed (1.0 before any forward pass)."""
        return self.computed / self.positions if self.positions else 1.0


def _token_layers(model: nn.Module, skip_attention: str | None) -> list[nn.Module]:
    """The position-wise layers of ``model``: its ``nn.Linear`` modules and PAPA's pruned query/key
    projections, except those inside a DeBERTa attention module (they also project the relative-position
    embeddings, a [1, 2k, H] input that can have a batch's shape)."""
    from .patching.routes import HeadSubsetLinear

    skip = set()
    if skip_attention is not None:
        for m in model.modules():
            if type(m).__name__ == skip_attention:
                skip.update(id(x) for x in m.modules())
    return [m for m in model.modules() if isinstance(m, (nn.Linear, HeadSubsetLinear)) and id(m) not in skip]


@contextmanager
def dense_on_real_tokens(model: nn.Module, enabled: bool | None = None):
    """Within the block, ``model``'s dense layers compute its inputs' real tokens only (the module docstring).

    Args:
        model: an encoder `papa.load_encoder` loaded (any task head: an MLM head's vocabulary
            projection, the costliest layer of the MLM probe, runs on the real tokens too), patched
            or not; a patch installed inside the block is covered from the next forward pass on.
        enabled: None (default): on for a model on the CPU, off elsewhere; True / False force it.
            Leave it off where the model runs through ``torch.compile`` (the gather has
            data-dependent shapes).
    Yields:
        a `DenseRows` counting the rows computed. In a gathered batch the dense layers' outputs at pad
        positions are 0, so the model's outputs there differ from a padded run's (they mean nothing in
        either). Leaving the block removes every hook.
    """
    if enabled is None:
        p = next(model.parameters(), None)
        enabled = p is not None and p.device.type == "cpu"
    stats = DenseRows(enabled=bool(enabled))
    if not enabled:
        yield stats
        return
    from .models import family_of

    attention = family_of(model).attention_class  # an unsupported model fails here, not at its first pass
    skip_attention = attention if attention == "DisentangledSelfAttention" else None
    sig = inspect.signature(model.forward)
    hooked: dict[int, object] = {}

    def gather(mod, args):
        if stats._shape is None or not args or args[0].dim() != 3 or tuple(args[0].shape[:2]) != stats._shape:
            return None
        x, rows = args[0], stats._rows
        stats.positions += x.shape[0] * x.shape[1]
        if rows is None:  # a batch run as it is
            stats.computed += x.shape[0] * x.shape[1]
            return None
        stats._gathered.add(id(mod))
        stats.computed += len(rows)
        return (x.reshape(-1, x.shape[-1]).index_select(0, rows), *args[1:])

    def scatter(mod, args, out):
        if id(mod) not in stats._gathered:
            return None
        stats._gathered.discard(id(mod))
        B, N = stats._shape
        # into the fresh zeros in place: index_copy (out of place) cloned the whole padded buffer first (MiniLM
        # encoding 512 Rotten Tomatoes examples, batch 64 x 64, one thread: 0.84x the CPU time in place, the hidden
        # states identical bit for bit)
        return out.new_zeros(B * N, out.shape[-1]).index_copy_(0, stats._rows, out).view(B, N, -1)

    with ExitStack() as undo:

        def begin(mod, args, kwargs):
            mask = sig.bind_partial(*args, **kwargs).arguments.get("attention_mask")
            stats._gathered.clear()
            stats._rows = stats._shape = None
            if mask is None or mask.dim() != 2:
                return  # no mask, or one this does not read: the batch runs as it is, uncounted
            stats._shape = tuple(mask.shape)
            rows = mask.reshape(-1).nonzero().squeeze(1)
            if MIN_ROWS <= len(rows) <= MAX_REAL_SHARE * mask.numel():
                stats._rows = rows
            # at every pass: a patch may have swapped projections in since the last
            for layer in _token_layers(model, skip_attention):
                if id(layer) not in hooked:
                    hooked[id(layer)] = layer
                    undo.callback(layer.register_forward_pre_hook(gather).remove)
                    # first among the layer's forward hooks: a patch's value hook reads the scattered output
                    undo.callback(layer.register_forward_hook(scatter, prepend=True).remove)

        def end(mod, args, kwargs, out=None):
            stats._rows = stats._shape = None
            stats._gathered.clear()

        undo.callback(model.register_forward_pre_hook(begin, with_kwargs=True).remove)
        undo.callback(model.register_forward_hook(end, with_kwargs=True, always_call=True).remove)
        yield stats
