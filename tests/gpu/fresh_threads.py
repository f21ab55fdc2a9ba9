"""First use from many threads in a new interpreter, shared by the GPU tests that need it: each
script defines N, `errors` and `work(i)` (which appends what went wrong); THREADS_MAIN runs the
N threads and exits non-zero with the errors; run_fresh starts the script in fresh processes."""
import os
import subprocess
import sys
from pathlib import Path

THREADS_MAIN = r"""
threads = [threading.Thread(target=work, args=(i,)) for i in range(N)]
[t.start() for t in threads]
[t.join() for t in threads]
print("\n".join(errors) or "ok")
sys.exit(1 if errors else 0)
"""


def run_fresh(script: str, repeats: int) -> None:
    """`script` (with THREADS_MAIN at its end) in `repeats` new interpreters, each on gemmlab's
    source tree; fails with the repetition's output on a non-zero exit."""
    import gemmlab

    env = {**os.environ, "PYTHONPATH": str(Path(gemmlab.__file__).parents[1])}
    for r in range(repeats):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, f"repetition {r + 1}/{repeats}:\n{run.stdout}\n{run.stderr[-3000:]}"
