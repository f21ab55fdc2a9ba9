"""The layering of docs/architecture.md, checked: the import-linter contract holds with no ignored
import, no module imports itself back through others, one harness (no per-op copy of a harness
module), and no module grows past ~300 lines without saying why at its top."""
import collections
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "gemmlab"
HARNESS_NAMES = ("api.py", "bench.py", "runner.py", "cli.py", "verify.py", "baselines.py")


def _lint_imports() -> str | None:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return exe if Path(exe).exists() else None


def test_pyproject_contract_ignores_nothing():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = config["contracts"]
    assert any(c["type"] == "layers" for c in contracts)
    assert not any("ignore_imports" in c for c in contracts)


@pytest.mark.skipif(_lint_imports() is None, reason="import-linter is not installed (pip install '.[test]')")
def test_import_linter_contract_is_kept():
    proc = subprocess.run([_lint_imports(), "--config", str(ROOT / "pyproject.toml")], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("grimp") is None, reason="grimp (import-linter's graph) is not installed")
def test_no_import_circles():
    """Tarjan's strongly connected components over every import, function-level ones included."""
    import grimp

    graph = grimp.build_graph("gemmlab")
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # iterative would be longer; the graph is ~100 modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package importing its own submodule from __init__ is not a circle of modules
            real = [c for c in comp if not any(o != c and o.startswith(c + ".") for o in comp)]
            if len(real) > 1:
                circles.append(sorted(comp))

    for m in modules:
        if m not in index:
            visit(m)
    assert circles == [], circles


def test_one_harness_no_per_op_copies():
    names = collections.Counter(p.name for p in SRC.rglob("*.py"))
    repeated = {n: names[n] for n in HARNESS_NAMES if names[n] > 1}
    assert repeated == {}


def test_long_modules_say_why():
    long = []
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 330 and "300 lines" not in text[:1500]:
            long.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
    assert long == []
