"""Tests that could not fail, eighth audit: hand-made mutants of cuda/cublaslt.py, cuda/cublas.py,
api/shared_workspaces.py, api/tuning.py and api/torch_ops.py that every other CPU test let
through, each pinned here by what a user would see: a cuBLASLt GEMM built with the wrong
descriptor, layouts, transpose flags, C type, preference or workspace, its arguments in the wrong
slots, its objects leaked or destroyed in the wrong order; a cuBLAS handle shared between threads
or made without its math mode; a library not found where it lies; a stream's cuBLASLt block handed
to a kernel; a tuning database's results cached under too small a key or not read afresh when
named, read with integrity checks again, or refused and warned of in the wrong words; a torch
op writing the caller's C, calling before it refuses, or handing on the wrong scalars or type.
No GPU: recording stand-ins for libcublasLt and libcublas (each entry point a Python function
that reads its ctypes arguments as the library would), for the stream's pool (test_api_workspace's),
for the tuning database's reader, and for the call behind the torch ops (FakeTensorMode's CUDA
tensors). The torch tests need torch (a CPU build serves) and skip without it."""
from __future__ import annotations

import contextlib
import ctypes
import threading
import types
import warnings

import pytest

from gemmlab.cuda import cublas, cublaslt
from gemmlab.errors import LaunchError

from . import test_api_workspace

pool = test_api_workspace.pool  # fixture, bound here by name


# -- cuda/cublaslt.py: a recording stand-in for libcublasLt -----------------------------------------

def _value(ref, size, signed=False):
    """What a setter's `ref` (a ctypes byref) holds, read as the library would: `size` bytes."""
    kind = {4: ctypes.c_int32 if signed else ctypes.c_uint32, 8: ctypes.c_int64 if signed else ctypes.c_uint64}[size]
    return ctypes.cast(ref, ctypes.POINTER(kind))[0]


class LtLib:
    """libcublasLt as PreparedLtGemm uses it: every object made gets a new number; `log` holds
    each call as the library sees it; the heuristic answers `answer` (count, state, workspace)."""

    _name = "libcublasLt.so.13"

    def __init__(self, count=1, state=0, workspace=4096, matmul_status=0):
        self.log, self.next, self.answer, self.matmul_status = [], 100, (count, state, workspace), matmul_status
        self.calls = []  # each cublasLtMatmul's 16 arguments, as values
        self.destroy_fails = set()

    def _new(self, ref):
        self.next += 1
        ref._obj.value = self.next
        return self.next

    def cublasLtCreate(self, ref):
        self.log.append(("Create", self._new(ref)))
        return 0

    def cublasLtMatmulDescCreate(self, ref, compute, scale):
        self.log.append(("MatmulDesc", self._new(ref), compute, scale))
        return 0

    def cublasLtMatrixLayoutCreate(self, ref, dtype, rows, cols, ld):
        self.log.append(("MatrixLayout", self._new(ref), dtype, rows, cols, ld))
        return 0

    def cublasLtMatmulPreferenceCreate(self, ref):
        self.log.append(("MatmulPreference", self._new(ref)))
        return 0

    def _setter(what):
        def setter(self, obj, attr, ref, size):
            self.log.append((what, obj.value, attr, _value(ref, size, signed=what != "pref"), size))
            return 0
        setter.__name__ = f"cublasLt{what}SetAttribute"
        return setter

    cublasLtMatmulDescSetAttribute = _setter("desc")
    cublasLtMatrixLayoutSetAttribute = _setter("layout")
    cublasLtMatmulPreferenceSetAttribute = _setter("pref")

    def cublasLtMatmulAlgoGetHeuristic(self, h, desc, la, lb, lc, ld, pref, n, result, count):
        self.log.append(("heuristic", h.value, desc.value, la.value, lb.value, lc.value, ld.value, pref.value, n))
        count._obj.value, result._obj.state, result._obj.workspaceSize = self.answer
        result._obj.algo.data[0] = 0xA160
        return 0

    def cublasLtGetStatusName(self, status):
        return {7: b"CUBLAS_STATUS_INVALID_VALUE", 15: b"CUBLAS_STATUS_NOT_SUPPORTED"}.get(status)

    def __getattr__(self, name):
        if name.endswith("Destroy"):
            def destroy(ptr):
                if ptr in self.destroy_fails:
                    raise OSError("destroy refused")
                self.log.append((name.removeprefix("cublasLt"), ptr))
                return 0
            return destroy
        raise AttributeError(name)

    def cublasLtMatmul(self, *args):
        self.calls.append(tuple(getattr(x, "value", x) for x in args))
        return self.matmul_status

    def made(self, what):
        return [entry for entry in self.log if entry[0] == what]


@pytest.fixture
def lt(monkeypatch):
    """A fresh LtLib as both cuBLASLt handles (typed and raw), this thread's handle forgotten,
    relaxed_capture recorded ('relaxed' in the log while inside)."""
    lib = LtLib()

    @contextlib.contextmanager
    def relaxed():
        lib.log.append("relaxed")
        yield
        lib.log.append("relaxed ends")

    monkeypatch.setattr(cublaslt, "_lib", lib)
    monkeypatch.setattr(cublaslt, "_raw", lib)
    monkeypatch.setattr(cublaslt, "relaxed_capture", relaxed)
    kept = vars(cublaslt._thread).pop("handle", None)  # this thread's own (the module's thread-local)
    yield lib
    vars(cublaslt._thread).pop("handle", None)
    if kept is not None:
        cublaslt._thread.handle = kept


def _allocator():
    asked = []

    def allocate(nbytes):
        asked.append(nbytes)
        return 0xF00000, types.SimpleNamespace(nbytes=nbytes)
    return asked, allocate


def test_an_lt_sgemm_is_built_with_the_classic_calls_layouts_and_types(lt):
    """fp32 5x7x3: the descriptor computes in fp32 with fp32 scalars read from host memory; Lt's
    A is the caller's B (7x3, ld 7), its B the caller's A (3x5, ld 3), C 7x5 ld 7 and D = C; no
    transpose, no batch; the heuristic asked for its first answer under the workspace and 16-byte
    alignment limits; the workspace it asks for comes from `allocate`, all inside relaxed capture."""
    asked, allocate = _allocator()
    gemm = cublaslt.PreparedLtGemm("sgemm", 5, 7, 3, allocate=allocate)
    (desc,) = lt.made("MatmulDesc")
    assert desc[2:] == (cublaslt.CUBLAS_COMPUTE_32F, cublaslt.CUDA_R_32F)
    assert [e[2:4] for e in lt.made("desc")] == [(cublaslt.CUBLASLT_MATMUL_DESC_POINTER_MODE,
                                                  cublaslt.CUBLASLT_POINTER_MODE_HOST)]
    layouts = lt.made("MatrixLayout")
    assert [e[2:] for e in layouts] == [(0, 7, 3, 7), (0, 3, 5, 3), (0, 7, 5, 7)]
    assert lt.made("layout") == []  # one matrix each: no batch attributes
    (pref,) = lt.made("MatmulPreference")
    prefs = {e[2]: (e[3], e[4]) for e in lt.made("pref")}
    assert prefs == {cublaslt.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: (cublaslt.WORKSPACE_BYTES, 8),
                     **{attr: (16, 4) for attr in (5, 6, 7, 8)}}  # A, B, C and D 16-byte aligned
    (heuristic,) = lt.made("heuristic")
    la, lb, lc = (e[1] for e in layouts)
    assert heuristic[1:] == (lt.made("Create")[0][1], desc[1], la, lb, lc, lc, pref[1], 1)
    assert gemm.workspace_bytes == 4096 and asked == [4096] and gemm.workspace_ptr == 0xF00000
    assert lt.log[0] == "relaxed" and lt.log[-1] == "relaxed ends"  # the workspace too: allocated last


def test_an_lt_call_passes_b_then_a_its_scalars_workspace_and_stream(lt):
    asked, allocate = _allocator()
    gemm = cublaslt.PreparedLtGemm("sgemm", 5, 7, 3, allocate=allocate)
    gemm(2.0, 0xA0, 0xB0, 0.5, 0xC0, 9)
    (args,) = lt.calls
    alpha, beta = ctypes.c_float.from_address(args[2]).value, ctypes.c_float.from_address(args[7]).value
    la, lb, lc = (e[1] for e in lt.made("MatrixLayout"))
    assert (alpha, beta) == (2.0, 0.5)
    assert args[3:7] == (0xB0, la, 0xA0, lb) and args[8:12] == (0xC0, lc, 0xC0, lc)
    assert ctypes.cast(args[12], ctypes.POINTER(cublaslt.MatmulAlgo))[0].data[0] == 0xA160  # the heuristic's
    assert args[13:] == (0xF00000, 4096, 9)
    assert args[0] == lt.made("Create")[0][1] and args[1] == lt.made("MatmulDesc")[0][1]


def test_an_lt_call_refuses_any_operand_not_16_byte_aligned_and_names_a_failure(lt):
    gemm = cublaslt.PreparedLtGemm("sgemm", 5, 7, 3, allocate=_allocator()[1])
    gemm(1.0, 0x1010, 0x2020, 0.0, 0x3030, 1)  # 16-byte aligned: taken
    for a, b, c in ((0x1008, 0x2000, 0x3000), (0x1000, 0x2008, 0x3000), (0x1000, 0x2000, 0x3008)):
        with pytest.raises(LaunchError, match="prepared for 16-byte aligned operands"):
            gemm(1.0, a, b, 0.0, c, 1)
    lt.matmul_status = 15
    with pytest.raises(LaunchError, match=r"cublasLtMatmul \(sgemm GEMM\) failed \(CUBLAS_STATUS_NOT_SUPPORTED\)"):
        gemm(1.0, 0x1000, 0x2000, 0.0, 0x3000, 1)
    assert len(lt.calls) == 2


def test_an_lt_gemm_called_from_another_thread_uses_that_threads_handle(lt):
    gemm = cublaslt.PreparedLtGemm("sgemm", 5, 7, 3, allocate=_allocator()[1])
    gemm(1.0, 0, 0, 0.0, 0, 1)
    other = threading.Thread(target=gemm, args=(1.0, 0, 0, 0.0, 0, 1))
    other.start()
    other.join()
    gemm(1.0, 0, 0, 0.0, 0, 1)
    handles = [e[1] for e in lt.made("Create")]
    assert len(handles) == 2 and [args[0] for args in lt.calls] == [handles[0], handles[1], handles[0]]


def test_the_transposes_set_the_flag_of_the_other_operand_and_a_16bit_c_its_type(lt):
    """trans_b (x @ W.T) sets TRANSA (Lt's A is the caller's B), trans_a TRANSB; a bf16 C is C's
    and D's layout type, with the fp32-only split-K reduction; a bf16 A and B with an fp32 C keep
    the default reductions."""
    cublaslt.PreparedLtGemm("ex", 5, 7, 3, "bf16", trans_b=True, out_dtype="bf16", allocate=_allocator()[1])
    assert lt.made("MatmulDesc")[0][2:] == (cublaslt.CUBLAS_COMPUTE_32F, cublaslt.CUDA_R_32F)  # fp32 alpha, beta
    flags = [e[2:4] for e in lt.made("desc")][1:]
    assert flags == [(cublaslt.CUBLASLT_MATMUL_DESC_TRANSA, cublaslt.CUBLAS_OP_T)]
    assert [e[2] for e in lt.made("MatrixLayout")] == [cublaslt.CUDA_R_16BF] * 3
    assert lt.made("MatrixLayout")[0][3:] == (3, 7, 3)  # W (7x3) as Lt's A, 3x7 ld 3, transposed
    assert {e[2] for e in lt.made("pref")} >= {cublaslt.CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK}
    lt.log.clear()
    cublaslt.PreparedLtGemm("ex", 5, 7, 3, "bf16", trans_a=True, allocate=_allocator()[1])
    assert [e[2:4] for e in lt.made("desc")][1:] == [(cublaslt.CUBLASLT_MATMUL_DESC_TRANSB, cublaslt.CUBLAS_OP_T)]
    assert [e[2] for e in lt.made("MatrixLayout")] == [cublaslt.CUDA_R_16BF] * 2 + [cublaslt.CUDA_R_32F]
    assert cublaslt.CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK not in {e[2] for e in lt.made("pref")}


def test_a_batch_is_set_on_each_layout_of_a_batched_gemm_only(lt):
    cublaslt.PreparedLtGemm("batched", 5, 7, 3, batch=2, allocate=_allocator()[1])
    layouts = [e[1] for e in lt.made("MatrixLayout")]
    got = [(e[1], e[2], e[3], e[4]) for e in lt.made("layout")]
    count, offset = cublaslt.CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, cublaslt.CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET
    assert got == [(layouts[0], count, 2, 4), (layouts[0], offset, 21, 8), (layouts[1], count, 2, 4),
                   (layouts[1], offset, 15, 8), (layouts[2], count, 2, 4), (layouts[2], offset, 35, 8)]
    lt.log.clear()
    cublaslt.PreparedLtGemm("sgemm", 5, 7, 3, batch=3, allocate=_allocator()[1])  # not a batched kind
    assert lt.made("layout") == []


@pytest.mark.parametrize("answer, why", [((0, 0, 0), "no algorithm returned"),
                                         ((1, 15, 0), "CUBLAS_STATUS_NOT_SUPPORTED")])
def test_no_algorithm_from_the_heuristic_is_refused_naming_the_gemm(lt, answer, why):
    lt.answer = answer
    with pytest.raises(cublaslt.NoAlgorithmError) as refused:
        cublaslt.PreparedLtGemm("ex", 5, 7, 3, "fp16", trans_a=True, trans_b=True, out_dtype="fp16",
                                allocate=lambda n: pytest.fail("allocated for no algorithm"))
    assert str(refused.value) == f"cuBLASLt has no algorithm for ex 5x7x3 fp16 A transposed B transposed C fp16 ({why})"


def test_a_gemm_without_allocate_takes_a_device_allocation_of_its_own(lt, monkeypatch):
    made = []
    monkeypatch.setattr(cublaslt, "DeviceMemory",
                        lambda n, what: made.append((n, what)) or types.SimpleNamespace(ptr=0xD000))
    gemm = cublaslt.PreparedLtGemm("sgemm", 5, 7, 3)
    assert made == [(4096, "cuBLASLt's workspace")] and gemm.workspace_ptr == 0xD000
    assert [e[0] for e in gemm._owned].count("owner") == 1 and gemm._owned[-1][1].ptr == 0xD000


def test_dropping_an_lt_gemm_destroys_what_it_made_newest_first_despite_a_failure(lt):
    import gc

    gemm = cublaslt.PreparedLtGemm("sgemm", 5, 7, 3, allocate=_allocator()[1])
    assert gemm._finalizer.atexit is False
    made = [(e[0], e[1]) for e in lt.log if isinstance(e, tuple) and e[0] in ("MatmulDesc", "MatrixLayout",
                                                                             "MatmulPreference")]
    lt.destroy_fails.add(made[2][1])  # Lt's B layout refuses: the others are destroyed all the same
    lt.log.clear()
    del gemm
    gc.collect()
    assert lt.log == [(what + "Destroy", ptr) for what, ptr in reversed(made) if ptr != made[2][1]]


def test_nothing_is_destroyed_at_interpreter_exit_and_an_owner_is_only_dropped(monkeypatch):
    import sys

    touched = []

    class Lib:
        def __getattr__(self, name):
            touched.append(name)
            return lambda *a: 0

    owned = [("cublasLtMatmulDescDestroy", 5), ("owner", object())]
    cublaslt._release(Lib(), owned)
    assert touched == ["cublasLtMatmulDescDestroy"] and owned == []
    monkeypatch.setattr(sys, "is_finalizing", lambda: True)
    owned = [("cublasLtMatmulDescDestroy", 5)]
    cublaslt._release(Lib(), owned)
    assert touched == ["cublasLtMatmulDescDestroy"] and len(owned) == 1


def test_the_lt_handle_is_made_once_per_thread_in_relaxed_capture(lt):
    h = cublaslt.handle()
    assert cublaslt.handle() is h and lt.log == ["relaxed", ("Create", h.value), "relaxed ends"]
    got = []
    t = threading.Thread(target=lambda: got.append(cublaslt.handle()))
    t.start()
    t.join()
    assert got[0] is not h and got[0].value != h.value


def test_a_failed_lt_call_is_named_with_the_status_name_or_number(lt, monkeypatch):
    cublaslt.check(0, "cublasLtCreate")
    with pytest.raises(LaunchError, match=r"^cublasLtCreate failed \(CUBLAS_STATUS_INVALID_VALUE\)$"):
        cublaslt.check(7, "cublasLtCreate")
    with pytest.raises(LaunchError, match=r"^cublasLtMatmulDescCreate failed \(cuBLAS status 3\)$"):
        cublaslt.check(3, "cublasLtMatmulDescCreate")

    def gone():
        raise LaunchError("cuBLASLt is not loadable")

    monkeypatch.setattr(cublaslt, "library", gone)  # an error path must not fail in turn
    assert cublaslt.status_name(7) == "cuBLAS status 7"


def test_the_library_is_declared_once_and_the_raw_handle_is_a_second_load(monkeypatch):
    class Fn:
        pass

    class Loaded:
        _name = "/wheel/libcublasLt.so.13"

        def __getattr__(self, name):
            fn = Fn()
            setattr(self, name, fn)
            return fn

    loaded, opened = Loaded(), []
    monkeypatch.setattr(cublaslt, "_lib", None)
    monkeypatch.setattr(cublaslt, "_raw", None)
    monkeypatch.setattr(cublaslt, "load_library", lambda name, sonames, what: loaded)
    monkeypatch.setattr(cublaslt.ctypes, "CDLL", lambda path: opened.append(path) or types.SimpleNamespace(path=path))
    assert cublaslt.library() is loaded and cublaslt.library() is loaded
    assert loaded.cublasLtGetStatusName.restype is ctypes.c_char_p
    assert loaded.cublasLtMatrixLayoutCreate.argtypes[2:] == [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64]
    assert loaded.cublasLtMatmulDescSetAttribute.argtypes == [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                                              ctypes.c_size_t]
    raw = cublaslt.raw_library()
    assert raw is not loaded and opened == ["/wheel/libcublasLt.so.13"] and cublaslt.raw_library() is raw


def test_lt_types_and_c_type_take_only_what_the_classic_calls_take():
    assert cublaslt.lt_types("ex", "fp32") == (cublaslt.CUDA_R_32F, cublaslt.CUBLAS_COMPUTE_32F)  # not TF32
    with pytest.raises(ValueError, match="a bf16 C needs bf16 A and B .GemmEx kind., not batched bf16"):
        cublaslt.c_type("batched", "bf16", "bf16")


# -- cuda/cublas.py: the classic handle and calls over a recording libcublas ----------------------

class ClassicLib:
    """libcublas's entry points the handle and PreparedGemm call: `log` holds (name, arguments as
    values); each call of a GEMM entry point reads alpha and beta through their pointers, as
    cuBLAS does in host pointer mode."""

    _name = "libcublas.so.13"

    def __init__(self, status=0):
        self.log, self.next, self.status = [], 0x100, status

    def cublasCreate_v2(self, ref):
        self.next += 1
        ref._obj.value = self.next
        self.log.append(("cublasCreate_v2", self.next))
        return 0

    def __getattr__(self, name):
        def call(*args):
            values = [getattr(x, "value", x) for x in args]
            gemm = name in ("cublasSgemm_v2", "cublasSgemmStridedBatched", "cublasGemmEx")
            if gemm:
                values.append(tuple(ctypes.c_float.from_address(values[i]).value
                                    for i in (6, 11 if name == "cublasSgemm_v2" else 13)))
            self.log.append((name, *values))
            return self.status if gemm else 0
        return call


@pytest.fixture
def classic(monkeypatch):
    lib = ClassicLib()
    monkeypatch.setattr(cublas, "_lib", lib)
    monkeypatch.setattr(cublas, "_raw", lib)
    monkeypatch.setattr(cublas, "_thread", threading.local())
    return lib


def test_the_classic_handle_disallows_reduced_precision_reductions(classic):
    h = cublas.handle()
    assert classic.log == [("cublasCreate_v2", h.handle.value),
                           ("cublasSetMathMode", h.handle.value, cublas.MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)]
    assert cublas.MATH_DISALLOW_REDUCED_PRECISION_REDUCTION == 16


def test_the_classic_handle_is_one_per_thread_and_each_threads_call_uses_its_own(classic):
    gemm = cublas.PreparedGemm("sgemm", 5, 7, 3)
    gemm(2.0, 0xA0, 0xB0, 0.5, 0xC0, 11)
    t = threading.Thread(target=gemm, args=(3.0, 0xA0, 0xB0, 0.25, 0xC0, 12))
    t.start()
    t.join()
    gemm(4.0, 0xA0, 0xB0, 0.0, 0xC0, 11)
    made = [e[1] for e in classic.log if e[0] == "cublasCreate_v2"]
    calls = [(e[1], e[-1]) for e in classic.log if e[0] == "cublasSgemm_v2"]
    assert len(made) == 2 and calls == [(made[0], (2.0, 0.5)), (made[1], (3.0, 0.25)), (made[0], (4.0, 0.0))]
    binds = [e[1:] for e in classic.log if e[0] == "cublasSetStream_v2"]
    assert binds == [(made[0], 11), (made[1], 12)]  # each handle bound to its call's stream, once
    assert cublas.handle() is cublas.handle()


def test_a_classic_gemm_that_fails_is_a_launch_error_with_its_status(classic):
    classic.status = 13
    with pytest.raises(LaunchError, match=r"^cuBLAS batched GEMM failed \(status 13\)$"):
        cublas.PreparedGemm("batched", 5, 7, 3, batch=2)(1.0, 0, 0, 0.0, 0, 1)
    with pytest.raises(LaunchError, match=r"^cublasSetStream failed \(cuBLAS status 7\)$"):
        cublas.check(7, "cublasSetStream")


def test_the_classic_calls_arguments_for_each_kind(classic):
    """Row-major C = A @ B as column-major C^T = B^T A^T: B first, (N, M, K), leading dimensions
    the row lengths; StridedBatched with each operand's stride and the batch; GemmEx's compute
    type TF32 only for tf32."""
    h = cublas.handle().handle.value

    def args(*prepared_args, **kw):
        g = cublas.PreparedGemm(*prepared_args, **kw)
        g(1.0, 0xA0, 0xB0, 0.0, 0xC0, 1)
        return classic.log[-1][1:-1]

    N_, T_ = cublas.OP_N, cublas.OP_T
    sgemm = args("sgemm", 5, 7, 3)
    assert sgemm[:6] == (h, N_, N_, 7, 5, 3) and sgemm[7:] == (0xB0, 7, 0xA0, 3, sgemm[11], 0xC0, 7)
    batched = args("batched", 5, 7, 3, batch=4)
    assert batched[:6] == (h, N_, N_, 7, 5, 3) and batched[7:11] == (0xB0, 7, 21, 0xA0) and batched[11:13] == (3, 15)
    assert batched[14:] == (0xC0, 7, 35, 4)
    tf32, bf16 = args("ex", 5, 7, 3, "tf32"), args("ex", 5, 7, 3, "bf16", trans_a=True)
    assert tf32[-2:] == (cublas.COMPUTE_32F_FAST_TF32, cublas.GEMM_DEFAULT) and tf32[8] == 0
    assert bf16[-2:] == (cublas.COMPUTE_32F, cublas.GEMM_DEFAULT) and bf16[1:3] == (N_, T_) and bf16[8] == 14
    for kind in ("sgemm", "batched"):
        with pytest.raises(ValueError, match="taken by the GemmEx kind only"):
            cublas.PreparedGemm(kind, 5, 7, 3, trans_a=True)


def test_the_one_call_helpers_hand_on_their_shape_batch_and_transposes(monkeypatch):
    made = []

    class Prepared:
        def __init__(self, *args, **kw):
            made.append((args, kw))

        def __call__(self, *args):
            made.append(args)

    monkeypatch.setattr(cublas, "PreparedGemm", Prepared)
    cublas.sgemm(5, 7, 3, 2.0, 0xA0, 0xB0, 0.5, 0xC0, 9)
    cublas.gemm_ex("bf16", 5, 7, 3, 1.0, 0xA0, 0xB0, 0.0, 0xC0, 9, trans_b=True, out_dtype="bf16", trans_a=True)
    cublas.sgemm_strided_batched(4, 5, 7, 3, 1.0, 0xA0, 0xB0, 0.0, 0xC0, 9)
    assert made == [(("sgemm", 5, 7, 3), {}), (2.0, 0xA0, 0xB0, 0.5, 0xC0, 9),
                    (("ex", 5, 7, 3, "bf16"), {"trans_b": True, "out_dtype": "bf16", "trans_a": True}),
                    (1.0, 0xA0, 0xB0, 0.0, 0xC0, 9),
                    (("batched", 5, 7, 3), {"batch": 4}), (1.0, 0xA0, 0xB0, 0.0, 0xC0, 9)]


def test_the_classic_raw_handle_is_a_second_load_of_the_same_file(monkeypatch):
    class Loaded:
        _name = "/wheel/libcublas.so.13"

    opened = []
    monkeypatch.setattr(cublas, "_lib", Loaded())
    monkeypatch.setattr(cublas, "_raw", None)
    monkeypatch.setattr(cublas.ctypes, "CDLL", lambda path: opened.append(path) or types.SimpleNamespace(
        cublasSgemm_v2="raw sgemm"))
    g = cublas.PreparedGemm("sgemm", 5, 7, 3)
    assert g._fn == "raw sgemm" and opened == ["/wheel/libcublas.so.13"]


@pytest.fixture
def loader(monkeypatch):
    """ctypes.CDLL as load_library sees it: `loads` is the set of paths that load; `tried` the order."""
    import sys

    state = types.SimpleNamespace(loads=set(), tried=[], found="/wheel/lib/libcublas.so.13", error=None)

    def load_nvidia_dynamic_lib(name):
        if state.error:
            raise state.error
        return types.SimpleNamespace(abs_path=state.found)

    def cdll(path):
        state.tried.append(path)
        if path not in state.loads:
            raise OSError(f"{path}: cannot open shared object file")
        return ("loaded", path)

    monkeypatch.setitem(sys.modules, "cuda.pathfinder",
                        types.SimpleNamespace(load_nvidia_dynamic_lib=load_nvidia_dynamic_lib))
    monkeypatch.setattr(cublas.ctypes, "CDLL", cdll)
    return state


def test_a_library_is_loaded_where_pathfinder_found_it(loader):
    loader.loads.add(loader.found)
    assert cublas.load_library("cublas", ("libcublas.so.13", "libcublas.so.12"), "cuBLAS") == ("loaded", loader.found)
    assert loader.tried == [loader.found]


def test_without_pathfinder_each_soname_is_tried_in_turn_and_a_failure_names_every_error(loader):
    loader.error = RuntimeError("no such library in the wheels")  # not only ImportError: any failure
    loader.loads.add("libcublas.so.12")
    loaded = cublas.load_library("cublas", ("libcublas.so.13", "libcublas.so.12"), "cuBLAS")
    assert loaded == ("loaded", "libcublas.so.12")
    loader.loads.clear()
    loader.tried.clear()
    with pytest.raises(LaunchError, match=r"^cuBLAS is not loadable \(libcublas.so.13: cannot open shared object "
                                          r"file; libcublas.so.12: cannot open shared object file\)$"):
        cublas.load_library("cublas", ("libcublas.so.13", "libcublas.so.12"), "cuBLAS")
    assert loader.tried == ["libcublas.so.13", "libcublas.so.12"]


def test_cublas_is_looked_for_as_cuda_13s_then_cuda_12s(monkeypatch):
    asked = []

    class Loaded:
        def __getattr__(self, name):
            setattr(self, name, types.SimpleNamespace())
            return getattr(self, name)

    monkeypatch.setattr(cublas, "_lib", None)
    monkeypatch.setattr(cublas, "load_library", lambda *args: asked.append(args) or Loaded())
    cublas.library()
    assert asked == [("cublas", ("libcublas.so.13", "libcublas.so.12"), "cuBLAS")]
    assert cublaslt.SONAMES == ("libcublasLt.so.13", "libcublasLt.so.12")


# -- api/shared_workspaces.py --------------------------------------------------------------------

def test_the_per_thread_default_stream_is_cudas_handle_2(pool):
    """cudaStreamPerThread is the handle 0x2 (CU_STREAM_PER_THREAD): a block per thread there, one
    block for every thread on an ordinary stream."""
    from gemmlab.api import launches, shared_workspaces

    got = []

    def build(stream):
        with launches.launching_on(stream):
            got.append(shared_workspaces.library_workspace(4096)[1])

    for stream in (2, 1):
        build(stream)
        t = threading.Thread(target=build, args=(stream,))
        t.start()
        t.join()
    assert got[0] is not got[1] and got[2] is got[3]


def test_cublaslts_block_and_the_kernels_block_of_one_stream_are_two(pool):
    """cuBLASLt writes its workspace as it likes; a kernel's block holds flags that must be zero.
    On the per-thread stream both would be keyed (stream, thread): one dict would hand the kernel
    cuBLASLt's block, its flags whatever cuBLASLt left."""
    from gemmlab.api import launches, shared_workspaces

    with launches.launching_on(shared_workspaces.PER_THREAD_STREAM):
        _, lt_block = shared_workspaces.library_workspace(4096)
        kernel = shared_workspaces.kernel_workspace(1024, 32)
    assert kernel.block is not lt_block and [entry[1] for entry in pool] == [4096, 4096]


def test_a_kernel_block_grows_to_twice_its_size_up_to_64_mib(pool):
    from gemmlab.api import launches, shared_workspaces

    mib = 1 << 20
    with launches.launching_on(11):
        first = shared_workspaces.kernel_workspace(24 * mib // 4, 0)
        second = shared_workspaces.kernel_workspace(40 * mib // 4, 0)  # twice 24 MiB is 48, under the most
        third = shared_workspaces.kernel_workspace(50 * mib // 4, 0)  # twice 48 is past 64 MiB: 64 MiB
    assert (first.block.nbytes, second.block.nbytes, third.block.nbytes) == (24 * mib, 48 * mib, 64 * mib)


def test_a_shared_kernel_workspace_is_kept_by_its_owner_the_block(pool):
    """executors.py keeps `owner` as the executor's workspace: for a shared one, the block."""
    from gemmlab.api import launches, shared_workspaces

    with launches.launching_on(11):
        w = shared_workspaces.kernel_workspace(1024, 32)
    assert w.owner is w.block and w.ptr == w.block.ptr


# -- api/tuning.py --------------------------------------------------------------------------------

@pytest.fixture
def tuned(monkeypatch, tmp_path):
    """tuning's state fresh (no database named, an empty cache, nothing warned of), and its reader
    stood in: `reads` holds (file, integrity, named_by, gpu, spec name, problem) per read; the
    answer is {"read": n} for the nth. Returns (reads, a non-empty file to name)."""
    from gemmlab import store
    from gemmlab.api import tuning
    from gemmlab.harness import tuned as harness_tuned

    reads = []

    class Store:
        def __init__(self, path, integrity=True, write=True, named_by=None):
            self.opened = (str(path), integrity, named_by)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def query(self, sql):  # use_tuning's check that the file is a results database
            return []

    def usable_best(st, gpu, spec, problem):
        reads.append((*st.opened, gpu, spec.name, problem))
        return {"read": len(reads)}

    monkeypatch.setattr(tuning, "_named", None)
    monkeypatch.setattr(tuning, "_cache", {})
    monkeypatch.setattr(tuning, "_warned", set())
    monkeypatch.delenv("GEMMLAB_DB", raising=False)
    monkeypatch.setattr(store, "ResultStore", Store)
    monkeypatch.setattr(harness_tuned, "usable_best", usable_best)
    db = tmp_path / "tuned.db"
    db.write_bytes(b"SQLite format 3\0")
    return reads, db


KERNEL = types.SimpleNamespace(kind="kernel", name="bigtile")


def test_a_tuned_lookup_is_cached_per_database_kernel_op_type_shape_gpu_layout_and_c_type(tuned, monkeypatch):
    from gemmlab.api import tuning
    from gemmlab.problem import GemmProblem

    reads, db = tuned
    monkeypatch.setenv("GEMMLAB_DB", str(db))
    base = GemmProblem(256, 128, 64, dtype="bf16")
    others = [(KERNEL, GemmProblem(256, 128, 64, dtype="fp16"), "GPU A"),
              (KERNEL, GemmProblem(256, 128, 32, dtype="bf16"), "GPU A"),
              (KERNEL, base, "GPU B"),
              (KERNEL, GemmProblem(256, 128, 64, dtype="bf16", layout="nt"), "GPU A"),
              (KERNEL, GemmProblem(256, 128, 64, dtype="bf16", out_dtype="bf16"), "GPU A"),
              (types.SimpleNamespace(kind="kernel", name="persistent"), base, "GPU A"),
              (KERNEL, types.SimpleNamespace(op="bgemm", dtype="bf16", M=256, N=128, K=64), "GPU A")]
    assert tuning.tuned_params(KERNEL, base, "GPU A") == {"read": 1}
    assert tuning.tuned_params(KERNEL, GemmProblem(256, 128, 64, dtype="bf16"), "GPU A") == {"read": 1}  # cached
    for n, (spec, problem, gpu) in enumerate(others, start=2):
        assert tuning.tuned_params(spec, problem, gpu) == {"read": n}, (spec.name, problem, gpu)
    assert reads[0] == (str(db), False, "GEMMLAB_DB", "GPU A", "bigtile", base)  # no integrity check per shape
    other_db = db.with_name("other.db")
    other_db.write_bytes(b"SQLite format 3\0")
    monkeypatch.setenv("GEMMLAB_DB", str(other_db))
    assert tuning.tuned_params(KERNEL, base, "GPU A") == {"read": len(others) + 2}
    assert tuning.tuned_params(types.SimpleNamespace(kind="library", name="cublas"), base, "GPU A") is None
    assert len(reads) == len(others) + 2


def test_naming_a_database_or_none_reads_it_afresh(tuned, monkeypatch):
    """use_tuning empties the cache: the same file named again (a tune may have written it since),
    or none named after it (back to GEMMLAB_DB's file), is read again, not answered from before."""
    import gemmlab
    from gemmlab.api import tuning
    from gemmlab.problem import GemmProblem

    reads, db = tuned
    problem = GemmProblem(256, 128, 64, dtype="bf16")
    monkeypatch.setenv("GEMMLAB_DB", str(db))
    assert tuning.tuned_params(KERNEL, problem, "GPU A") == {"read": 1}
    gemmlab.use_tuning(db)
    assert tuning.tuned_params(KERNEL, problem, "GPU A") == {"read": 2}
    assert reads[-1][2] == "gemmlab.use_tuning(path)"
    gemmlab.use_tuning(None)
    assert tuning.tuned_params(KERNEL, problem, "GPU A") == {"read": 3}
    assert reads[-1][2] == "GEMMLAB_DB"


def test_use_tuning_names_a_directory_or_a_pipe_for_what_it_is(tmp_path):
    import os

    import gemmlab
    from gemmlab.errors import BadArgumentError

    with pytest.raises(BadArgumentError, match=r"^gemmlab.use_tuning: .* is a directory: name a results database "
                                               r"file$"):
        gemmlab.use_tuning(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(BadArgumentError, match=r"no tuning database at .*pipe: it is not a regular file \(a pipe"):
        gemmlab.use_tuning(tmp_path / "pipe")
    with pytest.raises(BadArgumentError, match=r"no tuning database at .*none.db: it does not exist$"):
        gemmlab.use_tuning(tmp_path / "none.db")


def test_a_gemmlab_db_naming_a_directory_is_no_database_warned_of_and_not_read(tuned, monkeypatch, tmp_path):
    from gemmlab.api import tuning
    from gemmlab.problem import GemmProblem

    reads, _ = tuned
    folder = tmp_path / "dbs"
    folder.mkdir()
    monkeypatch.setenv("GEMMLAB_DB", str(folder))
    with pytest.warns(UserWarning, match=f"no tuning database at {folder} \\(named by GEMMLAB_DB\\)"):
        assert tuning.tuned_params(KERNEL, GemmProblem(256, 128, 64), "GPU A") is None
    assert reads == [] and "no such file" in tuning.describe()


def test_a_database_that_cannot_be_read_is_one_line_naming_it(tuned, monkeypatch):
    import sqlite3

    from gemmlab.api import tuning
    from gemmlab.errors import BadArgumentError
    from gemmlab.harness import tuned as harness_tuned
    from gemmlab.problem import GemmProblem

    reads, db = tuned
    monkeypatch.setenv("GEMMLAB_DB", str(db))
    failure = []

    def usable_best(store, gpu, spec, problem):
        raise failure[0]

    monkeypatch.setattr(harness_tuned, "usable_best", usable_best)
    failure.append(BadArgumentError(f"{db} was written by a newer gemmlab"))
    with pytest.raises(BadArgumentError, match=f"^the tuning database: {db} was written by a newer gemmlab$"):
        tuning.tuned_params(KERNEL, GemmProblem(256, 128, 64), "GPU A")
    failure[0] = sqlite3.DatabaseError("file is not a database")
    with pytest.raises(BadArgumentError, match=f"^cannot read the tuning database {db} \\(named by GEMMLAB_DB\\): "
                                               "file is not a database$"):
        tuning.tuned_params(KERNEL, GemmProblem(256, 128, 64), "GPU A")
    assert tuning._cache == {}, "a failed read is not remembered as nothing tuned"


def test_an_empty_gemmlab_db_names_no_database(tuned, monkeypatch):
    from gemmlab.api import tuning
    from gemmlab.problem import GemmProblem

    reads, _ = tuned
    monkeypatch.setenv("GEMMLAB_DB", "")
    assert tuning.database() is None and tuning.describe().startswith("no database named")
    assert tuning.tuned_params(KERNEL, GemmProblem(256, 128, 64), "GPU A") is None and reads == []


def test_a_database_named_by_use_tuning_then_removed_is_warned_of_as_use_tunings(tuned):
    import gemmlab
    from gemmlab.api import tuning
    from gemmlab.problem import GemmProblem

    reads, db = tuned
    gemmlab.use_tuning(db)
    db.unlink()
    with pytest.warns(UserWarning, match=f"^gemmlab: no tuning database at {db} \\(named by gemmlab.use_tuning\\): "
                                         "the shipped table's parameters serve$"):
        assert tuning.tuned_params(KERNEL, GemmProblem(256, 128, 64), "GPU A") is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once a path
        assert tuning.tuned_params(KERNEL, GemmProblem(512, 128, 64), "GPU A") is None
    assert reads == [] and f"{db} (use_tuning): no such file" in tuning.describe()
    gemmlab.use_tuning(None)


# -- api/torch_ops.py -----------------------------------------------------------------------------

@pytest.fixture
def torch_ops(monkeypatch):
    """(torch, api.torch_ops, the calls calls.gemm got) with calls.gemm stood in by a recorder
    that returns a fresh tensor; skips without torch."""
    torch = pytest.importorskip("torch", reason="the torch custom ops need torch (a CPU build serves)")
    import gemmlab
    from gemmlab.api import calls, torch_ops

    gemmlab.register_torch_ops()
    got = []

    def gemm(op, caller, A, B, out, alpha, beta, impl, params, out_dtype):
        got.append(types.SimpleNamespace(op=op, caller=caller, A=A, B=B, out=out, alpha=alpha, beta=beta,
                                         out_dtype=out_dtype))
        return out if out is not None else A.new_empty((A.shape[0], B.shape[1]), dtype=out_dtype or torch.float32)

    monkeypatch.setattr(calls, "gemm", gemm)
    return torch, torch_ops, got


@pytest.fixture
def fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        yield


def test_the_ops_call_works_on_a_row_major_copy_of_c_never_on_c(torch_ops, fake_mode):
    torch, torch_ops, got = torch_ops
    A, B = torch.empty(4, 3, device="cuda"), torch.empty(3, 5, device="cuda")
    C = torch.empty(5, 4, device="cuda").t()  # a transposed view
    torch_ops._gemm("sgemm", A, B, C, 2.0, 0.5)
    (call,) = got
    assert call.out is not C and call.out.is_contiguous() and tuple(call.out.shape) == (4, 5)
    assert (call.op, call.caller, call.alpha, call.beta) == ("sgemm", "torch.ops.gemmlab.sgemm", 2.0, 0.5)
    assert call.A is A and call.B is B
    assert call.out_dtype is None


def test_a_c_with_beta_zero_is_not_read_and_gives_the_results_type(torch_ops, fake_mode):
    torch, torch_ops, got = torch_ops
    A, B = torch.empty(4, 3, device="cuda", dtype=torch.float16), torch.empty(3, 5, device="cuda", dtype=torch.float16)
    torch_ops._gemm("hgemm", A, B, torch.empty(4, 5, device="cuda", dtype=torch.float16), 1.0, 0.0)
    torch_ops._gemm("hgemm", A, B, None, 1.0, 0.0, torch.float16)
    assert [(c.out, c.out_dtype, c.beta) for c in got] == [(None, torch.float16, 0.0), (None, torch.float16, 0.0)]


def test_the_op_refuses_what_the_metadata_decides_before_calling(torch_ops, fake_mode):
    from gemmlab.errors import BadArgumentError

    torch, torch_ops, got = torch_ops
    with pytest.raises(BadArgumentError, match="A is 4x3 but B is 7x5"):
        torch_ops._gemm("sgemm", torch.empty(4, 3, device="cuda"), torch.empty(7, 5, device="cuda"), None, 1.0, 0.0)
    assert got == []


def test_tensors_on_two_gpus_are_refused_naming_the_second(torch_ops, fake_mode):
    from gemmlab.errors import BadArgumentError

    torch, torch_ops, got = torch_ops
    A, B = torch.empty(4, 3, device="cuda:0"), torch.empty(3, 5, device="cuda:1")
    with pytest.raises(BadArgumentError, match=r"^B is on cuda:1; torch.ops.gemmlab.sgemm needs CUDA tensors on one "
                                               r"GPU$"):
        torch_ops._operands("sgemm", A, B, None, 0.0, None)


def test_a_type_gemmlab_does_not_take_is_named_by_torchs_name(torch_ops, fake_mode):
    from gemmlab.errors import BadArgumentError

    torch, torch_ops, got = torch_ops
    A = torch.empty(4, 3, device="cuda", dtype=torch.int32)
    with pytest.raises(BadArgumentError, match=r"^A has dtype int32; torch.ops.gemmlab.sgemm needs float32$"):
        torch_ops._operands("sgemm", A, torch.empty(3, 5, device="cuda"), None, 0.0, None)
    x = torch.empty(4, 3, device="cuda", dtype=torch.float64)
    with pytest.raises(BadArgumentError, match=r"^B has dtype float64; torch.ops.gemmlab.sgemm needs float32$"):
        torch_ops._operands("sgemm", torch.empty(4, 3, device="cuda"), x, None, 0.0, None)


def test_b_of_another_rank_is_refused_by_its_own_rank(torch_ops, fake_mode):
    from gemmlab.errors import BadArgumentError

    torch, torch_ops, got = torch_ops
    with pytest.raises(BadArgumentError, match=r"^B must be 2-D, got 3-D$"):
        torch_ops._operands("sgemm", torch.empty(4, 3, device="cuda"), torch.empty(2, 3, 5, device="cuda"), None, 0.0,
                            None)


def test_reduce_sum_hands_its_tensor_on_as_it_is(torch_ops, monkeypatch):
    """The real op passes x itself (a strided view included) to the call, which reads it in place."""
    from gemmlab.api import sum_calls

    torch, torch_ops, _ = torch_ops
    got = []
    monkeypatch.setattr(sum_calls, "reduce_sum", lambda x, impl, params: got.append((x, impl, params)) or x.sum())
    x = torch.arange(12.0).reshape(3, 4).t()
    assert float(torch.ops.gemmlab.reduce_sum(x)) == 66.0
    (seen, impl, params), = got
    assert seen.data_ptr() == x.data_ptr() and seen.stride() == (1, 4) and (impl, params) == (None, None)
