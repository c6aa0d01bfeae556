"""Which Snakemake records vouch for a results folder.

Snakemake decides what to rerun from its records in the working directory's ``.snakemake/`` (each output's
params, code, input set and software environment when it was written), kept by the output's path as written. An
output it has no record of, it takes as up to date: after ``.snakemake/`` is deleted (a common way to clear a
stale lock), for a results folder copied in from another machine, for one absolute ``results:`` folder that two
checkouts share, or for the same folder written another way (``./results``, ``results/``, the absolute path), a
file whose settings or papa code changed since it was written is not rerun (``snakemake -n`` says only "N jobs
have missing provenance/metadata").

The workflow therefore ties its results folder to the records that made it: the first run that runs jobs
writes a marker, ``<results>/.papa-records.json``, naming an id kept in ``.snakemake/papa-records-id`` and the
folder's path as the config wrote it (`claim_results`, from the Snakefile's ``onstart``, which Snakemake calls
only for a run with jobs to run and without ``--no-hooks``); every later start of Snakemake in the main process
(a run, ``-n``, ``--lint``, ``--unlock``, ``--report``, ...) checks that they still agree (`check_results`) and
otherwise stops before any job, saying what to do: another results folder (or the spelling the records know), or
removing the marker to take the files as they are (each keeps its settings and code fingerprint in its own
metadata, `papa.io.read_provenance`).

A results folder written before the marker existed is claimed by its next run that runs jobs, as it is. Not
caught: records emptied in place (``.snakemake/metadata`` deleted, ``--drop-metadata``) and a working directory
copied with its ``.snakemake/`` (the copy shares the id).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import errno
import functools
import json
import os
import re
import tempfile
import uuid
from pathlib import Path

from .fingerprint import DIGITS as FINGERPRINT_DIGITS
from .io import _temp_name, current_umask

#: The marker in a results folder: the id of the Snakemake records that vouch for its files, and where they were.
MARKER = ".papa-records.json"
#: The file in a working directory's ``.snakemake/`` holding the id of its records.
RECORDS_ID = "papa-records-id"


class ForeignResultsError(RuntimeError):
    """A results folder made under other Snakemake records than this working directory's."""


#: What to do about an unreadable id file and an unreadable marker (`_read_json`'s ``remedy``).
_ID_REMEDY = f"remove it; the results folders its id marked then stop the next start, until their {MARKER} goes too"
_MARKER_REMEDY = "unless another Snakemake is just starting on this folder, remove it (the next run writes it anew)"


def _read_json(path: Path, remedy: str) -> dict | None:
    """The JSON object in ``path`` (None where there is no such file), or a `ForeignResultsError` saying what to do
    (``remedy``, unless it is a matter of read access)."""
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except PermissionError as err:
        raise ForeignResultsError(f"{path} cannot be read ({err}): ask its owner for read access") from err
    except (OSError, ValueError) as err:
        raise ForeignResultsError(f"{path} cannot be read ({err}); {remedy}") from err
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        raise ForeignResultsError(f"{path} is not a papa records file (no 'id'); {remedy}")
    return value


def _create_exclusive(path: Path, value: dict) -> None:
    """Write ``value`` as JSON to ``path`` complete or not at all, unless ``path`` exists (then nothing): written to
    a temporary file and linked into place, which fails where another process got there first. On a file system
    without hard links, created exclusively and written in place (a write cut short reads as unreadable, and the
    error says to remove it)."""
    text = json.dumps(value, indent=1) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(**_temp_name(path))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~current_umask())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links here (some FUSE and object-store mounts)
            with contextlib.suppress(FileExistsError):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                with os.fdopen(fd, "w") as f:
                    f.write(text)
    finally:
        os.unlink(tmp)


def records_id(records: str | Path = ".snakemake", *, create: bool = False) -> str | None:
    """The id of the Snakemake records in ``records`` (a working directory's ``.snakemake/``): None where it has
    none yet, unless ``create`` (a new random id is then written, once, whoever asks at the same time)."""
    path = Path(records) / RECORDS_ID
    found = _read_json(path, _ID_REMEDY)
    if found is None and create:
        _create_exclusive(path, {"id": uuid.uuid4().hex})
        found = _read_json(path, _ID_REMEDY)
    return found["id"] if found else None


def _workdir(records: str | Path) -> str:
    """The working directory of the records folder ``records`` (its parent, not where a linked one points)."""
    return str(Path(records).absolute().parent.resolve())


def listed(items, n: int = 3) -> str:
    """The first ``n`` of ``items``, comma-separated, with ``...`` after them where there are more (messages)."""
    items = list(items)
    return ", ".join(map(str, items[:n])) + (", ..." if len(items) > n else "")


def spelling(path: str) -> str:
    """``path`` written one way (the config check writes ``results:`` so, `papa.checks.normalise_results`): repeated
    '/' as one, no '.' component, no trailing '/'; '..' kept (through a linked folder it is not the folder the text
    before it names)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    root = "/" if path.startswith("/") else ""
    return root + "/".join(parts) if parts else root or "."


def check_results(results: str | Path, records: str | Path = ".snakemake") -> None:
    """Raise `ForeignResultsError` where the results folder ``results`` carries the marker of other Snakemake
    records than those in ``records`` (deleted and made anew, or another working directory's), or that these
    records know under another spelling of its path (Snakemake keys them by the path as written: ``results`` and
    ``./results`` are two folders to it). Nothing to check where the folder has no marker (new, or written before
    the marker existed)."""
    given, results = os.fspath(results), Path(results)
    marker = _read_json(results / MARKER, _MARKER_REMEDY)
    if marker is None:
        return
    ours = records_id(records)
    if marker["id"] == ours:
        known = marker.get("path", given)  # a marker written without "path": any spelling
        if spelling(known) in _forgotten(records):
            raise ForeignResultsError(
                f"results folder {given!r} was removed by make clean (python -m papa.records forget), which dropped "
                f"the Snakemake records of its files, and it is back with its files (the target of a linked folder, "
                f"or a folder moved aside and back): Snakemake would take every one as up to date, whatever changed. "
                f"Remove it to run afresh (rm -rf {given}/), or take the files as they are by removing the marker: "
                f"rm {results / MARKER}"
            )
        if known != given and spelling(known) == given:
            raise ForeignResultsError(
                f"results folder {given!r} was run as {known!r}, a spelling papa now writes as {given!r} (the "
                f"config check's papa.checks.normalise_results). Snakemake keyed its records of these files by the "
                f"old paths, so under the new ones it has none and would take every file as up to date, whatever "
                f"changed. Take the files as they are by removing the marker (rm {results / MARKER}), or start "
                f"afresh (make clean CONFIG=<this config>, then run)"
            )
        if known != given:
            raise ForeignResultsError(
                f"results folder {given!r} is the folder this working directory's Snakemake "
                f"records know as {known!r}. Snakemake keys its records by the path as written, so under this "
                f"spelling it has none and would take every file as up to date, whatever changed. Write `results: "
                f"{known}` in the config, or remove the marker to take the files as they are: rm {results / MARKER}"
            )
        return
    here = _workdir(records)
    made = marker.get("workdir", "?")
    if made != here:
        why = f"the Snakemake records of another working directory, {made}"
    elif ours is None:
        why = f"this working directory's Snakemake records, since deleted (no {Path(records) / RECORDS_ID})"
    else:
        why = f"this working directory's Snakemake records, since made anew (id {marker['id']}, now {ours})"
    raise ForeignResultsError(
        f"results folder {given!r} was made under {why}. Snakemake reruns a job whose "
        f"settings or papa code changed as its records tell; an output it has no record of it takes as up to date, "
        f"even one written with other settings or code. Either point this working directory at a results folder of "
        f"its own (the config's `results:` key), or take the files as they are (each keeps its settings and code "
        f"fingerprint in its own metadata: papa.io.read_provenance) by removing the marker: rm {results / MARKER}"
    )


def claim_results(results: str | Path, records: str | Path = ".snakemake") -> None:
    """Tie the results folder ``results`` to the Snakemake records in ``records`` (created where missing):
    write its marker where it has none, then `check_results` (another process may have written one first)."""
    ours = records_id(records, create=True)
    marker = {"id": ours, "workdir": _workdir(records), "path": os.fspath(results)}
    fresh = not (Path(results) / MARKER).exists()
    try:
        _create_exclusive(Path(results) / MARKER, marker)
    except OSError as e:  # the first file a run writes there: a folder it cannot write is named, not a temporary
        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC):
            raise
        raise OSError(e.errno, f"the results folder {os.fspath(results)!r} cannot be written ({os.strerror(e.errno)}): "
                      f"the workflow writes every result there; make it writable, or set results: to a folder "
                      f"that is") from e  # fmt: skip
    if fresh:  # made anew after make clean forgot it: its files are this run's, with records
        with _lists_locked(records):
            _write_forgotten(records, [p for p in _forgotten(records) if p != spelling(os.fspath(results))])
    check_results(results, records)


#: The folder in a working directory's ``.snakemake/`` holding a lock file per results folder a run of it is
#: writing (`hold_results`).
RUNNING = "papa-running"
_held: dict[str, object] = {}  # the open lock files of this process's runs, held until it exits


def _running_file(results, records) -> Path:
    import hashlib

    key = hashlib.sha256(spelling(os.fspath(results)).rstrip("/").encode()).hexdigest()[:16]
    return Path(records) / RUNNING / f"{key}.lock"


def hold_results(results: str | Path, records: str | Path = ".snakemake") -> None:
    """Hold this process's lock on the results folder ``results`` for as long as it runs (the Snakefile's
    ``onstart``: a run with jobs to run), or raise `ForeignResultsError` naming the process that holds it. Snakemake's
    own lock does not hold a second run off: any Snakemake that ends in the working directory deletes every lock
    file in ``.snakemake/locks``, another run's too (Snakemake 9's ``_delete_locks``), and a second run of the same
    folder then deletes the outputs of the jobs the first is running. This lock is the operating system's
    (``flock`` on a file in ``.snakemake/papa-running/``): released when the process ends, however it ends."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX: Snakemake's lock alone, as before
        return
    key = spelling(os.fspath(results)).rstrip("/")
    path = _running_file(results, records)
    if str(path.resolve()) in _held:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(path, "a+")  # noqa: SIM115 - held open until the process exits
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        who = lock.read().strip() or "a process"
        lock.close()
        raise ForeignResultsError(
            f"another Snakemake is running on results folder {key!r} ({who}): a second run would delete the outputs "
            f"of the jobs it is running. Wait for it to end (or stop it), then run again"
        ) from None
    except OSError:  # a file system without locks (some network mounts): Snakemake's lock alone, as before
        lock.close()
        return
    import socket

    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    lock.flush()
    _held[str(path.resolve())] = lock


def running_on(results: str | Path, records: str | Path = ".snakemake") -> str | None:
    """Who holds `hold_results`'s lock on ``results`` (``pid N on HOST``: a run writing it now), or None."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return None
    path = _running_file(results, records)
    if not path.exists():
        return None
    if str(path.resolve()) in _held:
        return "this process"
    with open(path) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return lock.read().strip() or "a process"
        except OSError:
            return None
        fcntl.flock(lock, fcntl.LOCK_UN)
    return None


def not_removable(results: str | Path, records: str | Path = ".snakemake") -> str | None:
    """Why ``make clean`` in this working directory must leave the results folder ``results`` (None: it may remove
    it): a run is writing it (`running_on`), it holds what papa does not write (`foreign_entries`: make clean removes
    the folder whole; a linked folder loses its link alone), or its marker names another working directory's records
    (the workflow here refuses the folder as not its own: another checkout's finished run)."""
    if os.path.lexists(results) and not os.path.isdir(results):  # make clean would remove a file of the user's
        return f"{spelling(os.fspath(results))} is no folder (a file or a link to one): check the config's results:"
    who = running_on(results, records)
    if who is not None:
        return f"a Snakemake is running on {spelling(os.fspath(results))}/ ({who}): stop it first"
    foreign = [] if os.path.islink(spelling(os.fspath(results))) else foreign_entries(results)  # a link: kept files
    if foreign:  # `results: myexp` over a folder of the user's with a logs/ in it: everything in it went
        return (f"{spelling(os.fspath(results))}/ holds what papa does not write ({listed(foreign, 4)}), which "
                f"make clean would remove with it: move that out of the folder first (or remove the folder by "
                f"hand)")  # fmt: skip
    try:
        marker = json.loads((Path(results) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if isinstance(marker, dict) and marker.get("id") not in (None, records_id(records)):
        made = marker.get("workdir", "?")
        return (f"{spelling(os.fspath(results))}/ holds the results of the Snakemake records of {made}, not of this "
                f"working directory: run make clean there (or remove the folder by hand)")  # fmt: skip
    return None


#: The Snakemake report `make report` writes in a results folder, and where a run that changes the folder's results
#: sets it aside (`set_aside_report`).
REPORT = "report.html"
OUTDATED_REPORT = "report-outdated.html"
#: What papa writes at the top of a results folder: the rules' folders (a test holds them to the rules' outputs),
#: the records' marker, the reports. `foreign_entries` names anything else, which make clean must not remove.
RESULTS_ENTRIES = frozenset({MARKER, REPORT, OUTDATED_REPORT, "benchmarks", "built", "constants", "data", "lambda",
                             "logs", "mlm", "patterns", "plots", "probe", "tables", "tokens"})  # fmt: skip


def foreign_entries(results: str | Path) -> list[str]:
    """The entries at the top of the folder ``results`` that papa does not write (`RESULTS_ENTRIES`), sorted; []
    where the folder is not there. Hidden names are left out: papa's atomic writes' temporaries
    (``.<name>.papa-XXXXXXXX.tmp``) and what file systems and desktops put anywhere (``.nfs*``, ``.DS_Store``,
    ``.ipynb_checkpoints``)."""
    try:
        names = os.listdir(results)
    except OSError:
        return []
    return sorted(n for n in names if n not in RESULTS_ENTRIES and not n.startswith("."))


def set_aside_report(results: str | Path) -> Path | None:
    """Move ``results``' `REPORT` to `OUTDATED_REPORT` (over an older one): a run that runs jobs in the folder (the
    Snakefile's ``onstart``) changes the results it shows, and a report left in place passed for the new
    results'. Returns the new path, or None where the folder holds no report."""
    report = Path(results) / REPORT
    if not report.is_file():
        return None
    aside = report.with_name(OUTDATED_REPORT)
    os.replace(report, aside)
    return aside


def remove_files(paths, under: str | Path, log: str | Path | None = None) -> list[str]:
    """Remove the files ``paths`` (each inside the folder ``under``: another is refused, nothing removed) and the
    folders they leave empty, up to ``under``; returns those removed (`make prune`'s), also listed in the file
    ``log`` when given (which says so when nothing was: an empty log read as a prune that did not finish)."""
    # inside by their names (a subfolder linked to another disk, results/probe -> /scratch/probe, is inside)
    top = Path(os.path.abspath(under))
    paths = [Path(p) for p in paths]
    outside = [str(p) for p in paths if top not in Path(os.path.abspath(p)).parents]
    if outside:
        raise ValueError(f"not inside {under}: {', '.join(outside)}")
    removed = []
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(str(p))
        parent = Path(os.path.abspath(p)).parent
        while parent != top and parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    if log is not None:
        from .io import write_text

        write_text(log, "".join(f"removed {f}\n" for f in removed) or "removed nothing: no file to remove\n")
    return removed


def _record_key(relative: Path) -> str | None:
    """The output path a Snakemake record file is about (``.snakemake/incomplete/``, ``metadata/``: its name is the
    path, urlsafe-base64 encoded; a name too long for the file system is split into folders whose names start with
    '@'), None where the name is no such encoding."""
    import base64
    import binascii

    parts = list(relative.parts)
    if any(not p.startswith("@") for p in parts[:-1]):
        return None
    b64 = "".join(p[1:] for p in parts[:-1]) + parts[-1]
    try:
        return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def _record_files(records, kind: str):
    """``(file, output path)`` of each of Snakemake's record files of ``kind`` (``incomplete``, ``metadata``) in
    ``records``, the name decoded (`_record_key`); files whose name is no such encoding are skipped."""
    root = Path(records) / kind
    for dirpath, _, files in os.walk(root):  # nothing where there is no such folder
        for name in files:
            key = _record_key(Path(dirpath, name).relative_to(root))
            if key is not None:
                yield Path(dirpath, name), key


#: The file in a working directory's ``.snakemake/`` listing the outputs its failed runs lost (`note_lost`).
LOST = "papa-lost.json"


def _lost_file(records) -> Path:
    return Path(records) / LOST


def _read_paths(path: Path, what: str, remedy: str) -> list[str]:
    """The ``paths`` a list file of papa's in ``.snakemake/`` holds (`LOST`, `FORGOTTEN`; none where it is absent);
    ``what`` it lists and the ``remedy`` go into the error for an unreadable one."""
    try:
        listed = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as err:
        raise ForeignResultsError(
            f"{path} cannot be read ({err}): it lists {what}; fix its access, or {remedy}"
        ) from err
    paths = listed.get("paths") if isinstance(listed, dict) else None
    return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def _write_paths(path: Path, paths) -> None:
    """Write ``paths`` to the list file ``path`` (sorted, each once), atomically; no paths: no file."""
    from .io import write_text

    if not paths:
        path.unlink(missing_ok=True)
        return
    write_text(path, json.dumps({"paths": sorted(set(paths))}, indent=1))


def _listed_lost(records) -> list[str]:
    return _read_paths(_lost_file(records), "the outputs failed jobs lost, to be made again",
                       "remove it and name those files with --forcerun")  # fmt: skip


def _write_lost(records, paths) -> None:
    _write_paths(_lost_file(records), paths)


@contextlib.contextmanager
def _lists_locked(records):
    """Hold an exclusive lock on ``papa-lists.lock`` in ``records`` while a list file of papa's there (`LOST`,
    `FORGOTTEN`) is read and written: two Snakemakes ending at once in one working directory (two configs' runs), or
    a ``make clean`` beside a run, would otherwise each write the list it read, without the other's change (and
    `papa.io.atomic_path` takes another writer's temporary file for a killed one's)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX: unlocked, as before
        yield
        return
    with open(Path(records) / "papa-lists.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            locked = True
        except OSError:  # a file system without locks (some network mounts): unlocked, as `hold_results` goes on
            locked = False
        try:
            yield
        finally:
            if locked:
                fcntl.flock(lock, fcntl.LOCK_UN)


def note_lost(paths, records: str | Path = ".snakemake") -> None:
    """Keep the outputs of the jobs a failed run did not finish that are not on disk (``paths``: the Snakefile's
    ``onerror`` passes them from Snakemake's DAG) with those of earlier failed runs still missing: `lost_outputs`
    reads them. Snakemake deletes a job's old outputs when it starts the job, so a job that had to run again and
    failed leaves its outputs missing while the results made from them stand."""
    if Path(records).is_dir():
        paths = list(map(os.fspath, paths))
        with _lists_locked(records):
            _write_lost(records, [p for p in [*_listed_lost(records), *paths] if not os.path.exists(p)])


def forget_found(records: str | Path = ".snakemake", results: str | Path | None = None, makes=None) -> None:
    """Drop the outputs `note_lost` kept that are on disk again, and, of those under ``results`` (the folder of the
    config that just ran, from the Snakefile's ``onsuccess``), those ``makes`` (a predicate on a path: whether that
    config makes it) refuses: a successful run forgets every file of an earlier config of its folder that it does
    not make. The outputs of other results folders stay listed (another config's lost files: its own next run makes
    them again)."""
    prefix = None if results is None else spelling(os.fspath(results)).rstrip("/") + "/"
    if _lost_file(records).exists():
        with _lists_locked(records):
            kept = [p for p in _listed_lost(records) if not os.path.exists(p)
                    and (prefix is None or makes is None or not p.startswith(prefix) or makes(p))]  # fmt: skip
            _write_lost(records, kept)


#: The file in a working directory's ``.snakemake/`` listing the results folders whose records `forget_results` dropped.
FORGOTTEN = "papa-forgotten.json"


def _forgotten(records) -> list[str]:
    return _read_paths(Path(records) / FORGOTTEN, "the results folders make clean removed, whose files came back "
                       "without records", "remove it")  # fmt: skip


def _write_forgotten(records, paths) -> None:
    _write_paths(Path(records) / FORGOTTEN, paths)


def forget_results(results: str | Path, records: str | Path = ".snakemake") -> int:
    """Drop what the records in ``records`` keep about the outputs under ``results`` (a results folder removed by
    hand, as ``make clean`` does): `note_lost`'s list, the incomplete markers of killed jobs, Snakemake's metadata
    of each output, and the locks a killed run of it left (those of a run whose outputs all lie there: the next run
    would stop with "Directory cannot be locked"). The records of every other results folder stay, so their files
    keep their records and their markers (`check_results`) stay valid; deleting ``.snakemake/`` instead orphans
    every results folder made under it. The folder is noted as forgotten: should it come back with its marker (the
    target of a linked folder, a folder moved aside), `check_results` refuses it until it is made anew
    (`claim_results`) or its marker removed. Returns the number of records dropped."""
    folder = spelling(os.fspath(results)).rstrip("/")
    prefix = folder + "/"
    if not Path(records).is_dir():
        return 0
    who = running_on(folder, records)
    if who is not None:
        raise ForeignResultsError(f"a Snakemake is running on {folder}/ ({who}): its records are not dropped while "
                                  f"it writes there; stop it first")  # fmt: skip
    with _lists_locked(records):
        _write_forgotten(records, [*_forgotten(records), folder])
    dropped = 0
    locks = Path(records) / "locks"  # Snakemake's: N.input.lock and N.output.lock, a path per line
    for lock in sorted(locks.glob("*.output.lock")) if locks.is_dir() else []:
        paths = [spelling(line.strip()) for line in lock.read_text().splitlines() if line.strip()]
        if paths and all(p.startswith(prefix) for p in paths):
            for stale in (lock, locks / lock.name.replace(".output.", ".input.")):
                dropped += stale.exists()
                stale.unlink(missing_ok=True)
    if _lost_file(records).exists():
        with _lists_locked(records):
            listed = _listed_lost(records)
            kept = [p for p in listed if not p.startswith(prefix)]
            dropped += len(listed) - len(kept)
            _write_lost(records, kept)
    for kind in ("incomplete", "metadata"):
        for record, key in _record_files(records, kind):
            if key.startswith(prefix) or key == folder:
                record.unlink()
                dropped += 1
    return dropped


def lost_outputs(results: str | Path, records: str | Path = ".snakemake") -> list[str]:
    """Outputs under ``results`` that a failed or killed run lost: those of a job it started and did not finish that
    are not on disk, while the results made from their earlier versions still stand. Snakemake deletes a job's old
    outputs when it starts the job (one that has to run again after a changed setting, papa code or input) and, as
    the outputs made from them still stand, its next start says "Nothing to be done" (it does not regenerate a
    missing intermediate file whose readers are up to date: snakemake/snakemake#1978): the tables would keep the
    results of the old settings. The workflow asks for these files again (rule ``all``), so the failed job and every
    job after it reruns. They are the outputs `note_lost` kept for a run that failed (a job's error, its time or
    memory limit) and those of jobs whose Snakemake was killed mid-job (an incomplete marker left in
    ``.snakemake/incomplete``). A file deleted by hand is not listed: Snakemake regenerates it only when named."""
    prefix = spelling(os.fspath(results)).rstrip("/") + "/"
    found = set(_listed_lost(records)) | {key for _, key in _record_files(records, "incomplete")}
    return sorted(f for f in found if f.startswith(prefix) and not os.path.exists(f))


#: A code fingerprint (`papa.fingerprint.code_fingerprint`: `papa.fingerprint.DIGITS` hex digits) among a Snakemake
#: record's params (their reprs, as the record keeps them).
_FINGERPRINT_PARAM = re.compile(rf"'([0-9a-f]{{{FINGERPRINT_DIGITS}}})'")


def written_by_other_code(
    results: str | Path, current, records: str | Path = ".snakemake", makes=None
) -> dict[str, int]:
    """Per rule, how many outputs under ``results`` on disk were written by papa code that has changed since: their
    Snakemake record holds a code fingerprint (the rule's ``code`` param) and none of ``current``, the fingerprints
    the workflow computes now. Snakemake reruns their jobs ("Params have changed since last execution", naming two
    hashes and not why) and every job after them, whether or not the change moves a number: an upgrade of papa
    (``git pull``) is told apart from an edited setting. ``makes``: whether the config makes an output (the others,
    an earlier config's, rerun nothing: a dropped dataset's files, whose fingerprint is not computed now). Records
    that cannot be read are left out."""
    from collections import Counter

    prefix = spelling(os.fspath(results)).rstrip("/") + "/"
    current, counts = set(current), Counter()
    for file, key in _record_files(records, "metadata"):
        if not key.startswith(prefix) or not os.path.exists(key) or (makes is not None and not makes(key)):
            continue
        try:
            record = json.loads(file.read_text())
            codes = {m.group(1) for p in record.get("params") or () if (m := _FINGERPRINT_PARAM.fullmatch(str(p)))}
        except (OSError, ValueError, AttributeError):
            continue
        if codes and not codes & current:
            counts[record.get("rule", "?")] += 1
    return dict(sorted(counts.items()))


def marked_incomplete(results: str | Path, records: str | Path = ".snakemake") -> list[str]:
    """Outputs under ``results`` that Snakemake keeps marked incomplete (their job's Snakemake was killed mid-job:
    a Ctrl-C, a lost login session). One on disk (papa's jobs write atomically: written as the job ended) stops
    its next run (``IncompleteFilesException``) unless run with ``--rerun-incomplete``, which the Slurm profile
    sets; a missing one is made again (`lost_outputs`)."""
    prefix = spelling(os.fspath(results)).rstrip("/") + "/"
    return sorted(key for _, key in _record_files(records, "incomplete") if key.startswith(prefix))


def lost_targets(results: str | Path, makes, warn, records: str | Path = ".snakemake") -> list[str]:
    """The `lost_outputs` under ``results`` the config makes (``makes(path)``, `papa.layout.of_config`), which the
    workflow asks for again (rule ``all``), so the job that lost them and every job after it reruns (Snakemake would
    say "Nothing to be done" and the tables keep the old settings' results). Each lost output is said (``warn``),
    one the config no longer makes (a model, dataset, task or run it dropped) as only reported; so is each output on
    disk that Snakemake keeps marked incomplete (`marked_incomplete`: a job whose Snakemake was stopped as it ended,
    a local Ctrl-C), on which a run without ``--rerun-incomplete`` (the Slurm profile sets it) stops at once
    (``IncompleteFilesException``), or, while another process runs on ``results`` (`running_on`), a job of that run
    writing it now, said as such (not stopped: no ``--rerun-incomplete`` advice); a missing one is made again either
    way."""
    lost = lost_outputs(results, records)
    # a run writing the folder now (a `-n` beside it): its running jobs' outputs are marked, not stopped
    writer = running_on(results, records)
    writer = None if writer == "this process" else writer
    folder = spelling(os.fspath(results)).rstrip("/")
    for f in marked_incomplete(results, records):
        if os.path.exists(f) and makes(f):
            if writer is not None:
                warn(f"{f} is marked incomplete by the Snakemake running on {folder}/ ({writer}): its job is "
                     f"writing it, and it is complete when that job ends")  # fmt: skip
                continue
            warn(f"{f} was written, but its job's Snakemake was stopped before it recorded the job as "
                 f"finished (a Ctrl-C, a lost session): run with --rerun-incomplete (--ri) to make it again, "
                 f"and every result made from it")  # fmt: skip
    for f in lost:
        if makes(f):
            warn(f"{f} is missing: its job did not finish (it failed, was killed, or is running now); it "
                 f"is made again, and every result made from it reruns")  # fmt: skip
        else:
            warn(f"{f} is missing (its job did not finish), and this config does not make it: the results "
                 f"made from it are of an earlier config")  # fmt: skip
    return [f for f in lost if makes(f)]


def stale_files(results: str | Path, made) -> list[str]:
    """The probe and lambda files (``*.parquet``, not a hidden temporary) under ``results`` that are not among
    ``made`` (`papa.layout.grid_files`; paths compared normalized): those of an earlier config's runs (a dropped seed,
    fraction_dynamic, constants spec, head order, model or task), sorted. The tables never read them; a read of the
    whole folder (``pd.read_parquet(f"{results}/probe", partitioning=None)``) would. Rule prune removes them
    (`remove_files`)."""
    from .layout import RESULTS

    made = {os.path.normpath(f) for f in made}
    folders = (RESULTS[stage].split("/")[0] for stage in ("probe", "lambda"))  # probe/, lambda/
    found = (p for d in folders for p in Path(results, d).rglob("*.parquet") if not p.name.startswith("."))
    return sorted(str(p) for p in found if os.path.normpath(p) not in made)


def config_arguments(given) -> str:
    """Snakemake ``--config`` arguments, shell-quoted, that give the settings ``given`` again (a run's parsed
    ``--config`` entries, ``workflow.config_settings.config``): ``key=value`` each, a mapping or list in YAML's flow
    style with its values unquoted where YAML's base loader reads them back as the same text (Snakemake reads the
    values inside ``{...}`` or ``[...]`` as text, papa then as a config file's, `papa.checks.read_command_line`: ``[0,
    1]``, not ``['0', '1']``), a null as ``key=``."""
    import shlex

    import yaml

    class TextDumper(yaml.emitter.Emitter, yaml.serializer.Serializer, yaml.representer.SafeRepresenter,
                     yaml.resolver.BaseResolver):  # fmt: skip
        """Every value text, written plain where that reads back as the text (no tag resolves it to another)."""

        def __init__(self, stream, **kwds):
            yaml.emitter.Emitter.__init__(self, stream, width=kwds.get("width"))
            yaml.serializer.Serializer.__init__(self)
            yaml.representer.SafeRepresenter.__init__(self, default_flow_style=True, sort_keys=False)
            yaml.resolver.BaseResolver.__init__(self)

    def as_text(value):
        if isinstance(value, dict):
            return {str(k): as_text(v) for k, v in value.items()}
        if isinstance(value, list):
            return [as_text(v) for v in value]
        return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    def text(value) -> str:
        if value is None:
            return ""
        if isinstance(value, dict | list):
            return yaml.dump(as_text(value), Dumper=TextDumper, width=float("inf")).strip()
        return str(value)

    return " ".join(shlex.quote(f"{key}={text(value)}") for key, value in (given or {}).items())


def stale_notice(results: str | Path, stale, configfiles, given=None) -> str | None:
    """What a start says of `stale_files` (``stale``, sorted) under ``results``: how many, the first, and the
    command that removes them: ``make prune`` with the run's config files (``configfiles``), or, where the run was
    given ``--config`` settings (``given``, as in `config_arguments`), which make prune does not take (it would
    prune the files' config instead, and keep these), ``snakemake prune`` with them; None when there are none."""
    if not stale:
        return None
    import shlex

    if given:
        files = " ".join(shlex.quote(str(f)) for f in configfiles)
        command = f"snakemake prune --cores 1 --configfile {files} --config {config_arguments(given)}"
    else:
        command = f'make prune CONFIG="{" ".join(map(str, configfiles))}"'
    return (f"{results} holds {len(stale)} probe or lambda file(s) of runs this config does not make (an earlier "
            f"config's: a dropped seed, fraction_dynamic, constants spec, head order, model or task), e.g. "
            f"{stale[0]}: the tables leave them out, but a read of the whole folder (pd.read_parquet"
            f"(\"{results}/probe\", partitioning=None)) takes them in; {command} removes them")  # fmt: skip


def upgrade_notice(results: str | Path, upgraded: dict[str, int]) -> str | None:
    """What a start says of the files under ``results`` written by papa code that has changed since
    (`written_by_other_code`'s counts per rule, ``upgraded``), which a run that asks for them reruns; None when there
    are none."""
    if not upgraded:
        return None
    return (f"{sum(upgraded.values())} file(s) under {results} were written by papa code that has changed "
            f"since (a git pull or an edit of papa/; by rule: "
            f"{', '.join(f'{rule} {n}' for rule, n in upgraded.items())}): a run that asks for them "
            f"reruns their jobs, and every job after them, though the change may leave every number "
            f"as it was (papa.io.read_provenance names the commit that wrote a file; git log says what changed "
            f"since). --rerun-triggers mtime keeps them, and any other changed setting from rerunning "
            f"them while it is given (README: Upgrading papa)")  # fmt: skip


def config_keys() -> set:
    """The top-level keys of papa's config (the schema's), read from the workflow's schema (``papa.checks.SCHEMA``;
    this module imports no papa.checks: ``make clean`` runs it with any python3)."""
    return set(read_schema()["properties"])


def read_schema(path=None) -> dict:
    """The workflow's schema (``path``, default ``workflow/schemas/config.schema.yaml`` of this checkout, as
    ``papa.checks.SCHEMA``) as a new dict, read with libyaml's loader where PyYAML has one (a tenth of the
    pure-Python loader's CPU: every Snakemake start, dry runs too, reads it several times), once a process
    while the file stays as it is (its modification time and size)."""
    path = Path(path or Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml")
    stat = path.stat()
    return copy.deepcopy(_parsed_schema(str(path), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=4)
def _parsed_schema(path: str, mtime_ns: int, size: int) -> dict:
    import yaml

    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe


def yaml_error_place(path) -> str:
    """Where a config file that does not read breaks YAML (``" The YAML parser: <problem> at line L, column C."``),
    or ``""``: Snakemake's message ("not valid JSON or YAML ... do not mix whitespace and tab indentation") names
    no line."""
    import yaml

    try:
        yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as e:
        return f" The YAML parser: {yaml_problem(e)}."
    except (OSError, ValueError, yaml.YAMLError):
        pass
    return ""


def yaml_problem(e) -> str:
    """A YAML error on one line (``"<problem> at line L, column C"``): yaml's own message spans five, the line
    quoted under a caret (`yaml_error_place`, `papa.checks.read_config_file`)."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    said = getattr(e, "problem", None) or getattr(e, "context", None) or " ".join(str(e).split()) or "it does not parse"
    return f"{said}{where}"


def overlay_problem(configs) -> str | None:
    """What is wrong with the order of the config files given, or None: ``configs`` is ``[(path, config), ...]`` in
    ``--configfile`` order. A file whose ``overlay_of:`` names another (``config/paper-authors.yaml`` names
    ``config/paper.yaml``) updates that one key by key, so it must come after it: given first, the other's keys win
    (its ``results:`` folder among them, so its finished results would be rerun with the overlay's settings); given
    alone, it updates the defaults, not the grid it was written for. ``overlay_of`` is a path from the working
    directory (as ``--configfile`` takes it) or from the overlay's own folder."""

    def shown(path) -> str:  # Snakemake's configfiles are absolute: shown from the working directory
        with contextlib.suppress(ValueError):
            return str(Path(path).resolve().relative_to(Path.cwd().resolve()) if Path(path).is_absolute() else path)
        return str(path)

    def same(candidates, other) -> bool:
        for candidate in candidates:
            with contextlib.suppress(OSError):
                if os.path.samefile(candidate, other):
                    return True
        return False

    for i, (path, config) in enumerate(configs):
        path = shown(path)
        base = config.get("overlay_of") if isinstance(config, dict) else None
        if not isinstance(base, str) or not base.strip():
            continue
        candidates = (Path(base), Path(path).parent / base)
        before = any(same(candidates, other) for other, _ in configs[:i])
        after = any(same(candidates, other) for other, _ in configs[i + 1 :])  # given again after it: it wins again
        if before and not after:
            continue
        others = [shown(p) for p, _ in configs[:i] + configs[i + 1 :] if not same(candidates, p)]
        if after:
            where = f"{base} is given after it, whose keys would win (its results folder among them)"
        else:
            where = f"{base} is not given, so it would update the defaults' grid, not that one"
        return (f"{path} updates {base} (its overlay_of), and {where}: give it after {base} (--configfile "
                f"{' '.join([base, *others, path])}), or, to lay it over another config, set its overlay_of to that "
                f"file")  # fmt: skip
    return None


def load_yaml_strict(text: str, path) -> tuple[object, list[str]]:
    """``text`` read as YAML (a SafeLoader), and a message per key given twice in one mapping: YAML keeps the later
    one without a word, so a task, a seed list, a learning rate or the results folder would be lost
    (`papa.checks.read_config_file`, `results_folder`). Raises yaml's errors."""
    import yaml

    twice = []

    class StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # << : a merge, whose keys may be overridden
                continue
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: YAML's own constructor says so
                continue
            seen.setdefault(key, line)
            if first is not None:
                twice.append(f"{path}, line {line}: the key {key!r} is given twice in one mapping (first on "
                             f"line {first}); YAML would keep the later one without a word: remove one, or merge "
                             f"them")  # fmt: skip
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=StrictLoader), twice  # noqa: S506 (a SafeLoader)


def load_config_strict(text: str, path) -> tuple[object, list[str]]:
    """``text`` read as Snakemake reads a ``--configfile``: JSON first, whatever the file's name, else YAML
    (`load_yaml_strict`; a YTE template rendered, on YAML's path only, as Snakemake does), and a message per key
    given twice in one mapping or object (JSON keeps the last without a word too). The one strict reading of a
    config file (`papa.checks.read_config_file`, `results_folder`): a JSON file with tabs, which YAML does not
    read, had its repeated keys missed here. Raises yaml's errors."""
    twice = []

    def no_repeats(pairs):
        counts = collections.Counter(k for k, _ in pairs)
        if repeated := [k for k, n in counts.items() if n > 1]:
            twice.append(f"{path}: the key {repeated[0]!r} is given twice in one object (the one with the keys "
                         f"{', '.join(map(str, list(counts)[:6]))}; JSON keeps the last without a word): keep "
                         f"one")  # fmt: skip
        return dict(pairs)

    try:
        return json.loads(text, object_pairs_hook=no_repeats), twice
    except ValueError:  # not JSON (a byte-order mark too, as Snakemake reads it): YAML, as Snakemake tries next
        config, twice = load_yaml_strict(text, path)
    if isinstance(config, dict) and config.get("__use_yte__") is True:  # a YTE template (on YAML's path only)
        import yte

        config = yte.process_yaml(text, require_use_yte=True)
    return config, twice


def results_folder(configs) -> str:
    """The results folder a run with these config files writes into, each file read by Snakemake's own reading of a
    ``--configfile`` and later files updating earlier ones: the last that sets ``results:``, else the schema's
    default ``results`` (``make clean``, ``make report``). A `ValueError` for a value that is no plain folder name a
    shell command can take (papa refuses whitespace in it; a quote would end make's quoting), a file that does not
    read, one that is no papa config (a top-level key the config does not have: another tool's file would give the
    default's folder, and ``make clean`` remove it), an overlay given before the file it updates or without it
    (`overlay_problem`), or a Python without Snakemake (``make install``)."""
    try:
        from snakemake.common.configfile import load_configfile
    except ImportError:
        raise ValueError("reading the configs as Snakemake does needs the workflow's environment, which this Python "
                         "lacks: run it with .venv/bin/python (or after source .venv/bin/activate; make install makes "
                         ".venv), or in the environment.yml environment") from None  # fmt: skip
    # the schema read after Snakemake's import: a Python without it may lack PyYAML too (a bare system python3)
    folder, source = read_schema()["properties"]["results"]["default"], "the schema's default"
    loaded = []
    for path in configs:
        try:
            Path(path).stat()
        except OSError as e:
            raise ValueError(f"{path}: {e.strerror or e}") from None
        try:
            config = load_configfile(path)  # JSON, else YAML (a YTE template rendered), whatever the file's name
        except Exception as e:  # noqa: BLE001 - Snakemake's WorkflowError, yte's and yaml's errors
            raise ValueError(f"{path}: {' '.join(str(e).split())[:300]}{yaml_error_place(path)}") from None
        twice = []  # a key given twice: the workflow refuses the file (this read the last one's folder)
        with contextlib.suppress(Exception):  # what Snakemake read above and the strict reading does not
            twice = load_config_strict(Path(path).read_text(encoding="utf-8"), path)[1]
        if twice:
            raise ValueError(twice[0])
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"{path}: a config is a mapping of keys (results:, models:, ...), and this file holds "
                             f"a {type(config).__name__}: give papa's config files")  # fmt: skip
        known = config_keys()
        unknown = sorted(set(config or {}) - known, key=str)
        if unknown and not set(config) & known:  # another tool's file (the Slurm profile's, environment.yml)
            raise ValueError(f"{path} is not a papa config: its keys {listed(map(repr, unknown), 6)} are not the "
                             f"config's (the workflow refuses it too); give the config files of the run")  # fmt: skip
        if unknown:  # a papa config with a misspelled key: which one, and the key meant
            import difflib

            key = unknown[0]
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            meant = f": did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{path}: the key {key!r} is not one of the config's{meant} (the workflow refuses it "
                             f"too; the keys: {', '.join(sorted(known))})")  # fmt: skip
        if isinstance(config, dict) and "results" in config:
            folder, source = config["results"], path
        loaded.append((path, config))
    if problem := overlay_problem(loaded):
        raise ValueError(problem)
    if not isinstance(folder, str) or not folder.strip():
        raise ValueError(f"{source}: results: is {folder!r}, not a folder: give one plain path")
    if any(c.isspace() for c in folder) or any(c in folder for c in "'\"$`\\"):
        raise ValueError(f"{source}: results: {folder!r} holds whitespace or a quote, which papa refuses (whitespace) "
                         f"and make cannot pass to the shell as one folder: give one plain path")  # fmt: skip
    # as the workflow writes it (`papa.checks.normalise_results`): `results: link/` made make clean's `rm -rf link/`
    # empty a linked folder's target, where `link` loses the link alone
    return spelling(folder)


#: The files under a results folder that record their job's inputs (`recorded_inputs`).
RECORDING_SUFFIXES = (".parquet", ".safetensors", ".png", ".svg", ".html")


def recorded_inputs(path: str | Path) -> dict[str, str]:
    """The ``inputs`` a result file recorded (``{path: sha256}`` of its job's input files, `papa.io.input_digests`):
    a Parquet file's provenance (a data split's too), a constants file's metadata, a figure's record; {} where it
    records none."""
    record = _result_record(path)
    inputs = (record if isinstance(record, dict) else {}).get("inputs") or {}
    return dict(inputs) if isinstance(inputs, dict) else {}


def _result_record(path: str | Path):
    """The record papa wrote into a result file (`recorded_inputs`' kinds of file), None or {} where it has none."""
    from . import io

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        record = io.read_provenance(path)
    elif suffix == ".safetensors":
        with io.open_safetensors(path) as f:
            record = json.loads((f.metadata() or {}).get(io.PROVENANCE_KEY, "{}"))
    elif suffix in (".png", ".svg", ".html"):
        from .plots import figure_record

        record = figure_record(path)
    else:
        raise ValueError(f"{path}: not a result file papa writes ({', '.join(RECORDING_SUFFIXES)})")
    return record


def changed_inputs(results: str | Path, root: str | Path = ".") -> list[tuple[str, str, str]]:
    """``(result, input, what)`` for each input file a result under ``results`` recorded (`recorded_inputs`) that
    is no longer as it was read: ``what`` is ``"changed"`` (another sha256 now) or ``"missing"``, or ``"foreign"``
    for one in another marked results folder (`MARKER`: the result was copied in from another config's run);
    ``(result, path, "misplaced")`` for one whose record says its job wrote it elsewhere (`_written_as`);
    ``(result, "", "unrecorded")`` for a result file carrying no record of its inputs (edited by another tool); and
    ``(result, reason, "unreadable")`` for a result file whose record cannot be read (cut short, not papa's), or
    ``"forbidden"`` where this user may not read it (another user's, on a shared folder): the others are still
    checked. Input paths are read from ``root``, the working directory of the run that wrote
    them. Snakemake reruns a job whose input changed by its modification time; an input rewritten with its old time
    (``touch -r``, a copy with ``cp -p`` or ``rsync -t`` from another run) reruns nothing, and the results made from
    it no longer are what their records say: this finds them (``python -m papa.records verify``)."""
    return _verify(results, root)[0]


def _verify(results, root) -> tuple[list[tuple[str, str, str]], int, int]:
    """`changed_inputs`' list, the number of result files read and of recorded inputs found under ``root``."""
    from . import io
    from .layout import RESULTS

    root, found, present = Path(root), [], 0
    folder, top = Path(results).resolve(), root.resolve()
    # a built model's or dataset's files (rules build_model, build_data) are the libraries' own (transformers'
    # checkpoint), their record in the folder's rehearsal.json: no papa record in them is how they are written
    built_in = tuple(RESULTS[k].split("{")[0] for k in ("built_model", "built_data"))  # built/models/, built/data/

    def built(path: Path, by: Path) -> bool:  # a file rule build_model or build_data wrote under results folder `by`
        return any(Path(by, b) in path.parents for b in built_in)

    marked = functools.lru_cache(maxsize=None)(lambda place: (place / MARKER).is_file())
    files = sorted(p for p in Path(results).rglob("*") if p.suffix.lower() in RECORDING_SUFFIXES and p.is_file()
                   and not p.name.startswith(".") and p.name not in (REPORT, OUTDATED_REPORT))  # fmt: skip
    for result in files:
        try:
            record = _result_record(result)
        except PermissionError as e:  # not this user's to read (a shared folder): not a file to delete
            found.append((str(result), " ".join(str(e).split())[:200] or type(e).__name__, "forbidden"))
            continue
        except Exception as e:  # noqa: BLE001 - a file cut short or not papa's (pyarrow's, PIL's, json's errors)
            found.append((str(result), " ".join(str(e).split())[:200] or type(e).__name__, "unreadable"))
            continue
        # every result papa writes records its inputs, {} for a download's split: a file without (a table edited and
        # saved by pandas, which keeps no papa record) was said to be as it was read, its inputs unchecked
        if not isinstance(record, dict) or not isinstance(record.get("inputs"), dict):
            if not built(result, Path(results)):
                found.append((str(result), "", "unrecorded"))
            continue
        recorded = record["inputs"]
        if (written := _written_as(record, result, root)) is not None:
            found.append((str(result), written, "misplaced"))
        for name, digest in sorted(recorded.items()):
            source = root / name
            if not source.exists():
                found.append((str(result), name, "missing"))
                continue
            present += 1
            # a file copied in from another config's folder records that folder's inputs, as they still are there
            real = source.resolve()
            where = next((p for p in real.parents if p != top and p != folder and marked(p)), None)
            # a model or dataset that folder's run built is a source file another config reads in place (models:
            # {bert: results-rehearsal/built/models/bert}), not a result copied in
            if where is not None and built(real, where):
                where = None
            if where is not None and folder not in where.parents and where not in folder.parents:
                found.append((str(result), name, "foreign"))
            elif io.file_digest(source) != digest:
                found.append((str(result), name, "changed"))
    return found, len(files), present


def _written_as(record: dict, result: Path, root: Path) -> str | None:
    """Where a result's record says its job wrote it, when that is not where it lies (None: there, or the record
    names no output): the stage's ``out*`` settings (a file, or a figure's path without suffix, or the folder of
    the per-head figures) and, for a per-seed probe file, the output of its own ``seed``. Two files swapped (the
    lambdas of two tasks, two seeds' probe files) keep their inputs as they were and passed."""
    settings = record.get("settings")
    if not isinstance(settings, dict):
        return None
    outs = [v for k, v in settings.items() if k.startswith("out") for v in (v if isinstance(v, list) else [v])]
    outs = [o for o in outs if isinstance(o, str)]
    if not outs:
        return None
    seeds, seed = settings.get("seeds"), record.get("seed")
    if isinstance(settings.get("outs"), list) and isinstance(seeds, list) and len(seeds) == len(settings["outs"]):
        if seed in seeds:  # a probe job's files, one per seed, each recording its own
            outs = [settings["outs"][seeds.index(seed)]]
    here = os.path.realpath(result)
    for out in outs:
        there = os.path.realpath(Path(root, out))
        if there in (here, os.path.splitext(here)[0], os.path.dirname(here)):
            return None
    return next((o for o in outs if os.path.basename(o) == result.name), outs[0])


def main(argv: list[str] | None = None) -> int:
    """``python -m papa.records forget RESULTS...``: `forget_results` for each folder (``make clean``);
    ``python -m papa.records results-of CONFIG...``: `results_folder` (``make clean``, ``make report``);
    ``python -m papa.records removable RESULTS``: exit 1 saying why make clean must leave it (`not_removable`);
    ``python -m papa.records verify RESULTS``: exit 1 naming each result whose recorded input files changed or
    went since (`changed_inputs`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m papa.records", description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    forget = sub.add_parser("forget", help="drop the records of the outputs under each results folder")
    forget.add_argument("results", nargs="+", help="results folders, as the configs' results: key writes them")
    forget.add_argument("--records", default=".snakemake", help="the working directory's records (.snakemake)")
    of = sub.add_parser("results-of", help="the results folder a run with these config files writes into")
    of.add_argument("configs", nargs="+", help="config files, in Snakemake's --configfile order")
    removable = sub.add_parser("removable", help="exit 1 saying why make clean must leave the results folder")
    removable.add_argument("results", help="a results folder")
    removable.add_argument("--records", default=".snakemake", help="the working directory's records (.snakemake)")
    verify = sub.add_parser("verify", help="exit 1 naming the results whose recorded input files changed since")
    verify.add_argument("results", help="a results folder")
    verify.add_argument("--root", default=".", help="the run's working directory, where input paths start (.)")
    args = parser.parse_args(argv)
    if args.command == "verify":
        if not Path(args.results).is_dir():
            print(
                f"{args.results} is no folder (from {Path(args.root).resolve()}): name the config's results: folder "
                f"(python -m papa.records results-of CONFIG... says it; paper.yaml's is results-paper)"
            )
            return 1
        if not Path(args.root).is_dir():
            print(f"--root {args.root} is no folder: give the run's working directory (the checkout it ran in)")
            return 1
        found, n_files, present = _verify(args.results, args.root)
        if not n_files:  # an empty folder, a config folder: nothing checked is no "every input as it was"
            print(f"{args.results} holds no result file papa writes ({', '.join(RECORDING_SUFFIXES)}): name the "
                  f"config's results: folder (python -m papa.records results-of CONFIG... says it)")  # fmt: skip
            return 1
        missing = sum(what == "missing" for _, _, what in found)
        unrecorded = sum(what == "unrecorded" for _, _, what in found)
        if unrecorded == n_files or not (found or present):  # result files, none recording an input: nothing checked
            print(f"none of the {n_files} result file(s) under {args.results} records its inputs (papa's records "
                  f"them: is it a papa results folder?): nothing to verify")  # fmt: skip
            return 1
        if missing and not present:  # every input gone: the paths start elsewhere, not the files changed
            print(f"none of the {missing} recorded input file(s) of {args.results} is under "
                  f"{Path(args.root).resolve()}: run verify in the working directory of the run that wrote them "
                  f"(or give it as --root); a copied results folder records the paths of the run it was copied "
                  f"from")  # fmt: skip
            return 1
        for result, name, what in found:
            said = {"changed": f"its input {name} changed since it was read", "missing": f"its input {name} is gone",
                    "unreadable": f"unreadable ({name}): delete it and rerun its job",
                    "forbidden": f"this user may not read it ({name}): verify it as a user who may (its owner); "
                                 f"not a reason to delete it",
                    "misplaced": f"its record says its job wrote it as {name}: moved or swapped since",
                    "unrecorded": "it carries no papa record of its inputs (rewritten by another tool, such as "
                                  "pandas' to_parquet, or not papa's): its inputs cannot be checked; rerun its job",
                    "foreign": f"its input {name} lies in another results folder: it was made by that folder's "
                               f"run and copied in, not from the files beside it"}[what]  # fmt: skip
            print(f"{result}: {said}")
        if found:
            wrong = {r for r, _, what in found if what != "forbidden"}
            if wrong:
                print(
                    f"{len(wrong)} of the {n_files} result(s) under {args.results} no longer match their recorded "
                    f"inputs or cannot be read: rerun their jobs (snakemake --forcerun <rule> or delete them; make "
                    f"run redoes them)"
                )
            forbidden = {r for r, _, what in found if what == "forbidden"} - wrong
            if forbidden:
                print(f"{len(forbidden)} of the {n_files} result(s) under {args.results} this user may not read: "
                      f"they were not checked")  # fmt: skip
            return 1
        print(f"{args.results}: every recorded input file is as it was read ({n_files} result files)")
        return 0
    if args.command == "removable":
        why = not_removable(args.results, args.records)
        if why is not None:
            print(why)
            return 1
        return 0
    if args.command == "results-of":
        try:
            print(results_folder(args.configs))
        except ValueError as e:
            print(e)
            return 1
        return 0
    for results in args.results:
        if os.path.exists(results):  # its records gone, the workflow refused the folder as removed by make clean
            print(f"{results} is still there: forget drops the records of a results folder removed (make clean "
                  f"removes the folder, then forgets it); remove it first, or run make clean")  # fmt: skip
            return 1
        try:
            n = forget_results(results, args.records)
        except ForeignResultsError as e:
            print(e)
            return 1
        print(f"{args.records}: dropped {n} record(s) of {spelling(results)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
