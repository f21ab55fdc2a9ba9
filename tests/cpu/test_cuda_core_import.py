"""cuda.core's first import from many threads at once: gemmlab imports it under one lock.

Without the lock, eight threads compiling kernels first thing in a fresh process failed 4 to 7
times in 8 with "cannot import name 'Program' from 'cuda.core.cu13'" (session 11). Each run is a
fresh interpreter, since only the first import races."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = r"""
import os, sys, tempfile, threading
os.environ["GEMMLAB_CACHE"] = tempfile.mkdtemp()
from gemmlab import registry
import gemmlab.ops.hgemm  # noqa
from gemmlab.cuda.compile import compile_kernel
spec = registry.get("tma_wgmma", "hgemm")
barrier, errors = threading.Barrier(8), []
def one(i):
    barrier.wait()
    try:
        compile_kernel(spec, {"BN": 64 if i % 2 else 128, "STAGES": 2 + i // 2}, "sm_90a")
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(len(errors), errors[:1])
sys.exit(1 if errors else 0)
"""


@pytest.mark.parametrize("run", range(2))
def test_first_compile_from_eight_threads(run):
    pytest.importorskip("cuda.core")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
