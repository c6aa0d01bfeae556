"""The files each process opens under a folder, seen by the kernel: the reads the ``open`` audit event misses.

tests/opens_audit's sitecustomize hears Python's ``open`` audit event, which only Python's own ``open()``,
``os.open`` and imports raise. The readers papa's jobs lean on most open their files in native code: pyarrow
(every Parquet table, ``pandas.read_parquet`` too), safetensors (constants, model weights), tokenizers
(``tokenizer.json``). A job reading a Parquet table it did not declare went unseen.

`NativeOpens` listens to fanotify's ``FAN_CLOSE_NOWRITE`` event on the mount that holds a folder (Linux; the
``CAP_SYS_ADMIN`` capability: root on a machine of its own, as CI's, where Slurm runs too). The kernel reports each
file opened without write access once it is closed (a memory-mapped one, as safetensors maps, when the mapping
goes too: at the process's exit at the latest), by any process and any code, with the process id (a thread's as
its process's) and a descriptor of the file, whose path is read back from ``/proc/self/fd``. Files opened for
writing are not reported (``FAN_OPEN`` would report them too, as reads: safetensors writes each file through a
``.tmpXXXXXX`` of its own beside it, which is no read), nor are read-write opens of native code (Python's are
the audit event's), nor folders (``FAN_ONDIR`` is not asked for). The mount's other files are dropped as they
come. A path is read when the event is taken from the queue, so a file renamed meanwhile is reported under its
new name, and one removed under its old one.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import sys
import threading
import time

_FAN_CLOEXEC, _FAN_NONBLOCK, _FAN_UNLIMITED_QUEUE = 0x1, 0x2, 0x10
_FAN_MARK_ADD, _FAN_MARK_MOUNT = 0x1, 0x10
_FAN_CLOSE_NOWRITE, _FAN_Q_OVERFLOW = 0x10, 0x4000
_METADATA = struct.Struct("=IBBHQii")  # struct fanotify_event_metadata: event_len, vers, reserved, metadata_len,
#                                        mask, fd, pid
_DELETED = " (deleted)"


class NativeOpens:
    """Record, from `start` to `stop`, the files under ``root`` that each process opened to read, and when:
    ``{pid: {path: [time.monotonic() the event was taken, ...]}}`` (`stop`'s answer, real paths; a time kept where it
    is over a second after the last one kept for that path). The times tell apart two processes that had one id in
    turn (a long run on a machine with 32,768 ids reuses them): each is no earlier than its event. `start` raises
    OSError where fanotify cannot be had (not Linux, not permitted), saying why."""

    def __init__(self, root: str | os.PathLike):
        self.root = os.path.join(os.path.realpath(root), "")
        self.opened: dict[int, dict[str, list[float]]] = {}
        self.events = 0
        self._fd = -1
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._overflow = False

    def start(self) -> NativeOpens:
        if not sys.platform.startswith("linux"):
            raise OSError(f"fanotify is Linux's; this is {sys.platform}")
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
        libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int, ctypes.c_char_p]
        flags = _FAN_CLOEXEC | _FAN_NONBLOCK | _FAN_UNLIMITED_QUEUE
        self._fd = libc.fanotify_init(flags, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
        if self._fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"fanotify_init: {os.strerror(err)} (it needs CAP_SYS_ADMIN: root)")
        mark = _FAN_MARK_ADD | _FAN_MARK_MOUNT
        marked = libc.fanotify_mark(self._fd, mark, _FAN_CLOSE_NOWRITE, -1, os.fsencode(self.root))
        if marked < 0:
            err = ctypes.get_errno()
            os.close(self._fd)
            raise OSError(err, f"fanotify_mark on {self.root}: {os.strerror(err)}")
        self._thread = threading.Thread(target=self._listen, name="native-opens", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[int, dict[str, list[float]]]:
        """Stop listening, take what is queued, and return the opens by process id. An overflowing queue (events
        lost: it is unbounded, so only with memory short) raises RuntimeError: a record with holes vouches for
        nothing."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self._drain()
        os.close(self._fd)
        if self._overflow:
            raise RuntimeError("fanotify's queue overflowed: opens were lost, the record is incomplete")
        return self.opened

    def _listen(self) -> None:
        while not self._stopping.is_set():
            select.select([self._fd], [], [], 0.2)
            self._drain()

    def _drain(self) -> None:
        while True:
            try:
                buf = os.read(self._fd, 1 << 18)
            except BlockingIOError:
                return
            at, now = 0, time.monotonic()
            while at + _METADATA.size <= len(buf):
                length, _, _, _, mask, fd, pid = _METADATA.unpack_from(buf, at)
                at += length
                self.events += 1
                self._overflow |= bool(mask & _FAN_Q_OVERFLOW)
                if fd < 0:
                    continue
                try:
                    path = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    continue
                finally:
                    os.close(fd)
                if path.startswith(self.root):
                    times = self.opened.setdefault(pid, {}).setdefault(path.removesuffix(_DELETED), [])
                    if not times or now - times[-1] > 1.0:
                        times.append(now)
