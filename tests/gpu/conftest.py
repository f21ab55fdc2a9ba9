import pytest

from gemmlab.cuda.device import gpu_available

_OK, _WHY = gpu_available()


def pytest_collection_modifyitems(config, items):
    if _OK:
        return
    skip = pytest.mark.skip(reason=f"GPU tests need a CUDA GPU ({_WHY})")
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
