"""FP32 sum reduction kernels: seed 004's six rungs, Harris's last two steps, a single pass."""
