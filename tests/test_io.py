"""papa.io: folders written atomically (`atomic_dir`), as files are (`atomic_path`, tests/test_errors.py)."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from papa import io


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_atomic_dir_writes_a_new_folder_with_ordinary_permissions(tmp_path):
    target = tmp_path / "deep" / "model"
    with io.atomic_dir(target) as tmp:
        assert tmp.is_dir() and not any(tmp.iterdir()) and tmp.parent == target.parent
        assert not target.exists()  # nothing at the target until the block succeeds
        (tmp / "sub").mkdir()
        (tmp / "sub" / "a.txt").write_text("a")
        (tmp / "b.txt").write_text("b")
    assert _tree(target) == {"b.txt": "b", "sub/a.txt": "a"}
    assert [p.name for p in target.parent.iterdir()] == ["model"]  # no temporaries left
    assert target.stat().st_mode & 0o777 == 0o777 & ~io.current_umask()  # not mkdtemp's 0700


def test_atomic_dir_replaces_a_folder_only_when_complete(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.txt").write_text("old")
    (target / "shared.txt").write_text("old")
    with io.atomic_dir(target) as tmp:
        (tmp / "shared.txt").write_text("new")
        assert _tree(target) == {"old.txt": "old", "shared.txt": "old"}  # readers see the complete old folder
    assert _tree(target) == {"shared.txt": "new"}  # the old folder's files do not linger
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_atomic_dir_replaces_a_file(tmp_path):
    target = tmp_path / "model"
    target.write_text("a file where the folder goes")
    with io.atomic_dir(target) as tmp:
        (tmp / "x").write_text("x")
    assert _tree(target) == {"x": "x"} and [p.name for p in tmp_path.iterdir()] == ["model"]


@pytest.mark.parametrize("existing", [False, True])
def test_atomic_dir_failure_leaves_the_target_as_it_was(tmp_path, existing):
    target = tmp_path / "model"
    if existing:
        target.mkdir()
        (target / "old.txt").write_text("old")
    with pytest.raises(KeyboardInterrupt):  # any exception, BaseException included
        with io.atomic_dir(target) as tmp:
            (tmp / "half.txt").write_text("half")
            raise KeyboardInterrupt
    assert _tree(target) == {"old.txt": "old"} if existing else not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["model"] if existing else [])  # the temporary is gone


def test_atomic_dir_clears_the_temporaries_of_a_killed_writer(tmp_path):
    target = tmp_path / "model"
    code = (
        "import time; from papa.io import atomic_dir\n"
        f"with atomic_dir({str(target)!r}) as t:\n"
        "    (t / 'half.bin').write_text('partial'); print('in', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    left = list(tmp_path.iterdir())
    assert not target.exists() and len(left) == 1 and left[0].is_dir() and left[0].name.endswith(".tmp")
    (tmp_path / ".model.bak.papa-abcdefgh.tmp").mkdir()  # another target's temporary: kept
    with io.atomic_dir(target) as tmp:
        (tmp / "done").write_text("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.bak.papa-abcdefgh.tmp", "model"]
    assert _tree(target) == {"done": "done"}


def test_atomic_path_clears_a_stale_temporary_folder_too(tmp_path):
    """A killed `atomic_dir` writer's temporary (a folder) is removed by the next writer of the path,
    whichever of the two it uses."""
    stale = tmp_path / ".out.papa-abcdefgh.tmp"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "f").write_text("x")
    with io.atomic_path(tmp_path / "out") as t:
        t.write_text("file")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_failed_rehearsal_model_build_leaves_the_old_folder(tmp_path, monkeypatch):
    """`papa.rehearsal.build_model` writes its folder through `atomic_dir`."""
    from papa import rehearsal

    def fail(*args, **kwargs):
        raise RuntimeError("tokenizer training failed")

    target = tmp_path / "bert"
    target.mkdir()
    (target / "config.json").write_text("{}")
    monkeypatch.setattr(rehearsal, "build_tokenizer", fail)
    with pytest.raises(RuntimeError, match="tokenizer training failed"):
        rehearsal.build_model("bert", target)
    assert _tree(target) == {"config.json": "{}"} and [p.name for p in tmp_path.iterdir()] == ["bert"]


@pytest.mark.slow  # a fresh Python process importing torch (~3 s): `make test`, not the fast tier
def test_seed_everything_sets_torchs_deterministic_state_without_importing_inductor():
    """`io.seed_everything` leaves torch as ``torch.use_deterministic_algorithms(True, warn_only=True)`` does
    (the global flag, warn-only, and inductor's ``deterministic`` once inductor is imported) but without
    importing ``torch._inductor.config`` itself (~2 s of every workflow job's start-up); with inductor already
    imported it calls torch's function. A fresh interpreter, without the variable this process may have set."""
    code = """
import sys, torch
from papa import io
io.seed_everything(0)
assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
assert "torch._inductor.config" not in sys.modules
import torch._inductor.config as inductor
assert inductor.deterministic is True
torch.use_deterministic_algorithms(False)
assert inductor.deterministic is False and not torch.are_deterministic_algorithms_enabled()
io.seed_everything(0)
assert inductor.deterministic is True
assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_DETERMINISTIC"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]


def _durability_log(monkeypatch):
    """Record os.fsync (by the path its descriptor names) and os.replace, in order."""
    events = []
    fsync, replace = os.fsync, os.replace

    def logged_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def logged_replace(src, dst):
        events.append(("replace", str(src), str(dst)))
        replace(src, dst)

    monkeypatch.setattr(io.os, "fsync", logged_fsync)
    monkeypatch.setattr(io.os, "replace", logged_replace)
    return events


def test_a_write_that_finds_its_disk_full_names_the_file_and_the_disk(tmp_path):
    """A full disk inside an atomic write (safetensors' "I/O error: No space left on device (os error 28)", Arrow's
    errno 28) named neither the file nor the disk; the error now says both and what to do, and no temporary is
    left. Other errors pass through as they were."""
    target = tmp_path / "sub" / "C.safetensors"
    safetensors_says = "Error while serializing: I/O error: No space left on device (os error 28)"
    for raised in (OSError(28, "No space left on device"), RuntimeError(safetensors_says)):
        with pytest.raises(OSError, match=rf"no space left writing {re.escape(str(target))}: the disk of "
                           rf"{re.escape(str(target.parent))} has \d+ MB free; free space there") as e:  # fmt: skip
            with io.atomic_path(target):
                raise raised
        assert e.value.errno == 28 and e.value.__cause__ is raised
        assert not list(target.parent.iterdir())
    with pytest.raises(ValueError, match="^other$"):
        with io.atomic_path(target):
            raise ValueError("other")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names descriptors through /proc")
def test_atomic_path_flushes_the_data_before_the_rename_and_the_rename_after(tmp_path, monkeypatch):
    """A crash after the rename cannot leave the finished name over unflushed (empty) data."""
    events = _durability_log(monkeypatch)
    target = tmp_path / "out.parquet"
    with io.atomic_path(target) as tmp:
        tmp.write_text("rows")
    assert events == [("fsync", str(tmp)), ("replace", str(tmp), str(target)), ("fsync", str(tmp_path))]
    assert target.read_text() == "rows"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names descriptors through /proc")
def test_atomic_dir_flushes_every_file_before_the_rename(tmp_path, monkeypatch):
    events = _durability_log(monkeypatch)
    target = tmp_path / "heads"
    with io.atomic_dir(target) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "a.png").write_text("a")
        (tmp / "sub" / "b.png").write_text("b")
    first_replace = next(i for i, e in enumerate(events) if e[0] == "replace")
    flushed = {e[1] for e in events[:first_replace] if e[0] == "fsync"}
    assert {str(tmp / "a.png"), str(tmp / "sub" / "b.png"), str(tmp / "sub"), str(tmp)} <= flushed
    assert events[-1] == ("fsync", str(tmp_path))  # the rename itself made durable
    assert _tree(target) == {"a.png": "a", "sub/b.png": "b"}


def test_model_folder_files_are_what_each_stage_reads(tmp_path):
    """The workflow's model inputs per stage (papa.io.model_folder_files): the tokenizer loads from a copy holding
    only the "tokenizer" files (no weights) and tokenizes as from the whole folder; the model's shape loads from
    the "config" file alone; "model" is every file of the folder's own; hidden entries, subfolders and Markdown
    never count."""
    import shutil

    from transformers import AutoConfig, AutoTokenizer

    from papa.models import resolve_model_path

    folder = tmp_path / "minilm"
    shutil.copytree(resolve_model_path("minilm"), folder)
    (folder / ".cache").mkdir()
    (folder / ".cache" / "lock").write_text("x")
    (folder / "pytorch_model.bin").write_bytes(b"weights")  # a second weight format, as hub snapshots hold
    # what from_pretrained never reads: a Trainer's checkpoint written into the folder, a model card (they reran
    # every job of the model, tokenization too)
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "trainer_state.json").write_text("{}")
    (folder / "README.md").write_text("# a model card")
    (folder / "model.safetensors.index.json").write_text("{}")  # a sharded checkpoint's index: weights, to stages
    (folder / "part.json").symlink_to(tmp_path / "nowhere")  # a half-downloaded snapshot's link: listed, missing
    every = io.model_folder_files(folder)
    assert not any("/.cache/" in f or "checkpoint-10" in f or f.endswith("README.md") for f in every), every
    assert {str(folder / "part.json"), str(folder / "model.safetensors.index.json")} <= set(every)
    assert str(folder / "model.safetensors.index.json") not in io.model_folder_files(folder, "tokenizer")
    (folder / "part.json").unlink()
    (folder / "model.safetensors.index.json").unlink()
    every = io.model_folder_files(folder)
    assert every == sorted(str(p) for p in folder.iterdir() if p.is_file() and p.suffix != ".md" and p.name[0] != ".")
    assert {str(folder / n) for n in ("config.json", "pytorch_model.bin")} <= set(every)
    tokenizer = io.model_folder_files(folder, "tokenizer")
    assert not any(f.endswith((".safetensors", ".bin")) for f in tokenizer) and set(tokenizer) < set(every)
    assert io.model_folder_files(folder, "config") == [str(folder / "config.json")]

    def copy_of(files, name):
        out = tmp_path / name
        for f in files:
            (out / os.path.relpath(f, folder)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, out / os.path.relpath(f, folder))
        return out

    text = ["a great film", "the plot, sadly, is thin"]
    whole = AutoTokenizer.from_pretrained(folder)(text)["input_ids"]
    assert AutoTokenizer.from_pretrained(copy_of(tokenizer, "tok"))(text)["input_ids"] == whole
    shape = AutoConfig.from_pretrained(copy_of(io.model_folder_files(folder, "config"), "cfg"))
    assert (shape.num_hidden_layers, shape.num_attention_heads) == (6, 12)
    no_config = tmp_path / "no-config"
    no_config.mkdir()
    (no_config / "model.safetensors").write_bytes(b"w")
    assert io.model_folder_files(no_config, "config") == [str(no_config / "model.safetensors")]  # every file
    with pytest.raises(ValueError, match="model, tokenizer, config"):
        io.model_folder_files(folder, "weights")


def test_a_column_without_a_value_is_written_as_text_so_a_folder_of_files_reads(tmp_path):
    """A local model's `model_revision` (None in every row) was Arrow's null type, a hub model's text: a folder
    holding both files did not read ("Unsupported cast from large_string to null"). Numbers stay numbers."""
    import pandas as pd
    import pyarrow.parquet as pq

    io.write_parquet(pd.DataFrame({"score": [0.5], "model_revision": [None]}), tmp_path / "runs" / "local.parquet")
    io.write_parquet(pd.DataFrame({"score": [0.7], "model_revision": ["abc123"]}), tmp_path / "runs" / "hub.parquet")
    assert str(pq.read_schema(tmp_path / "runs" / "local.parquet").field("model_revision").type) == "string"
    both = pd.read_parquet(tmp_path / "runs").sort_values("score", ignore_index=True)
    assert both.score.tolist() == [0.5, 0.7] and both.score.dtype == "float64"
    assert both.model_revision.isna().tolist() == [True, False] and both.model_revision[1] == "abc123"


def test_file_digests_follow_the_bytes(tmp_path):
    """What a result records of its inputs (papa.io.input_digests): a file's sha256, recomputed when it changes;
    a folder's, over its files' relative paths and bytes."""
    import hashlib

    from papa.io import file_digest, input_digests

    f = tmp_path / "a.bin"
    f.write_bytes(b"abc")
    assert file_digest(f) == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    f.write_bytes(b"abcd")  # rewritten in place: another state, another digest (not the cached one)
    assert file_digest(f) == "sha256:" + hashlib.sha256(b"abcd").hexdigest()
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "w.bin").write_bytes(b"w")
    before = file_digest(folder)
    (folder / "sub" / "w.bin").rename(folder / "w.bin")  # same bytes, another layout
    assert file_digest(folder) != before
    assert input_digests([f, folder]) == {str(f): file_digest(f), str(folder): file_digest(folder)}


def _weights_with_a_kept_digest(tmp_path, monkeypatch, digest_cache_bytes):
    """A 7-byte weights.bin hashed once, digests kept from `digest_cache_bytes` bytes on under tmp_path/cache (the
    one entry asserted written): (the file, its digest, the kept entry's path)."""
    import hashlib

    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(io, "DIGEST_CACHE_BYTES", digest_cache_bytes)
    f = tmp_path / "weights.bin"
    f.write_bytes(b"weights")
    real = "sha256:" + hashlib.sha256(b"weights").hexdigest()
    assert io.file_digest(f) == real
    (kept,) = (tmp_path / "cache" / "digests").iterdir()
    return f, real, kept


def test_a_large_files_digest_is_kept_per_state(tmp_path, monkeypatch):
    """A model's weights, read by hundreds of jobs, are hashed once per state of the file (papa.io.file_digest keeps
    the digest of a large file under $PAPA_CACHE/digests); a new state (rewritten, touched) is hashed again."""
    from papa import io as papa_io

    f, real, kept = _weights_with_a_kept_digest(tmp_path, monkeypatch, 4)
    other = "sha256:" + "ab" * 32
    kept.write_text(other + "\n")  # what another job hashed: read, not computed again
    papa_io._file_digest.cache_clear()
    assert papa_io.file_digest(f) == other
    for broken in (other[:13], "sha256:kept", b"\xff\xfe garbage"):  # an entry cut short or garbled: hashed again
        kept.write_bytes(broken if isinstance(broken, bytes) else broken.encode() + b"\n")
        papa_io._file_digest.cache_clear()
        assert papa_io.file_digest(f) == real and kept.read_text().strip() == real
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # another state of the file
    assert papa_io.file_digest(f) == real
    monkeypatch.setattr(papa_io, "DIGEST_CACHE_BYTES", 1 << 40)  # a small file: hashed, nothing kept
    g = tmp_path / "small.bin"
    g.write_bytes(b"x")
    papa_io.file_digest(g)
    assert len(list((tmp_path / "cache" / "digests").iterdir())) == 2


def test_kept_digests_not_written_for_a_month_are_pruned_and_hashed_again_when_read(tmp_path, monkeypatch):
    """`prune_digests` (a run's start) removes `file_digest`'s entries not written for a month: a rewritten file's
    old states, never read again, went nowhere. A file still read is hashed once more and its entry kept again;
    a cache without its digests folder or under a home this machine lacks removes nothing."""
    import time

    from papa import io as papa_io

    f, real, kept = _weights_with_a_kept_digest(tmp_path, monkeypatch, 4)
    recent = kept.with_name("recent")
    recent.write_text(real + "\n")
    assert papa_io.prune_digests() == []  # all written just now
    month_ago = time.time() - 31 * 24 * 3600
    os.utime(kept, (month_ago, month_ago))
    assert papa_io.prune_digests() == [kept] and not kept.exists() and recent.exists()
    papa_io._file_digest.cache_clear()
    assert papa_io.file_digest(f) == real and kept.read_text().strip() == real  # hashed and kept again
    for cache in (tmp_path / "empty", "~nosuchuser/cache"):
        monkeypatch.setenv("PAPA_CACHE", str(cache))
        assert papa_io.prune_digests() == []


def test_the_record_names_the_device_a_job_ran_on_and_initialises_no_cuda(monkeypatch):
    """On a GPU node `papa.io.environment` read the name of GPU 0 (torch.cuda.get_device_name, which initialises
    CUDA) for every job: a tokenize, aggregate or plot job set up a CUDA context it never used and recorded the GPU
    as its device. It names a GPU only where torch has initialised CUDA, or the device a stage says it computed on (a
    model stage: its model's); a job asking for a GPU still starts where torch sees one (`check_gpu_granted`). On the
    CPU: torch's CUDA calls stand in, and initialising CUDA fails."""
    import torch

    from papa import pipeline

    named = []

    def name(device=None):
        named.append(device)
        return "NVIDIA H200"

    def no_init():
        raise AssertionError("CUDA initialised")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "_lazy_init", no_init)
    monkeypatch.setattr(torch.cuda, "get_device_name", name)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    env = io.environment()
    assert env["device"] == "cpu" and env["cuda"] == "12.4" and not named, (env["device"], named)
    stage = pipeline.Stage()  # a stage that runs no model (aggregate, plot): the CPU, no CUDA initialised
    assert stage.job_record()["environment"]["device"] == "cpu" and not named, named
    assert stage.provenance(device="cpu")["environment"]["device"] == "cpu" and not named, named
    # a model stage passes its model's device: a GPU's name, read once the model is there
    assert stage.provenance(device=torch.device("cuda", 0))["environment"]["device"] == "NVIDIA H200"
    # the job's start reads no GPU name (no model has run): a job given a GPU torch sees is not refused
    job = SimpleNamespace(rule="probe", resources=SimpleNamespace(gpu=1, mem_mb=1000))
    pipeline.check_gpu_granted(job, io.environment())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"asks for 1 GPU\(s\).*sees no CUDA device"):
        pipeline.check_gpu_granted(job, io.environment())
    pipeline.check_gpu_granted(SimpleNamespace(rule="tokenize", resources=SimpleNamespace(gpu=0)), io.environment())
    for gpus in ("1", "2.0"):  # a request written as text (stop 69's left item: it was taken as none)
        with pytest.raises(RuntimeError, match=rf"asks for {float(gpus):g} GPU\(s\)"):
            pipeline.check_gpu_granted(
                SimpleNamespace(rule="probe", resources=SimpleNamespace(gpu=gpus)), io.environment()
            )
    for none in ("0", "a100", None, float("nan")):  # no request, or none counted here
        pipeline.check_gpu_granted(SimpleNamespace(rule="probe", resources=SimpleNamespace(gpu=none)), io.environment())
    # where torch has initialised CUDA (a model ran there; a notebook), its current device's name
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert io.environment()["device"] == io.device_name() == "NVIDIA H200"
    assert io.device_name("cpu") == "cpu" and stage.job_record(device="cpu")["environment"]["device"] == "cpu"
    # a stage given no device computed on the CPU, not on the GPU a notebook's model ran on
    assert stage.job_record()["environment"]["device"] == "cpu"
    # the current device's, which is not always GPU 0 (torch.cuda.set_device(1) in a notebook)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    named.clear()
    assert io.device_name() == "NVIDIA H200" and named == [torch.device("cuda", 1)], named
    named.clear()  # another accelerator's (Apple's, Intel's) or the meta device: its type, no CUDA name read
    assert [io.device_name(d) for d in ("mps", "xpu:0", "meta")] == ["mps", "xpu", "meta"] and not named, named
    # a model stage also records which release of an offline alias's weights it loaded; a data-free one none
    from papa.models import model_release

    average = pipeline.AverageStage(model="minilm", kind="average", tokens="t", out="o")
    assert average.job_record()["model_release"] == model_release("minilm") is not None
    assert "model_release" not in stage.job_record()


def test_a_stages_record_names_it_its_settings_each_inputs_digest_and_what_it_adds(tmp_path):
    """`Stage.provenance`, what each output of a job records: the stage's class, its settings, every input file's
    digest and what the stage adds (the MLM stage its hub commit, a probe its cache strategy) (mutation testing:
    a record without the digests, naming the base class or without the additions passed the fast tier)."""
    from papa import pipeline

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one")
    b.write_text("two")
    stage = pipeline.AverageStage(model="minilm", kind="average", tokens=str(a), out="o", inputs=(str(a), str(b)))
    record = stage.provenance(model_revision="abc123")
    assert record["stage"] == "AverageStage" and record["settings"]["tokens"] == str(a)
    assert record["settings"]["inputs"] == (str(a), str(b)) and record["model_revision"] == "abc123"
    assert list(record["inputs"]) == [str(a), str(b)] and record["inputs"] == io.input_digests([a, b])
    b.write_text("changed")  # each file's own digest: another content, another digest
    after = stage.provenance()["inputs"]
    assert after[str(a)] == record["inputs"][str(a)] and after[str(b)] != record["inputs"][str(b)]
    assert "model_revision" not in stage.provenance()


def test_a_job_given_a_gpu_by_a_rocm_build_of_torch_is_not_refused(monkeypatch):
    """A ROCm build of torch sees an AMD GPU through torch.cuda (HIP: torch.cuda.is_available() is True) but has no
    CUDA version (torch.version.cuda is None), so `papa.io.environment` records ``cuda`` None. `check_gpu_granted`
    read that as "torch sees no GPU" and refused every GPU job there (it tested the device GPU 0's name before, which
    HIP gives); a ROCm build that sees no GPU is still refused."""
    import torch

    from papa import pipeline

    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    job = SimpleNamespace(rule="probe", resources=SimpleNamespace(gpu=1, mem_mb=1000))
    env = io.environment()
    assert env["cuda"] is None
    pipeline.check_gpu_granted(job, env)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"asks for 1 GPU\(s\).*sees no CUDA device"):
        pipeline.check_gpu_granted(job, io.environment())


def test_the_environment_names_the_checkout_the_cpu_and_mkls_setting():
    """papa.io.environment records the git commit papa runs from (this checkout's, when it is one)."""
    import subprocess

    from papa.io import environment

    env = environment()
    assert env["tokenizers"] and env["safetensors"] and env["scipy"]
    # what bit-equality depends on besides the code: the CPU type and MKL's setting (float32 products), and the
    # version that draws the figures
    assert env["cpu"] and env["matplotlib"] and "mkl_cbwr" in env
    if Path("/proc/cpuinfo").exists():
        assert env["cpu"] in Path("/proc/cpuinfo").read_text()
    # one model name covers CPUs with and without AVX-512, whose kernels round differently (review AK): the kernels
    # torch picked, and the variables that change them
    import torch

    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and env["cpu_capability"]
    assert set(env["kernel_env"]) <= set(io.KERNEL_VARIABLES)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DNNL_MAX_CPU_ISA", "AVX2")
        mp.delenv("ATEN_CPU_CAPABILITY", raising=False)
        kernels = environment()["kernel_env"]
        assert kernels["DNNL_MAX_CPU_ISA"] == "AVX2" and "ATEN_CPU_CAPABILITY" not in kernels
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        assert env["papa_source"] is None
        return
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    if git.returncode != 0:  # git refuses the checkout (another user's: "dubious ownership"), or is not there
        assert env["papa_source"] is None, git.stderr
        return
    assert env["papa_source"]["commit"] == git.stdout.strip() and isinstance(env["papa_source"]["dirty"], bool)


def test_a_dirty_checkout_records_the_digest_of_its_changes(tmp_path):
    """A result of a checkout with uncommitted changes recorded only ``dirty``: which changes is now recorded too,
    as the sha256 of ``git diff --binary HEAD`` (review AK), and a clean checkout records None."""
    import hashlib
    import subprocess

    checkout = tmp_path / "checkout"
    shutil.copytree(Path(io.__file__).parent, checkout / "papa", ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "papa"], ["commit", "-qm", "papa"]):
        subprocess.run([*git, *args], cwd=checkout, check=True, capture_output=True)
    code = "import json, papa.io as io; print(json.dumps(io.source_commit()))"

    def recorded():
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(checkout)}, timeout=120)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)

    (checkout / "notes.txt").write_text("untracked")  # untracked files are in neither `dirty` nor the diff
    clean = recorded()
    assert clean["dirty"] is False and clean["diff_sha256"] is None
    with open(checkout / "papa" / "spec.py", "a") as f:
        f.write("\n# an edit not committed\n")
    bare = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}  # git's defaults
    diff = subprocess.run(["git", "diff", "--binary", "HEAD"], cwd=checkout, capture_output=True, check=True, env=bare)
    dirty = recorded()
    assert dirty["commit"] == clean["commit"] and dirty["dirty"] is True
    assert dirty["diff_sha256"] == "sha256:" + hashlib.sha256(diff.stdout).hexdigest()
    # the same digest whatever the checkout's git config: an external diff that fails lost the commit itself, colour
    # and prefixes changed the digest (review AL)
    for key, value in (("diff.external", "/bin/false"), ("color.diff", "always"), ("diff.noprefix", "true"),
                       ("diff.algorithm", "patience"), ("diff.context", "7")):  # fmt: skip
        subprocess.run(["git", "config", key, value], cwd=checkout, check=True)
    assert recorded() == dirty


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a checkout owned by another user")
def test_the_commit_of_a_checkout_another_user_owns_is_recorded(tmp_path):
    """git refuses a checkout another user owns ("dubious ownership": a container's root on a bind-mounted checkout),
    and every result recorded no commit without a word (review AF): papa names its own checkout safe for its two
    read-only git commands."""
    import shutil
    import subprocess

    checkout = tmp_path / "checkout"
    shutil.copytree(Path(io.__file__).parent, checkout / "papa", ignore=shutil.ignore_patterns("__pycache__"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "papa"], ["commit", "-qm", "papa"]):
        subprocess.run([*git, *args], cwd=checkout, check=True, capture_output=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    subprocess.run(["chown", "-R", "nobody", str(checkout)], check=True)
    refused = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True)
    assert refused.returncode != 0 and "dubious ownership" in refused.stderr  # what papa's git call met
    code = "import papa.io as io; s = io.source_commit(); print(s['commit'], s['dirty'])"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(checkout)}, timeout=120)  # fmt: skip
    assert out.stdout.split() == [head, "False"], out.stderr[-2000:]


@pytest.fixture
def job_logging():
    """The root logger, its level and handlers, the excepthook, the environment and torch's deterministic flag as
    they were before a test of `papa.pipeline.setup` (which sets them all for a job), given back after it."""
    import logging

    import torch

    root = logging.getLogger()
    saved = (root.handlers[:], root.level, sys.excepthook)
    # setup seeds everything (papa.io.seed_everything): deterministic algorithms on and their variables set, for
    # every later test of this worker unless given back (review AF)
    environ, deterministic = dict(os.environ), torch.are_deterministic_algorithms_enabled()
    # setup routes warnings to the log (logging.captureWarnings), which does nothing while logging still holds the
    # showwarning of an earlier call: pytest's per-test warning capture has since put its own back, so without this
    # reset a second test's warnings reach pytest and not the job's log (stop 80's CI)
    logging.captureWarnings(False)
    try:
        yield root
    finally:
        logging.captureWarnings(False)
        for h in root.handlers:
            h.close()
        root.handlers[:], sys.excepthook = saved[0], saved[2]
        root.setLevel(saved[1])
        os.environ.clear()
        os.environ.update(environ)
        torch.use_deterministic_algorithms(deterministic)


def test_a_slurm_job_logs_to_its_log_file_only(tmp_path, monkeypatch, job_logging):
    """In a Slurm job stderr is the Slurm log, which the profile prints beside the rule's log on a failure: a
    stage logs to its log file alone there (every line came twice), to both elsewhere and in an interactive
    allocation (stderr a terminal)."""
    import logging

    from papa import pipeline

    root = job_logging
    for slurm, tty, want_stderr in ((None, False, True), ("1234", False, False), ("1234", True, True)):
        if slurm:
            monkeypatch.setenv("SLURM_JOB_ID", slurm)
        else:
            monkeypatch.delenv("SLURM_JOB_ID", raising=False)
        monkeypatch.setattr(sys, "stderr", SimpleNamespace(isatty=lambda tty=tty: tty, write=sys.stderr.write))
        pipeline.setup(str(tmp_path / f"{slurm}-{tty}.log"))
        kinds = [type(h) for h in root.handlers]
        assert logging.FileHandler in kinds
        assert (logging.StreamHandler in kinds) is want_stderr, (slurm, tty, kinds)
    monkeypatch.setattr(sys, "stderr", SimpleNamespace(isatty=lambda: False, write=sys.stderr.write))
    pipeline.setup(None)  # no log file: stderr, in a Slurm batch job too (stderr no terminal)
    assert [type(h) for h in root.handlers] == [logging.StreamHandler]


def test_a_stage_set_up_again_on_a_log_path_starts_a_new_log(tmp_path, monkeypatch, job_logging):
    """Where a log path holds an earlier run's log (a notebook's cell run again, a stage run by hand outside
    Snakemake, which removes a job's log before each attempt) the stage's log is its own run's, not appended to the
    old one (mutation testing: a log opened for appending passed every test)."""
    import logging

    from papa import pipeline

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    path = tmp_path / "logs" / "toy.log"
    for run in ("first", "second"):
        pipeline.setup(str(path))
        logging.getLogger("papa").info("the %s run", run)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" papa INFO the second run"), lines


def test_setup_seeds_torch_numpy_and_random_with_the_seed_it_is_given(job_logging):
    """`setup(log, threads, seed)` seeds everything, as its docstring says: a notebook's stage run by hand draws the
    same numbers for one seed and others for another (mutation testing, the Stage base's third round: a `setup`
    that seeded nothing passed, as a workflow job seeds again with its stage's seed)."""
    import random

    import numpy as np
    import torch

    from papa import pipeline

    draws = []
    for seed in (5, 5, 6):
        pipeline.setup(None, seed=seed)
        draws.append((torch.rand(3).tolist(), np.random.rand(3).tolist(), random.random()))
    assert draws[0] == draws[1]
    assert all(a != b for a, b in zip(draws[0], draws[2], strict=True)), draws


def test_a_jobs_console_and_log_say_how_it_failed_or_stopped(tmp_path, monkeypatch, capsys, job_logging):
    """In-process, for the fast tier (the `slow` tests run whole jobs): a line for the log file alone (a bad
    input's traceback) stays off the console; a bad input's error is one line on the console, its traceback in the
    log; any other error's traceback is on both; a Ctrl-C is a stop, not a failure; the job's end line says it
    failed or was stopped, not "finished", and keeps its log beside (Snakemake removes it before a retry)."""
    import logging
    import time
    import warnings

    from papa import pipeline
    from papa.data.errors import TaskSpecError

    monkeypatch.setattr(pipeline, "_JOB", {"failed": False})
    monkeypatch.setattr(io, "STOPPED_BY", [])
    monkeypatch.setattr(io, "_STOP_FINAL", [True])  # a workflow job's: the kept log is the one write after a stop
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    path = tmp_path / "logs" / "toy.log"
    pipeline.setup(str(path))
    said = logging.getLogger("papa")

    def raised(error):
        try:
            raise error
        except BaseException as e:  # noqa: BLE001 - what the hook is given
            return type(e), e, e.__traceback__

    def end(**job):  # the end line of a job that ran 0 s, with what its hook recorded
        pipeline._JOB.clear()
        pipeline._JOB.update({"failed": False, "stage": "Toy", "t0": time.monotonic(), "log": str(path), **job})
        pipeline._log_job_end()
        return path.read_text().splitlines()[-1].split(" ", 4)[-1]

    said.info("inputs: a, b", extra={"log_file_only": True})
    warnings.warn("a warning of the stage's", stacklevel=1)  # in the log, with no blank line after it
    text = path.read_text()
    assert "UserWarning: a warning of the stage's" in text and "\n\n" not in text, text
    sys.excepthook(*raised(TaskSpecError("datasets.x: bad label 'q'")))
    assert pipeline._JOB == {"failed": True}
    console = capsys.readouterr().err
    assert "stage failed: TaskSpecError: datasets.x: bad label 'q'" in console
    assert "inputs: a, b" not in console and "Traceback" not in console and "where it was raised" not in console
    text = path.read_text()
    assert "inputs: a, b" in text and "where it was raised (for a bug report)\nTraceback" in text
    sys.excepthook(*raised(RuntimeError("a bug")))
    assert "Traceback" in capsys.readouterr().err and "RuntimeError: a bug" in path.read_text()
    pipeline._JOB["failed"] = False
    sys.excepthook(*raised(KeyboardInterrupt()))
    assert pipeline._JOB == {"failed": False, "interrupted": True} and "stage failed" not in capsys.readouterr().err
    # the end lines (and the log kept as the first free .unfinished-<k>)
    assert re.fullmatch(r"Toy finished in \d+\.\d s \(CPU .*\)", end())
    assert not list(path.parent.glob("*.unfinished-*"))
    assert re.match(r"Toy failed after \d+\.\d s .*; this log is kept as .*toy\.log\.unfinished-1 ", end(failed=True))
    assert re.match(r"Toy stopped by signal 2 after .*toy\.log\.unfinished-2 ", end(interrupted=True))
    io.STOPPED_BY.append(15)
    assert re.match(r"Toy stopped by signal 15 after .*toy\.log\.unfinished-3 ", end())
    kept = sorted(path.parent.glob("*.unfinished-*"))
    assert [p.name for p in kept] == [f"toy.log.unfinished-{k}" for k in (1, 2, 3)]
    assert "Toy failed after" in kept[0].read_text() and "RuntimeError: a bug" in kept[0].read_text()
    # a copy that cannot be written (a full disk, a folder gone) is said, and fails nothing more: the job has failed
    # already (no test reached it: the whole suite's line trace)
    io.STOPPED_BY.clear()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setattr(pipeline, "unfinished_log_path", lambda log: str(blocked / "toy.log.unfinished-4"))
    assert re.match(rf"could not keep this log as {re.escape(str(blocked))}/toy\.log\.unfinished-4: ", end(failed=True))
    assert sorted(path.parent.glob("*.unfinished-*")) == kept and blocked.read_text() == ""
    # a copy cut short (the disk full half-way) leaves no kept log that looks whole: it is written atomically
    # (mutation testing, the Stage base's third round: a plain copy passed)
    import shutil

    def cut_short(src, dst):
        with open(src, "rb") as f, open(dst, "wb") as g:
            g.write(f.read()[:100])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pipeline, "unfinished_log_path", lambda log: f"{log}.unfinished-4")
    monkeypatch.setattr(shutil, "copyfile", cut_short)
    assert re.match(r"could not keep this log as .*toy\.log\.unfinished-4: .*free space there .*\[Errno 28\] No "
                    r"space left on device\)$", end(failed=True))  # fmt: skip
    assert sorted(path.parent.iterdir()) == [path, *kept]  # the log and the three kept before: nothing new


def test_a_stop_python_dropped_still_stops_the_jobs_writes(tmp_path):
    """Review DE (c910565, left since stop 72): a stop signal landing while Python ran a weakref callback or a
    ``__del__`` raised its SystemExit there, where Python prints "Exception ignored in" and goes on: the job wrote its
    outputs after the stop, logged "finished" and exited 0, while Snakemake counted it failed. A workflow job's
    writes (`atomic_path`, `atomic_dir`) raise the stop again, and nothing is placed; a process that is no workflow
    job (a notebook) writes on."""
    script = textwrap.dedent(f"""
        import os, signal, sys
        from papa import io

        io.stop_on_signals(final={{final}})

        class Stops:
            def __del__(self):  # the signal's handler runs here: its SystemExit is "ignored"
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))

        Stops()
        assert io.STOPPED_BY == [signal.SIGTERM], io.STOPPED_BY
        print("went on", flush=True)
        with io.atomic_path({str(tmp_path / "out.txt")!r}) as tmp:
            tmp.write_text("after the stop")
        with io.atomic_dir({str(tmp_path / "out.d")!r}) as tmp:
            (tmp / "x").write_text("after the stop")
        print("wrote", flush=True)
    """)
    for final in (True, False):
        run = subprocess.run([sys.executable, "-c", script.replace("{final}", str(final))], capture_output=True,
                             text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])  # fmt: skip
        assert "Exception ignored in" in run.stderr and "went on" in run.stdout, (run.stdout, run.stderr)
        if final:
            assert run.returncode == 128 + signal.SIGTERM and "wrote" not in run.stdout, (run.returncode, run.stderr)
            assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())  # no output, no temporary left
        else:
            assert run.returncode == 0 and "wrote" in run.stdout, run.stderr
            assert (tmp_path / "out.txt").read_text() == "after the stop" and (tmp_path / "out.d" / "x").is_file()


def _toy_stage():
    """A stage that adds no settings of its own, for the in-process tests of `Stage.from_snakemake`."""
    from papa import pipeline

    class Toy(pipeline.Stage):
        @classmethod
        def _from_snakemake(cls, sm):
            return {}

    return Toy


def test_a_job_registers_its_end_line_and_stop_handlers_once(tmp_path, monkeypatch, job_logging):
    """In-process, for the fast tier (the `slow` tests run whole jobs): `Stage.from_snakemake` registers the job's
    end line (`_log_job_end`, at exit) and its stop-signal handlers once a process, with the first stage built; a
    stage built again in that job (a subclass calling its parent's) adds neither a second end line nor handlers."""
    import atexit

    from papa import pipeline

    Toy = _toy_stage()
    registered, handlers = [], []
    monkeypatch.setattr(pipeline, "_JOB", {"failed": False})
    monkeypatch.setattr(atexit, "register", lambda fn, *a, **k: registered.append(fn))
    log = tmp_path / "toy.log"
    # the handlers go in before the logging is set up (review DE, 750f187: a stop during the set-up left an empty log,
    # and no kept copy), for good: no output is placed after a stop (`_raise_if_stopped`)
    monkeypatch.setattr(io, "stop_on_signals", lambda *a, **k: handlers.append((a, k, log.exists())) or {})
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    import torch

    threads = []  # the job's threads reach torch (mutation testing: a job computing on torch's default passed)
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    sm = SimpleNamespace(log=[str(log)], threads=1, params=SimpleNamespace(code="x"), input=["a", "b"])
    stage = Toy.from_snakemake(sm)
    assert registered == [pipeline._log_job_end] and handlers == [((), {"final": True}, False)]
    assert pipeline._JOB["stage"] == "Toy" and pipeline._JOB["log"] == str(log) and list(stage.inputs) == ["a", "b"]
    assert threads == [1] and stage.threads == 1 and stage.code == "x"  # the code fingerprint, recorded
    Toy.from_snakemake(sm)
    assert registered == [pipeline._log_job_end] and handlers == [((), {"final": True}, False)]
    first = [line.split(" ", 4)[-1] for line in log.read_text().splitlines()][:2]
    assert first == ["Toy: 2 input file(s), 1 thread(s), seed 0", "inputs: a, b"], first

    class Seeded(Toy):  # the stage's own seed, not setup's 0, seeds the job (mutation testing: nothing checked it)
        @classmethod
        def _from_snakemake(cls, sm):
            return {"seed": 7}

    assert Seeded.from_snakemake(sm).seed == 7 and torch.initial_seed() == 7


def test_a_jobs_log_names_the_checkouts_commit_and_whether_it_was_dirty(tmp_path, monkeypatch, job_logging):
    """A job's log names the commit of the papa checkout it ran and says when that checkout had uncommitted changes
    (its results then come from code no commit holds; mutation testing: the word could go unseen)."""
    from papa import pipeline

    Toy = _toy_stage()
    monkeypatch.setattr(pipeline, "_JOB", {"failed": False})
    monkeypatch.setattr(io, "stop_on_signals", lambda *a, **k: {})
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    real = io.environment
    for dirty, said in ((True, "(commit 0123456789ab, dirty)"), (False, "(commit 0123456789ab)")):
        source = {"commit": "0123456789abcdef0123", "dirty": dirty}
        monkeypatch.setattr(io, "environment", lambda source=source: {**real(), "papa_source": source})
        log = tmp_path / f"{dirty}.log"
        Toy.from_snakemake(SimpleNamespace(log=[str(log)], threads=1, params=SimpleNamespace(), input=[]))
        on = [line for line in log.read_text().splitlines() if " python " in line]
        assert len(on) == 1 and on[0].endswith(said), on


def test_a_failed_job_without_a_log_file_keeps_none_and_an_unreadable_file_is_a_users_error(monkeypatch, caplog):
    """A job with no log file that failed says nothing more at its end (its error is above; no log to keep), one a
    signal stopped says so without a kept log; an unreadable input file is a bad input (`_user_errors`: one line on
    the console, no traceback), as a task's spec error is (mutation testing: neither was checked)."""
    import logging
    import time

    from papa import pipeline
    from papa.data.errors import TaskSpecError

    monkeypatch.setattr(io, "STOPPED_BY", [])
    for job, said in (({"failed": True}, []), ({"interrupted": True}, ["Toy stopped by signal 2 after"])):
        monkeypatch.setattr(pipeline, "_JOB", {"failed": False, "stage": "Toy", "t0": time.monotonic(), "log": None,
                                               **job})  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="papa"):
            pipeline._log_job_end()
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == len(said) and all(m.startswith(s) for m, s in zip(lines, said, strict=True)), lines
        assert not any("kept as" in m for m in lines), lines
    errors = pipeline._user_errors()
    assert issubclass(io.UnreadableFileError, errors) and issubclass(TaskSpecError, errors)
    # a model papa cannot patch and inputs of another N than the matrices: bad input too, each message says what to
    # change (mutation testing: either could be taken for a bug, a traceback on the console, and no test saw it)
    from papa.models import UnsupportedModelError
    from papa.patching.kernels import SequenceLengthMismatch

    assert issubclass(UnsupportedModelError, errors) and issubclass(SequenceLengthMismatch, errors)
    assert not issubclass(RuntimeError, errors) and not issubclass(ValueError, errors)


@pytest.mark.slow  # a fresh Python process (~2 s): `make test`, not the fast tier
def test_a_job_log_is_utf8_whatever_the_locale(tmp_path):
    """A job's log file is UTF-8 under a locale that is not (LANG=C with PYTHONUTF8=0: ASCII; a Latin-1 one): its
    FileHandler took the locale's encoding, so a line naming a label, file or text it could not encode
    (``positiv\u20ac``, a CJK review) was dropped from the log ("--- Logging error ---" on stderr) and the others
    were written in that encoding. A fresh interpreter: the locale's encoding is read at its start."""
    code = """
import logging, sys
from papa import pipeline
pipeline.setup(sys.argv[1])
logging.getLogger("papa").info("labels ['n\\xe9gatif', 'positiv\\u20ac'] \\u6700\\u60aa")
"""
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
    log = tmp_path / "job.log"
    p = subprocess.run([sys.executable, "-X", "utf8=0", "-c", code, str(log)], capture_output=True, text=True,
                       env=env, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Logging error" not in p.stderr, p.stderr[-2000:]
    assert "labels ['n\xe9gatif', 'positiv\u20ac'] \u6700\u60aa" in log.read_bytes().decode("utf-8")


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
def test_a_workflow_job_shows_no_progress_bars_and_imports_no_transformers_for_it(tmp_path):
    """A job with a log file shows transformers' bars nowhere (they fill a Slurm log with \\r lines), whether
    transformers is imported after `setup` (a model job) or before it; `setup` itself does not import it (0.9 s in
    every job that loads no model). Fresh interpreters: this one has imported transformers long ago."""
    code = """
import sys
import textwrap
if sys.argv[1] == "before":
    import transformers
elif sys.argv[1] == "datasets first":  # huggingface_hub read the variable before setup set it
    import datasets
from papa import pipeline
pipeline.setup(sys.argv[2])
print("transformers" in sys.modules)
from transformers.utils import logging
print(logging.is_progress_bar_enabled())
"""
    for when, imported in (("after", "False"), ("before", "True"), ("datasets first", "False")):
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
        out = subprocess.run([sys.executable, "-c", code, when, str(tmp_path / f"{when}.log")], env=env,
                             capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        assert out == [imported, "False"], (when, out)


def test_a_footer_changed_on_disk_fails_naming_the_file(tmp_path):
    """A Parquet footer has no checksum: a byte changed in pandas' metadata there failed `read_parquet` (so the
    aggregate stage, which reads every probe file) with a bare UnicodeDecodeError that named no file; papa's own JSON
    there (provenance, a token file's or a data split's description) is read through `footer_json`, which names it
    too."""
    import pandas as pd

    from papa import io as papa_io

    table = tmp_path / "t.parquet"
    papa_io.write_parquet(pd.DataFrame({"x": [1.0, 2.0]}), table, {"stage": "Toy"})
    data = bytearray(table.read_bytes())
    i = bytes(data).rfind(b"pandas_type")
    data[i + len("pandas_type") + 3] = 0xFF  # not UTF-8
    bad = tmp_path / "pandas.parquet"
    bad.write_bytes(bytes(data))
    with pytest.raises(papa_io.UnreadableFileError, match=r"pandas\.parquet is not a readable Parquet file"):
        papa_io.read_parquet(bad)
    for raw in (b"\xff{}", b'{"max_length": 8'):
        with pytest.raises(papa_io.UnreadableFileError, match=r"t\.parquet is not a readable Parquet file"):
            papa_io.footer_json(table, raw)
    assert papa_io.footer_json(table, b'{"a": 1}') == {"a": 1}


def test_a_file_changed_on_disk_after_it_was_written_fails_when_read(tmp_path):
    """A bit flipped in a result, a token file or a constants file, its time kept: Snakemake takes it as it is
    (it goes by file times), and pyarrow and safetensors read other numbers without a word. papa's Parquet files
    carry a CRC-32 per page (`papa.io.write_table`) and its constants the sha256 of their tensors; reading such a
    file fails naming it."""
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    import papa
    from papa import io as papa_io
    from papa.encoding import stream_tokens

    def flip(path, offset):
        st = path.stat()
        data = bytearray(path.read_bytes())
        data[offset] ^= 0x10
        path.write_bytes(bytes(data))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    df = pd.DataFrame({"x": np.random.default_rng(0).random(1000)})
    table = tmp_path / "t.parquet"
    papa_io.write_parquet(df, table)
    col = pq.ParquetFile(table).metadata.row_group(0).column(0)
    assert col.has_dictionary_page  # the values sit in the dictionary page: a flipped bit there reads silently
    flip(table, col.dictionary_page_offset + (col.data_page_offset - col.dictionary_page_offset) // 2)
    assert (pq.read_table(table).to_pandas().x != df.x).sum() == 1
    with pytest.raises(papa_io.UnreadableFileError, match=r"t\.parquet .*CRC checksum verification failed"):
        papa_io.read_parquet(table)

    enc = papa.Encoded(np.arange(64, dtype=np.int64).reshape(8, 8), np.ones((8, 8), dtype=np.int64), None,
                       np.arange(8) % 2, "papa", 8)  # fmt: skip
    tokens = tmp_path / "tokens.parquet"
    enc.save(tokens)
    col = pq.ParquetFile(tokens).metadata.row_group(0).column(0)
    start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
    flip(tokens, start + col.total_compressed_size - 3)  # in the input ids' last page
    with pytest.raises(papa_io.UnreadableFileError, match=r"tokens\.parquet"):
        papa.Encoded.load(tokens)
    with pytest.raises(papa_io.UnreadableFileError, match=r"tokens\.parquet"):
        list(stream_tokens(tokens, 4))

    C = papa.data_free("toeplitz", 2, 3, 8)
    constants = tmp_path / "c.safetensors"
    C.save(constants)
    flip(constants, constants.stat().st_size - 40)  # a byte of the last tensor's data
    with pytest.raises(papa_io.UnreadableFileError, match=r"c\.safetensors: its tensors are not the ones written"):
        papa.ConstantAttention.load(constants)


@pytest.mark.slow  # ~10 s of fresh Python processes: `make test`, not the fast tier
def test_constants_are_the_same_file_in_every_process(tmp_path):
    """safetensors writes a header's metadata keys in its hash map's order, which changes from process to process:
    constants saved with two keys (metadata and digest) were two different files for the same numbers, so every
    digest recorded downstream differed between identical runs. One key: the same bytes in any process; a file
    with the digest under a key of its own (stop 41's) still loads and is checked."""
    import subprocess
    import sys

    from safetensors.torch import save_file

    import papa
    from papa import io as papa_io
    from papa.constants import DIGEST_KEY, _tensors_digest

    script = (
        "import sys, papa; papa.data_free('toeplitz', 2, 3, 8, metadata={'model': 'm', 'corpus': None})"
        ".save(sys.argv[1])"
    )
    paths = [tmp_path / f"c{i}.safetensors" for i in range(6)]  # two keys: one order in 2 ** 5
    for p in paths:
        subprocess.run([sys.executable, "-c", script, str(p)], check=True)
    assert len({p.read_bytes() for p in paths}) == 1
    C = papa.ConstantAttention.load(paths[0])
    assert DIGEST_KEY not in C.metadata and C.metadata["model"] == "m"
    tensors = {"mean": C.mean.float().contiguous(), "count": C.count.double().contiguous()}
    old = tmp_path / "old.safetensors"
    save_file(tensors, str(old), metadata={"papa": '{"model": "m"}', "sha256": _tensors_digest(tensors)})
    assert papa.ConstantAttention.load(old).metadata == {"model": "m"}
    save_file(tensors, str(old), metadata={"papa": '{"model": "m"}', "sha256": "sha256:" + "0" * 64})
    with pytest.raises(papa_io.UnreadableFileError, match="its tensors are not the ones written"):
        papa.ConstantAttention.load(old)


def test_constants_metadata_keeps_numbers_and_refuses_what_json_cannot_hold(tmp_path, minilm):
    """Metadata was written with json's ``default=str``: NumPy's int64 5 came back as the text "5", a tensor as its
    repr, an object as its str, silently. Numbers now come back as numbers (NumPy scalars and arrays, tensors),
    paths as text; anything else fails when the matrices are made, before an average's work, naming it."""
    from pathlib import PurePosixPath

    import numpy as np
    import torch

    import papa

    meta = {"n": np.int64(5), "x": np.float32(0.5), "v": torch.tensor([1, 2]), "a": np.arange(3),
            "p": PurePosixPath("/data/x.csv"), "s": {"b", "a"}}  # fmt: skip
    C = papa.data_free("uniform", 1, 1, 4, metadata=meta)
    C.save(tmp_path / "c.safetensors")
    got = papa.ConstantAttention.load(tmp_path / "c.safetensors").metadata
    assert {k: got[k] for k in meta} == {"n": 5, "x": 0.5, "v": [1, 2], "a": [0, 1, 2], "p": "/data/x.csv",
                                         "s": ["a", "b"]}  # fmt: skip
    assert isinstance(got["n"], int)
    with pytest.raises(TypeError, match=r"metadata value <object object at .*> \(object\) cannot be stored as JSON"):
        papa.data_free("uniform", 1, 1, 4, metadata={"o": object()})
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        papa.average_attention(minilm[0], [], metadata={"o": object()})
    # a key that is no string (review CV, left since the cut-off session): beside string keys it failed in save,
    # after the averaging's work, on json's bare "'<' not supported"; alone it came back from load as text
    for meta, key, where in (({1: "a", "b": 2}, r"1 \(int\)", "metadata"),
                             ({"runs": [{(1, 2): 3}]}, r"\(1, 2\) \(tuple\)", r"metadata\['runs'\]"),
                             ({2.5: 1}, r"2\.5 \(float\)", "metadata")):  # fmt: skip
        said = rf"^{where} has the key {key}: metadata keys are strings \(it is stored as JSON\); write it as"
        with pytest.raises(TypeError, match=said):
            papa.average_attention(minilm[0], [], metadata=meta)  # refused before the work (no batch here)
        with pytest.raises(TypeError, match=said):
            papa.data_free("uniform", 1, 1, 4, metadata=meta)
        built = papa.data_free("uniform", 1, 1, 4)
        built.metadata.update(meta)  # changed after it was built: save refuses it before writing
        with pytest.raises(TypeError, match=said):
            built.save(tmp_path / "k.safetensors")
        assert not (tmp_path / "k.safetensors").exists()
    # the keys the matrices' own numbers give are not the caller's to set: a kind "uniform" on averaged matrices
    # recorded them as data-free (and turned off patch's check that constants are the model's own)
    for meta in (
        {"kind": "uniform"},
        {"n_examples": 3, "N": 4},
        {"dtype": "float16"},
        {"head_dim": 32, "n_examples_at_most_head_dim": 1},
    ):  # effective attention's own (review DR)
        with pytest.raises(ValueError, match=f"average_attention: metadata may not set {', '.join(meta)}"):
            papa.average_attention(minilm[0], [], metadata=meta)  # refused before the work (no batch here)
        with pytest.raises(ValueError, match=f"data_free: metadata may not set {', '.join(meta)}"):
            papa.data_free("uniform", 1, 1, 4, metadata=meta)
    with pytest.raises(TypeError, match="metadata must be a dict"):
        papa.data_free("uniform", 1, 1, 4, metadata=[("model", "m")])
    # the caller's model and model_revision name the model (an alias, a folder), beside what the average computes
    # (review DR's mutation testing: the computed name overwriting the caller's passed)
    batches = papa.encode(minilm[1], ["a good film", "dull"], max_length=8).batches(2)
    got = papa.average_attention(minilm[0], batches, metadata={"model": "mine", "model_revision": "abc"}).metadata
    assert got == {"kind": "average", "n_examples": 2, "N": 8, "layers": 6, "heads": 12, "dtype": "float32",
                   "model": "mine", "model_revision": "abc", "layout": "papa"}  # fmt: skip
    assert papa.data_free("uniform", 1, 1, 4, metadata={"model": "m", "model_revision": "abc"}).metadata == {
        "kind": "uniform",
        "N": 4,
        "layers": 1,
        "heads": 1,
        "n_examples": 0,
        "model": "m",
        "model_revision": "abc",
    }


def test_constants_read_back_as_written_and_save_again(tmp_path):
    """What load gives back of saved constants beyond the mean (review DR's mutation testing: none of it was checked
    in the fast tier): the count as float64, the effective normaliser, the metadata without the digest save adds
    (left in, loaded constants could not be saved again), the same file when saved again; a missing file is a
    FileNotFoundError (not an unreadable file to delete); the digest covers each tensor's dtype and shape; the
    metadata's key order and NumPy matrices make no other file."""
    import torch

    import papa
    from papa import io as papa_io
    from papa.constants import DIGEST_KEY, _tensors_digest

    C = papa.data_free("toeplitz", 2, 3, 8)
    norm = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    eff = papa.ConstantAttention(C.mean, C.count * 3, {"kind": "effective", "n_examples": 3, "model": "m"}, norm)
    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    eff.save(first)
    back = papa.ConstantAttention.load(first)
    assert back.count.dtype == torch.float64 and torch.equal(back.count, torch.full((8, 8), 3.0, dtype=torch.float64))
    assert back.norm is not None and torch.equal(back.norm, norm) and torch.equal(back.mean, C.mean)
    assert back.metadata == {"kind": "effective", "n_examples": 3, "model": "m"} and DIGEST_KEY not in back.metadata
    back.save(second)
    assert second.read_bytes() == first.read_bytes()
    with pytest.raises(FileNotFoundError) as missing:
        papa.ConstantAttention.load(tmp_path / "none.safetensors")
    assert not isinstance(missing.value, papa_io.UnreadableFileError)
    t = torch.arange(6, dtype=torch.float32)
    digests = {_tensors_digest({"mean": x}) for x in (t, t.reshape(2, 3), t.reshape(3, 2), t.view(torch.int32))}
    assert len(digests) == 4  # the same bytes as another shape or dtype are other tensors
    # the matrices are written as float32 whatever their dtype in memory (a float64 average of a notebook's, a
    # bfloat16 model's), the count as float64 (mutation testing: a float64 mean was written as it was)
    for dtype in (torch.float64, torch.bfloat16):
        odd = papa.ConstantAttention(C.mean.to(dtype), C.count.float(), dict(C.metadata), norm.to(dtype))
        odd.save(tmp_path / "odd.safetensors")
        back = papa.ConstantAttention.load(tmp_path / "odd.safetensors")
        assert (back.mean.dtype, back.norm.dtype, back.count.dtype) == (torch.float32, torch.float32, torch.float64)
        assert torch.equal(back.mean, C.mean.to(dtype).float()) and torch.equal(back.norm, norm.to(dtype).float())
    # the same metadata in another key order is the same file (a record read back and saved again); NumPy
    # matrices are taken as tensors
    for name, meta in (("ab", {"a": 1, "b": [2]}), ("ba", {"b": [2], "a": 1})):
        papa.ConstantAttention(C.mean.numpy(), C.count.numpy(), meta).save(tmp_path / f"{name}.safetensors")
    assert (tmp_path / "ab.safetensors").read_bytes() == (tmp_path / "ba.safetensors").read_bytes()
    back = papa.ConstantAttention.load(tmp_path / "ab.safetensors")
    assert torch.equal(back.mean, C.mean) and torch.equal(back.count, C.count)


@pytest.mark.slow  # fresh Python processes importing torch (~3 s): `make test`, not the fast tier
def _unprivileged(script: str, cwd) -> subprocess.CompletedProcess:
    """``script`` run by this Python as root without the capabilities that let root read any file (``setpriv``):
    a file of another user's with mode 600 is then as unreadable as it is to a user on a shared folder."""
    cmd = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-c", script]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv, to make a file this process may not read")  # fmt: skip
def test_a_result_this_user_may_not_read_is_not_called_corrupt_or_to_be_deleted(tmp_path):
    """Review DO: a Parquet table or constants file another user owns, on a shared results folder, was "not a
    readable ... file: it may be truncated or corrupt: delete it and write it again" (`read_parquet`,
    `ConstantAttention.load`; safetensors itself calls it "No such file"), and `verify` said to delete it: advice
    that deletes a good result of someone else's. It is the PermissionError it is, and verify checks the rest."""
    import pandas as pd

    import papa

    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    ok, locked = results / "tables" / "ok.parquet", results / "tables" / "locked.parquet"
    for path in (ok, locked):
        io.write_parquet(pd.DataFrame({"x": [1.0]}), path, {"inputs": {}})
    const = results / "locked.safetensors"
    papa.data_free("toeplitz", 1, 2, 4).save(const)
    for path in (locked, const):
        os.chown(path, 65534, 65534)  # nobody's
        path.chmod(0o600)
    script = textwrap.dedent(f"""
        import json, papa
        from papa import io, records
        said = {{}}
        for name, read in (("parquet", lambda: io.read_parquet({str(locked)!r})),
                           ("constants", lambda: papa.ConstantAttention.load({str(const)!r}))):
            try:
                read()
                said[name] = "read"
            except Exception as e:
                said[name] = [type(e).__name__, str(e)]
        said["ok"] = len(io.read_parquet({str(ok)!r}))
        print(json.dumps(said))
        print("rc", records.main(["verify", {str(results)!r}]))
    """)
    run = _unprivileged(script, Path(__file__).resolve().parents[1])
    if "Operation not permitted" in run.stderr and "setpriv" in run.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    said, verify = run.stdout.split("\n", 1)
    said = json.loads(said)
    assert said["ok"] == 1  # the files beside them read
    for name, path in (("parquet", locked), ("constants", const)):
        kind, message = said[name]
        assert kind == "PermissionError" and str(path) in message, said
        assert "delete" not in message and "corrupt" not in message, message
    assert f"{locked}: this user may not read it (" in verify and "not a reason to delete it" in verify, verify
    assert f"{const}: this user may not read it (" in verify, verify
    assert "delete it and rerun" not in verify and "no longer match" not in verify, verify  # nothing else is wrong
    assert "2 of the 3 result(s) under" in verify and "this user may not read: they were not checked" in verify
    assert verify.rstrip().endswith("rc 1")  # not "every recorded input file is as it was read"


@pytest.mark.slow  # four fresh Python processes importing torch: `make test`, not the fast tier
def test_a_jobs_thread_count_does_not_change_its_numbers():
    """A job's ``threads`` is a resource, not a param: changing it reruns nothing, so it must change no number.
    MKL's float32 products of a few rows (5 to 11: a probe's last batch, an MLM batch's masked tokens) rounded
    differently with 1 and 2 threads, and a job's losses and lambdas with them; `seed_everything` (every job's
    setup) now asks MKL for reproducible results (MKL_CBWR). The products here, in two processes per count."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import hashlib, sys, torch
        from papa.io import seed_everything
        seed_everything(0)
        torch.set_num_threads(int(sys.argv[1]))
        g, h = torch.Generator().manual_seed(0), hashlib.sha256()
        for rows in range(1, 40):
            x, w = torch.randn(rows, 384, generator=g), torch.randn(384, 384, generator=g) * 0.02
            h.update(torch.nn.functional.linear(x, w).numpy().tobytes())
        print(h.hexdigest())
    """)
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}  # what papa sets, not this shell
    digests = {
        threads: subprocess.run(
            [sys.executable, "-c", code, str(threads)], capture_output=True, text=True, check=True, env=env, timeout=120
        ).stdout.strip()  # fmt: skip
        for threads in (1, 2)
    }
    assert len(set(digests.values())) == 1, digests


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
def test_a_workflow_job_stopped_by_sigterm_anywhere_ends_its_log_with_the_stop(tmp_path):
    """Slurm's time limit (SIGTERM) on an averaging, lambda or MLM job killed it at once: its log ended mid-run, like
    a job still running (only a probe's feature block caught it). Every job now exits on SIGTERM through SystemExit
    (``finally`` blocks and atomic writes clean up) and its log ends with the stop; it opens with what it runs on."""
    code = """
import sys, time
from types import SimpleNamespace
from papa import pipeline

class Toy(pipeline.Stage):
    @classmethod
    def _from_snakemake(cls, sm):
        return {}

sm = SimpleNamespace(log=[sys.argv[1]], threads=1, params=SimpleNamespace(code="x"), input=["a", "b"])
if sys.argv[2] == "finish":  # a workflow job: its rule and wildcards
    sm.rule, sm.wildcards = "toy", {"task": "t1", "fraction_dynamic": "0.5"}
Toy.from_snakemake(sm)
if sys.argv[2] == "finish":
    import warnings
    warnings.warn("a warning of the stage's")
if sys.argv[2] == "stop":
    print("ready", flush=True)
    time.sleep(120)  # a long loop of a stage (no probe feature block around it)
"""
    # a closed terminal (SIGHUP) too (it ended the job at once); under nohup (SIGHUP ignored) the job goes on; the
    # four jobs run at once (each imports torch)
    logs, procs = {}, {}
    for how in ("stop", "hangup", "nohup", "finish"):
        logs[how] = tmp_path / "results" / "logs" / "toy" / f"{how}.log" if how == "finish" else tmp_path / f"{how}.log"
        # SIGHUP ignored under nohup, else as a terminal's session has it (a test suite run under nohup ignores it)
        hup = signal.SIG_IGN if how == "nohup" else signal.SIG_DFL
        args = [sys.executable, "-c", code, str(logs[how]), "finish" if how == "finish" else "stop"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        if how == "finish":  # as a Slurm job: its log names it (sacct, seff; a kept log of a failed attempt)
            env["SLURM_JOB_ID"] = "4242"
        procs[how] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      preexec_fn=lambda hup=hup: signal.signal(signal.SIGHUP, hup))  # fmt: skip
    for how in ("stop", "hangup", "nohup"):
        assert procs[how].stdout.readline().strip() == "ready"
    procs["stop"].send_signal(signal.SIGTERM)
    procs["hangup"].send_signal(signal.SIGHUP)
    procs["nohup"].send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        procs["nohup"].wait(timeout=2)
    procs["nohup"].send_signal(signal.SIGTERM)
    sent = {"stop": signal.SIGTERM, "hangup": signal.SIGHUP, "nohup": signal.SIGTERM}
    for how, p in procs.items():
        assert p.wait(timeout=120) == (128 + sent[how] if how in sent else 0), how
    lines = {how: [line.split(" ", 4)[-1] for line in f.read_text().splitlines()] for how, f in logs.items()}
    assert lines["stop"][-1].startswith("Toy stopped by signal 15 after"), lines["stop"]
    assert lines["hangup"][-1].startswith("Toy stopped by signal 1 after"), lines["hangup"]
    assert lines["nohup"][-1].startswith("Toy stopped by signal 15 after"), lines["nohup"]
    # what the job used (its own count: Snakemake's benchmark file samples a short job's too seldom; review AP)
    assert re.fullmatch(r"Toy finished in \d+\.\d s \(CPU \d+\.\d s, peak memory \d+\.\d\d GiB\)", lines["finish"][-1])
    assert re.search(r"Toy stopped by signal 15 after \d+\.\d s \(CPU \d+\.\d s, peak memory", lines["stop"][-1])
    for how, said in lines.items():
        # which job: its rule and wildcards (two probe logs read alike but for numbers)
        which = " (rule toy: task=t1, fraction_dynamic=0.5)" if how == "finish" else ""
        assert said[0] == f"Toy{which}: 2 input file(s), 1 thread(s), seed 0", said
        assert said[1] == "inputs: a, b", said  # in the log file only
        env = io.environment()
        cuda = f"CUDA {env['cuda']}" if env["cuda"] else "no CUDA"  # as torch sees it: no GPU's name at the start
        assert said[2].startswith("on ") and f"torch {env['torch']}" in said[2] and f", {cuda})" in said[2], said
        assert (", Slurm job 4242 (" in said[2]) == (how == "finish"), said
    # a warning reaches the job's log (it went to stderr alone); the console's lines name the job (its log's path
    # under logs/): jobs side by side wrote lines no one could tell apart
    assert any("UserWarning: a warning of the stage's" in line for line in lines["finish"]), lines["finish"]
    assert all(line.strip() for line in logs["finish"].read_text().splitlines()), lines["finish"]  # no blank line
    console = procs["stop"].stderr.read().splitlines()
    assert any(" INFO " in line for line in console), console
    assert all(" [stop] papa " in line for line in console if " INFO " in line), console
    assert not any(line.endswith("inputs: a, b") for line in console), console
    assert " INFO " not in procs["finish"].stderr.read()  # a Slurm batch job: its log file only, as before
    from papa import pipeline

    assert pipeline.job_tag(str(logs["finish"])) == "toy/finish"
    assert pipeline.job_tag("results/logs/probe/m/t/average/lambda/fraction_dynamic=0.5.log") == (
        "probe/m/t/average/lambda/fraction_dynamic=0.5"
    )


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
def test_a_runs_stop_signals_interrupt_it_as_ctrl_c_does():
    """The Snakefile's ``onstart`` (`papa.io.interrupt_on_stop_signals`): a closed terminal (SIGHUP) and, where
    Snakemake itself runs in a Slurm job (``SLURM_JOB_ID``), SIGTERM (scancel, the time limit, then SIGKILL) raise
    KeyboardInterrupt, Snakemake's Ctrl-C (its jobs cancelled, its lock removed); elsewhere SIGTERM keeps
    Snakemake's own handler (its graceful stop), and under nohup (SIGHUP ignored) the run goes on."""
    code = """
import os, signal, sys, time
from papa.io import interrupt_on_stop_signals

signal.signal(signal.SIGHUP, signal.SIG_IGN if sys.argv[2] == "nohup" else signal.SIG_DFL)
signal.signal(signal.SIGTERM, lambda *a: print("graceful", flush=True))  # Snakemake's exit_gracefully
if sys.argv[3] == "env":  # left to read SLURM_JOB_ID itself, as a notebook's call is
    interrupt_on_stop_signals()
else:  # as the Snakefile calls it: SLURM_JOB_ID read when it was read (the Slurm executor deletes it later)
    interrupt_on_stop_signals(slurm_job=sys.argv[3] == "slurm")
try:
    os.kill(os.getpid(), signal.SIGHUP if sys.argv[1] == "hup" else signal.SIGTERM)
    time.sleep(2)
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    said = {}
    cases = (
        ("term", "", "dfl", "told"),
        ("term", "1234", "dfl", "told"),
        ("term", "1234", "dfl", "env"),
        ("term", "", "dfl", "env"),
        ("term", "1234", "dfl", "not slurm"),  # told: the variable is not read again
        ("hup", "", "dfl", "told"),
        ("hup", "", "nohup", "told"),
    )
    for sig, slurm, hup, how in cases:
        told = how if how != "told" else ("slurm" if slurm else "not slurm")
        out = subprocess.run([sys.executable, "-c", code, sig, hup, told], capture_output=True, text=True,
                             timeout=120, env={**env, **({"SLURM_JOB_ID": slurm} if slurm else {})})  # fmt: skip
        said[sig, bool(slurm), hup, how] = out.stdout.splitlines()
    assert said == {
        ("term", False, "dfl", "told"): ["graceful", "went on"],
        ("term", True, "dfl", "told"): ["interrupted"],
        ("term", True, "dfl", "env"): ["interrupted"],
        ("term", False, "dfl", "env"): ["graceful", "went on"],
        ("term", True, "dfl", "not slurm"): ["graceful", "went on"],
        ("hup", False, "dfl", "told"): ["interrupted"],
        ("hup", False, "nohup", "told"): ["went on"],
    }, said
    assert io.hangup_as_interrupt is io.interrupt_on_stop_signals  # the name an onstart copied from papa's used


def test_stop_signals_are_left_alone_where_snakemake_runs_in_a_thread():
    """Snakemake's API driven from a thread (a notebook's or a service's) runs the Snakefile's ``onstart`` there:
    Python lets only the main thread set a signal handler (``ValueError: signal only works in main thread``), so
    `papa.io.interrupt_on_stop_signals` sets none there and returns, the handlers as they were, rather than failing
    the run at its start."""
    import signal
    import threading

    before = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGTERM)}
    failed = []

    def onstart():
        try:
            io.interrupt_on_stop_signals(slurm_job=True)
        except Exception as e:  # noqa: BLE001 - the test's point: nothing is raised
            failed.append(e)

    t = threading.Thread(target=onstart)
    t.start()
    t.join(30)
    assert not t.is_alive() and failed == []
    assert {s: signal.getsignal(s) for s in before} == before


_ATTEMPT = """
import sys, time
from types import SimpleNamespace
from papa import io, pipeline

calls = []
read = io.environment
io.environment = lambda: calls.append(1) or read()

how = sys.argv[2]

class Toy(pipeline.Stage):
    @classmethod
    def _from_snakemake(cls, sm):
        if how == "refused":  # a job's inputs or settings refused while its stage config is built
            raise ValueError("the token file's max_length is 64, the config's 128, say")
        return {}

sm = SimpleNamespace(log=[sys.argv[1]], threads=1, params=SimpleNamespace(code="x"), input=[], rule="toy",
                     wildcards={"task": "t1"})
stage = Toy.from_snakemake(sm)
if how == "fail":
    raise RuntimeError("out of memory, say")
if how == "bad data":  # an error of bad input whose message says what to change
    from papa.data.errors import TaskSpecError
    raise TaskSpecError("datasets.mine: label 'pos' is not in labels ['positive'], say")
if how == "interrupt":  # Ctrl-C of a local run: SIGINT's KeyboardInterrupt
    raise KeyboardInterrupt
if how == "finish":
    assert stage.provenance()["environment"]["torch"] and len(calls) == 1, calls  # read once a job
if how == "stop":
    try:
        print("ready", flush=True)
        time.sleep(120)
    finally:  # a clean-up that takes a while (atomic writes, a disk cache), hit by the second SIGTERM
        print("cleaning", flush=True)
        time.sleep(2)
        print("cleaned", flush=True)
"""


def _attempt(log, how):
    p = subprocess.Popen([sys.executable, "-c", _ATTEMPT, str(log), how], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)  # fmt: skip
    if how == "stop":  # Slurm's time limit reaches the script twice: from Slurm and through Snakemake
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        assert p.stdout.readline().strip() == "cleaning"
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
def test_the_log_of_an_attempt_that_did_not_finish_is_kept_beside_the_jobs_log(tmp_path):
    """Snakemake removes a job's log before every attempt, so a retry (the Slurm profile's ``retries``, a rerun after
    a fix) erased the first attempt's traceback or "stopped by signal 15". A job that fails or is stopped keeps a
    copy, ``<log>.unfinished-<k>``, the first free ``k``; its log says where; a job that finishes keeps none."""
    log = tmp_path / "job.log"
    rc, _, _ = _attempt(log, "fail")
    first = Path(f"{log}.unfinished-1")
    assert rc == 1 and first.read_text() == log.read_text() and "out of memory, say" in first.read_text()
    last = first.read_text().splitlines()[-1].split(" ", 3)[-1]
    assert re.fullmatch(rf"ERROR Toy failed after [0-9.]+ s \(CPU [0-9.]+ s, peak memory [0-9.]+ GiB\); this log is "
                        rf"kept as {re.escape(str(first))} \(Snakemake removes a job's log before its next attempt\)",
                        last), last  # fmt: skip
    log.unlink()  # as Snakemake does before the next attempt
    rc, _, err = _attempt(log, "stop")
    second = Path(f"{log}.unfinished-2")
    assert rc == 128 + signal.SIGTERM and second.read_text() == log.read_text(), err
    assert log.read_text().splitlines()[-1].split(" ", 3)[-1].startswith("ERROR Toy stopped by signal 15 after")
    assert f"this log is kept as {second}" in log.read_text() and "out of memory" not in log.read_text()
    log.unlink()
    rc, _, err = _attempt(log, "finish")
    assert rc == 0 and log.read_text().splitlines()[-1].split(" ", 3)[-1].startswith("INFO Toy finished in"), err
    assert sorted(p.name for p in tmp_path.glob("job.log*")) == ["job.log", "job.log.unfinished-1",
                                                                  "job.log.unfinished-2"]  # fmt: skip
    assert "out of memory, say" in first.read_text() and "stopped by signal 15" in second.read_text()


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
def test_a_job_refused_while_its_stage_is_built_or_stopped_by_ctrl_c_says_so_in_its_log(tmp_path):
    """A job whose inputs or settings are refused while its stage config is built (`Stage._from_snakemake`) logs
    the error and keeps the log: logging was set up after it, so the error reached Snakemake's console only. A
    Ctrl-C (SIGINT) is a stop, not a failure: its log ends "stopped by signal 2", without a traceback."""
    log = tmp_path / "job.log"
    rc, _, err = _attempt(log, "refused")
    text = log.read_text()
    assert rc == 1 and "ValueError: the token file's max_length is 64, the config's 128, say" in text, err
    assert "Traceback" in text  # an error of papa's own code: where it was raised
    # which job was refused (its header came after the stage was built: review AR's AR-10)
    assert text.splitlines()[0].endswith(" INFO Toy (rule toy: task=t1): 0 input file(s), 1 thread(s)"), text
    log.unlink()
    rc, _, err = _attempt(log, "bad data")  # bad input: its message, without papa's code path on the console
    text = log.read_text()
    assert rc == 1 and "ERROR stage failed: TaskSpecError: datasets.mine: label 'pos' is not in" in text, err
    assert "stage failed: TaskSpecError: datasets.mine" in err and "Traceback" not in err, err
    assert "where it was raised (for a bug report)\nTraceback" in text, text  # the log file keeps it
    assert text.splitlines()[-1].split(" ", 3)[-1].startswith("ERROR Toy failed after"), text
    assert Path(f"{log}.unfinished-2").read_text() == text
    log.unlink()
    rc, _, err = _attempt(log, "interrupt")
    text = log.read_text()
    assert rc == -signal.SIGINT and "Traceback" not in text and "stage failed" not in text, text  # as python exits
    assert text.splitlines()[-1].split(" ", 3)[-1].startswith("ERROR Toy stopped by signal 2 after"), text
    # (not "its outputs were not written": a job with several outputs may have written some, kept incomplete)
    assert "it did not finish (an output it wrote before the stop stays marked incomplete" in text, text
    assert Path(f"{log}.unfinished-3").read_text() == text


@pytest.mark.slow  # a Snakemake run (make check skips it)
def test_a_snakemake_retry_keeps_the_first_attempts_log(tmp_path):
    """The same through Snakemake (``--retries 1``, as the Slurm profile sets it): the retry's log is its own, and
    the first attempt's, with its traceback, is kept beside it."""
    (tmp_path / "job.py").write_text(
        textwrap.dedent("""
        from pathlib import Path
        from papa import pipeline

        class Toy(pipeline.Stage):
            @classmethod
            def _from_snakemake(cls, sm):
                return {}

        Toy.from_snakemake(snakemake)  # noqa: F821
        if not Path("tried").exists():
            Path("tried").touch()
            raise RuntimeError("the first attempt fails")
        Path(snakemake.output[0]).write_text("done")  # noqa: F821
    """)
    )
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent("""
        rule job:
            output: "out.txt"
            log: "logs/job.log"
            params: code="x"
            script: "job.py"
    """)
    )
    from tests.test_workflow import smk

    p = smk(tmp_path, "--cores", "1", "--retries", "1", timeout=300)
    log, kept = tmp_path / "logs/job.log", tmp_path / "logs/job.log.unfinished-1"
    assert (tmp_path / "out.txt").read_text() == "done", p.stderr[-2000:]
    assert "the first attempt fails" not in log.read_text() and "Toy finished in" in log.read_text()
    assert "RuntimeError: the first attempt fails" in kept.read_text() and "Toy failed after" in kept.read_text()


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
def test_a_second_sigterm_during_the_clean_up_is_ignored(tmp_path):
    """The second SIGTERM of a time limit (Slurm's, then Snakemake's) raised SystemExit inside the first one's
    clean-up: a ``SystemExit: 143`` traceback in the Slurm log and a clean-up cut short. The same signal within
    `papa.io.STOP_GRACE_S` of a stop is ignored; the job still exits 143 with its stop as the log's last line."""
    log = tmp_path / "job.log"
    rc, out, err = _attempt(log, "stop")
    assert rc == 128 + signal.SIGTERM and out.splitlines()[-1] == "cleaned", (out, err)
    assert "Traceback" not in err and "SystemExit" not in err, err
    assert log.read_text().splitlines()[-1].split(" ", 3)[-1].startswith("ERROR Toy stopped by signal 15 after")


def test_exit_on_signal_stops_once_within_its_grace_time(monkeypatch):
    monkeypatch.setattr(io, "STOPPED_BY", [])
    monkeypatch.setattr(io, "_stopped_at", [])
    with pytest.raises(SystemExit) as stop:
        io.exit_on_signal(signal.SIGTERM, None)
    assert stop.value.code == 128 + signal.SIGTERM and io.STOPPED_BY == [signal.SIGTERM]
    assert io.exit_on_signal(signal.SIGTERM, None) is None  # the second, during the clean-up
    with pytest.raises(SystemExit):  # another signal is not the same stop
        io.exit_on_signal(signal.SIGINT, None)
    monkeypatch.setattr(io, "STOP_GRACE_S", 0.0)  # a process still alive after the grace time (a notebook kernel)
    with pytest.raises(SystemExit):
        io.exit_on_signal(signal.SIGINT, None)


def test_progress_is_due_every_interval_and_its_rate_leaves_pauses_out(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(io.time, "monotonic", lambda: clock[0])
    p = io.Progress(every=10)
    assert not p.due(0) and not p.due(5)  # nothing done yet / too soon
    clock[0] = 110.0
    assert not p.due(0) and p.due(50) and not p.due(60)  # due once an interval, with work done
    assert p.rate(50) == 5.0 and p.eta(50, 150) == 20.0
    p.paused = 5.0  # a validation pass: out of the rate, in the ETA (it recurs)
    assert p.rate(50) == 10.0 and p.eta(50, 150) == 20.0 and p.elapsed() == 10.0
    clock[0] = 120.0
    assert p.due(60)
    assert not io.Progress(every=float("inf")).due(10)  # log_every inf: never
    # an epoch's own line starts the interval again: no progress line right after it (review AP's AP-4)
    clock[0] = 131.0
    p.mark()
    clock[0] = 140.0
    assert not p.due(70)
    clock[0] = 141.0
    assert p.due(70)
    # a long loop's interval grows to a thirtieth of its time, at most 5 minutes: an 8-hour job wrote ~3,000 lines
    clock[0] = 100.0 + 3600  # an hour in: every 2 minutes
    assert p.interval() == 120.0 and p.due(80)
    clock[0] += 119.0
    assert not p.due(90)
    clock[0] = 100.0 + 8 * 3600
    assert p.interval() == io.Progress.MAX_EVERY == 300.0
    assert io.Progress(every=0).interval() == 0  # every call (tests, log_every 0)
    assert p.eta_text(50, 150) == "ETA 16 h 0 min"  # not "ETA 57600 s"
    said = [io.format_seconds(x) for x in (0, 42.4, 119.4, 125, 3599, 7169, 7190, 7200, 28000, -3)]
    assert said == ["0 s", "42 s", "119 s", "2 min", "60 min", "119 min", "2 h 0 min", "2 h 0 min", "7 h 47 min", "0 s"]


@pytest.mark.slow  # a workflow job started as a subprocess (seconds): make test, not make check
@pytest.mark.cuda  # its device branch: make test-cuda runs it with the GPU visible
def test_a_job_that_asks_for_a_gpu_torch_cannot_see_fails_saying_so(tmp_path):
    """A CPU build of torch, or one built for a newer CUDA than the node's driver, sees no GPU: a job asking for one
    ran on the CPU while holding it, into its time limit, and said only "cpu" in its log's header (review AM). It
    fails at its start now, naming the request and what to change; a job asking for none, or given a GPU, runs."""
    import torch

    from papa import pipeline

    def job(gpu, rule="probe"):
        return SimpleNamespace(rule=rule, resources=SimpleNamespace(gpu=gpu, mem_mb=1000))

    for gpu, cuda in ((0, None), (1, "12.4")):  # env["cuda"]: None where torch sees no CUDA device
        pipeline.check_gpu_granted(job(gpu), {"cuda": cuda})
    pipeline.check_gpu_granted(SimpleNamespace(), {"cuda": None})  # a notebook's stand-in job: no resources
    with pytest.raises(RuntimeError, match=r"the probe job asks for 1 GPU\(s\).*sees no CUDA device.*gpu: 0") as e:
        pipeline.check_gpu_granted(job(1), {"cuda": None})
    # every place the request can come from: the config (a task's entry over the rule's), the Slurm profile, the CLI
    for where in ("resources.probe", "tasks.<t>.resources.probe", "PAPA_SLURM_GPUS=0", "--set-resources probe:gpu=0"):
        assert where in str(e.value), where
    if torch.cuda.is_available():
        return
    code = """
import sys
from types import SimpleNamespace
from papa import pipeline

class Toy(pipeline.Stage):
    @classmethod
    def _from_snakemake(cls, sm):
        return {}

sm = SimpleNamespace(log=[sys.argv[1]], threads=1, params=SimpleNamespace(code="x"), input=[], rule="learn_lambda",
                     resources=SimpleNamespace(gpu=int(sys.argv[2]), mem_mb=1000))
Toy.from_snakemake(sm)
print("ran")
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    for gpu in (0, 1):
        log = tmp_path / f"gpu{gpu}.log"
        out = subprocess.run([sys.executable, "-c", code, str(log), str(gpu)], capture_output=True, text=True,
                             timeout=300, env=env)  # fmt: skip
        if gpu == 0:
            assert out.returncode == 0 and out.stdout.strip() == "ran", out.stderr[-2000:]
        else:
            assert out.returncode != 0 and "ran" not in out.stdout
            assert "the learn_lambda job asks for 1 GPU(s)" in log.read_text(), log.read_text()[-2000:]


@pytest.mark.cuda  # its device branch: make test-cuda runs it with the GPU visible
def test_a_jobs_end_line_names_its_peak_cuda_memory_and_survives_a_cuda_error(monkeypatch):
    """`papa.pipeline._usage`, a job's last log line: CPU time and peak memory always; the peak CUDA memory torch
    allocated once CUDA is in use (not on a machine with a GPU the job never touched); a CUDA error while reading it
    (a device in an error state) leaves the rest of the line, not an exception that would lose the job's end line.
    Its CUDA branch ran on no machine of the test suite (review AP left it untested)."""
    import torch

    from papa import pipeline

    shape = r"CPU \d+\.\d s, peak memory \d+\.\d\d GiB"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a, **k: 3 * 2**30 + 2**28)
    said = pipeline._usage()
    assert re.fullmatch(shape + r", peak CUDA memory 3\.25 GiB", said), said
    assert float(re.search(r"peak memory (\S+) GiB", said).group(1)) > 0.05  # this process imported torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # CUDA there, never used by the job
    assert re.fullmatch(shape, pipeline._usage())

    def broken(*a, **k):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", broken)
    assert re.fullmatch(shape, pipeline._usage())

    # the CPU time is the process's and its children's (a tokenizer's or data loader's workers), the peak memory the
    # larger of the two peaks (mutation testing, the Stage base's third round: either without the children passed)
    import resource
    from types import SimpleNamespace

    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss' unit: bytes on macOS, KiB on Linux
    usage = {
        resource.RUSAGE_SELF: SimpleNamespace(ru_utime=1.25, ru_stime=0.5, ru_maxrss=2**30 // unit),
        resource.RUSAGE_CHILDREN: SimpleNamespace(ru_utime=2.0, ru_stime=0.25, ru_maxrss=3 * 2**30 // unit),
    }
    monkeypatch.setattr(resource, "getrusage", usage.__getitem__)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pipeline._usage() == "CPU 4.0 s, peak memory 3.00 GiB"


def test_a_folder_digest_covers_the_given_files_names_and_bytes(tmp_path):
    """The ``release`` param of a job reading a local model folder (common.smk's folder_digest): one digest of the
    files it reads, by their names in the folder and their bytes, in the order given; other files do not count."""
    import hashlib

    from papa.io import file_digest, folder_digest

    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    files = [folder / "config.json", folder / "sub" / "w.bin"]
    files[0].write_text("{}")
    files[1].write_bytes(b"w")
    expected = "".join(f"{os.path.relpath(f, folder)}\0{file_digest(f)}\n" for f in files)
    digest = folder_digest(folder, [str(f) for f in files])
    assert digest == "sha256:" + hashlib.sha256(expected.encode()).hexdigest()
    assert folder_digest(str(folder), tuple(files)) == digest  # str or Path, list or tuple
    assert folder_digest(folder, []) == "sha256:" + hashlib.sha256().hexdigest()
    assert folder_digest(folder, files[::-1]) != digest
    (folder / "checkpoint-1").mkdir()
    (folder / "checkpoint-1" / "w.bin").write_bytes(b"not read")
    assert folder_digest(folder, files) == digest
    files[1].write_bytes(b"other weights")
    assert folder_digest(folder, files) != digest
    (folder / "sub" / "w.bin").rename(folder / "w.bin")  # same bytes, another name in the folder
    assert folder_digest(folder, [files[0], folder / "w.bin"]) not in (digest, folder_digest(folder, [files[0]]))


def test_process_dirs_of_dead_processes_of_this_host_are_removed_and_no_others(tmp_path, monkeypatch):
    """`process_dir` names a folder by host and pid; `remove_dead_process_dirs` removes those of this host's dead
    processes under its root, and keeps live processes', other hosts', other prefixes' and names that only begin
    like one (a user's ``...-k1lled00.bak``); another user's live process (kill -0: EPERM) is alive."""
    import socket

    from papa.io import process_dir, remove_dead_process_dirs

    host = socket.gethostname()
    mine = process_dir("pre-", tmp_path)
    assert mine.parent == tmp_path and mine.is_dir() and mine.name.startswith(f"pre-{host}-{os.getpid()}-")
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)
    names = [f"pre-{host}-{dead}-k1lled00", f"pre-{host}-{dead}-k1lled00.bak", f"pre-elsewhere-{dead}-0ther000",
             f"other-{host}-{dead}-k1lled00"]  # fmt: skip
    for name in names:
        (tmp_path / name / "sub").mkdir(parents=True)
    assert remove_dead_process_dirs("pre-", tmp_path) == [str(tmp_path / names[0])]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, *names[1:]])
    assert remove_dead_process_dirs("pre-", tmp_path / "absent") == []

    def other_users(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", other_users)
    (tmp_path / names[0]).mkdir()
    assert remove_dead_process_dirs("pre-", tmp_path) == [] and (tmp_path / names[0]).is_dir()


def test_atomic_writes_are_written_by_papa_io_alone():
    """Every file papa writes goes through `papa.io.atomic_path` / `atomic_dir` (the module's docstring): a
    hand-written temporary file renamed into place (a second copy of the writer) missed what the writer gives
    (papa.fingerprint's cache: mkstemp's 0600 mode, 1ea2fbe; a descriptor left open, fdb2123; no stale temporaries
    removed). A function outside papa/io.py that makes a temporary file and renames is one such copy; moving a
    finished file into an `atomic_path` block's temporary (papa.data.downloads) makes none."""
    import ast

    root = Path(__file__).resolve().parents[1]
    makers, renames = {"mkstemp", "mkdtemp", "NamedTemporaryFile"}, {"replace", "rename", "move"}
    copies = []
    for path in sorted([*(root / "papa").rglob("*.py"), *(root / "workflow" / "scripts").glob("*.py")]):
        if path == root / "papa" / "io.py":
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            calls = [n.func for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
            called = {(f.value.id if isinstance(f.value, ast.Name) else None, f.attr) for f in calls}
            if any(a in makers for _, a in called) and any(m in ("os", "shutil") and a in renames for m, a in called):
                copies.append(f"{path.relative_to(root)}:{fn.name}")
    assert copies == []


def test_stale_temporaries_are_this_targets_alone_and_a_link_among_them_goes_without_its_folder(tmp_path):
    """`_remove_stale_temps` removes exactly ``.<name>.papa-XXXXXXXX.tmp`` of the target written: not a name that only
    begins like one (a user's ``...tmp.keep``), not another target's whose name differs where ``name`` has a dot (a
    regex wildcard), and a link named like a temporary goes as a link, the folder it points to kept."""
    linked = tmp_path / "elsewhere"
    linked.mkdir()
    (linked / "keep.txt").write_text("keep")
    (tmp_path / ".a.b.papa-l1nk0000.tmp").symlink_to(linked, target_is_directory=True)
    kept = [".a.b.papa-abcdefgh.tmp.keep", ".aXb.papa-abcdefgh.tmp"]
    for name in kept:
        (tmp_path / name).write_text("not a temporary of a.b")
    io.write_text(tmp_path / "a.b", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "a.b", "elsewhere"])
    assert (linked / "keep.txt").read_text() == "keep" and (tmp_path / "a.b").read_text() == "new"


def test_a_failed_flush_of_a_file_fails_the_write_and_a_folders_is_tolerated(tmp_path, monkeypatch):
    """A file whose data cannot be flushed (an I/O error) must not be renamed into place as finished; a folder that
    cannot be opened or flushed (network filesystems refuse with EINVAL) is left to the filesystem's order."""
    import errno

    real_fsync, real_open = os.fsync, os.open
    target = tmp_path / "out.txt"

    def fsync_fails(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(io.os, "fsync", fsync_fails)
    with pytest.raises(OSError, match="Input/output error"):
        with io.atomic_path(target) as tmp:
            tmp.write_text("rows")
    assert not list(tmp_path.iterdir())  # neither the target nor a temporary
    io._fsync(tmp_path)  # a folder: tolerated
    monkeypatch.setattr(io.os, "fsync", real_fsync)

    def folder_refused(p, flags, *a):
        if os.path.isdir(p):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(p, flags, *a)

    monkeypatch.setattr(io.os, "open", folder_refused)
    io.write_text(target, "rows")
    assert target.read_text() == "rows"


def test_a_folder_holding_a_dangling_link_is_written(tmp_path):
    """`atomic_dir` flushes files, not links (a hub snapshot half downloaded holds links to nothing): following one
    failed the write."""
    target = tmp_path / "snapshot"
    with io.atomic_dir(target) as tmp:
        (tmp / "config.json").write_text("{}")
        (tmp / "part.bin").symlink_to(tmp_path / "nowhere")
    assert (target / "part.bin").is_symlink() and _tree(target) == {"config.json": "{}"}


def test_atomic_writes_give_the_umasks_permissions_even_under_umask_zero(tmp_path):
    """0666 / 0777 less the umask, as ``open`` and ``mkdir`` give: under umask 0 a file is 0666 and a folder 0777
    (under the usual 022 a 0644 or 0755 base reads the same)."""
    old = os.umask(0)
    try:
        io.write_text(tmp_path / "f.txt", "x")
        with io.atomic_dir(tmp_path / "d") as tmp:
            (tmp / "x").write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o666
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o777


def test_an_interrupted_file_write_leaves_no_temporary(tmp_path):
    """Ctrl-C (KeyboardInterrupt) or a job's stop (SystemExit) inside `atomic_path`: BaseExceptions, not Exceptions;
    the temporary goes and the earlier file stays whole."""
    target = tmp_path / "out.txt"
    target.write_text("old")
    for stop in (KeyboardInterrupt, SystemExit):
        with pytest.raises(stop):
            with io.atomic_path(target) as tmp:
                tmp.write_text("half")
                raise stop
        assert [p.name for p in tmp_path.iterdir()] == ["out.txt"] and target.read_text() == "old"


def test_a_spent_quota_is_a_full_disk_and_the_free_space_is_in_megabytes(tmp_path, monkeypatch):
    """A quota spent (EDQUOT, or a library's "Disk quota exceeded") is named as a full disk is, and the free space
    the message gives is the disk's, in MB."""
    import errno

    disk = SimpleNamespace(total=100 << 20, used=93 << 20, free=7 << 20)
    monkeypatch.setattr(io.shutil, "disk_usage", lambda p: disk)
    target = tmp_path / "C.safetensors"
    said = r"no space left writing .*C\.safetensors: the disk of .* has 7 MB free"
    # by its errno (macOS says "Disc quota exceeded") or by a library's text
    for raised in (OSError(errno.EDQUOT, "Disc quota exceeded"), RuntimeError("I/O error: Disk quota exceeded")):
        with pytest.raises(OSError, match=said) as e:
            with io.atomic_path(target):
                raise raised
        assert e.value.errno == errno.ENOSPC and e.value.__cause__ is raised


def test_a_folder_write_replaces_a_link_not_what_it_points_to(tmp_path):
    """A target that is a link (to a folder, or to nothing) becomes the new folder; the folder a link pointed to is
    left as it was."""
    linked = tmp_path / "real"
    linked.mkdir()
    (linked / "old.txt").write_text("old")
    for target, to in ((tmp_path / "model", linked), (tmp_path / "dangling", tmp_path / "nowhere")):
        target.symlink_to(to, target_is_directory=True)
        with io.atomic_dir(target) as tmp:
            (tmp / "new.txt").write_text("new")
        assert not target.is_symlink() and _tree(target) == {"new.txt": "new"}
    assert _tree(linked) == {"old.txt": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "model", "real"]


def test_a_killed_writers_scratch_folder_is_removed_by_the_next(tmp_path):
    """`scratch_dir` removes a scratch folder an earlier writer of the path left (killed: no ``finally`` ran) under
    the name it gives them, and its own when the block ends, however it ends."""
    target = tmp_path / "pkg.whl"
    killed = io.scratch_dir(target, "pip")
    left = killed.__enter__()  # never exited: the writer was killed
    (left / "pkg.whl").write_bytes(b"partial")
    with pytest.raises(RuntimeError):
        with io.scratch_dir(target, "pip") as work:
            assert not left.exists() and work.parent == tmp_path
            raise RuntimeError
    assert not list(tmp_path.iterdir())
    # an older papa's scratch name (`older`: ".<name>.XXXXXXXX", the model assembly's) goes too; names of that form
    # with another count of random characters, or another tag, are no writer's of it and stay (mutation testing:
    # neither was checked)
    for name in (".pkg.whl.ab12CD34", ".pkg.whl.pip-ab12CD34", ".pkg.whl.pip-abc", ".pkg.whl.ab12CD345"):
        (tmp_path / name).mkdir()
    kept = [".pkg.whl.ab12CD345", ".pkg.whl.pip-abc"]
    with io.scratch_dir(target, "pip", older=(".",)) as work:
        assert sorted(p.name for p in tmp_path.iterdir() if p != work) == kept
    assert sorted(p.name for p in tmp_path.iterdir()) == kept


def test_a_model_card_in_capitals_is_no_input(tmp_path):
    """Markdown goes by its suffix in any case (``README.MD``), as the weights' suffixes do (``MODEL.BIN``)."""
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "README.MD").write_text("# card")
    (tmp_path / "MODEL.BIN").write_bytes(b"w")
    assert io.model_folder_files(tmp_path) == [str(tmp_path / "MODEL.BIN"), str(tmp_path / "config.json")]
    assert io.model_folder_files(tmp_path, "tokenizer") == [str(tmp_path / "config.json")]


def test_a_missing_parquet_file_stays_a_missing_file(tmp_path):
    """A path that is not there is a FileNotFoundError, not a corrupt file to delete (`UnreadableFileError`)."""
    with pytest.raises(FileNotFoundError) as e:
        io.read_parquet(tmp_path / "absent.parquet")
    assert not isinstance(e.value, io.UnreadableFileError)


def test_pandas_metadata_that_is_no_json_fails_naming_the_file(tmp_path):
    """pandas' footer metadata cut or garbled into text that is not JSON (a ValueError, not a UnicodeDecodeError)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(pd.DataFrame({"x": [1.0]}), preserve_index=False)
    pq.write_table(table.replace_schema_metadata({b"pandas": b'{"index_columns": ['}), tmp_path / "cut.parquet")
    with pytest.raises(io.UnreadableFileError, match=r"cut\.parquet is not a readable Parquet file \(JSONDecodeError"):
        io.read_parquet(tmp_path / "cut.parquet")


def test_write_parquet_drops_the_index_and_stores_provenance_beside_pandas_metadata(tmp_path):
    """The file holds the frame's columns alone (no index column), pandas' own metadata beside papa's provenance, and
    the provenance's text is the same for the same record whatever its keys' order (a file's bytes, so its digest,
    follow its content); a path in it is stored as its text."""
    import pandas as pd
    import pyarrow.parquet as pq

    df = pd.DataFrame({"x": [1.0, 2.0]}, index=[5, 7])
    io.write_parquet(df, tmp_path / "a.parquet", {"stage": "Toy", "path": Path("/data/x.csv")})
    io.write_parquet(df, tmp_path / "b.parquet", {"path": Path("/data/x.csv"), "stage": "Toy"})
    schema = pq.read_schema(tmp_path / "a.parquet")
    assert schema.names == ["x"] and b"pandas" in schema.metadata
    assert io.read_parquet(tmp_path / "a.parquet").to_dict("list") == {"x": [1.0, 2.0]}
    assert io.read_provenance(tmp_path / "a.parquet") == {"path": "/data/x.csv", "stage": "Toy"}
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    # a data split's description without a provenance (hand-written, say) has none: None, as a file without papa's
    # metadata (mutation testing: a KeyError)
    import pyarrow as pa

    table = pa.table({"x": [1]}).replace_schema_metadata({b"papa.task": b'{"name": "t"}'})
    pq.write_table(table, tmp_path / "split.parquet")
    assert io.read_provenance(tmp_path / "split.parquet") is None


def test_the_split_metadata_key_is_spelt_once_in_papas_code():
    """A data split's description sits under one key of its Parquet metadata, `papa.io.SPLIT_META_KEY` (beside
    `PROVENANCE_KEY`, which papa's code uses by name alone): no other line of papa's code, docstrings aside,
    spells its value, and `papa.data`'s name is that constant. A copy (`read_provenance` had one) would go on
    reading the old key once the constant changed (issue 15: each concept defined once). The test spells the
    keys as literals: they are the file format."""
    import ast

    from papa.data.task import SPLIT_META_KEY
    from papa.fingerprint import _strip_docstrings  # what a code fingerprint leaves out

    assert (io.PROVENANCE_KEY, io.SPLIT_META_KEY) == ("papa", b"papa.task")
    assert SPLIT_META_KEY is io.SPLIT_META_KEY
    root = Path(io.__file__).parent
    spelt = [
        (path.relative_to(root.parent).as_posix(), node.lineno)
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(_strip_docstrings(ast.parse(path.read_text(encoding="utf-8"))))
        if isinstance(node, ast.Constant) and node.value in (b"papa.task", "papa.task")
    ]
    lines = (root / "io.py").read_text(encoding="utf-8").splitlines()
    defined = [("papa/io.py", n) for n, line in enumerate(lines, 1) if line.startswith("SPLIT_META_KEY = ")]
    assert len(defined) == 1 and spelt == defined, spelt


def test_the_environment_records_this_processs_values():
    """`environment`'s values are the ones this process runs with: MKL's setting, torch's thread count, the CPU's
    model name (the value of /proc/cpuinfo's line, not its key) and papa's installed version."""
    from importlib.metadata import version

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(torch.get_num_interop_threads() + 1)  # torch's intra-op threads, not its inter-op ones
    try:
        env = io.environment()
        assert env["threads"] == torch.get_num_interop_threads() + 1
    finally:
        torch.set_num_threads(threads)
    assert env["mkl_cbwr"] == os.environ.get("MKL_CBWR") and env["mkl_cbwr"]  # tests/conftest.py sets it
    assert env["papa"] == version("papa")
    if Path("/proc/cpuinfo").exists():
        names = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                 if ln.startswith("model name")]  # fmt: skip
        assert env["cpu"] == names[0] if names else env["cpu"] is not None


def test_a_digest_is_kept_from_the_size_on_and_a_new_change_time_is_a_new_state(tmp_path, monkeypatch):
    """A file of exactly `DIGEST_CACHE_BYTES` has its digest kept (an entry a digit too long is garbled: hashed
    again); bytes rewritten in place with the size and modification time kept (a copy that keeps times) change its
    change time, a new state: hashed again."""
    import hashlib
    import time

    f, real, kept = _weights_with_a_kept_digest(tmp_path, monkeypatch, 7)
    kept.write_text(real + "0\n")  # a digit too many (a garbled entry): no digest, hashed again
    io._file_digest.cache_clear()
    assert io.file_digest(f) == real and kept.read_text() == real + "\n"
    st = f.stat()
    time.sleep(0.01)
    f.write_bytes(b"WEIGHTS")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_mtime_ns == st.st_mtime_ns and f.stat().st_ctime_ns != st.st_ctime_ns
    assert io.file_digest(f) == "sha256:" + hashlib.sha256(b"WEIGHTS").hexdigest()


def test_a_folders_digest_does_not_follow_the_listing_order(tmp_path, monkeypatch):
    """A folder's digest sorts its files: the order a filesystem lists them in (os.scandir's) does not count."""
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    for name in ("a.json", "b.bin", "sub/c.txt"):
        (folder / name).write_text(name)
    before = io.file_digest(folder)
    real = Path.rglob
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: reversed(sorted(real(self, pattern))))
    assert io.file_digest(folder) == before


def test_small_helpers_at_their_edges():
    """format_seconds' first minute line, check_seed's last seed, json_value's sets in order."""
    assert [io.format_seconds(x) for x in (119.6, 120)] == ["2 min", "2 min"]
    assert io.format_seconds(119) == "119 s"
    assert io.check_seed(2**32 - 1) == 2**32 - 1
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        io.check_seed(2**32)
    assert io.json_value(set("hgfedcba")) == list("abcdefgh")


def test_a_signal_ignored_since_the_start_stays_ignored():
    """Under ``nohup`` SIGHUP is ignored, and a job should outlive its terminal: `stop_on_signals` leaves it be and
    installs the stop for the others."""
    old = {s: signal.getsignal(s) for s in (signal.SIGHUP, signal.SIGTERM)}
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        replaced = io.stop_on_signals()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN and signal.SIGHUP not in replaced
        assert signal.getsignal(signal.SIGTERM) is io.exit_on_signal and replaced[signal.SIGTERM] is old[signal.SIGTERM]
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_a_jobs_console_tag_and_its_kept_logs_names(tmp_path):
    """The tag each console line of a workflow job carries is its log's path under the last ``logs/`` folder (without
    ``.log``), a log elsewhere its name alone, a log named ``logs.log`` its name (no empty tag); an attempt's kept log
    takes the first free ``.unfinished-<k>`` from 1, past a dangling link (a name taken all the same)."""
    from papa import pipeline

    assert pipeline.job_tag("results/logs/probe/m/logs/t.log") == "t"
    assert pipeline.job_tag("results/logs/probe/m/t.log") == "probe/m/t"
    assert pipeline.job_tag("elsewhere/run/job.log") == "job"
    assert pipeline.job_tag("results/logs.log") == "logs"
    log = tmp_path / "job.log"
    assert pipeline.unfinished_log_path(str(log)) == f"{log}.unfinished-1"
    Path(f"{log}.unfinished-1").write_text("")
    Path(f"{log}.unfinished-2").symlink_to(tmp_path / "gone")
    assert pipeline.unfinished_log_path(str(log)) == f"{log}.unfinished-3"


def test_real_number_takes_one_real_number_of_any_type_and_nothing_else():
    """`real_number` (the MLM's mask share, the pattern thresholds): each kind of real number its docstring names as
    its float, and None for what is no real number, a 0-d bool tensor among them (mutation testing: no test called
    it directly; a bool tensor was read as 1.0)."""
    from decimal import Decimal
    from fractions import Fraction

    import numpy as np
    import torch

    numbers = ((3, 3.0), (0.25, 0.25), (np.float32(0.5), 0.5), (np.int64(2), 2.0), (np.array(0.75), 0.75),
               (torch.tensor(0.125), 0.125), (torch.tensor(4), 4.0), (Fraction(1, 4), 0.25), (Decimal("0.5"), 0.5),
               (np.array(0.5, dtype=object), 0.5))  # fmt: skip
    for value, expected in numbers:
        got = io.real_number(value)
        assert type(got) is float and got == expected, value
    for value in (True, np.bool_(False), "0.5", b"1", None, [0.5], (0.5,), np.array([0.5]), torch.tensor([0.5]),
                  1 + 0j, np.complex128(1), np.array(1 + 0j), torch.tensor(1 + 0j), torch.tensor(True),
                  np.array(True), np.array("0.5"), np.array("0.5", dtype=object), object()):  # fmt: skip
        assert io.real_number(value) is None, value


def test_seed_everything_asks_cublas_and_mkl_for_reproducible_kernels_unless_told_otherwise(monkeypatch):
    """`seed_everything` sets the variables cuBLAS and MKL read at their first use (the slow thread-count test shows
    MKL's effect in fresh processes; mutation testing: the fast tier did not see the setting dropped), each where
    it is unset, a value of the user's kept; ``deterministic=False`` sets neither."""
    for name in ("MKL_CBWR", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    io.seed_everything(0, deterministic=False)
    assert "MKL_CBWR" not in os.environ and "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    io.seed_everything(0)
    assert os.environ["MKL_CBWR"] == "AUTO,STRICT" and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    io.seed_everything(0)
    assert os.environ["MKL_CBWR"] == "COMPATIBLE" and os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_seed_everything_seeds_each_global_generator_by_its_seed():
    """The seed reaches python's, numpy's and torch's global generators (those third-party code draws from: a
    model head's initialisation, dropout, a collator's masking): the same seed, the same draws from each; another
    seed, other draws (papa's own draws take generators of their own, seeded explicitly)."""
    import random

    import numpy as np
    import torch

    def draws(seed):
        io.seed_everything(seed, deterministic=False)
        return random.random(), float(np.random.rand()), float(torch.rand(()))

    one, again, other = draws(1), draws(1), draws(2)
    assert one == again
    assert all(a != b for a, b in zip(one, other)), (one, other)
