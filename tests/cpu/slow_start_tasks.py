"""A stand-in candidate whose worker process is slow to start, as a real one is (imports and a
CUDA context, seconds): prepare_worker sleeps GEMMLAB_TEST_PREPARE_S, read in the child."""
import os
import time


def prepare_worker() -> None:
    time.sleep(float(os.environ.get("GEMMLAB_TEST_PREPARE_S", "0")))


def answer(task: dict) -> dict:
    time.sleep(task.get("sleep", 0))
    return {"status": "PASS", "x": task["x"], "fatal": False}
