"""CUDA C++ sources, one rung per numbered file, each with its spec beside it."""
