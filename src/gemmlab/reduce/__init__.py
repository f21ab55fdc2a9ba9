"""The reduction op: problem, verification, runner, baselines, bench, tables, CLI and API.

The kernels and their specs live in gemmlab/kernels/reduce/; this package drives them with the
shared machinery (compile_kernel, launch_kernel, Timer, ResultStore, ClockSampler).
"""
