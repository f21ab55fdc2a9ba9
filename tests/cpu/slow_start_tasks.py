"""A stand-in candidate whose worker process is slow to start, as a real one is (imports and a
CUDA context, seconds): prepare_worker sleeps GEMMLAB_TEST_PREPARE_S, read in the child. Where
GEMMLAB_TEST_DIE_ONCE names a file that is not there, the process makes it and dies as it starts
(as a crash in its CUDA initialisation would end it), so only the first process to start dies."""
import os
import time


def prepare_worker() -> None:
    flag = os.environ.get("GEMMLAB_TEST_DIE_ONCE")
    if flag and not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(5)
    time.sleep(float(os.environ.get("GEMMLAB_TEST_PREPARE_S", "0")))


def answer(task: dict) -> dict:
    time.sleep(task.get("sleep", 0))
    return {"status": "PASS", "x": task["x"], "fatal": False}
