"""Profiling and analysis: Nsight Compute metrics (ncu.py, target.py, profiler.py), theoretical
occupancy (occupancy.py), SASS instruction mix (sass.py), rows in the results database
(rows.py), and the `profile`, `analyze` and `report` commands (cli.py)."""
