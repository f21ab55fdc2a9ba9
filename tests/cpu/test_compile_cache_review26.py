"""The NVRTC cache and environment findings of session 26's review: writers that cannot truncate
each other's files, XDG_CACHE_HOME that is empty or relative, the toolkit's <mma.h> in the key
(and a clear error without it), NVRTC missing as one line, `gemmlab env` in a removed folder."""
import os
import threading

import pytest

from gemmlab import registry
from gemmlab.cuda import compile as cc
from gemmlab.errors import CompileError


def test_concurrent_writers_of_one_entry_leave_it_whole(tmp_path, monkeypatch):
    """Eight threads write one entry while a reader reads it throughout: every write succeeds
    (a writer that truncated another's temporary file, or found it moved away, would report False),
    and the reader sees the entry absent or whole, never a short cubin."""
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path))
    key = "ab" * 32
    files = {"kernel.cubin": b"\x7fELF" + b"x" * 100_000, "meta.json": b"{}"}
    errors, results, seen = [], [], []
    done = threading.Event()

    def write():
        try:
            for _ in range(20):
                results.append(cc._write_entry(cc.cache_dir() / key[:2] / key, files))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def read():
        while not done.is_set():
            entry = cc.read_cache_entry(key)
            if entry is not None and entry["kernel.cubin"] != files["kernel.cubin"]:
                seen.append(len(entry["kernel.cubin"]))

    reader = threading.Thread(target=read)
    reader.start()
    threads = [threading.Thread(target=write) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert not errors
    assert len(results) == 160 and all(results), f"{results.count(False)} writes failed"
    assert not seen, f"the reader saw torn cubins of {sorted(set(seen))[:5]} bytes"
    assert cc.read_cache_entry(key) == files
    assert sorted(os.listdir(cc.cache_dir() / key[:2] / key)) == ["kernel.cubin", "meta.json"], "no temp left"


@pytest.mark.parametrize("value", ["", "relative/cache"])
def test_an_empty_or_relative_xdg_cache_home_is_ignored(monkeypatch, value):
    monkeypatch.delenv("GEMMLAB_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    assert cc.cache_dir().is_absolute() and cc.cache_dir() == cc.Path.home() / ".cache" / "gemmlab" / "nvrtc"


def test_the_toolkits_mma_h_is_in_the_wmma_key_and_its_absence_is_one_line(tmp_path, monkeypatch):
    wmma = registry.get("wmma", "hgemm")
    source = wmma.source_path.read_text()
    include = tmp_path / "include"
    include.mkdir()
    (include / "mma.h").write_text("// one toolkit")
    monkeypatch.setattr(cc, "cuda_include_dir", lambda: str(include))
    monkeypatch.setattr(cc, "nvrtc_version", lambda: "13.5")
    first = cc.cache_key(source, "e", "sm_90", {})
    (include / "mma.h").write_text("// another toolkit")
    assert cc.cache_key(source, "e", "sm_90", {}) != first
    other = registry.get("mma_sync", "hgemm").source_path.read_text()
    assert cc._toolkit_digest(other) == "", "only a source that includes it"
    monkeypatch.setattr(cc, "cuda_include_dir", lambda: None)
    with pytest.raises(CompileError, match="includes <mma.h>, which NVRTC does not ship"):
        cc.compile_kernel(wmma, {}, arch="sm_80", use_cache=False)


def test_nvrtc_missing_is_a_compile_error(monkeypatch):
    import sys
    import types

    def missing():
        raise OSError('Failure finding "libnvrtc.so.13"')

    fake = types.SimpleNamespace(nvrtc=types.SimpleNamespace(nvrtcVersion=missing))
    monkeypatch.setitem(sys.modules, "cuda.bindings", fake)
    cc.nvrtc_version.cache_clear()
    try:
        with pytest.raises(CompileError, match="NVRTC is not usable: Failure finding"):
            cc.nvrtc_version()
    finally:
        cc.nvrtc_version.cache_clear()


def test_env_in_a_removed_folder(tmp_path, monkeypatch):
    from gemmlab.envinfo import collect_env

    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    env = collect_env()
    assert env.get("cwd") is None
