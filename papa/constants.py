"""Constant attention matrices: averaging (paper Sec. 3.1) and the data-free kinds (Table 1).

``C[l,h,i,j] = sum_e A_e[l,h,i,j] valid_e(i,j) / #{e : valid_e(i,j)}`` with
``valid_e(i,j)`` = both i and j are real tokens of example e; 0 where no example had
(i, j) valid. Sums are accumulated in float64, so memory does not grow with the corpus;
rows are not renormalised here (that happens per example at use time).

``kind="effective"`` averages effective attention instead (`effective_attention`), on
every supported family. It equals raw attention for an example with at most d' (head
dim) real tokens; how many examples that was is logged and stored in the metadata
(``n_examples_at_most_head_dim``, ``head_dim``). Its rows are signed and need not sum to 1,
so they keep, as ``norm``, the raw attention's average of the same examples: at use time each
row is divided by the raw average's mass on the input's valid keys, as the raw matrix's own row
would be (`papa.patching.constant_output`), and effective constants averaged on one input
reproduce it.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .io import PROVENANCE_KEY, Progress, check_not_folder, is_integer, json_value
from .models import check_positions, in_mode, model_revision, model_shape
from .spec import CONSTANT_KINDS, DATA_FREE, DATA_KINDS

log = logging.getLogger(__name__)

KINDS = CONSTANT_KINDS  # old name, replaced by papa.spec.CONSTANT_KINDS


#: The key of the tensors' sha256 in a constants file's ``papa`` metadata (`ConstantAttention.save`).
DIGEST_KEY = "tensors_sha256"


def _tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 of named tensors: each one's name, dtype, shape and bytes, in name order (`ConstantAttention.save`
    stores it with them, `load` compares)."""
    import hashlib

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


@dataclass
class ConstantAttention:
    """Constant matrices for every (layer, head).

    Attributes:
        mean: float32 [layers, heads, N, N].
        count: float64 [N, N], how many examples had (i, j) valid (ones for data-free kinds).
        metadata: N, layers, heads, kind, n_examples, dtype (the model's, for averaged kinds; and head_dim
            for effective attention), plus
            what the caller adds (the workflow: model, corpus, layout, environment, ...)
        norm: None, or float32 [layers, heads, N, N] non-negative matrices whose mass on an input's
            valid keys divides each row of ``mean`` where the constants are used (effective attention:
            the raw attention's average over the same examples). None: each row's own absolute values.
    """

    mean: torch.Tensor
    count: torch.Tensor
    metadata: dict = field(default_factory=dict)
    norm: torch.Tensor | None = None

    def __post_init__(self):
        """Tensors (a NumPy array is taken as one) of the shapes `load` requires: constants that could not be
        written and read back fail here, not at `save` or `load`."""
        for name in ("mean", "count", "norm"):
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                setattr(self, name, torch.from_numpy(value))
            elif value is not None and not isinstance(value, torch.Tensor):
                raise TypeError(f"ConstantAttention.{name} must be a tensor, got {type(value).__name__}")
        if not isinstance(self.metadata, dict):
            raise TypeError(f"ConstantAttention.metadata must be a dict, got {type(self.metadata).__name__}")
        _check_storable(self.metadata)  # what save cannot store fails here, not after the work
        mean, count, norm = self.mean, self.count, self.norm
        N = mean.shape[-1] if mean.dim() else 0
        if mean.dim() != 4 or mean.shape[-2] != N or tuple(count.shape) != (N, N):
            raise ValueError(f"ConstantAttention: mean has shape {tuple(mean.shape)} and count {tuple(count.shape)}; "
                             f"expected [layers, heads, N, N] and [N, N]")  # fmt: skip
        if norm is not None and norm.shape != mean.shape:
            raise ValueError(f"ConstantAttention: norm has shape {tuple(norm.shape)}, mean {tuple(mean.shape)}")
        problem = _content_problem(mean, count, norm, self.metadata)
        if problem:  # what load would refuse: save would write a file that cannot be read back
            raise ValueError(f"ConstantAttention: {problem}")

    def __repr__(self) -> str:  # the matrices themselves are too many numbers to print
        meta = {k: self.metadata[k] for k in ("kind", "model", "n_examples") if k in self.metadata}
        said = ", ".join(f"{k}={v!r}" for k, v in meta.items())
        return (f"ConstantAttention(shape={self.shape}{', ' if said else ''}{said}"
                f"{', norm' if self.norm is not None else ''})")  # fmt: skip

    @property
    def shape(self):
        return tuple(self.mean.shape)

    @property
    def max_length(self) -> int:
        return int(self.mean.shape[-1])

    def uncovered_queries(self, attention_mask) -> int:
        """How many valid tokens of ``attention_mask`` [B, N] sit at a position that no averaged example had
        valid (``count`` 0 on its row): the constant heads give those tokens an exactly zero output (the
        paper's 0 where no example was valid), e.g. validation inputs longer than any averaged one."""
        never = (torch.as_tensor(self.count).diagonal() == 0).cpu().numpy()
        if isinstance(attention_mask, torch.Tensor):  # on a GPU, or a float mask requiring grad: numpy took neither
            attention_mask = attention_mask.detach().cpu()
        mask = np.asarray(attention_mask)
        if mask.ndim != 2 or mask.shape[1] != len(never):
            raise ValueError(f"attention_mask has shape {mask.shape}, and the constants N = {len(never)}: give the "
                             f"[examples, {len(never)}] mask of inputs encoded at that N")  # fmt: skip
        return int((mask != 0)[:, never].sum())

    def save(self, path: str | Path) -> None:
        """Write safetensors (atomically) with the metadata as JSON under the key ``papa``, the sha256 of the
        tensors in it (``tensors_sha256``; `load` checks it and leaves it out of `metadata`: a file changed on
        disk fails instead of patching other numbers in). One metadata key: safetensors writes a header's keys in
        its hash map's order, which changes from process to process, so two keys made the same constants two
        different files (and every digest recorded downstream of them differ between identical runs)."""
        from safetensors.torch import save_file

        from .io import atomic_path

        if Path(path).is_dir():
            raise IsADirectoryError(f"ConstantAttention.save: {path} is a folder; give the file's path, e.g. "
                                    f"{Path(path) / 'average.safetensors'}")  # fmt: skip
        tensors = {"mean": self.mean.detach().float(), "count": self.count.double()}
        if self.norm is not None:
            tensors["norm"] = self.norm.detach().float()
        tensors = {k: t.contiguous().cpu() for k, t in tensors.items()}
        if DIGEST_KEY in self.metadata:
            raise ValueError(f"metadata key {DIGEST_KEY!r} is where save records the tensors' sha256: rename yours")
        _check_keys(self.metadata)
        record = {**self.metadata, DIGEST_KEY: _tensors_digest(tensors)}
        meta = {PROVENANCE_KEY: json.dumps(record, sort_keys=True, default=json_value)}
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata=meta)

    @classmethod
    def load(cls, path: str | Path) -> ConstantAttention:
        """Read a file written by `save`, checking it: an unreadable file, bad metadata, a missing
        tensor, a shape other than [layers, heads, N, N] / [N, N], or NaN/inf values fail naming the path."""
        from safetensors import SafetensorError

        from .io import NOT_CONTENT_ERRORS, UnreadableFileError, open_safetensors

        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"ConstantAttention.load takes a path, got {type(path).__name__}")
        check_not_folder(path, "constants (safetensors)")
        try:
            with open_safetensors(path) as f:
                raw = (f.metadata() or {}).get(PROVENANCE_KEY, "{}")
                digest = (f.metadata() or {}).get("sha256")  # stop 41's files: a key of its own; older ones: none
                names = set(f.keys())
                if not {"mean", "count"} <= names:
                    raise UnreadableFileError(f"{path} has tensors {sorted(names)}, not 'mean' and 'count': it was "
                                              f"not written by papa.ConstantAttention.save")  # fmt: skip
                tensors = {name: f.get_tensor(name) for name in names}
                mean, count, norm = tensors["mean"], tensors["count"], tensors.get("norm")
        except (SafetensorError, OSError) as e:
            if isinstance(e, NOT_CONTENT_ERRORS):  # missing, or not this user's: not a corrupt file to delete
                raise
            raise UnreadableFileError(f"{path} is not a readable safetensors file ({type(e).__name__}: {e}); delete "
                                      f"it and compute it again (in the workflow: its job reruns)") from e  # fmt: skip
        try:
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            raise UnreadableFileError(f"{path}: the 'papa' metadata is not a JSON object ({e}); rewrite the file "
                                      f"with ConstantAttention.save") from e  # fmt: skip
        digest = meta.pop(DIGEST_KEY, digest)
        if digest is not None and digest != _tensors_digest(tensors):
            raise UnreadableFileError(f"{path}: its tensors are not the ones written (their sha256 differs from the "
                                      f"one saved with them): the file changed on disk; delete it and run the "
                                      f"workflow again (the job that writes it reruns)")  # fmt: skip
        N = mean.shape[-1] if mean.dim() else 0
        if mean.dim() != 4 or mean.shape[-2] != N or tuple(count.shape) != (N, N):
            raise UnreadableFileError(f"{path}: mean has shape {tuple(mean.shape)} and count {tuple(count.shape)}; "
                                      f"expected [layers, heads, N, N] and [N, N]")  # fmt: skip
        if norm is not None and norm.shape != mean.shape:
            raise UnreadableFileError(f"{path}: norm has shape {tuple(norm.shape)}, mean {tuple(mean.shape)}; "
                                      f"recompute it")  # fmt: skip
        problem = _content_problem(mean, count, norm, meta)
        if problem:
            raise UnreadableFileError(f"{path}: {problem}; recompute it")
        return cls(mean, count, meta, norm)


def _content_problem(mean, count, norm, meta: dict) -> str | None:
    """What constants of valid shapes may not hold (`ConstantAttention` refuses it when built, `load` when read):
    metadata stating other layers, heads or N than the matrices have, integer (or bool, complex) matrices or
    normalisers, NaN/inf ones, a count or a normaliser that is negative or not finite."""
    N = mean.shape[-1]
    stated = {k: meta[k] for k in ("layers", "heads", "N") if k in meta}
    actual = {"layers": mean.shape[0], "heads": mean.shape[1], "N": N}
    if any(not is_integer(v) or int(v) != actual[k] for k, v in stated.items()):
        return f"the metadata states {stated} but mean has shape {tuple(mean.shape)}"
    for name, t in (("mean", mean), ("norm", norm)):
        if t is not None and not t.is_floating_point():
            return (
                f"{name} is {str(t.dtype).removeprefix('torch.')}: constants are real-valued matrices (papa "
                f"writes float32); give floating-point ones"
            )  # an integer average rounded every weight
        if t is not None and t.device.type != "meta" and not torch.isfinite(t).all():
            return f"{name} holds {int((~torch.isfinite(t)).sum())} NaN/inf values"
    if count.device.type != "meta" and ((count < 0).any() or not torch.isfinite(count).all()):
        return "count holds negative or non-finite entries (it counts the examples valid at each position)"
    if norm is not None and norm.device.type != "meta" and (norm < 0).any():
        return "norm holds negative entries (row normalisers are masses of attention)"
    return None


class _Recorder:
    """Streaming masked sums of attention maps, fed by the patched attention."""

    def __init__(self, layers, heads, n, device, effective=False):
        self.sums = torch.zeros(layers, heads, n, n, dtype=torch.float64, device=device)
        self.effective = effective
        # effective attention: the raw attention's sums too (its rows' normaliser, ConstantAttention.norm)
        self.raw_sums = torch.zeros_like(self.sums) if effective else None
        self.n = n
        self.head_dim = None  # d' of the values seen (effective attention)

    def add(self, layer, probs, valid, value, keys_masked: bool = False):
        """Add a batch of attention maps [B, H, N, N]; ``valid`` [B, N] marks real tokens.

        ``keys_masked``: pad-key columns are already exactly 0 (softmax over a masked row);
        then only pad-query rows need zeroing, done in place on ``probs``.
        """
        if probs.shape[-1] != self.n:
            from .patching import check_length

            check_length(self.n, probs.shape[-1])
        if self.effective:
            if value is None:
                raise ValueError(
                    f"Effective attention needs the values, but layer {layer}'s value projection "
                    "did not run in this forward pass before its attention probabilities"
                )
            self.head_dim = int(value.shape[-1])
            self.raw_sums[layer] += self._masked_sum(probs.detach(), valid, keys_masked)
            # the values of pad tokens never reach a real token's output: project on the real ones
            probs, keys_masked = effective_attention(probs, value, valid=valid), False
        self.sums[layer] += self._masked_sum(probs.detach(), valid, keys_masked)

    @staticmethod
    def _masked_sum(probs, valid, keys_masked: bool) -> torch.Tensor:
        """The batch's sum [H, N, N] (float64) of ``probs`` with every entry of a pad query or key zeroed."""
        if valid is not None:
            if keys_masked:
                probs = probs.masked_fill_(~valid[:, None, :, None], 0.0)
            else:
                pair = valid[:, :, None] & valid[:, None, :]  # [B, N, N]
                probs = probs.masked_fill(~pair[:, None], 0.0)
        return probs.float().sum(0).double()  # the batch summed in float32, the running sum in float64


def effective_attention(
    probs: torch.Tensor,
    value: torch.Tensor,
    rtol: float | None = None,
    valid: torch.Tensor | None = None,
    method: str = "cholesky_qr",
) -> torch.Tensor:
    """Effective attention ``A U_r U_r^T`` (Sun & Marasovic 2021).

    Args:
        probs: [B, H, N, N] attention; value: [B, H, N, d] values.
        valid: optional [B, N] bool of real tokens: the rows of V at pad positions are zeroed
            first (A gives them no weight), so the result has no mass on pad keys.
        rtol: singular values below ``rtol`` times the largest count as zero (default
            ``max(N, d) * eps``, numpy's ``matrix_rank`` rule), by either method (``cholesky_qr``
            hands every matrix to the SVD where ``rtol`` is above 1e-9).
        method: how the projector ``U_r U_r^T`` onto the column space of V is computed.
            ``"cholesky_qr"`` (default): batched Cholesky factorisations and triangular solves
            (`projector_cholesky_qr`), equal to the SVD's projector to float64 rounding (~1e-14)
            wherever it is used, with the SVD for the matrices it cannot certify; ~2.5x faster
            than the SVD on a CPU, and on a GPU the difference between usable and not: there a
            batched SVD of matrices larger than 32 x 32 runs one matrix at a time (cuSOLVER), 2.3
            examples/s for MiniLM at N = 64 on an H200. ``"svd"``: a batched SVD for every matrix.
    Removes from each row of A the part in the left null space of V (which never reaches
    the output). Equals A when V has full row rank (N <= d and V generic).
    """
    if not (isinstance(probs, torch.Tensor) and isinstance(value, torch.Tensor)):
        raise TypeError(f"effective_attention takes tensors, got {type(probs).__name__} and {type(value).__name__}")
    B, H, N = (tuple(probs.shape[:3]) + (None, None, None))[:3]
    if probs.dim() != 4 or probs.shape[-1] != N or value.dim() != 4 or tuple(value.shape[:3]) != (B, H, N):
        raise ValueError(f"effective_attention needs probs [B, H, N, N] and values [B, H, N, d] of the same B, H and "
                         f"N; got {tuple(probs.shape)} and {tuple(value.shape)}")  # fmt: skip
    if valid is not None and tuple(valid.shape) != (B, N):
        raise ValueError(f"effective_attention: valid must be [B, N] = [{B}, {N}], got {tuple(valid.shape)}")
    v = value.detach().double()
    if valid is not None:
        v = v * valid[:, None, :, None].to(v.dtype)
    if method == "svd":
        proj = projector_svd(v, rtol)
    elif method == "cholesky_qr":
        proj = projector_cholesky_qr(v, rtol)
    else:
        raise ValueError(f"effective_attention: method must be 'cholesky_qr' or 'svd', got {method!r}")
    return (probs.double() @ proj).to(probs.dtype)


def projector_svd(v: torch.Tensor, rtol: float | None = None) -> torch.Tensor:
    """[..., N, N] projector ``U_r U_r^T`` onto the column space of each [N, d] matrix of ``v`` (SVD)."""
    U, S, _ = torch.linalg.svd(v, full_matrices=False)  # U [..., N, k], k = min(N, d)
    if rtol is None:
        rtol = max(v.shape[-2:]) * torch.finfo(v.dtype).eps
    keep = (S > rtol * S[..., :1]).to(v.dtype)  # [..., k]
    Ur = U * keep[..., None, :]
    return Ur @ Ur.transpose(-1, -2)


#: Cholesky paths accept a matrix only when it is this well conditioned (an upper bound on
#: cond(V) of 1e6, or a first CholeskyQR pass whose Q^T Q is within 0.1 of I: cond(V) <~ 1e7),
#: far from the SVD's rank threshold (~1e-14 relative), so the SVD would keep every direction too.
_MAX_COND_GRAM = 1e12
_MAX_ORTHO_ERR = 0.1
#: The largest ``rtol`` for which the matrices those checks accept keep every direction under the SVD's rule too
#: (their smallest singular value is above ~5e-8 of the largest); a larger one (a notebook's) goes to the SVD.
_CERTIFIED_RTOL = 1e-9


def projector_cholesky_qr(v: torch.Tensor, rtol: float | None = None) -> torch.Tensor:
    """`projector_svd` from batched Cholesky factorisations (fast on GPUs), the SVD as a fallback.

    Each [N, d] matrix of ``v`` (float64; zero rows are pad tokens) with ``m`` non-zero rows:

    * ``m > d`` (tall): the projector onto its d-dimensional column space is ``Q Q^T`` with Q
      from CholeskyQR2 (R = chol(V^T V), Q = V R^-1, repeated once on Q), accepted when the
      first pass's ``Q^T Q`` is within 0.1 of the identity (cond(V) below ~1e7: CholeskyQR2 is
      then orthogonal to rounding, and V has full column rank by a wide margin).
    * ``m <= d`` (short): if its non-zero rows are linearly independent, the column space is
      every vector that is 0 on the zero rows: the projector is ``diag(row is non-zero)``
      (effective attention = attention with pad keys zeroed). Independence is certified by a
      Cholesky factorisation of ``V V^T`` (the zero rows' diagonal set to the largest entry)
      with a condition bound ``||G||_F ||L^-1||_F^2`` below 1e12.

    Matrices that fail their check (rank-deficient or ill-conditioned) go through `projector_svd`, and so does
    every matrix where ``rtol`` is above `_CERTIFIED_RTOL` (it may drop directions the checks accept as kept).
    """
    if rtol is not None and rtol > _CERTIFIED_RTOL:
        return projector_svd(v, rtol)
    *batch, N, d = v.shape
    flat = v.reshape(-1, N, d)
    M = flat.shape[0]
    nonzero = flat.abs().amax(-1) > 0  # [M, N]
    tall = nonzero.sum(-1) > d
    P = torch.zeros(M, N, N, dtype=v.dtype, device=v.device)
    ok = torch.zeros(M, dtype=torch.bool, device=v.device)
    if bool(tall.any()):
        V = flat[tall]
        eye = torch.eye(d, dtype=v.dtype, device=v.device)
        R, info = torch.linalg.cholesky_ex(V.transpose(-1, -2) @ V, upper=True)
        Q = torch.linalg.solve_triangular(R, V, upper=True, left=False)  # V R^-1
        G = Q.transpose(-1, -2) @ Q
        err = (G - eye).abs().amax((-2, -1))
        R2, info2 = torch.linalg.cholesky_ex(G, upper=True)
        Q = torch.linalg.solve_triangular(R2, Q, upper=True, left=False)
        P[tall] = Q @ Q.transpose(-1, -2)
        ok[tall] = (info == 0) & (info2 == 0) & (err < _MAX_ORTHO_ERR)  # NaN fails
    short = ~tall
    if bool(short.any()):
        V, nz = flat[short], nonzero[short]
        G = V @ V.transpose(-1, -2)  # [*, N, N]; zero rows give zero rows and columns
        scale = G.diagonal(dim1=-2, dim2=-1).amax(-1).clamp_min(torch.finfo(v.dtype).tiny)
        G = G + torch.diag_embed((~nz).to(v.dtype) * scale[:, None])
        L, info = torch.linalg.cholesky_ex(G)
        eye = torch.eye(N, dtype=v.dtype, device=v.device).expand_as(G)
        Linv = torch.linalg.solve_triangular(L, eye, upper=False)
        bound = torch.linalg.matrix_norm(G) * torch.linalg.matrix_norm(Linv) ** 2  # >= cond_2(G)
        P[short] = torch.diag_embed(nz.to(v.dtype))
        ok[short] = (info == 0) & (bound < _MAX_COND_GRAM)
    bad = ~ok
    if bool(bad.any()):
        P[bad] = projector_svd(flat[bad], rtol)
    return P.reshape(*batch, N, N)


def average_attention(
    model,
    batches: Iterable[dict],
    kind: str = "average",
    total: int | None = None,
    metadata: dict | None = None,
    log_every: float = 10.0,
) -> ConstantAttention:
    """Average every head's attention matrix over ``batches`` (masked, streaming).

    Args:
        model: a supported encoder (run in eval mode, whatever its mode: dropout would make the
            averages random; its modules' modes are restored afterwards).
        batches: dicts of model inputs (``input_ids``, ``attention_mask``, ...), all of one length N.
        kind: ``"average"`` (the method) or ``"effective"`` (average of effective attention; the
            metadata then also holds ``head_dim`` and ``n_examples_at_most_head_dim``).
        total: number of examples, for the progress ETA.
        metadata: extra metadata stored with the result; ``model`` and ``model_revision`` default to the
            model's own (its ``name_or_path`` and hub commit), which `papa.patch` compares with the model
            it patches; the keys it computes (`COMPUTED_METADATA`) are refused, a ``layout`` must be the
            batches' own.
        log_every: seconds between progress lines (examples, examples/s, ETA) in the log.
    """
    from .patching import record_attention

    if kind not in DATA_KINDS:
        raise ValueError(
            f"average_attention kind must be one of {', '.join(DATA_KINDS)} (papa.spec.DATA_KINDS), got {kind!r}"
        )
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"average_attention needs a loaded model (papa.load_encoder(...)[0]), got "
                        f"{type(model).__name__} {model!r:.60}")  # fmt: skip
    _check_metadata(metadata, "average_attention")
    _with_metadata({"layout": getattr(batches, "layout", None)}, metadata)  # a layout that is not the batches': now
    if total is not None and (not is_integer(total) or total < 1):
        raise ValueError(f"total must be the number of examples (a positive integer, for the ETA), got {total!r}")
    if isinstance(batches, Mapping) or hasattr(batches, "model_inputs"):  # one batch (a BatchEncoding), or a split
        raise TypeError("average_attention takes an iterable of input batches: pass enc.batches(32) for a "
                        "papa.encode split, or [inputs] for one dict of model inputs")  # fmt: skip
    L, H = model_shape(model)
    device = next(model.parameters()).device
    recorder = None
    count = None
    n_examples = n_batches = 0
    n_short = 0  # examples with at most head_dim real tokens (effective attention equals raw there)
    progress = Progress(log_every)
    with ExitStack() as recording:  # leaving it removes the recording patch (and restores train mode)
        # a model in train mode would average attention under dropout: other numbers every call
        recording.enter_context(in_mode(model, False))
        with torch.inference_mode():
            for batch in batches:
                ids = _checked_batch(batch, n_examples, model)
                n = ids.shape[-1]
                if recorder is not None and n != recorder.n:
                    raise ValueError(f"average_attention: batch {n_batches} has length N={n}, the batches before it "
                                     f"N={recorder.n}; one average is over inputs of one length: encode them all "
                                     f"with one max_length")  # fmt: skip
                n_batches += 1
                if recorder is None:
                    check_positions(model, n)  # before the model fails on it, deep inside transformers
                    recorder = _Recorder(L, H, n, device, effective=(kind == "effective"))
                    count = torch.zeros(n, n, dtype=torch.float64, device=device)
                    recording.enter_context(record_attention(model, recorder.add, values=recorder.effective))
                batch = {k: v.to(device) for k, v in batch.items() if k != "labels"}
                model(**batch)
                mask = batch.get("attention_mask")
                if mask is None:
                    count += ids.shape[0]
                else:
                    w = mask.double()
                    count += w.T @ w
                if recorder.effective:
                    n_real = torch.full((ids.shape[0],), n) if mask is None else (mask != 0).sum(-1)
                    n_short += int((n_real <= recorder.head_dim).sum())
                n_examples += ids.shape[0]
                if progress.due(n_examples):
                    eta = f", {progress.eta_text(n_examples, total)}" if total else ""
                    log.info("averaged %d%s examples, %.1f examples/s%s", n_examples, f"/{total}" if total else "",
                             progress.rate(n_examples), eta)  # fmt: skip
    if recorder is None:
        raise ValueError(
            "average_attention got no batches: the corpus is empty, or the batches were an iterator used up "
            "already (enc.batches(n) is one pass: call it again for another)"
        )

    def averaged(sums):
        return torch.where(count > 0, sums / count.clamp_min(1), torch.zeros((), dtype=torch.float64, device=device))

    mean = averaged(recorder.sums)
    log.info("averaged %d examples in %.1f s (%.1f examples/s)", n_examples, progress.elapsed(),
             progress.rate(n_examples))  # fmt: skip
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")  # a half-precision model's averages differ
    meta = {"kind": kind, "n_examples": n_examples, "N": int(mean.shape[-1]), "layers": L, "heads": H, "dtype": dtype}
    if recorder.effective:
        log.info(
            "effective attention equals raw attention on %d of %d examples (%.1f%%): those with at most "
            "d' = %d real tokens",
            n_short,
            n_examples,
            100 * n_short / n_examples,
            recorder.head_dim,
        )
        meta.update(n_examples_at_most_head_dim=n_short, head_dim=recorder.head_dim)
    name = getattr(model.config, "_name_or_path", "")
    if name:
        meta.update(model=name, model_revision=model_revision(model))
    if isinstance(getattr(batches, "layout", None), str):  # Encoded.batches; learn_lambdas and the MLM check it
        meta.update(layout=batches.layout)
    meta = _with_metadata(meta, metadata)
    norm = None if recorder.raw_sums is None else averaged(recorder.raw_sums).float().cpu()
    return ConstantAttention(mean.float().cpu(), count.cpu(), meta, norm)


def vocabulary_problem(model, top_id: int, bottom_id: int = 0) -> str | None:
    """Why token ids from ``bottom_id`` to ``top_id`` cannot go into ``model`` (below 0 or beyond its input
    embeddings: an index error inside torch otherwise), None when they can."""
    if bottom_id < 0:
        return f"token id {bottom_id}, and token ids run from 0: encode the texts with this model's tokenizer"
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    size = getattr(emb, "num_embeddings", None)
    if size is None or top_id < size:
        return None
    return (
        f"token id {top_id}, and the model embeds {size} tokens: they were encoded with another model's "
        f"tokenizer, or one with added tokens (model.resize_token_embeddings(len(tokenizer)) after "
        f"tokenizer.add_tokens); encode them with this model's tokenizer"
    )


def segment_problem(model, top_type: int, bottom_type: int = 0) -> str | None:
    """Why segment ids from ``bottom_type`` to ``top_type`` (``token_type_ids``) cannot go into ``model`` (below 0 or
    beyond its ``type_vocab_size`` segment embeddings: an index error inside torch otherwise), None when they can or
    the model reads no segments
    (``type_vocab_size`` 0: DeBERTa v1 and v3 add no segment embedding). What to change depends on where the ids
    came from, which neither caller knows (an `Encoded`, or batches of any origin), so the message names each source:
    `papa.encode` (either ``pair_segments``) where the tokenizer lists ``token_type_ids`` among its
    ``model_input_names``, `papa.encode` for an ALBERT tokenizer whatever it lists (`papa.encoding.SEGMENT_IDS`),
    and a batch made by calling the tokenizer."""
    size = getattr(getattr(model, "config", None), "type_vocab_size", None)
    if size and bottom_type < 0:
        return f"segment id {bottom_type} (token_type_ids), and segment ids run from 0 (sentence A) to {size - 1}"
    if not size or top_type < size:
        return None
    return (
        f"segment id {top_type} (token_type_ids), and the model has {size} segment embedding"
        f"{'' if size == 1 else 's'} (type_vocab_size): its tokenizer gives sentence B a segment the model never "
        f"saw (a BERT tokenizer beside a RoBERTa model, as some hub models ship them). papa.encode gives "
        f"a pair segment ids where the tokenizer lists token_type_ids among its model_input_names: save the "
        f"tokenizer with model_input_names=['input_ids', 'attention_mask'] (AutoTokenizer.from_pretrained(folder, "
        f"model_input_names=[...]).save_pretrained(folder)) and encode again; it gives them to an "
        f"ALBERT tokenizer whatever that lists (papa.encoding.SEGMENT_IDS): encode with a tokenizer of the model's "
        f"own family, or drop them (dataclasses.replace(enc, token_type_ids=None)); a batch of your own holds what "
        f"the tokenizer's call returned: call it with return_token_type_ids=False"
    )


def _checked_batch(batch, done: int, model) -> torch.Tensor:
    """The ``input_ids`` of one batch of `average_attention`, failing on what the model would fail on deep inside
    (or average silently): not a dict of tensors, no rows, ids beyond the vocabulary (another model's tokenizer),
    an example without a real token (its attention would count as nothing, under ``n_examples``)."""
    where = f"the batch after {done} examples"
    if not isinstance(batch, Mapping) or "input_ids" not in batch:
        raise TypeError(f"{where} is a {type(batch).__name__}, not a dict of model inputs with input_ids: pass "
                        f"enc.batches(32) for a papa.encode split")  # fmt: skip
    bad = [k for k, v in batch.items() if k != "labels" and not isinstance(v, torch.Tensor)]
    if bad:
        raise TypeError(f"{where}: {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a torch tensor (use "
                        f"enc.batches(32), or return_tensors='pt')")  # fmt: skip
    ids = batch["input_ids"]
    if ids.dim() != 2 or ids.shape[0] == 0:
        raise ValueError(f"{where}: input_ids has shape {tuple(ids.shape)}; a batch is [examples >= 1, N]")
    types, mask = batch.get("token_type_ids"), batch.get("attention_mask")
    for name, value in (("attention_mask", mask), ("token_type_ids", types)):
        if value is not None and tuple(value.shape) != tuple(ids.shape):  # [1, N] was broadcast over the batch
            raise ValueError(f"{where}: {name} has shape {tuple(value.shape)}, input_ids {tuple(ids.shape)}")
    for name, value in (("input_ids", ids), ("token_type_ids", types)):
        if value is not None and value.dtype not in (torch.long, torch.int):  # what an embedding takes as indices
            raise TypeError(f"{where}: {name} are {str(value.dtype).removeprefix('torch.')}, and the model's "
                            f"embeddings take integer ids as torch.long (or torch.int32): pass them as torch.long "
                            f"(enc.batches(32) does)")  # fmt: skip
    why = vocabulary_problem(model, int(ids.max()), int(ids.min()))
    if not why and types is not None and types.numel():
        why = segment_problem(model, int(types.max()), int(types.min()))
    if why:
        raise ValueError(f"{where} holds {why}")
    if mask is not None and not bool(((mask == 0) | (mask == 1)).all()):  # 0.5 would be averaged as a weight
        raise ValueError(f"{where}: attention_mask holds values other than 0 and 1 (e.g. "
                         f"{mask[(mask != 0) & (mask != 1)].flatten()[0].item():g}): it says which tokens are real "
                         f"(1) and which are padding (0)")  # fmt: skip
    if mask is not None and bool((mask.sum(-1) == 0).any()):
        raise ValueError(f"{where}: {int((mask.sum(-1) == 0).sum())} example(s) have no real token "
                         f"(attention_mask all 0): drop them")  # fmt: skip
    return ids


#: Metadata keys `average_attention` and `data_free` compute from the matrices: a caller's ``metadata`` may not set
#: them (a ``kind`` or ``n_examples`` saying other than the matrices are would pass into every record of them, and
#: a data-free ``kind`` turns off `patch`'s check that constants are the model's own).
COMPUTED_METADATA = ("kind", "n_examples", "N", "layers", "heads", "dtype", "head_dim", "n_examples_at_most_head_dim")


def _check_metadata(metadata: dict | None, fn: str) -> None:
    """Refuse a caller's ``metadata`` that is not a JSON-able dict or sets a computed key (`COMPUTED_METADATA`)."""
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict (stored with the matrices), got {type(metadata).__name__}")
    _check_storable(metadata)  # before the work: what save cannot store
    computed = [k for k in COMPUTED_METADATA if k in metadata]
    if computed:
        raise ValueError(
            f"{fn}: metadata may not set {', '.join(computed)}: {fn} records what the matrices are "
            f"(metadata adds keys; model and model_revision may name the model otherwise)"
        )


def _check_storable(metadata: dict) -> None:
    """Refuse what `ConstantAttention.save` cannot store as its JSON metadata: a key that is no string
    (`_check_keys`), a value JSON cannot hold (`papa.io.json_value`)."""
    _check_keys(metadata)
    json.dumps(metadata, sort_keys=True, default=json_value)


def _check_keys(value, where: str = "metadata") -> None:
    """Refuse a dict key (at any depth of ``value``) that is no string: `ConstantAttention.save` stores metadata as
    JSON with sorted keys, so ``1`` beside ``"a"`` failed there after the averaging's work, and a lone ``1`` came
    back from `load` as ``"1"``."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{where} has the key {k!r} ({type(k).__name__}): metadata keys are strings (it is "
                                f"stored as JSON); write it as {str(k)!r}")  # fmt: skip
            _check_keys(v, f"{where}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_keys(item, where)


def _with_metadata(meta: dict, metadata: dict | None) -> dict:
    """``meta`` (computed) with the caller's ``metadata``, a ``layout`` it gives agreeing with the batches'."""
    layout = (metadata or {}).get("layout")
    if isinstance(meta.get("layout"), str) and layout is not None and layout != meta["layout"]:
        raise ValueError(f"metadata layout={layout!r} contradicts the batches' layout {meta['layout']!r}")
    return {**meta, **(metadata or {})}


def data_free(kind: str, layers: int, heads: int, n: int, metadata: dict | None = None) -> ConstantAttention:
    """Data-free constant matrices (paper Table 1).

    ``identity``: each token attends to itself; ``toeplitz``: weight ``1 / (1 + |i - j|)``
    (harmonic series around the diagonal); ``zeros``: pruning (every head outputs 0);
    ``uniform``: all ones (uniform over the valid tokens after masking).

    Args:
        kind: ``identity``, ``toeplitz``, ``zeros`` or ``uniform`` (`papa.spec.DATA_FREE`).
        layers, heads: the model's shape (`papa.model_shape`); every head gets the same matrix.
        n: the sequence length N (positive integers, all three).
        metadata: extra metadata stored with the result (not the keys it computes, `COMPUTED_METADATA`).
    """
    _check_metadata(metadata, "data_free")
    for name, value in (("layers", layers), ("heads", heads), ("n", n)):
        if not is_integer(value) or value < 1:
            raise ValueError(f"data_free: {name} must be a positive integer, got {value!r}")
    i = torch.arange(n)
    if kind == "identity":
        m = torch.eye(n)
    elif kind == "toeplitz":
        m = 1.0 / (1.0 + (i[:, None] - i[None, :]).abs().float())
    elif kind == "zeros":
        m = torch.zeros(n, n)
    elif kind == "uniform":
        m = torch.ones(n, n)
    else:
        raise ValueError(f"Unknown data-free constant kind {kind!r}; choose from {', '.join(DATA_FREE)}")
    meta = _with_metadata({"kind": kind, "N": n, "layers": layers, "heads": heads, "n_examples": 0}, metadata)
    return ConstantAttention(m.expand(layers, heads, n, n).clone(), torch.ones(n, n, dtype=torch.float64), meta)
