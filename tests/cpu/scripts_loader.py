"""Import a file of scripts/ (or any path) as a module, for the CPU tests of the project's scripts."""
import importlib.util
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(path, name: str | None = None):
    """The module at `path` (a scripts/ file name, or a Path), freshly executed."""
    path = SCRIPTS / path if isinstance(path, str) else path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
