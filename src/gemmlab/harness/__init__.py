"""The op-generic harness: points (verify, time, row), the bench/verify commands, tables, timing, tuned parameters."""
