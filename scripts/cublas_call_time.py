"""Host time of one prepared cuBLAS call: the classic entry point (cuda/cublas.py, the algorithm
chosen inside every call) against cuBLASLt with the algorithm chosen once (cuda/cublaslt.py),
with torch.mm of the same problem in the same process for scale. Warm, back to back on one
stream, no synchronisation per call (apibench._host_us: median of 11 interleaved batches).

    PYTHONPATH=src python3 scripts/cublas_call_time.py [--markdown FILE]
"""
from __future__ import annotations

import argparse
import sys

CASES = [("sgemm", "fp32", (64, 64, 64)), ("sgemm", "fp32", (1024, 1024, 1024)), ("sgemm", "fp32", (4096, 4096, 4096)),
         ("ex", "bf16", (64, 64, 64)), ("ex", "bf16", (1024, 1024, 1024)), ("ex", "bf16", (4096, 4096, 4096)),
         ("ex", "bf16", (1000, 3000, 2000)), ("ex", "tf32", (1024, 1024, 1024))]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown")
    args = ap.parse_args(argv)
    import torch

    from gemmlab.apibench import _host_us
    from gemmlab.cuda import cublas, cublaslt

    torch.backends.cuda.matmul.allow_tf32 = False
    lines = ["| kind | dtype | MxNxK | torch.mm us | classic us | cublasLtMatmul us | Lt workspace |",
             "|---|---|---|---|---|---|---|"]
    for kind, dtype, (M, N, K) in CASES:
        t = {"bf16": torch.bfloat16}.get(dtype, torch.float32)
        a, b = torch.rand(M, K, device="cuda").to(t), torch.rand(K, N, device="cuda").to(t)
        c = torch.empty(M, N, device="cuda")
        stream = torch.cuda.current_stream().cuda_stream
        classic = cublas.PreparedGemm(kind, M, N, K, dtype)
        lt = cublaslt.PreparedLtGemm(kind, M, N, K, dtype)
        pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
        fns = [lambda: torch.mm(a, b), lambda: classic(1.0, pa, pb, 0.0, pc, stream),
               lambda: lt(1.0, pa, pb, 0.0, pc, stream)]
        if dtype == "tf32":
            fns[0] = lambda: None  # torch has no per-call tf32 switch; not compared
        us = _host_us(fns, torch.cuda.synchronize)
        ref = "-" if dtype == "tf32" else f"{us[0]:.1f}"
        lines.append(f"| {kind} | {dtype} | {M}x{N}x{K} | {ref} | {us[1]:.1f} | {us[2]:.1f} | {lt.workspace_bytes} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("Command: `PYTHONPATH=src python3 scripts/cublas_call_time.py`\n\n" + text)


if __name__ == "__main__":
    from gemmlab.errors import run_script

    sys.exit(run_script(main, sys.argv[1:]))
