"""Search over a kernel's declared parameter space: enumerate, filter, compile, time."""
