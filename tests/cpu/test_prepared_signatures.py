"""The API's prepared launches against the kernels they launch: for every (kernel, signature) pair
the executors can build (api/launches.py's signatures, routed as api/executors.gemm_executor and
reduce_executor route each registered kernel), the kernel is compiled with NVRTC - as
compile_kernel compiles it (source, name expression, options), to PTX - for sm_90 (sm_90a where
the kernel needs it) and sm_80 where it runs there, and the signature is compared with the
parameters of the kernel's PTX `.entry`: kind by kind, "i32" a 32-bit integer, "i64" and "ptr" a
64-bit one, "f32" a float, "tmap" a 128-byte by-value struct aligned to 64 bytes (CUtensorMap).
PTX cannot tell a pointer from a 64-bit integer: where c++filt is on the PATH, the C++ parameter
types of the kernel's mangled name are compared too. A PreparedLaunch whose signature disagrees
with its kernel passes the driver arguments of the wrong size or type, with no error to say so.
No GPU is needed; nothing is written to the compile cache."""
import importlib
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import pytest

from gemmlab import registry
from gemmlab.api.launches import REDUCE_SIGNATURES, SPLITK_REDUCE_SIGNATURE, gemm_signature, tma_signature
from gemmlab.cuda import compile as cc
from gemmlab.kernels.hgemm.specs import tma_boxes
from gemmlab.kernels.reduce.specs import SINGLE_PASS
from gemmlab.ops.hgemm import OP as HGEMM


def _nvrtc_reason() -> str:
    """"" when NVRTC (the cuda.core / cuda.bindings wheels) can compile here, else why not."""
    try:
        for module in ("cuda.core", "cuda.bindings.nvrtc"):
            importlib.import_module(module)
        cc.nvrtc_version()
    except Exception as exc:  # ImportError, or a broken NVRTC library
        return f"NVRTC is not usable here: {exc}"
    return ""


needs_nvrtc = pytest.mark.skipif(bool(_nvrtc_reason()), reason=_nvrtc_reason() or "NVRTC available")
CXXFILT = shutil.which("c++filt")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE", str(tmp_path / "cache"))  # nothing here should write it


# -- the pairs the API builds ----------------------------------------------------------------


def _api_params(spec) -> dict:
    """The parameters the API builds `spec` with when none are named: its defaults, and for
    hgemm what the problem sets (its first input type, layout nn, an fp32 C: HgemmRunner)."""
    return spec.resolve(HGEMM.build_params(spec, None, spec.dtypes[0]) if spec.op == "hgemm" else None)


def _launches(op: str, spec) -> list[tuple[str, object, tuple]]:
    """(executor, kernel, signature) of every prepared launch the API's executor of kernel `spec`
    makes: reduce_executor -> KernelReduce; gemm_executor -> TmaGemm for the TMA rungs ("tma"
    in the tags), else KernelGemm (batched for bgemm) and its split-K reduction launch."""
    if op == "reduce":
        return [("KernelReduce", spec, REDUCE_SIGNATURES[SINGLE_PASS in spec.tags])]  # ReduceRunner.single_pass
    if "tma" in spec.tags:
        return [("TmaGemm", spec, tma_signature("C" in tma_boxes(spec, _api_params(spec))))]
    out = [("KernelGemm", spec, gemm_signature(spec, op == "bgemm"))]
    if spec.splitk_reduce is not None:  # GemmRunner.reduce
        out.append(("KernelGemm split-K", spec.splitk_reduce, SPLITK_REDUCE_SIGNATURE))
    return out


def api_pairs() -> list[tuple[str, object, tuple, list[str]]]:
    """Distinct (executor, kernel, signature, the implementations that use it): a variant that is
    another kernel's source and entry with other defaults shares that kernel's pair."""
    pairs: dict[tuple, tuple] = {}
    for spec in registry.kernels():
        for who, kernel, signature in _launches(spec.op, spec):
            key = (kernel.source, kernel.entry, signature)
            pairs.setdefault(key, (who, kernel, signature, []))[3].append(f"{spec.op}/{spec.name}")
    return list(pairs.values())


PAIRS = api_pairs()


def _archs(kernel) -> list[str]:
    """sm_90 (the kernel's own sm_90a where it needs it), and sm_80 where the kernel runs there."""
    return ["sm_90"] if kernel.arch is not None else ["sm_90", "sm_80"]


# -- the kernel's real parameters ------------------------------------------------------------


@lru_cache(maxsize=None)
def _compiled(kernel, arch: str) -> tuple[str, list[str]]:
    """(mangled name, PTX .param declarations of its .entry) of `kernel` with the API's default
    parameters, compiled as compile_kernel compiles it (the same source, name expression and
    options) but to PTX: no ptxas run, no cache. Straight through NVRTC: cuda.core's PTX target
    asks the driver whether it could load the PTX, and there may be no driver."""
    from cuda.bindings import nvrtc

    from gemmlab.cuda.core_import import cuda_core

    def ok(result):
        err, *rest = result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"{kernel.name} ({arch}): {err}")
        return rest[0] if rest else None

    arch = kernel.arch_for(arch)
    name = kernel.name_expression(_api_params(kernel))
    options = cc.base_options(arch, kernel.source_path.parent)
    del options["ptxas_options"]  # PTX only
    flags = cuda_core().ProgramOptions(**options, no_cache=True).as_bytes("nvrtc")
    prog = ok(nvrtc.nvrtcCreateProgram(kernel.source_path.read_bytes(), kernel.source_path.name.encode(), 0, [], []))
    try:
        ok(nvrtc.nvrtcAddNameExpression(prog, name.encode()))
        if nvrtc.nvrtcCompileProgram(prog, len(flags), flags)[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            log = b" " * ok(nvrtc.nvrtcGetProgramLogSize(prog))
            ok(nvrtc.nvrtcGetProgramLog(prog, log))
            raise AssertionError(f"{kernel.name} ({name}, {arch}) failed to compile:\n{log.decode(errors='replace')}")
        mangled = ok(nvrtc.nvrtcGetLoweredName(prog, name.encode())).decode()
        ptx = b" " * ok(nvrtc.nvrtcGetPTXSize(prog))
        ok(nvrtc.nvrtcGetPTX(prog, ptx))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return mangled, entry_params(ptx.decode().rstrip("\0 "), mangled)


def entry_params(ptx: str, mangled: str) -> list[str]:
    """The .param declarations of the PTX .entry `mangled`, one string each."""
    m = re.search(r"\.entry\s+" + re.escape(mangled) + r"\s*\((.*?)\)\s*(?:\.|\{)", ptx, re.S)
    assert m, f"no .entry {mangled} in the PTX"
    body = m.group(1).strip()
    return [p.strip() for p in body.split(",")] if body else []


# -- the comparison --------------------------------------------------------------------------

# a PTX parameter as the comparison sees it: its type, with the alignment and byte count of a
# by-value struct ("align 64 b8[128]"); pointer annotations (.ptr .global .align N) dropped
_PARAM_RE = re.compile(r"\.param\s+(?:\.align\s+(?P<align>\d+)\s+)?\.(?P<type>[a-z]+\d+)"
                       r"(?:\s+\.ptr(?:\s+\.[a-z]+)*(?:\s+\.align\s+\d+)?)?\s+[\w$]+(?:\[(?P<count>\d+)\])?")
PTX_TYPES = {"i32": {"u32", "s32", "b32"}, "i64": {"u64", "s64", "b64"}, "f32": {"f32"},
             "ptr": {"u64", "b64"}, "tmap": {"align 64 b8[128]"}}  # tmap: CUtensorMap by value


def ptx_type(decl: str) -> str:
    m = _PARAM_RE.fullmatch(decl)
    assert m, f"unparsed PTX parameter {decl!r}"
    align, count = m.group("align"), m.group("count")
    return (f"align {align} " if align else "") + m.group("type") + (f"[{count}]" if count else "")


def mismatches(signature, params: list[str]) -> list[str]:
    """Where `signature` disagrees with the PTX parameters `params` (empty: it matches)."""
    types = [ptx_type(p) for p in params]
    out = [] if len(signature) == len(types) else [
        f"{len(signature)} arguments in the signature, {len(types)} parameters in the kernel"]
    for i, (kind, t) in enumerate(zip(signature, types)):
        if t not in PTX_TYPES.get(kind, ()):
            out.append(f"argument {i}: {kind!r} in the signature, .{t} in the kernel")
    return out


# C++ parameter types (as c++filt prints them, const dropped) by signature kind
CPP_KINDS = {"int": "i32", "unsigned int": "i32", "long long": "i64", "unsigned long long": "i64",
             "long": "i64", "unsigned long": "i64", "float": "f32"}


def cpp_kinds(mangled: str) -> list[str]:
    """The signature kinds of the C++ parameters of `mangled` (a type not listed stays as it is)."""
    text = subprocess.run([CXXFILT, mangled], capture_output=True, text=True, check=True).stdout.strip()
    assert text.endswith(")"), text
    depth, start = 0, None
    for i in range(len(text) - 1, -1, -1):  # the parameter list: the last top-level (...)
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            start = i
            break
    parts, depth, word = [], 0, ""
    for ch in text[start + 1:-1]:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(word)
            word = ""
        else:
            word += ch
    parts += [word] if word.strip() else []
    kinds = []
    for t in (" ".join(w for w in p.split() if w != "const") for p in parts):
        kinds.append("ptr" if t.endswith("*") else "tmap" if t.endswith("TmaMap") else CPP_KINDS.get(t, t))
    return kinds


def cpp_mismatches(signature, kinds: list[str]) -> list[str]:
    out = [] if len(signature) == len(kinds) else [
        f"{len(signature)} arguments in the signature, {len(kinds)} C++ parameters"]
    out += [f"argument {i}: {k!r} in the signature, {c!r} in C++" for i, (k, c) in enumerate(zip(signature, kinds))
            if k != c]
    return out


# -- the tests -------------------------------------------------------------------------------


def test_every_registered_kernel_has_its_launches_paired():
    used = {name for *_, names in PAIRS for name in names}
    assert used == {f"{s.op}/{s.name}" for s in registry.kernels()}
    assert {who for who, *_ in PAIRS} == {"KernelGemm", "KernelGemm split-K", "TmaGemm", "KernelReduce"}


def _id(pair) -> str:
    who, kernel, _, names = pair
    return f"{names[0]}:{kernel.name}" if kernel.name != names[0].split("/")[1] else names[0]


@pytest.fixture(scope="module")
def compiled_at_once(request):
    """The kernels of every selected pair compiled together on threads (NVRTC releases the GIL:
    about half the time on two cores); a kernel that fails is left for its own test to report."""
    jobs = set()
    for item in request.session.items:
        if getattr(item, "function", None) is test_signature_matches_the_kernel:
            kernel = item.callspec.params["pair"][1]
            jobs.update((kernel, arch) for arch in _archs(kernel))

    def build(job):
        try:
            _compiled(*job)
        except Exception:  # reported by the test that compiles it again
            pass

    with ThreadPoolExecutor(max(2, os.cpu_count() or 1)) as pool:
        list(pool.map(build, jobs))


@needs_nvrtc
@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_signature_matches_the_kernel(pair, compiled_at_once):
    who, kernel, signature, names = pair
    if "<mma.h>" in kernel.source_path.read_text() and cc.cuda_include_dir() is None:
        pytest.skip(f"{kernel.name} includes <mma.h>: no CUDA toolkit or nvidia-cuda-runtime wheel on this machine")
    for arch in _archs(kernel):
        mangled, params = _compiled(kernel, arch)
        bad = mismatches(signature, params)
        assert not bad, (f"{who}'s signature for {kernel.name} ({', '.join(names)}; {arch}) disagrees with the "
                         f"kernel:\n  " + "\n  ".join(bad) + f"\n  signature {signature}\n  kernel    "
                         f"{[ptx_type(p) for p in params]}")
    if CXXFILT is not None:
        bad = cpp_mismatches(signature, cpp_kinds(mangled))
        assert not bad, f"{who}'s signature for {kernel.name}: " + "; ".join(bad)


@needs_nvrtc
def test_a_wrong_signature_is_reported():
    """The comparison can fail: a kind swapped, one dropped or added, a tensor map passed as a
    pointer are each reported (rung 15: two maps, ints, floats, pointers)."""
    kernel = registry.get("tma_ffma", "sgemm")
    signature = gemm_signature(kernel, False)
    _, params = _compiled(kernel, "sm_90")
    assert mismatches(signature, params) == []
    swapped = list(signature)
    swapped[4], swapped[5] = swapped[5], swapped[4]  # K and alpha (after the two maps): i32 <-> f32
    assert mismatches(swapped, params) == ["argument 4: 'f32' in the signature, .u32 in the kernel",
                                           "argument 5: 'i32' in the signature, .f32 in the kernel"]
    assert mismatches(signature[:-1], params)[0] == f"{len(signature) - 1} arguments in the signature, " \
                                                    f"{len(signature)} parameters in the kernel"
    assert mismatches(signature + ("ptr",), params)
    assert mismatches(("ptr",) + signature[1:], params) == [
        "argument 0: 'ptr' in the signature, .align 64 b8[128] in the kernel"]


@needs_nvrtc
@pytest.mark.skipif(CXXFILT is None, reason="c++filt is not on the PATH: the C++ parameter types are not compared")
def test_a_pointer_given_as_an_integer_is_reported_by_its_cpp_type():
    """What PTX cannot tell apart (a pointer and a 64-bit integer are both .u64), the mangled
    name's C++ types can: bgemm's strideA given as a pointer."""
    kernel = registry.get("batched_pipeline", "bgemm")
    signature = gemm_signature(kernel, True)
    mangled, params = _compiled(kernel, "sm_90")
    wrong = signature[:5] + ("ptr",) + signature[6:]
    assert mismatches(wrong, params) == []
    assert cpp_mismatches(signature, cpp_kinds(mangled)) == []
    assert cpp_mismatches(wrong, cpp_kinds(mangled)) == ["argument 5: 'ptr' in the signature, 'i64' in C++"]
