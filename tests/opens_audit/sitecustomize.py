"""The files each Snakemake job reads, recorded for tests/test_workflow.py's `undeclared_reads`.

The tests' whole-workflow runs (tests/conftest.py's `smoke_once`, tests/test_rehearsal_run.py's sample and full
rehearsal, tests/test_slurm.py's runs) put this folder on PYTHONPATH with ``PAPA_TEST_OPENS`` naming a folder: every
Python process then imports this module at start-up (``site`` imports ``sitecustomize``) and, where
``PAPA_TEST_OPENS`` is set, listens to the interpreter's ``open`` audit event (PEP 578: ``open()``, ``os.open``,
imports). At exit, a process that ran a Snakemake script (its ``__main__`` holds the ``snakemake`` object) writes
``<rule>-<pid>-<ns>.json``: its rule, process id and the ``time.monotonic()`` it started and ended at (a long
run reuses process ids), declared inputs, outputs and logs, and the paths it opened for reading,
each resolved (``os.path.realpath``). Anything else (the Snakemake process itself, a tool it starts) writes nothing.
A path opened relative to a directory descriptor (``os.open(name, dir_fd=...)``, as ``shutil.rmtree`` walks a
folder) cannot be resolved here and is left out, as are opens for writing alone. Files opened by native code
(pyarrow's Parquet, safetensors, tokenizers) raise no audit event: tests/native_opens.py has the kernel report
those, by process id.
"""

import atexit
import json
import os
import sys
import time

_FOLDER = os.environ.get("PAPA_TEST_OPENS")


def _reads(mode, flags) -> bool:
    if isinstance(mode, str):  # open(): "r", "rb", "r+", "w+", "a+" read; "w", "a", "x" do not
        return "r" in mode or "+" in mode
    return isinstance(flags, int) and flags & os.O_ACCMODE != os.O_WRONLY  # os.open and imports (flags)


def _install(folder: str) -> None:
    opened: set[str] = set()
    start = time.monotonic()  # the process's window, for tests/native_opens.py's record (a process id is reused)

    def hook(event, args):
        if event != "open":
            return
        path, mode, flags = args
        if not isinstance(path, (str, bytes, os.PathLike)) or not _reads(mode, flags):
            return  # a file descriptor, or a write
        path = os.fsdecode(path)
        if not os.path.isabs(path) and mode is None:
            return  # os.open: perhaps relative to a dir_fd, which the event does not give
        opened.add(os.path.realpath(path))

    sys.addaudithook(hook)

    @atexit.register
    def write():
        job = getattr(sys.modules.get("__main__"), "snakemake", None)
        if job is None or not hasattr(job, "rule"):
            return
        files = {key: [os.path.realpath(str(f)) for f in getattr(job, key)] for key in ("input", "output", "log")}
        window = {"pid": os.getpid(), "start": start, "end": time.monotonic()}
        record = {"rule": job.rule, **window, "cwd": os.getcwd(), **files, "read": sorted(opened)}
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{job.rule}-{os.getpid()}-{time.monotonic_ns()}.json"), "w") as f:
            json.dump(record, f)


if _FOLDER:
    _install(_FOLDER)
