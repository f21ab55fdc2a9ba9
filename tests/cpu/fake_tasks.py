"""Stand-in candidates for the worker-pool tests: they misbehave on purpose, without a GPU."""
import os
import time


def misbehave(task: dict) -> dict:
    x = task["params"].get("X", task["params"].get("TM", 0))
    if x == 1:
        os._exit(7)  # the worker process dies (like a segfault in a driver call)
    if x == 2:
        time.sleep(600)  # hangs (like a kernel that never ends)
    if x == 3:
        return {"status": "ERROR", "reason": "illegal address (sticky)", "fatal": True}
    return {"status": "PASS", "gflops": 1000.0 + x + task["params"].get("BK", 0) / 100, "t_median_ms": 1.0,
            "fatal": False}
