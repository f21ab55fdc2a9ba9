"""scripts/gpu_check.sh's test parts select the GPU files they say: tests-other is exactly its two
halves (tests-other-api, tests-other-kernels), which share no file, and every GPU test file but
the sanitizer's belongs to one part. Run with a stand-in Python that prints what pytest was given."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

FAKE_PYTHON = """#!/bin/bash
if [[ "$1 $2" == "-m pytest" ]]; then shift 2; printf '%s\\n' "$@" | grep '^tests/'; fi
exit 0
"""


def selected(tmp_path: Path, parts: str) -> set[str]:
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake), "GPU_CHECK_PARTS": parts, "GEMMLAB_WHEELHOUSE": str(tmp_path / "none")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=60)
    return {line for line in proc.stdout.splitlines() if line.startswith("tests/gpu/")}


def test_tests_other_is_its_two_halves(tmp_path):
    other = selected(tmp_path, "tests-other")
    api, kernels = selected(tmp_path, "tests-other-api"), selected(tmp_path, "tests-other-kernels")
    assert api and kernels and not api & kernels
    assert other == api | kernels
    assert "tests/gpu/test_api.py" in api and "tests/gpu/test_kernels.py" in kernels


def test_every_gpu_file_is_in_one_part(tmp_path):
    every = {f"tests/gpu/{p.name}" for p in (ROOT / "tests" / "gpu").glob("test_*.py")} - {"tests/gpu/test_sanitizer.py"}
    parts = {name: selected(tmp_path, name) for name in ("tests-hgemm", "tests-profile", "tests-other")}
    assert set().union(*parts.values()) == every
    assert sum(len(files) for files in parts.values()) == len(every)
