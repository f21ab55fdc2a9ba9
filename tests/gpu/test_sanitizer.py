"""compute-sanitizer memcheck and racecheck (shared-memory hazards) over every kernel of
every op: each script runs all its kernels once on awkward sizes and checks the results."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# script, name for the log, the least number of PASS lines it must print (None: exactly the runs
# the script plans, which it counts without a GPU). The tensor-core sweep runs one input type at a
# time: under racecheck rung 5's 1028 runs of one type took about 330 s on an H100 (session 16),
# and the 120 runs of 256-row tiles a type added in session 27 about 200 s more: they are a fourth part
# (both 16-bit types, 396 s), so each part fits a 10-minute device call where the whole sweep does
# not (session 27, H100: the bf16 part 467 s; on an H200 the bf16 part with the 256-row runs
# passed 585 s).
SCRIPTS = [("sanitize_kernels.py", "sgemm", 3 * 20), ("sanitize_reduce.py", "reduce", 9 * 7),
           *((f"sanitize_hgemm.py --part main --dtypes {d}", f"hgemm-{d}", None) for d in ("fp16", "bf16", "tf32")),
           ("sanitize_hgemm.py --part rows256", "hgemm-rows256", None),
           ("sanitize_kernels.py --op bgemm", "bgemm", 3)]


def planned_runs(script: str) -> int:
    """How many runs the script will make (its --count, which needs no GPU)."""
    args = script.split()
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / args[0]), *args[1:], "--count"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return int(out.stdout.strip().splitlines()[-1].split()[-1])


def _sanitizer() -> str:
    path = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(path).exists():
        pytest.skip("compute-sanitizer is not installed")
    return path


@pytest.mark.parametrize("script,name,least", SCRIPTS, ids=[s[1] for s in SCRIPTS])
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_sanitizer_clean(tool, script, name, least, tmp_path):
    log_dir = Path(os.environ.get("GEMMLAB_SANITIZER_LOGS", tmp_path))
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"sanitizer-{name}-{tool}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [_sanitizer(), "--tool", tool, "--error-exitcode", "99", "--log-file", str(log),
           sys.executable, str(ROOT / "scripts" / script.split()[0]), *script.split()[1:]]
    if tool == "racecheck":
        cmd[3:3] = ["--racecheck-report", "all"]
    if least is None:
        least = planned_runs(script)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1500)
    text = log.read_text() if log.exists() else ""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}\n{text[-4000:]}"
    assert "ERROR SUMMARY: 0 errors" in text or "RACECHECK SUMMARY: 0 hazards" in text, text[-3000:]
    assert proc.stdout.count("PASS") >= least, proc.stdout[-2000:]
