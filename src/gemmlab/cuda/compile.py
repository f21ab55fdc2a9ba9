"""NVRTC compilation through cuda.core, with an on-disk cache and a ptxas resource report.

A compiled kernel is keyed by everything that changes its machine code: the source and
every header it can include, the template arguments, the architecture, the options and
the NVRTC version. A second request for the same key loads the cubin from disk.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from ..errors import CompileError
from ..registry import KERNEL_DIR, KernelSpec

CACHE_VERSION = 2  # bump when the cache layout or the default options change (2: ptxas performance warnings kept)


@dataclass(frozen=True)
class Resources:
    """What ptxas reported for one kernel."""

    registers: int = 0
    smem_static: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0
    # ptxas's "Potential Performance Loss" notes ("C7511: wgmma.mma_async instructions are
    # serialized due to ..."): a wgmma kernel that compiles without a spill can still lose its
    # asynchronous pipeline, every wgmma then waiting for the last, and nothing else says so
    perf_warnings: tuple[str, ...] = ()

    def perf_notes(self, kernel: str) -> list[str]:
        """One printable line per ptxas performance note, as the compile reports show them."""
        return [f"{kernel}: ptxas: potential performance loss: {w}" for w in self.perf_warnings]


@dataclass
class CompiledKernel:
    spec: KernelSpec
    params: dict[str, int]
    arch: str
    name_expression: str
    mangled: str
    cubin: bytes
    resources: Resources
    compile_seconds: float
    cached: bool
    _kernel: object = None
    cache_key: str = ""  # content address of the entry (source, headers, options, NVRTC version)

    def kernel(self):
        """The loaded cuda.core Kernel (needs a current device)."""
        if self._kernel is None:
            from .core_import import cuda_core

            ObjectCode = cuda_core().ObjectCode

            # cuda.core wants the mangled name as bytes, as NVRTC returned it
            obj = ObjectCode.from_cubin(self.cubin, symbol_mapping={self.name_expression: self.mangled.encode()})
            self._kernel = obj.get_kernel(self.name_expression)
        return self._kernel


def cache_dir() -> Path:
    root = os.environ.get("GEMMLAB_CACHE")
    xdg = os.environ.get("XDG_CACHE_HOME")  # an empty or relative one is ignored (the XDG rule), never the cwd
    base = Path(root) if root else (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "gemmlab"
    return base / "nvrtc"


@lru_cache(maxsize=1)
def nvrtc_version() -> str:
    """NVRTC's major.minor, and its library's own version where pip installed it (a patch release
    embeds another ptxas): part of every cache key."""
    try:
        from cuda.bindings import nvrtc

        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # the library missing (DynamicLibNotFoundError) or unloadable
        raise CompileError(f"NVRTC is not usable: {exc}") from None
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"NVRTC is not usable: {err}")
    try:
        from importlib.metadata import version

        return f"{major}.{minor} ({version('nvidia-cuda-nvrtc')})"
    except Exception:  # not a pip install of NVRTC: the toolkit's major.minor is what there is
        return f"{major}.{minor}"


def _header_digest() -> str:
    """Hash of every header under kernels/: any of them may be included (conservative)."""
    h = hashlib.sha256()
    for path in sorted(KERNEL_DIR.rglob("*.cuh")):
        h.update(path.relative_to(KERNEL_DIR).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


@lru_cache(maxsize=1)
def cuda_include_dir() -> str | None:
    """The CUDA toolkit's include folder, for the headers NVRTC does not build in (<mma.h>,
    <cuda_fp16.h>, <cuda_bf16.h>): $CUDA_HOME or $CUDA_PATH, /usr/local/cuda, the pip wheels."""
    candidates = [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates.append(Path("/usr/local/cuda/include"))
    try:
        import nvidia  # the pip CUDA wheels (nvidia-cuda-runtime...), where installed

        for root in nvidia.__path__:
            candidates += [Path(root) / "cu13" / "include", Path(root) / "cuda_runtime" / "include"]
    except ImportError:
        pass
    return next((str(p) for p in candidates if (p / "mma.h").exists()), None)


def base_options(arch: str, source_dir: Path | None = None) -> dict:
    """kernels/ and the source's own folder are on the include path (headers live in both),
    then the CUDA toolkit's include folder when there is one (only the wmma rung needs it)."""
    include = [str(KERNEL_DIR)] + ([str(source_dir)] if source_dir is not None else [])
    toolkit = cuda_include_dir()
    if toolkit is not None:
        include.append(toolkit)
    return {"arch": arch, "std": "c++17", "ptxas_options": ["-v"], "include_path": include}


CACHE_FILES = ("meta.json", "kernel.cubin")


def read_cache_entry(key: str) -> dict[str, bytes] | None:
    """An entry's files, to hand to another machine (a Dask worker); None if absent or torn."""
    entry_dir = cache_dir() / key[:2] / key
    try:
        return {name: (entry_dir / name).read_bytes() for name in CACHE_FILES}
    except OSError:
        return None


def _write_entry(entry_dir: Path, files: Mapping[str, bytes]) -> bool:
    """The entry's files, each through a temporary file of its own (mkstemp: unique across threads
    as well as processes, so no writer truncates another's) moved into place, meta.json last: it
    marks the entry complete. False where the cache cannot be written (that only costs speed)."""
    try:
        entry_dir.mkdir(parents=True, exist_ok=True)
        for name in ("kernel.cubin", "meta.json"):
            fd, tmp = tempfile.mkstemp(dir=entry_dir, prefix=f"{name}.")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(files[name])
                os.replace(tmp, entry_dir / name)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    except OSError:
        return False
    return True


def install_cache_entry(key: str, files: Mapping[str, bytes]) -> bool:
    """Put an entry compiled elsewhere into this machine's cache. The key is a content address,
    so an entry present under it is the same one; True if this call wrote it."""
    if set(files) != set(CACHE_FILES) or not all(c in "0123456789abcdef" for c in key) or len(key) != 64:
        raise ValueError("not a gemmlab NVRTC cache entry")
    entry_dir = cache_dir() / key[:2] / key
    if (entry_dir / "meta.json").exists():
        return False
    return _write_entry(entry_dir, files)


def _toolkit_digest(source: str) -> str:
    """The toolkit's <mma.h> where the source includes it (the wmma rung): another toolkit's headers
    build another binary, so they are part of the key; "" for every other source."""
    folder = cuda_include_dir() if "<mma.h>" in source else None
    return hashlib.sha256((Path(folder) / "mma.h").read_bytes()).hexdigest() if folder else ""


def cache_key(source: str, name_expression: str, arch: str, options: Mapping) -> str:
    h = hashlib.sha256()
    for part in (str(CACHE_VERSION), nvrtc_version(), arch, name_expression,
                 json.dumps({k: v for k, v in options.items() if k != "include_path"}, sort_keys=True),
                 _header_digest(), _toolkit_digest(source), source):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


_FUNC_RE = re.compile(r"Function properties for (\S+)")
_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PERF_RE = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*?) in the function '([^']+)'")


def parse_ptxas_log(log: str) -> dict[str, Resources]:
    """ptxas -v output -> resources per mangled kernel name."""
    found: dict[str, dict] = {}  # Resources' fields by kernel
    current = None
    for line in log.splitlines():
        m = _PERF_RE.search(line)  # names its function itself, wherever ptxas prints it
        if m:
            entry = found.setdefault(m.group(3), {})
            entry["perf_warnings"] = (*entry.get("perf_warnings", ()), f"{m.group(1)}: {m.group(2)}")
            continue
        m = _FUNC_RE.search(line) or _ENTRY_RE.search(line)
        if m:
            current = m.group(1)
            found.setdefault(current, {})
            continue
        if current is None:
            continue
        m = _FRAME_RE.search(line)
        if m:
            found[current].update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                                  spill_loads=int(m.group(3)))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m:
            found[current]["registers"] = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            s = re.search(r"(\d+) bytes smem", line)
            if b:
                found[current]["barriers"] = int(b.group(1))
            if s:
                found[current]["smem_static"] = int(s.group(1))
    return {name: Resources(**vals) for name, vals in found.items()}


def compile_kernel(spec: KernelSpec, params: Mapping[str, int] | None = None, arch: str = "sm_90",
                   use_cache: bool = True) -> CompiledKernel:
    """Compile one instantiation of a kernel to cubin (no GPU needed). A kernel with its own
    architecture (wgmma rungs: sm_90a) is built for that one; another family is refused."""
    arch = spec.arch_for(arch)
    values = spec.resolve(params)
    name_expr = spec.name_expression(values)
    source = spec.source_path.read_text()
    if "<mma.h>" in source and cuda_include_dir() is None:
        raise CompileError(f"{spec.name} includes <mma.h>, which NVRTC does not ship: install the CUDA toolkit "
                           "(or set CUDA_HOME), or pip install nvidia-cuda-runtime")
    options = base_options(arch, spec.source_path.parent)
    key = cache_key(source, name_expr, arch, options)
    entry_dir = cache_dir() / key[:2] / key
    meta_path = entry_dir / "meta.json"
    if use_cache and meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
            cubin = (entry_dir / "kernel.cubin").read_bytes()
            res = dict(meta["resources"])
            res["perf_warnings"] = tuple(res.get("perf_warnings", ()))  # JSON gives a list
            return CompiledKernel(spec, values, arch, name_expr, meta["mangled"], cubin,
                                  Resources(**res), meta["compile_seconds"], cached=True,
                                  cache_key=key)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a torn or stale entry: recompile and overwrite it

    from .core_import import cuda_core

    core = cuda_core()
    Program, ProgramOptions = core.Program, core.ProgramOptions

    log = io.StringIO()
    start = time.perf_counter()
    try:
        program = Program(source, code_type="c++", options=ProgramOptions(**options, no_cache=True))
        obj = program.compile("cubin", name_expressions=(name_expr,), logs=log)
    except Exception as exc:  # NVRTC errors arrive as several exception types
        text = log.getvalue().strip("\x00\n ") or str(exc)
        first = next((ln for ln in text.splitlines() if "error" in ln), text.splitlines()[0] if text else str(exc))
        raise CompileError(f"{spec.name} ({name_expr}, {arch}) failed to compile: {first.strip()}", log=text) from None
    seconds = time.perf_counter() - start
    mangled = obj.symbol_mapping[name_expr]
    mangled = mangled.decode() if isinstance(mangled, bytes) else mangled
    resources = parse_ptxas_log(log.getvalue()).get(mangled, Resources())
    cubin = obj.code if isinstance(obj.code, bytes) else Path(obj.code).read_bytes()

    if use_cache:
        meta = json.dumps({"mangled": mangled, "resources": asdict(resources), "compile_seconds": seconds,
                           "name_expression": name_expr, "arch": arch, "nvrtc": nvrtc_version()})
        _write_entry(entry_dir, {"kernel.cubin": cubin, "meta.json": meta.encode()})
    return CompiledKernel(spec, values, arch, name_expr, mangled, cubin, resources, seconds, cached=False,
                          cache_key=key)
