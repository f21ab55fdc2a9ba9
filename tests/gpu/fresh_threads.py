"""First use from many threads in a new interpreter, shared by the GPU tests that need it:
threads_script makes the script (N threads at once, each its own work(i), which appends what went
wrong to `errors`; the process exits non-zero with them), run_fresh starts it in fresh processes."""
import os
import subprocess
import sys
from pathlib import Path

THREADS_HEAD = r"""
import sys, threading
import torch, gemmlab
N = {n}
barrier = threading.Barrier(N)
errors = []
def work(i):
    try:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            g = torch.Generator(device="cuda").manual_seed(i)
"""

THREADS_TAIL = r"""
    except Exception as exc:
        errors.append(f"thread {i}: {type(exc).__name__}: {exc}")
threads = [threading.Thread(target=work, args=(i,)) for i in range(N)]
[t.start() for t in threads]
[t.join() for t in threads]
print("\n".join(errors) or "ok")
sys.exit(1 if errors else 0)
"""


def threads_script(n: int, body: str) -> str:
    """A script of `n` threads at once, each running work(i) with its own torch stream `s` and a
    generator `g` seeded with i: `body` starts inside `with torch.cuda.stream(s):` (12 spaces in;
    lines 8 spaces in go on after that block), and an exception becomes the thread's error."""
    return THREADS_HEAD.format(n=n) + body.strip("\n") + THREADS_TAIL


def run_fresh(script: str, repeats: int) -> None:
    """`script` (from threads_script) in `repeats` new interpreters, each on gemmlab's
    source tree; fails with the repetition's output on a non-zero exit."""
    import gemmlab

    env = {**os.environ, "PYTHONPATH": str(Path(gemmlab.__file__).parents[1])}
    for r in range(repeats):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, f"repetition {r + 1}/{repeats}:\n{run.stdout}\n{run.stderr[-3000:]}"
