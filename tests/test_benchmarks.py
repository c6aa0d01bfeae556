"""The benchmark script's own measuring code (the figures themselves come from `make bench`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_child_peak_rss_is_not_the_parents():
    """A subprocess's ru_maxrss also carries its parent's peak (fork/vfork + exec); the memory
    benchmark's children report their own VmHWM instead."""
    ballast = bytearray(800 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: 800 MB resident
    code = (
        "import json, resource, sys; sys.path.insert(0, 'benchmarks'); import run; "
        "print(json.dumps([run._peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    own, ru_maxrss = json.loads(out.stdout.strip().splitlines()[-1])
    del ballast
    # the child itself (python, torch, papa: a few hundred MB) is far smaller than the ballast
    assert 50 < own < 600, (own, ru_maxrss)
